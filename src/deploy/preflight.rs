//! The server's verdict on a plan before anything is written: a server-side dry run of each
//! object, which `mlkube validate` reports and `mlkube apply` must pass before it writes, and
//! what an apply the server refused says about it.
//!
//! Expected flow of an apply's checks: every object the apply would send (not those its fast
//! path finds unchanged since the last apply) is dry-run once, concurrently, exactly as it will
//! be sent: server-side apply with `dryRun=All`, its field manager (`mlkube`, or the set's own
//! for shared objects) and the same force-conflicts choice. That is the first pass, before
//! anything is written. An object the server cannot judge yet because the same apply creates
//! what it needs is deferred, not sent: one in a namespace that does not exist yet (the
//! server's NamespaceLifecycle admission refuses anything in it) is dry-run as soon as the
//! apply has created its namespaces, before it writes anything else; one of a kind whose
//! CustomResourceDefinition is in the plan and not served yet, as soon as those CRDs are
//! established, before anything of a later tier is written.
//!
//! Guarantees: when the server rejects any object, the apply fails listing every rejected
//! object with the server's message, and has written nothing; or, when only deferred objects
//! were rejected, no more than what their check needed first, which the error names: the
//! namespaces, and for custom objects also the inventory (it is always widened before a
//! member is written) and the CRDs. An object that needs a namespace neither the cluster nor
//! the apply has is rejected in the first pass. `apply --dry-run` runs the first pass, reports
//! the same rejections, and lists the deferred objects as not checked: it cannot create what
//! they need. Each object costs one dry-run request, and an unchanged one none; an object the
//! fast path cannot vouch for (a shared one carries no configuration hash) but whose dry run
//! answers with the live object as it is, is not written at all, so a re-apply that changes
//! nothing sends a dry run where it used to send a write.
//!
//! Caveats: the server is asked, not bound. A write that its dry run accepted can still fail
//! (a quota used up in between, a webhook that answers otherwise); the apply then stops after
//! that tier, as it always did. Objects of a CRD that is already served are checked against the
//! schema served now, before the plan's version of the CRD is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use futures::StreamExt;
use serde_json::Value;

use crate::deploy::cancel::Cancel;
use crate::deploy::cluster::{
    self, ApplyMode, CONCURRENCY, Cluster, Conflict, Resolved, namespace_resource,
};
use crate::deploy::key::Key;
use crate::deploy::plan::{Desired, Plan};

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(
        "the server rejected {count} object(s) in a dry run; {written}:\n{details}\n  hint: fix \
         what the server names (the component's params or Jsonnet), then apply again"
    )]
    Rejected {
        count: usize,
        written: Written,
        details: String,
    },
    #[error("cannot read namespace `{namespace}`")]
    Namespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// What an apply had written when the server rejected an object it could only check then.
#[derive(Debug, Default)]
pub struct Written(pub Vec<Key>);

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "nothing was written");
        }
        let keys: Vec<String> = self.0.iter().map(Key::to_string).collect();
        write!(
            f,
            "nothing was written but what their check needed first: {}",
            keys.join(", ")
        )
    }
}

/// What an object waits for before the server can judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// Its namespace, which this apply creates.
    Namespace(String),
    /// Its kind, which a CustomResourceDefinition of this apply defines.
    Kind,
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::Namespace(ns) => {
                write!(f, "namespace `{ns}` does not exist yet; apply creates it")
            }
            Blocker::Kind => write!(f, "its CustomResourceDefinition is created by this apply"),
        }
    }
}

/// The server's answer to one object's dry run, or why it was not asked.
#[derive(Debug)]
enum Verdict {
    /// The object as the server would store it.
    Accepted(Value),
    Rejected(String),
    Deferred(Blocker),
}

/// The namespaces that `objects` live in and the cluster does not have.
async fn missing_namespaces(
    cluster: &impl Cluster,
    objects: &[&Desired],
) -> Result<BTreeSet<String>, PreflightError> {
    let used: BTreeSet<&str> = objects
        .iter()
        .filter_map(|d| d.key.namespace.as_deref())
        .collect();
    let reads: Vec<_> = used
        .into_iter()
        .map(|namespace| async move {
            let live = cluster
                .get(&namespace_resource(), None, namespace)
                .await
                .map_err(|source| PreflightError::Namespace {
                    namespace: namespace.to_string(),
                    source,
                })?;
            Ok(live.is_none().then(|| namespace.to_string()))
        })
        .collect();
    let found: Vec<Result<Option<String>, PreflightError>> = futures::stream::iter(reads)
        .buffered(CONCURRENCY)
        .collect()
        .await;
    found.into_iter().filter_map(Result::transpose).collect()
}

/// Whether an apply of `plan` creates namespace `namespace`: it renders it, or it is the
/// environment's own, which the apply creates when missing.
fn creates_namespace(plan: &Plan, namespace: &str) -> bool {
    namespace == plan.applyset.namespace
        || plan
            .objects
            .iter()
            .any(|d| d.key.group.is_empty() && d.key.kind == "Namespace" && d.key.name == namespace)
}

/// How the objects of one check are sent.
struct Check<'a> {
    plan: &'a Plan,
    /// Namespaces that do not exist (yet).
    missing: BTreeSet<String>,
    /// Whether an object's conflicting fields are forced, as its apply will force them.
    forced: &'a (dyn Fn(&Desired) -> bool + Sync),
    /// Once cancelled, no dry run is started any more.
    cancel: &'a Cancel,
    /// How a rejection reads.
    message: fn(&kube::Error) -> String,
}

impl Check<'_> {
    /// Dry-run `objects` concurrently; those cancelled before they started are left out.
    async fn run<'p>(
        &self,
        cluster: &impl Cluster,
        objects: &[&'p Desired],
    ) -> Vec<(&'p Desired, Verdict)> {
        let checks: Vec<_> = objects
            .iter()
            .map(|desired| async move {
                if self.cancel.is_cancelled() {
                    return None;
                }
                Some((*desired, self.one(cluster, desired).await))
            })
            .collect();
        let verdicts: Vec<Option<(&Desired, Verdict)>> = futures::stream::iter(checks)
            .buffered(CONCURRENCY)
            .collect()
            .await;
        verdicts.into_iter().flatten().collect()
    }

    async fn one(&self, cluster: &impl Cluster, desired: &Desired) -> Verdict {
        let key = &desired.key;
        let Some(resolved) = cluster.resolve(&desired.api_version, &key.kind) else {
            if self.plan.defines(&key.group, &key.kind) {
                return Verdict::Deferred(Blocker::Kind);
            }
            return Verdict::Rejected(format!(
                "the cluster does not serve {} {}",
                desired.api_version, key.kind
            ));
        };
        let namespace = key.namespace.as_deref();
        if let Some(missing) = self.missing_namespace(&resolved, namespace) {
            return if creates_namespace(self.plan, missing) {
                Verdict::Deferred(Blocker::Namespace(missing.to_string()))
            } else {
                Verdict::Rejected(format!(
                    "namespace `{missing}` does not exist, and this apply does not create it"
                ))
            };
        }
        let mode = ApplyMode {
            dry_run: true,
            force: (self.forced)(desired),
            manager: self.plan.manager(desired),
        };
        match cluster
            .apply(&resolved, namespace, &key.name, &desired.value, mode)
            .await
        {
            Ok(answer) => Verdict::Accepted(answer),
            Err(e) => Verdict::Rejected((self.message)(&e)),
        }
    }

    fn missing_namespace<'n>(
        &self,
        resolved: &Resolved,
        namespace: Option<&'n str>,
    ) -> Option<&'n str> {
        namespace.filter(|ns| resolved.namespaced && self.missing.contains(*ns))
    }
}

/// The checks of one apply: the server's answers so far, and what waits for a later pass.
#[derive(Debug, Default)]
pub struct Preflight<'p> {
    /// Each accepted object as the server would store it (what a dry run reports).
    pub accepted: BTreeMap<Key, Value>,
    /// Objects not checked yet, and what each waits for.
    deferred: Vec<(&'p Desired, Blocker)>,
}

impl<'p> Preflight<'p> {
    /// The first pass, before anything is written: dry-run every object of `objects` that can
    /// be checked now, and fail listing every rejection, `known` ones (found without asking
    /// the server) included.
    pub async fn first(
        cluster: &impl Cluster,
        plan: &'p Plan,
        objects: &[&'p Desired],
        known: Vec<(Key, String)>,
        forced: &(dyn Fn(&Desired) -> bool + Sync),
        cancel: &Cancel,
    ) -> Result<Preflight<'p>, PreflightError> {
        let check = Check {
            plan,
            missing: missing_namespaces(cluster, objects).await?,
            forced,
            cancel,
            message: apply_failure,
        };
        let verdicts = check.run(cluster, objects).await;
        let mut preflight = Preflight::default();
        preflight.settle(verdicts, known, Written::default())?;
        Ok(preflight)
    }

    /// A later pass, once what the objects `waits` selects needed exists: dry-run them, and
    /// fail listing every rejection and what was `written` so far.
    pub async fn then(
        &mut self,
        cluster: &impl Cluster,
        plan: &'p Plan,
        waits: fn(&Blocker) -> bool,
        forced: &(dyn Fn(&Desired) -> bool + Sync),
        (cancel, written): (&Cancel, Written),
    ) -> Result<(), PreflightError> {
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|(_, blocker)| waits(blocker));
        self.deferred = waiting;
        let objects: Vec<&'p Desired> = ready.into_iter().map(|(d, _)| d).collect();
        if objects.is_empty() {
            return Ok(());
        }
        let check = Check {
            plan,
            missing: BTreeSet::new(),
            forced,
            cancel,
            message: apply_failure,
        };
        let verdicts = check.run(cluster, &objects).await;
        self.settle(verdicts, Vec::new(), written)
    }

    /// What a dry run could not check, and why.
    pub fn unchecked(&self) -> Vec<(Key, String)> {
        self.deferred
            .iter()
            .map(|(d, blocker)| (d.key.clone(), blocker.to_string()))
            .collect()
    }

    fn settle(
        &mut self,
        verdicts: Vec<(&'p Desired, Verdict)>,
        mut rejected: Vec<(Key, String)>,
        written: Written,
    ) -> Result<(), PreflightError> {
        for (desired, verdict) in verdicts {
            match verdict {
                Verdict::Accepted(answer) => {
                    self.accepted.insert(desired.key.clone(), answer);
                }
                Verdict::Rejected(message) => rejected.push((desired.key.clone(), message)),
                Verdict::Deferred(blocker) => self.deferred.push((desired, blocker)),
            }
        }
        if rejected.is_empty() {
            return Ok(());
        }
        rejected.sort();
        let details: Vec<String> = rejected
            .iter()
            .map(|(key, message)| format!("  {key}: {message}"))
            .collect();
        Err(PreflightError::Rejected {
            count: rejected.len(),
            written,
            details: details.join("\n"),
        })
    }
}

/// One object the server rejected, or could not check yet.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rejection {
    #[serde(flatten)]
    pub key: Key,
    pub component: String,
    pub message: String,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct Validation {
    pub valid: usize,
    pub rejected: Vec<Rejection>,
    /// Objects that can only be checked once something this apply creates exists.
    pub skipped: Vec<Rejection>,
}

/// `mlkube validate`: a server-side dry run of every object, forced and whether or not it
/// changed, every rejection listed.
pub async fn validate(cluster: &impl Cluster, plan: &Plan) -> Result<Validation, PreflightError> {
    let objects: Vec<&Desired> = plan.objects.iter().collect();
    let check = Check {
        plan,
        missing: missing_namespaces(cluster, &objects).await?,
        forced: &|_| true,
        cancel: &Cancel::new(),
        message: rejection_message,
    };
    let mut validation = Validation::default();
    for (desired, verdict) in check.run(cluster, &objects).await {
        let rejection = |message| Rejection {
            key: desired.key.clone(),
            component: desired.component.clone(),
            message,
        };
        match verdict {
            Verdict::Accepted(_) => validation.valid += 1,
            Verdict::Rejected(message) => validation.rejected.push(rejection(message)),
            Verdict::Deferred(blocker) => validation.skipped.push(rejection(blocker.to_string())),
        }
    }
    Ok(validation)
}

/// The server's message with each invalid field on its own line.
fn rejection_message(error: &kube::Error) -> String {
    let kube::Error::Api(status) = error else {
        return error.to_string();
    };
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    if causes.is_empty() {
        return status.message.clone();
    }
    let mut message = status.reason.clone();
    for cause in causes {
        let _ = write!(message, "\n    {}: {}", cause.field, cause.message);
    }
    message
}

/// What a refused apply says: every conflicting field with its owner, or the server's message.
pub fn apply_failure(error: &kube::Error) -> String {
    match cluster::conflicts(error) {
        Some(conflicts) => conflict_failure(&conflicts, Some(error)),
        None => cluster::api_message(error),
    }
}

/// Every conflicting field with its manager, and how to go on; the server's message when it
/// named no field.
pub fn conflict_failure(conflicts: &[Conflict], error: Option<&kube::Error>) -> String {
    let mut message = String::from("conflicts with other field managers:");
    for c in conflicts {
        let _ = write!(message, "\n    {} is owned by \"{}\"", c.field, c.manager);
    }
    if let (true, Some(error)) = (conflicts.is_empty(), error) {
        let _ = write!(message, " {}", cluster::api_message(error));
    }
    message.push_str(
        "\n    hint: pass --force-conflicts to take these fields over, or stop the other manager setting them",
    );
    message
}
