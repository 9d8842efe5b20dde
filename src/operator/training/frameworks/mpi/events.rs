//! The events training-operator's MPIJob controller records besides the engine's, in its
//! words: `MPIJobRunning` when the Launcher is created and when it runs with every Worker,
//! `MPIJobEvicted` when Workers are evicted, and `MPIJobFailed` when the Launcher cannot be
//! created. Pure.
//!
//! Upstream records the running and evicted states again on every reconcile; here each is a
//! state event, recorded once per occurrence (the pods it is about: a pod created again makes
//! another occurrence, which counts into the same event).

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{LAUNCHER, MPIJob, WORKER};
use crate::operator::training::engine::observe::{phase, terminating};
use crate::operator::training::framework::{Event, ReplicaType, TrainingJob};

/// The events of the states the job's `pods` are in: the Launcher running with every Worker
/// (`MPIJobRunning`), Workers evicted (`MPIJobEvicted`).
pub fn of_pods(job: &MPIJob, pods: &[Pod]) -> Vec<Event> {
    let live = |name: &str| {
        pods.iter()
            .find(|p| p.name_any() == name && !terminating(p))
    };
    let workers: Vec<Option<&Pod>> = (0..job.replicas_of(WORKER).unwrap_or(0))
        .map(|index| live(&job.pod_name(WORKER, index)))
        .collect();
    let launcher = live(&job.pod_name(LAUNCHER, 0));
    let mut events = Vec::new();

    let evicted: Vec<&Pod> = workers
        .iter()
        .flatten()
        .copied()
        .filter(|p| phase(p) == "Failed" && evicted_reason(p))
        .collect();
    if !evicted.is_empty() {
        events.push(Event {
            warning: true,
            reason: "MPIJobEvicted".into(),
            message: format!("{}/{} workers are evicted", evicted.len(), workers.len()),
            occurrence: Some(occurrence(&evicted)),
        });
    }

    let all_running = workers
        .iter()
        .all(|w| w.is_some_and(|p| phase(p) == "Running"));
    if let Some(launcher) = launcher.filter(|p| phase(p) == "Running")
        && all_running
    {
        let mut running: Vec<&Pod> = workers.iter().flatten().copied().collect();
        running.push(launcher);
        events.push(Event {
            warning: false,
            reason: "MPIJobRunning".into(),
            message: format!(
                "MPIJob {}/{} is running",
                job.namespace().unwrap_or_default(),
                job.name_any()
            ),
            occurrence: Some(occurrence(&running)),
        });
    }
    events
}

/// Upstream's event for the Launcher created (`Ok` its name) or not (`Err` why); none for a
/// Worker.
pub fn of_created(rtype: ReplicaType, created: Result<&str, &str>) -> Option<Event> {
    if rtype != LAUNCHER {
        return None;
    }
    Some(match created {
        Ok(name) => Event {
            warning: false,
            reason: "MPIJobRunning".into(),
            message: format!("launcher pod created success: {name}"),
            occurrence: None,
        },
        Err(why) => Event {
            warning: true,
            reason: "MPIJobFailed".into(),
            message: format!("launcher pod created failed: {why}"),
            occurrence: None,
        },
    })
}

fn evicted_reason(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
}

/// Which pods a state is about, by UID: the same pods are the same occurrence.
fn occurrence(pods: &[&Pod]) -> String {
    let uids: Vec<String> = pods.iter().map(|p| p.uid().unwrap_or_default()).collect();
    uids.join(",")
}
