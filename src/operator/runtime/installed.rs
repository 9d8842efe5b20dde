//! Whether a framework's CRD is installed: asked before its controller starts, and again when
//! its watch is answered 404 while it runs.
//!
//! A controller whose kind the API server does not serve lists it, is answered 404, and
//! retries for ever: dozens of failed lists a minute, a warning for each, and a shutdown that
//! waits for a watch that never started. So a framework's kind is first looked up in the API
//! server's discovery (which every authenticated user may read).
//!
//! # Expected flow
//! Served: the framework starts at once. Not served: one warning says which CRD is missing and
//! how to install it or leave the framework out, `/readyz` answers 503 naming it, and discovery
//! is asked again after a pause that doubles up to [`RECHECK_MAX`]; once the CRD is installed
//! the framework starts, `/readyz` turns ready, and an info line says so. A stop ends the wait
//! at once.
//!
//! A CRD deleted while its framework runs takes its jobs with it (their pods and services go
//! with them, by their owner references), and the watch of its jobs is answered 404. Discovery
//! then confirms the kind is gone ([`deleted`]): the framework's controller stops (the
//! reconciles in flight finish), and the framework waits as at start, with a warning that says
//! the CRD was deleted. Other frameworks run on.
//!
//! # Caveats
//! - Any other answer from discovery (an error, a timeout) starts the framework as before:
//!   only a definite "not served" holds it back, and its watch then retries with backoff.
//! - A CRD deleted and installed again between two lists of its jobs is not noticed: the watch
//!   lists the new CRD's jobs as it would after any broken watch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use kube::runtime::watcher;
use tokio::sync::Notify;

use super::shutdown::Stop;
use super::writes::is_gone;
use crate::error_text::OneLine;
use crate::operator::runtime::http::Health;

/// The first pause before discovery is asked again, and the longest.
const RECHECK_FIRST: Duration = Duration::from_secs(1);
pub const RECHECK_MAX: Duration = Duration::from_secs(30);

/// Why a framework waits for its CRD, which its warning says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// The operator starts.
    AtStart,
    /// The CRD was deleted while the framework ran.
    AfterDeletion,
}

/// A kind that a controller runs, as discovery lists it and its warnings name it.
#[derive(Clone, Debug)]
pub struct Served {
    /// The kind, e.g. `TFJob`.
    pub kind: &'static str,
    /// Its resource, e.g. `tfjobs`.
    pub plural: &'static str,
    /// Its group, e.g. `kubeflow.org`.
    pub group: String,
    /// Its group and version, e.g. `kubeflow.org/v1`.
    pub api_version: String,
    /// The name that leaves it out of the operator's flags, e.g. `tensorflow` of
    /// `--frameworks`.
    pub flag_name: &'static str,
    /// That flag, e.g. `--frameworks`.
    pub flag: &'static str,
    /// The prototype whose components render its CRD, e.g. `training-operator`.
    pub component: &'static str,
}

impl Served {
    /// The CRD's name, e.g. `tfjobs.kubeflow.org`.
    fn crd(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// Wait until the API server serves `served`'s kind; false when `stop` came first.
pub async fn await_installed(
    client: &Client,
    served: &Served,
    health: &Health,
    stop: Stop,
    waiting: Waiting,
) -> bool {
    let kind = served.kind;
    let crd = served.crd();
    let mut pause = RECHECK_FIRST;
    let mut said = false;
    loop {
        // A stop also ends a discovery request still in flight (a slow API server).
        let answer = tokio::select! {
            answer = is_served(client, served) => answer,
            () = stop.clone() => return false,
        };
        match answer {
            Ok(true) => break,
            Ok(false) if !said => {
                warn_missing(served, &crd, waiting);
                health.crd_missing(kind, crd.clone());
                said = true;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(kind, error = %OneLine(&e), "cannot tell whether the {crd} CRD is installed; starting its controller");
                break;
            }
        }
        let stopped = tokio::select! {
            () = tokio::time::sleep(pause) => false,
            () = stop.clone() => true,
        };
        if stopped {
            return false;
        }
        pause = (pause * 2).min(RECHECK_MAX);
    }
    if said {
        tracing::info!(kind, crd, "the {crd} CRD is installed now: running {kind}s");
        health.crd_installed(kind);
    }
    true
}

/// The one warning that `served`'s CRD is missing, and how to install it or do without.
fn warn_missing(served: &Served, crd: &str, waiting: Waiting) {
    let kind = served.kind;
    let what = match waiting {
        Waiting::AtStart => "is not installed",
        Waiting::AfterDeletion => "was deleted",
    };
    tracing::warn!(
        kind,
        crd,
        "the {crd} CRD {what}, so {kind}s are not run until it is installed; \
         hint: install it (a {} component renders it unless its installCrd is \
         false, or `kubectl apply -f crds/{crd}.yaml` from mlkube's source), or leave {} out \
         of {}",
        served.component,
        served.flag_name,
        served.flag
    );
}

/// Whether `error`, from the watch of `served`'s kind, means its CRD was deleted: the API
/// server answered 404 and its discovery no longer lists the kind. False when `stop` came
/// first.
pub async fn deleted(client: &Client, served: &Served, error: &watcher::Error, stop: Stop) -> bool {
    if !not_found(error) {
        return false;
    }
    tokio::select! {
        answer = is_served(client, served) => matches!(answer, Ok(false)),
        () = stop => false,
    }
}

/// Whether the API server answered a list or watch with 404 Not Found.
fn not_found(error: &watcher::Error) -> bool {
    let code = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code,
        watcher::Error::WatchError(status) => status.code,
        _ => return false,
    };
    code == 404
}

/// Set once a framework's CRD is found deleted: its controller shuts down on it.
#[derive(Default)]
pub struct CrdDeleted {
    seen: AtomicBool,
    notify: Notify,
}

impl CrdDeleted {
    pub fn set(&self) {
        self.seen.store(true, Ordering::Relaxed);
        self.notify.notify_one();
    }

    pub fn seen(&self) -> bool {
        self.seen.load(Ordering::Relaxed)
    }

    /// Resolves once [`Self::set`] was called (also before this was polled).
    pub async fn wait(self: std::sync::Arc<Self>) {
        self.notify.notified().await;
    }
}

/// Whether discovery lists `served`'s resource in its group and version; a group version that
/// does not exist at all (404) serves nothing.
async fn is_served(client: &Client, served: &Served) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(&served.api_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == served.plural)),
        Err(e) if is_gone(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn status(code: u16) -> Box<Status> {
        Box::new(
            Status::failure(
                "the server could not find the requested resource",
                "NotFound",
            )
            .with_code(code),
        )
    }

    #[test]
    fn only_a_404_from_a_list_or_watch_says_the_kind_may_be_gone() {
        assert!(not_found(&watcher::Error::InitialListFailed(
            kube::Error::Api(status(404))
        )));
        assert!(not_found(&watcher::Error::WatchStartFailed(
            kube::Error::Api(status(404))
        )));
        assert!(not_found(&watcher::Error::WatchError(status(404))));
        assert!(!not_found(&watcher::Error::InitialListFailed(
            kube::Error::Api(status(403))
        )));
        assert!(!not_found(&watcher::Error::WatchError(status(410))));
        assert!(!not_found(&watcher::Error::NoResourceVersion));
    }
}
