//! Waiting until what was applied is healthy: CRDs established (before their objects are
//! applied), then Deployments, StatefulSets and DaemonSets available at their desired replicas
//! and observed generation, and Jobs complete.
//!
//! Expected flow: poll every pending object (concurrently, a short interval growing to one
//! second) until all are ready, the deadline passes or the caller cancels. After every poll the
//! caller's callback hears each object's state and, for those not ready, what blocks them (their
//! pods' scheduling failures, waiting containers), so it can show progress; this module prints
//! nothing. At the end the objects still not ready are returned with why, so the caller can list
//! them and exit 3.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use crate::deploy::cancel::Cancel;
use crate::deploy::cluster::{self, CONCURRENCY, Cluster, Resolved};
use crate::deploy::key::Key;

/// An object's health as far as waiting is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Ready,
    /// Not ready yet, and why.
    Progressing(String),
    /// Will not become ready by waiting (a failed Job).
    Failed(String),
}

/// Whether mlkube waits for this kind at all.
pub fn waits_for(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet")
            | ("batch", "Job")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
    )
}

fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn condition_true(object: &Value, kind: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == "True")
}

/// The health of a live object of a waited-for kind.
pub fn health(group: &str, kind: &str, object: &Value) -> Health {
    let status = &object["status"];
    let generation = int(&object["metadata"]["generation"]);
    let observed = int(&status["observedGeneration"]);
    if matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet") && observed < generation {
        return Health::Progressing(format!(
            "generation {generation} not yet observed (at {observed})"
        ));
    }
    match (group, kind) {
        ("apps", "Deployment") => {
            let desired = object["spec"]["replicas"].as_i64().unwrap_or(1);
            let updated = int(&status["updatedReplicas"]);
            let available = int(&status["availableReplicas"]);
            let total = int(&status["replicas"]);
            if let Some(c) = condition(object, "Progressing")
                .filter(|c| c["reason"] == "ProgressDeadlineExceeded")
            {
                return Health::Failed(
                    c["message"]
                        .as_str()
                        .unwrap_or("progress deadline exceeded")
                        .to_string(),
                );
            }
            if updated >= desired && available >= desired && total <= updated {
                Health::Ready
            } else {
                Health::Progressing(format!(
                    "{available}/{desired} available, {updated} updated"
                ))
            }
        }
        ("apps", "StatefulSet") => {
            let desired = object["spec"]["replicas"].as_i64().unwrap_or(1);
            let ready = int(&status["readyReplicas"]);
            let available = status["availableReplicas"].as_i64().unwrap_or(ready);
            let updated = int(&status["updatedReplicas"]);
            let rolling = object["spec"]["updateStrategy"]["type"]
                .as_str()
                .unwrap_or("RollingUpdate")
                == "RollingUpdate";
            if ready >= desired && available >= desired && (!rolling || updated >= desired) {
                Health::Ready
            } else {
                Health::Progressing(format!("{ready}/{desired} ready, {updated} updated"))
            }
        }
        ("apps", "DaemonSet") => {
            let desired = int(&status["desiredNumberScheduled"]);
            let available = int(&status["numberAvailable"]);
            let updated = int(&status["updatedNumberScheduled"]);
            if available >= desired && updated >= desired {
                Health::Ready
            } else {
                Health::Progressing(format!(
                    "{available}/{desired} available, {updated} updated"
                ))
            }
        }
        ("batch", "Job") => {
            if condition_true(object, "Complete") {
                Health::Ready
            } else if let Some(failed) =
                condition(object, "Failed").filter(|c| c["status"] == "True")
            {
                Health::Failed(format!(
                    "failed: {}",
                    failed["message"]
                        .as_str()
                        .or(failed["reason"].as_str())
                        .unwrap_or("no reason given")
                ))
            } else {
                let succeeded = int(&status["succeeded"]);
                let completions = object["spec"]["completions"].as_i64().unwrap_or(1);
                Health::Progressing(format!("{succeeded}/{completions} completions"))
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if condition_true(object, "Established") {
                Health::Ready
            } else if let Some(c) =
                condition(object, "NamesAccepted").filter(|c| c["status"] == "False")
            {
                Health::Failed(format!(
                    "names not accepted: {}",
                    c["message"].as_str().unwrap_or_default()
                ))
            } else {
                Health::Progressing("not established yet".into())
            }
        }
        _ => Health::Ready,
    }
}

/// An object that did not become ready, with why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NotReady {
    #[serde(flatten)]
    pub key: Key,
    pub reason: String,
    /// Its pods' problems (waiting reasons, scheduling failures).
    pub pods: Vec<String>,
}

/// One object to wait for.
#[derive(Debug, Clone)]
pub struct Pending {
    pub key: Key,
    pub resolved: Resolved,
}

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("cannot read {key} while waiting for it")]
    Read {
        key: Key,
        #[source]
        source: kube::Error,
    },
}

/// One waited-for object as the last poll saw it.
#[derive(Debug, Clone)]
pub struct Watched {
    pub key: Key,
    pub health: Health,
    /// What holds it up, as soon as it is known: its pods' scheduling failures and waiting or
    /// terminated containers.
    pub blockers: Vec<String>,
}

/// Told after every poll how long the wait has run and where every object stands.
pub type OnPoll<'a> = &'a (dyn Fn(Duration, &[Watched]) + Sync);

/// Wait until every object is ready, `timeout` passes or `cancel` comes; return those that are
/// not ready. `on_poll` hears about every poll; nothing is printed here.
pub async fn wait(
    cluster: &impl Cluster,
    pending: Vec<Pending>,
    timeout: Duration,
    on_poll: OnPoll<'_>,
    cancel: &Cancel,
) -> Result<Vec<NotReady>, WaitError> {
    let started = Instant::now();
    let deadline = started + timeout;
    let mut watched: Vec<(Pending, Watched)> = pending
        .into_iter()
        .map(|p| {
            let state = Watched {
                key: p.key.clone(),
                health: Health::Progressing("not read yet".into()),
                blockers: Vec::new(),
            };
            (p, state)
        })
        .collect();
    let mut interval = Duration::from_millis(100);
    loop {
        poll(cluster, &mut watched).await?;
        let states: Vec<Watched> = watched.iter().map(|(_, w)| w.clone()).collect();
        on_poll(started.elapsed(), &states);
        let open: Vec<&Watched> = states
            .iter()
            .filter(|w| w.health != Health::Ready)
            .collect();
        let all_failed = open.iter().all(|w| matches!(w.health, Health::Failed(_)));
        if all_failed || Instant::now() >= deadline || cancel.is_cancelled() {
            return Ok(open.into_iter().map(not_ready).collect());
        }
        let pause = interval.min(deadline.saturating_duration_since(Instant::now()));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = cancel.cancelled() => {}
        }
        interval = (interval * 2).min(Duration::from_secs(1));
    }
}

fn not_ready(watched: &Watched) -> NotReady {
    let reason = match &watched.health {
        Health::Progressing(why) | Health::Failed(why) => why.clone(),
        Health::Ready => String::new(),
    };
    NotReady {
        key: watched.key.clone(),
        reason,
        pods: watched.blockers.clone(),
    }
}

/// Read every object not ready yet (concurrently) and, for those still not ready, their pods.
async fn poll(cluster: &impl Cluster, watched: &mut [(Pending, Watched)]) -> Result<(), WaitError> {
    let reads: Vec<_> = watched
        .iter_mut()
        .filter(|(_, w)| w.health != Health::Ready)
        .map(|(p, w)| async move {
            let live = cluster
                .get(&p.resolved, p.key.namespace.as_deref(), &p.key.name)
                .await
                .map_err(|source| WaitError::Read {
                    key: p.key.clone(),
                    source,
                })?;
            w.health = match &live {
                Some(object) => health(&p.key.group, &p.key.kind, object),
                None => Health::Progressing("not found".into()),
            };
            w.blockers = match &live {
                Some(object) if w.health != Health::Ready => {
                    pod_problems(cluster, &p.key, object).await
                }
                _ => Vec::new(),
            };
            Ok::<(), WaitError>(())
        })
        .collect();
    let results: Vec<Result<(), WaitError>> = futures::stream::iter(reads)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Why the pods of a workload are not ready: container waiting reasons, unschedulable pods.
/// Best effort: a failure to list pods gives no reasons rather than an error.
async fn pod_problems(cluster: &impl Cluster, key: &Key, object: &Value) -> Vec<String> {
    let Some(labels) = object["spec"]["selector"]["matchLabels"].as_object() else {
        return Vec::new();
    };
    let selector: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    let Some(pods) = cluster.resolve("v1", "Pod") else {
        return Vec::new();
    };
    let Ok(pods) = cluster
        .list(&pods, key.namespace.as_deref(), &selector.join(","))
        .await
    else {
        return Vec::new();
    };
    pods.iter().flat_map(pod_reasons).collect()
}

/// The problems of one pod, each as a line.
pub fn pod_reasons(pod: &Value) -> Vec<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?");
    let mut reasons = Vec::new();
    if let Some(c) = condition(pod, "PodScheduled").filter(|c| c["status"] == "False") {
        reasons.push(format!(
            "pod {name}: not scheduled: {} {}",
            c["reason"].as_str().unwrap_or_default(),
            c["message"].as_str().unwrap_or_default()
        ));
    }
    for status in ["initContainerStatuses", "containerStatuses"] {
        for container in pod["status"][status].as_array().into_iter().flatten() {
            let state = &container["state"];
            let cname = container["name"].as_str().unwrap_or("?");
            if let Some(waiting) = state["waiting"].as_object() {
                reasons.push(format!(
                    "pod {name}: container {cname} waiting: {} {}",
                    waiting
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    waiting
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ));
            } else if let Some(terminated) = state["terminated"].as_object()
                && container["ready"] != Value::Bool(true)
                && terminated.get("reason").and_then(Value::as_str) != Some("Completed")
            {
                reasons.push(format!(
                    "pod {name}: container {cname} terminated: {}",
                    terminated
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ));
            }
        }
    }
    if reasons.is_empty()
        && pod["status"]["phase"] != "Running"
        && pod["status"]["phase"] != "Succeeded"
    {
        reasons.push(format!(
            "pod {name}: {}",
            pod["status"]["phase"].as_str().unwrap_or("no phase yet")
        ));
    }
    reasons
        .into_iter()
        .map(|r| r.trim_end().to_string())
        .collect()
}

/// Wait for CRDs to be established (briefly, and not cut short: their objects need them).
pub async fn crds_established(
    cluster: &impl Cluster,
    crds: &[Pending],
    timeout: Duration,
) -> Result<Vec<NotReady>, WaitError> {
    wait(cluster, crds.to_vec(), timeout, &|_, _| {}, &Cancel::new()).await
}

/// The message of a kube error, for reasons.
pub fn message(error: &kube::Error) -> String {
    cluster::api_message(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_deployment_is_ready_when_the_new_generation_is_available_at_its_replicas() {
        let d = |observed: i64, available: i64, updated: i64, total: i64| {
            json!({"metadata": {"generation": 2}, "spec": {"replicas": 2},
                   "status": {"observedGeneration": observed, "availableReplicas": available,
                              "updatedReplicas": updated, "replicas": total}})
        };
        assert_eq!(health("apps", "Deployment", &d(2, 2, 2, 2)), Health::Ready);
        assert!(matches!(
            health("apps", "Deployment", &d(1, 2, 2, 2)),
            Health::Progressing(_)
        ));
        assert!(matches!(
            health("apps", "Deployment", &d(2, 1, 2, 2)),
            Health::Progressing(_)
        ));
        // Old replicas still running.
        assert!(matches!(
            health("apps", "Deployment", &d(2, 2, 2, 3)),
            Health::Progressing(_)
        ));
    }

    #[test]
    fn a_job_is_ready_when_complete_and_failed_when_failed() {
        let complete = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(health("batch", "Job", &complete), Health::Ready);
        let failed = json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}});
        assert!(matches!(health("batch", "Job", &failed), Health::Failed(_)));
    }

    #[test]
    fn pod_reasons_name_the_waiting_container() {
        let pod = json!({"metadata": {"name": "p"}, "status": {"phase": "Pending",
            "containerStatuses": [{"name": "c", "ready": false,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]}});
        assert_eq!(
            pod_reasons(&pod),
            ["pod p: container c waiting: ImagePullBackOff no such image"]
        );
    }
}
