//! Whether a framework's CRD is installed, asked before its controller starts.
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
//! # Caveats
//! - Any other answer from discovery (an error, a timeout) starts the framework as before:
//!   only a definite "not served" holds it back, and its watch then retries with backoff.
//! - A CRD deleted while its framework runs is not noticed here: its watch retries until the
//!   CRD is back.

use std::time::Duration;

use kube::Client;

use super::Stop;
use crate::error_text::OneLine;
use crate::operator::framework::TrainingJob;
use crate::operator::http::Health;

/// The first pause before discovery is asked again, and the longest.
const RECHECK_FIRST: Duration = Duration::from_secs(1);
pub const RECHECK_MAX: Duration = Duration::from_secs(30);

/// Wait until the API server serves `J`'s kind; false when `stop` came first.
pub(super) async fn await_installed<J: TrainingJob>(
    client: &Client,
    health: &Health,
    stop: Stop,
) -> bool {
    let kind = J::FRAMEWORK.kind;
    let crd = format!("{}.{}", J::FRAMEWORK.plural, J::group(&()));
    let mut pause = RECHECK_FIRST;
    let mut said = false;
    loop {
        // A stop also ends a discovery request still in flight (a slow API server).
        let answer = tokio::select! {
            answer = served::<J>(client) => answer,
            () = stop.clone() => return false,
        };
        match answer {
            Ok(true) => break,
            Ok(false) if !said => {
                tracing::warn!(
                    kind,
                    crd,
                    "the {crd} CRD is not installed, so {kind}s are not run until it is; \
                     hint: install it (the tf-job-operator component renders it unless its \
                     installCrd is false, or `kubectl apply -f crds/{crd}.yaml` from mlkube's \
                     source), or leave {} out of --frameworks",
                    J::FRAMEWORK.name
                );
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

/// Whether discovery lists `J`'s resource in its group and version; a group version that does
/// not exist at all (404) serves nothing.
async fn served<J: TrainingJob>(client: &Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(&J::api_version(&())).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == J::FRAMEWORK.plural)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}
