//! What apply, prune and delete hand back and ask for: the report of what they did (each
//! object's [`Outcome`], each removed member's [`Removal`]), their error, the consent a
//! destructive step waits for ([`Consent`]) and what they tell their caller while they work
//! ([`Observer`]).
//!
//! Below the verbs, which share it, and above the rooms whose errors it carries.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::time::Duration;

use crate::deploy::checks::preflight::{Deferred, PreflightError, Refusal, write_hint};
use crate::deploy::checks::{gateways, node_ports, operators, requires};
use crate::deploy::cluster::ClusterError;
use crate::deploy::cluster::key::Key;
use crate::deploy::health::wait::{NotReady, WaitError, Watched};
use crate::deploy::inventory::adopt::RemovedField;
use crate::deploy::inventory::applyset::ApplySetError;
use crate::deploy::inventory::ownership::Verdict;

/// Whether destructive steps may go ahead. The caller decides: the command line lists what
/// will be deleted and asks on a terminal, or takes `--yes`.
pub trait Consent: Sync {
    /// Asked once, before anything is written, with every object the verb would delete (an
    /// empty list too); an error stops the verb with nothing written.
    fn confirm(&self, verb: &'static str, doomed: &[Key]) -> Result<(), ApplyError>;
}

/// What the verbs tell their caller while they work, as it happens: each object applied or
/// removed, and every poll of the wait. The command line prints it; tests may record it.
pub trait Observer: Sync {
    /// An object was applied (in a dry run: would be), with what that did.
    fn applied(&self, _key: &Key, _outcome: Outcome) {}
    /// The environment's namespace, which the app does not render, was created (in a dry run:
    /// would be).
    fn namespace_created(&self, _key: &Key) {}
    /// A member was deleted, or only this set's claim on a shared object was released.
    fn removed(&self, _key: &Key, _removal: Removal) {}
    /// How long the wait has run and where every waited-for object stands.
    fn waiting(&self, _elapsed: Duration, _objects: &[Watched]) {}
}

/// Tells nobody anything.
pub struct Quiet;

impl Observer for Quiet {}

/// What happened to one applied object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Created,
    /// Taken over with `--adopt`: it existed, and was not this environment's.
    Adopted,
    Configured,
    Unchanged,
}

#[derive(Debug, Default)]
pub struct ApplyReport {
    pub applied: Vec<(Key, Outcome)>,
    pub pruned: Vec<Key>,
    /// Shared objects whose claim this set released: other sets still use them, or (those also
    /// in `unused`) none does, but mlkube never deletes them.
    pub released: Vec<Key>,
    /// Released objects no set uses any more: CustomResourceDefinitions, which stay.
    pub unused: Vec<Key>,
    /// Without `--prune`: the members no longer rendered that a prune would remove.
    pub not_rendered: Vec<Key>,
    /// Objects taken over with `--adopt`, and whose they were.
    pub adopted: Vec<(Key, Verdict)>,
    /// Training jobs this apply adopted or changed that had already finished, and how
    /// (`Succeeded`, `Failed`): their operator does not run them again.
    pub finished_jobs: Vec<(Key, &'static str)>,
    /// The fields of adopted objects that the adopt removes (in a dry run: would remove), and
    /// who wrote them.
    pub removed_fields: Vec<(Key, RemovedField)>,
    /// Members no longer rendered that are not mlkube's to delete, and why.
    pub kept: Vec<(Key, String)>,
    pub not_ready: Vec<NotReady>,
    /// Routes not written because what they send to was not ready (see `not_ready`): their
    /// live weights stand.
    pub held_routes: Vec<Key>,
    /// In a dry run that would wait: the routes it changes, which the real apply writes only
    /// once every workload before them is ready (else it holds them, as `held_routes`).
    pub gated_routes: Vec<Key>,
    /// In a dry run, objects the server could not judge, why (they need a namespace or a
    /// CustomResourceDefinition that only the apply itself would create), and how far they
    /// were checked.
    pub unchecked: Vec<(Key, Deferred)>,
    /// Cancelled before the end: the lists say what was done, the inventory covers it.
    pub interrupted: bool,
    /// The environment's namespace, when this apply created it because the app does not render
    /// it: told apart from `applied`, which holds what the app renders, as `diff` counts it.
    pub namespace_created: Option<Key>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "the cluster does not serve these kinds: {kinds}\n  hint: install their CustomResourceDefinitions first, or check the apiVersions"
    )]
    UnknownKinds { kinds: String },
    #[error(
        "{count} rendered object(s) exist but are not this environment's; nothing was written:\n{details}\n  hint: pass --adopt to take them over (a later prune may then delete them), or rename them in the app"
    )]
    NotOurs { count: usize, details: String },
    #[error("cannot read {key}")]
    Read {
        key: Key,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Inventory(#[from] ApplySetError),
    #[error(transparent)]
    Operators(#[from] operators::CheckError),
    #[error(transparent)]
    NodePorts(#[from] node_ports::NodePortError),
    #[error(transparent)]
    Gateways(#[from] gateways::GatewayError),
    #[error(transparent)]
    Requires(#[from] Box<requires::Unserved>),
    #[error(
        "apply --no-wait would change {count} route(s) without waiting until the versions they send traffic to are ready, and prune the versions they leave at once; nothing was written:\n{details}\n  hint: drop --no-wait: apply then moves traffic only once the new versions are ready, and prunes after"
    )]
    UnwaitedRoutes { count: usize, details: String },
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("cannot create namespace `{namespace}`")]
    Namespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "{count} object(s) failed to apply; nothing after their tier was applied:\n{details}{}",
        write_hint(refused)
    )]
    Objects {
        count: usize,
        details: String,
        /// Every object refused, in the order of `details`.
        refused: Vec<(Key, Refusal)>,
    },
    #[error("{what} did not become established within {timeout:?}:\n{details}")]
    NotEstablished {
        what: String,
        timeout: Duration,
        details: String,
    },
    #[error(transparent)]
    Wait(#[from] WaitError),
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error(
        "environment `{env}` renders no objects, but its inventory has {count}; refusing to {verb} \
         them all\n  hint: if the environment really should be empty, pass --allow-empty"
    )]
    EmptyPrune {
        env: String,
        count: usize,
        verb: &'static str,
    },
    #[error(
        "refusing to {verb} {count} object(s) without confirmation: there is no terminal to ask \
         on\n  hint: pass --yes after checking the list above"
    )]
    NoConsent { verb: &'static str, count: usize },
    #[error("{verb} cancelled: nothing was deleted")]
    Declined { verb: &'static str },
    #[error("cannot read the answer to the confirmation")]
    Prompt(#[source] std::io::Error),
    #[error("{count} object(s) could not be deleted:\n{details}")]
    Delete { count: usize, details: String },
}

/// What removing one member does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Deleted,
    /// A shared object other sets still use: only this set's claim went.
    Released,
    /// The last claim on a shared object mlkube never deletes (a CustomResourceDefinition) went:
    /// no set uses it any more, and it stays.
    Unused,
}
