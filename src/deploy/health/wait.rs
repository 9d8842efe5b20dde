//! Waiting until what was applied is healthy: CRDs established (before their objects are
//! applied), then Deployments, StatefulSets and DaemonSets available at their desired replicas
//! and observed generation, Jobs complete, routes taken up by their Gateways,
//! InferenceServices ready at their newest revision, and requests answered by their Secret
//! ([`answer`]).
//!
//! A PodDisruptionBudget is not waited for: it has nothing to become, and how many evictions it
//! allows now (none while its pods roll out) is what a drain reads, not a state of the apply.
//! Its health, as `status` shows it, is failed only when the disruption controller cannot
//! compute it (`DisruptionAllowed` False for `SyncFailed`: pods it selects have no controller
//! with a scale, say), since then it allows no eviction ever and every drain of a node with
//! one of its pods blocks.
//!
//! Expected flow: poll every pending object (concurrently, a short interval growing to one
//! second) until all are ready, the deadline passes or the caller cancels. After every poll the
//! caller's callback hears each object's state and, for those not ready, what blocks them (their
//! pods' scheduling failures, waiting containers), so it can show progress; this module prints
//! nothing. At the end the objects still not ready are returned with why, so the caller can list
//! them and exit 3.
//!
//! A workload whose pods can never start because their image cannot be pulled (`ErrImagePull`,
//! `ImagePullBackOff`, `InvalidImageName`, `ErrImageNeverPull` on a container of its current pod
//! template) is failed as soon as one of its pods reports it ([`image_pull_failure`]): the
//! kubelet retries with a growing back-off, but nothing changes until the image does, so waiting
//! out the timeout would only hide the reason.
//!
//! Caveats: a registry that fails one pull and serves the next (a rate limit, a network blip)
//! fails the wait too; running the apply again waits afresh.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{self, CONCURRENCY, Cluster, Resolved};
use crate::deploy::health::answer::{self, Answer};
use crate::deploy::health::blocked::{IMAGE_PULL_FAILURES, ended, image_of, image_pull_message};

/// An object's health as far as waiting is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Ready,
    /// Not ready yet, and why.
    Progressing(String),
    /// Will not become ready by waiting (a failed Job).
    Failed(String),
}

/// KServe's condition types an InferenceService's health reads.
const READY: &str = "Ready";
const LATEST_READY: &str = "LatestDeploymentReady";

/// Whether mlkube waits for this kind at all.
pub fn waits_for(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet")
            | ("batch", "Job")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("gateway.networking.k8s.io", "HTTPRoute" | "GRPCRoute")
            | ("serving.kserve.io", "InferenceService")
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

/// How a kubeflow.org job that has finished ended, `Succeeded` or `Failed`: its operator does
/// not run it again, whatever an apply changes in it.
pub fn finished_job(group: &str, object: &Value) -> Option<&'static str> {
    if group != "kubeflow.org" {
        return None;
    }
    ["Succeeded", "Failed"]
        .into_iter()
        .find(|kind| condition_true(object, kind))
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
        ("apps", "Deployment") => deployment_health(object),
        ("apps", "StatefulSet") => stateful_set_health(object),
        ("apps", "DaemonSet") => daemon_set_health(object),
        ("batch", "Job") => job_health(object),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd_health(object),
        ("gateway.networking.k8s.io", "HTTPRoute" | "GRPCRoute") => route_health(object),
        ("policy", "PodDisruptionBudget") => budget_health(object),
        ("serving.kserve.io", "InferenceService") => inference_service_health(object),
        _ => Health::Ready,
    }
}

/// A PodDisruptionBudget is well unless the disruption controller failed to compute it, which
/// blocks every eviction of its pods (see the module's doc).
fn budget_health(object: &Value) -> Health {
    match condition(object, "DisruptionAllowed") {
        Some(c) if c["status"] == "False" && c["reason"] == "SyncFailed" => {
            Health::Failed(format!(
                "the disruption controller cannot compute it, so no pod of it can be evicted and \
                 node drains block: {}",
                c["message"].as_str().unwrap_or("no message")
            ))
        }
        _ => Health::Ready,
    }
}

/// An InferenceService is ready when its controller has seen its current generation, says it
/// is `Ready`, and the revision of the current spec is ready (`LatestDeploymentReady`: a canary
/// held back for not being ready is waited for). Failed when the controller refused the spec
/// (`modelStatus.transitionStatus` InvalidSpec: no runtime for the format, a storage scheme it
/// cannot fetch): waiting changes nothing until the spec does.
fn inference_service_health(object: &Value) -> Health {
    let generation = int(&object["metadata"]["generation"]);
    let status = &object["status"];
    if int(&status["observedGeneration"]) < generation {
        return Health::Progressing(format!(
            "generation {generation} not yet seen by the InferenceService controller (is the \
             operator running with servingGateway?)"
        ));
    }
    let message = |kind: &str| {
        condition(object, kind).map_or(format!("no {kind} condition yet"), |c| {
            format!(
                "{kind}: {}: {}",
                c["reason"].as_str().unwrap_or("False"),
                c["message"].as_str().unwrap_or("no message")
            )
        })
    };
    if status["modelStatus"]["transitionStatus"] == "InvalidSpec" {
        return Health::Failed(message(READY));
    }
    match [READY, LATEST_READY]
        .into_iter()
        .find(|kind| !condition_true(object, kind))
    {
        None => Health::Ready,
        Some(kind) => Health::Progressing(message(kind)),
    }
}

/// A Gateway API route is ready when every Gateway it names has accepted its current
/// generation and resolved its backends, as that Gateway's controller writes in the route's
/// status. Never failed: a controller that starts late, or a Gateway created after the route,
/// still accepts it.
fn route_health(object: &Value) -> Health {
    let generation = int(&object["metadata"]["generation"]);
    let parents = object["status"]["parents"].as_array();
    let wanted = object["spec"]["parentRefs"]
        .as_array()
        .into_iter()
        .flatten();
    for wanted in wanted {
        let gateway = wanted["name"].as_str().unwrap_or("?");
        let Some(parent) = parents.into_iter().flatten().find(|p| {
            p["parentRef"]["name"] == wanted["name"]
                && (wanted["namespace"].is_null()
                    || p["parentRef"]["namespace"] == wanted["namespace"])
        }) else {
            return Health::Progressing(format!(
                "gateway {gateway} has not taken it up yet (is the Gateway there, and its controller running?)"
            ));
        };
        for kind in ["Accepted", "ResolvedRefs"] {
            let mut conditions = parent["conditions"].as_array().into_iter().flatten();
            let Some(c) = conditions.find(|c| c["type"] == kind) else {
                return Health::Progressing(format!("gateway {gateway}: no {kind} condition yet"));
            };
            if int(&c["observedGeneration"]) < generation {
                return Health::Progressing(format!(
                    "gateway {gateway} has not seen generation {generation} yet"
                ));
            }
            if c["status"] != "True" {
                return Health::Progressing(format!(
                    "gateway {gateway}: not {kind}: {} {}",
                    c["reason"].as_str().unwrap_or_default(),
                    c["message"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    Health::Ready
}

/// A Deployment is ready when every desired replica is updated and available and no old one is
/// left; failed when it exceeded its progress deadline.
fn deployment_health(object: &Value) -> Health {
    let status = &object["status"];
    let desired = object["spec"]["replicas"].as_i64().unwrap_or(1);
    let updated = int(&status["updatedReplicas"]);
    let available = int(&status["availableReplicas"]);
    let total = int(&status["replicas"]);
    if let Some(c) =
        condition(object, "Progressing").filter(|c| c["reason"] == "ProgressDeadlineExceeded")
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

/// A StatefulSet is ready when every desired replica is ready and available, and, under a
/// rolling update, updated.
fn stateful_set_health(object: &Value) -> Health {
    let status = &object["status"];
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

/// A DaemonSet is ready when its pod on every node it is scheduled to is updated and available.
fn daemon_set_health(object: &Value) -> Health {
    let status = &object["status"];
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

/// A Job is ready when complete, and failed when its Failed condition says so.
fn job_health(object: &Value) -> Health {
    let status = &object["status"];
    if condition_true(object, "Complete") {
        Health::Ready
    } else if let Some(failed) = condition(object, "Failed").filter(|c| c["status"] == "True") {
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

/// A CustomResourceDefinition is ready when established, and failed when its names were not
/// accepted (they clash with another CRD's).
fn crd_health(object: &Value) -> Health {
    if condition_true(object, "Established") {
        Health::Ready
    } else if let Some(c) = condition(object, "NamesAccepted").filter(|c| c["status"] == "False") {
        Health::Failed(format!(
            "names not accepted: {}",
            c["message"].as_str().unwrap_or_default()
        ))
    } else {
        Health::Progressing("not established yet".into())
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
    /// Whether it failed (no wait would make it ready), rather than being still on its way.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
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
        failed: matches!(watched.health, Health::Failed(_)),
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
                Some(object) if answer::answered_by(object).is_some() => {
                    match answer::answer(cluster, &p.key, object).await {
                        Answer::Given => Health::Ready,
                        Answer::Awaited(why) => Health::Progressing(why),
                        Answer::Refused(why) => Health::Failed(why),
                    }
                }
                Some(object) => health(&p.key.group, &p.key.kind, object),
                None => Health::Progressing("not found".into()),
            };
            w.blockers = Vec::new();
            if let Some(object) = live.as_ref().filter(|_| w.health != Health::Ready) {
                let pods = pods_of(cluster, &p.key, object).await;
                w.blockers = pods.iter().flat_map(pod_reasons).collect();
                if let Some(why) = image_pull_failure(object, &pods) {
                    w.health = Health::Failed(why);
                }
            }
            Ok::<(), WaitError>(())
        })
        .collect();
    let results: Vec<Result<(), WaitError>> = futures::stream::iter(reads)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// The pods of a workload, by its selector's labels. Best effort: a failure to list pods gives
/// none rather than an error, so the wait goes on without their reasons.
pub async fn pods_of(cluster: &impl Cluster, key: &Key, object: &Value) -> Vec<Value> {
    let Some(labels) = object["spec"]["selector"]["matchLabels"].as_object() else {
        return Vec::new();
    };
    let selector: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    // An empty selector would be every pod of the namespace, none of them known to be its.
    if selector.is_empty() {
        return Vec::new();
    }
    let Some(pods) = cluster.resolve("v1", "Pod") else {
        return Vec::new();
    };
    cluster
        .list(&pods, key.namespace.as_deref(), &selector.join(","))
        .await
        .unwrap_or_default()
}

/// Why a workload can never become ready, if one of its pods says its image cannot be pulled:
/// the image, the kubelet's message and what to do, on one line.
///
/// Only containers whose image is the one the workload's pod template has now count, and only
/// pods not being deleted: a pod of the previous rollout, with the image an apply just fixed,
/// is on its way out and says nothing about the new one.
pub fn image_pull_failure(object: &Value, pods: &[Value]) -> Option<String> {
    let template = &object["spec"]["template"]["spec"];
    pods.iter()
        .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
        .find_map(|pod| {
            ["initContainerStatuses", "containerStatuses"]
                .iter()
                .flat_map(|field| pod["status"][field].as_array().into_iter().flatten())
                .find_map(|status| {
                    let waiting = &status["state"]["waiting"];
                    let reason = waiting["reason"].as_str()?;
                    if !IMAGE_PULL_FAILURES.contains(&reason) {
                        return None;
                    }
                    let name = status["name"].as_str()?;
                    let image = image_of(&pod["spec"], name)?;
                    (image_of(template, name) == Some(image))
                        .then(|| image_pull_message(image, reason, waiting["message"].as_str()))
                })
        })
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
                let reason = waiting.get("reason").and_then(Value::as_str);
                // A crash loop's own message only says it backs off: how it ended says why.
                let message = match (reason, ended(container)) {
                    (Some("CrashLoopBackOff"), Some(ended)) => ended,
                    _ => waiting
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                };
                reasons.push(format!(
                    "pod {name}: container {cname} waiting: {} {message}",
                    reason.unwrap_or_default()
                ));
            } else if let Some(terminated) = state["terminated"].as_object()
                && container["ready"] != Value::Bool(true)
                && terminated.get("reason").and_then(Value::as_str) != Some("Completed")
            {
                let how = ended(container).unwrap_or_else(|| {
                    let reason = terminated.get("reason").and_then(Value::as_str);
                    reason.unwrap_or_default().to_string()
                });
                reasons.push(format!("pod {name}: container {cname} terminated: {how}"));
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
    fn a_disruption_budget_is_never_waited_for_and_fails_only_when_it_cannot_be_computed() {
        assert!(!waits_for("policy", "PodDisruptionBudget"));
        let budget = |status: &str, reason: &str| {
            json!({"metadata": {"generation": 1}, "spec": {"maxUnavailable": 1},
                   "status": {"observedGeneration": 1, "disruptionsAllowed": 0,
                              "conditions": [{"type": "DisruptionAllowed", "status": status,
                                              "reason": reason, "message": "found no controllers for pod \"p\""}]}})
        };
        let health = |object: &Value| health("policy", "PodDisruptionBudget", object);
        assert_eq!(health(&budget("True", "SufficientPods")), Health::Ready);
        // None allowed while its pods roll out: not a fault of the budget.
        assert_eq!(health(&budget("False", "InsufficientPods")), Health::Ready);
        assert_eq!(
            health(&json!({"spec": {"maxUnavailable": 1}})),
            Health::Ready
        );
        let Health::Failed(why) = health(&budget("False", "SyncFailed")) else {
            panic!("a budget that cannot be computed blocks every drain")
        };
        assert!(
            why.contains("drains block") && why.contains("found no controllers"),
            "{why}"
        );
    }

    #[test]
    fn an_inference_service_waits_for_its_newest_revision_and_fails_on_a_refused_spec() {
        let isvc = |observed: i64, ready: &str, latest: &str, transition: &str| {
            json!({"metadata": {"generation": 2},
                   "status": {"observedGeneration": observed,
                              "modelStatus": {"transitionStatus": transition},
                              "conditions": [
                                  {"type": "Ready", "status": ready, "reason": "NoSupportingRuntime",
                                   "message": "no runtime serves onnx"},
                                  {"type": "LatestDeploymentReady", "status": latest,
                                   "reason": "RevisionNotReady", "message": "d-predictor-1 is not ready"}]}})
        };
        let health = |object: &Value| health("serving.kserve.io", "InferenceService", object);
        assert!(waits_for("serving.kserve.io", "InferenceService"));
        assert_eq!(health(&isvc(2, "True", "True", "UpToDate")), Health::Ready);
        let Health::Progressing(why) = health(&isvc(1, "True", "True", "UpToDate")) else {
            panic!("a generation the controller has not seen is not ready")
        };
        assert!(why.contains("servingGateway"), "{why}");
        let Health::Progressing(why) = health(&isvc(2, "True", "False", "InProgress")) else {
            panic!("a held canary is waited for")
        };
        assert!(why.contains("d-predictor-1 is not ready"), "{why}");
        let Health::Failed(why) = health(&isvc(2, "False", "False", "InvalidSpec")) else {
            panic!("a refused spec does not become ready by waiting")
        };
        assert!(
            why.contains("NoSupportingRuntime: no runtime serves onnx"),
            "{why}"
        );
    }

    #[test]
    fn a_route_is_ready_once_its_gateway_accepted_its_generation_and_resolved_its_backends() {
        let route = |conditions: Value| {
            json!({"metadata": {"generation": 2},
                   "spec": {"parentRefs": [{"name": "gateway"}]},
                   "status": {"parents": [{"parentRef": {"name": "gateway"}, "conditions": conditions}]}})
        };
        let at = |generation: i64, resolved: &str| {
            json!([{"type": "Accepted", "status": "True", "observedGeneration": generation},
                   {"type": "ResolvedRefs", "status": resolved, "observedGeneration": generation,
                    "reason": "BackendNotFound", "message": "service digits-v2 not found"}])
        };
        let group = "gateway.networking.k8s.io";
        assert_eq!(
            health(group, "HTTPRoute", &route(at(2, "True"))),
            Health::Ready
        );
        let Health::Progressing(old) = health(group, "HTTPRoute", &route(at(1, "True"))) else {
            panic!("an old generation is not ready");
        };
        assert!(old.contains("generation 2"), "{old}");
        let Health::Progressing(unresolved) = health(group, "HTTPRoute", &route(at(2, "False")))
        else {
            panic!("unresolved backends are not ready");
        };
        assert!(unresolved.contains("digits-v2 not found"), "{unresolved}");
        let mut untaken = route(at(2, "True"));
        untaken["status"] = json!({});
        assert!(matches!(
            health(group, "HTTPRoute", &untaken),
            Health::Progressing(_)
        ));
    }

    #[test]
    fn a_crash_loop_is_told_by_how_its_container_ended_and_what_it_said() {
        let pod = json!({"metadata": {"name": "digits-v3-1"}, "status": {"phase": "Pending",
            "initContainerStatuses": [{"name": "fetch-model", "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                    "message": "s3://models/digits/v3/ holds no objects: no model was saved there\n"}}}]}});
        assert_eq!(
            pod_reasons(&pod),
            [
                "pod digits-v3-1: container fetch-model waiting: CrashLoopBackOff last ended with \
              exit code 1 (Error): s3://models/digits/v3/ holds no objects: no model was saved there"
            ]
        );
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

    const SERVING: &str = "tensorflow/serving:2.18.0";

    /// A Deployment `resnet` of one replica whose `serving` container runs `image`.
    fn serving_deployment(image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "resnet", "namespace": "ml"},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "resnet"}},
                        "template": {"metadata": {"labels": {"app": "resnet"}},
                                     "spec": {"containers": [{"name": "serving", "image": image}]}}}})
    }

    /// A pod of `resnet` running `image`, its container waiting for `reason`.
    fn waiting_pod(name: &str, image: &str, reason: &str, message: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml", "labels": {"app": "resnet"}},
               "spec": {"containers": [{"name": "serving", "image": image}]},
               "status": {"phase": "Pending", "containerStatuses": [{"name": "serving",
                   "ready": false, "image": image,
                   "state": {"waiting": {"reason": reason, "message": message}}}]}})
    }

    #[test]
    fn an_image_that_cannot_be_pulled_is_named_with_the_kubelets_message_and_a_hint() {
        let message = format!("failed to pull and unpack image \"{SERVING}\": not found");
        let pods = [waiting_pod("resnet-1", SERVING, "ErrImagePull", &message)];
        let why = image_pull_failure(&serving_deployment(SERVING), &pods).expect("a failure");
        assert_eq!(
            why,
            format!(
                "image {SERVING} cannot be pulled: {message} (ErrImagePull); hint: build the \
                 image and import it into the cluster's nodes (or push it to a registry they \
                 can pull from), or set the component's image param to an image that exists"
            )
        );
        for reason in ["ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"] {
            let pods = [waiting_pod("resnet-1", SERVING, reason, "")];
            let why = image_pull_failure(&serving_deployment(SERVING), &pods);
            assert!(
                why.as_deref().is_some_and(|w| w.contains(reason)),
                "{reason}: {why:?}"
            );
        }
    }

    #[test]
    fn only_pods_of_the_current_template_that_are_not_going_away_fail_a_workload() {
        let fixed = serving_deployment("tensorflow/serving:2.17.0");
        // The pod of the rollout before the fix still backs off; it is on its way out.
        let old = waiting_pod("resnet-old", SERVING, "ImagePullBackOff", "Back-off");
        assert_eq!(image_pull_failure(&fixed, std::slice::from_ref(&old)), None);
        let mut deleting = waiting_pod("resnet-1", SERVING, "ErrImagePull", "not found");
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            image_pull_failure(&serving_deployment(SERVING), &[deleting]),
            None
        );
        let creating = waiting_pod("resnet-1", SERVING, "ContainerCreating", "");
        assert_eq!(
            image_pull_failure(&serving_deployment(SERVING), &[creating]),
            None
        );
    }

    #[test]
    fn an_init_container_whose_image_cannot_be_pulled_fails_the_workload_too() {
        let mut deployment = serving_deployment(SERVING);
        deployment["spec"]["template"]["spec"]["initContainers"] =
            json!([{"name": "fetch", "image": "example/fetch:1"}]);
        let mut pod = waiting_pod("resnet-1", SERVING, "PodInitializing", "");
        pod["spec"]["initContainers"] = json!([{"name": "fetch", "image": "example/fetch:1"}]);
        pod["status"]["initContainerStatuses"] = json!([{"name": "fetch",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off"}}}]);
        let why = image_pull_failure(&deployment, &[pod]).expect("a failure");
        assert!(
            why.starts_with("image example/fetch:1 cannot be pulled: Back-off (ImagePullBackOff)"),
            "{why}"
        );
    }

    /// The memory cluster with namespace `ml`, the Deployment `resnet` running `SERVING` (not
    /// available: nothing runs its pods) and its pod `resnet-1` in the state `status`.
    async fn serving_cluster(
        pod_status: Value,
    ) -> (crate::deploy::cluster::memory::MemoryCluster, Pending) {
        let cluster = crate::deploy::cluster::memory::MemoryCluster::new();
        cluster.create_as(
            "test",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}),
        );
        cluster.create_as("test", serving_deployment(SERVING));
        cluster.create_as(
            "kube-controller-manager",
            waiting_pod("resnet-1", SERVING, "", ""),
        );
        cluster.set_status("v1", "Pod", Some("ml"), "resnet-1", pod_status);
        let pending = Pending {
            key: Key {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: Some("ml".into()),
                name: "resnet".into(),
            },
            resolved: cluster.resolve("apps/v1", "Deployment").expect("served"),
        };
        (cluster, pending)
    }

    #[tokio::test]
    async fn the_wait_fails_a_deployment_whose_image_cannot_be_pulled_without_waiting_out_the_timeout()
     {
        let backing_off = waiting_pod("resnet-1", SERVING, "ImagePullBackOff", "Back-off pulling");
        let (cluster, pending) = serving_cluster(backing_off["status"].clone()).await;
        // The first poll decides: the memory cluster answers at once, so anything near the
        // timeout means it was waited out.
        let timeout = Duration::from_secs(60);
        let started = Instant::now();
        let not_ready = wait(&cluster, vec![pending], timeout, &|_, _| {}, &Cancel::new())
            .await
            .expect("the wait reads the cluster");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "waited {:?}",
            started.elapsed()
        );
        assert_eq!(not_ready.len(), 1, "{not_ready:?}");
        assert!(
            not_ready[0].reason.starts_with(&format!(
                "image {SERVING} cannot be pulled: Back-off pulling"
            )),
            "{not_ready:?}"
        );
        assert!(not_ready[0].reason.contains("hint: "), "{not_ready:?}");
        assert_eq!(
            not_ready[0].pods,
            ["pod resnet-1: container serving waiting: ImagePullBackOff Back-off pulling"]
        );
    }

    #[tokio::test]
    async fn a_deployment_whose_pod_is_only_being_created_is_waited_for_until_the_timeout() {
        let creating = waiting_pod("resnet-1", SERVING, "ContainerCreating", "");
        let (cluster, pending) = serving_cluster(creating["status"].clone()).await;
        let timeout = Duration::from_millis(500);
        let started = Instant::now();
        let not_ready = wait(&cluster, vec![pending], timeout, &|_, _| {}, &Cancel::new())
            .await
            .expect("the wait reads the cluster");
        assert!(
            started.elapsed() >= timeout,
            "gave up after {:?}",
            started.elapsed()
        );
        assert_eq!(not_ready[0].reason, "0/1 available, 0 updated");
    }
}
