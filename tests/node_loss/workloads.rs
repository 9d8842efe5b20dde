//! The work the lost node runs: a TFJob of one worker and a Framework of one task, each about
//! 25 s of work, that prefer the node to be stopped (and may go elsewhere once it is gone), and
//! tolerate an unreachable node for 5 s instead of Kubernetes' default 300.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use mlkube::operator::fc::api::{Framework, FrameworkState};
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::{TestNamespace, eventually};
use crate::timeline::task_of;

const TFJOB: &str = "trained";
const FRAMEWORK: &str = "framed";
const IMAGE: &str = concat!("mlkube/training:", env!("CARGO_PKG_VERSION"));
const TIMEOUT: Duration = Duration::from_secs(300);

/// A pod that prefers `node`, leaves an unreachable node after 5 s, and works 25 s.
fn pod_spec(node: &str, restart: &str) -> Value {
    let prefer = json!({"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    ]});
    let tolerate = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
    json!({
        "restartPolicy": restart,
        "terminationGracePeriodSeconds": 5,
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": prefer}
        ]}},
        "tolerations": [tolerate("node.kubernetes.io/unreachable"), tolerate("node.kubernetes.io/not-ready")],
        "containers": [{
            "name": "tensorflow",
            "image": IMAGE,
            "command": ["sh", "-c", "echo started on $NODE; sleep 25; echo done on $NODE"],
            "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        }],
    })
}

fn tfjob(node: &str) -> TFJob {
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": TFJOB},
        "spec": {"tfReplicaSpecs": {"Worker": {
            "replicas": 1, "restartPolicy": "OnFailure",
            "template": {"spec": pod_spec(node, "OnFailure")},
        }}},
    }))
    .expect("a TFJob")
}

/// One task, retried up to twice; its success completes the Framework.
fn framework(node: &str) -> Framework {
    serde_json::from_value(json!({
        "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
        "metadata": {"name": FRAMEWORK},
        "spec": {
            "executionType": "Start",
            "retryPolicy": {"fancyRetryPolicy": false, "maxRetryCount": 0},
            "taskRoles": [{
                "name": "worker", "taskNumber": 1,
                "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceededTaskCount": 1},
                "task": {
                    "retryPolicy": {"fancyRetryPolicy": false, "maxRetryCount": 2},
                    "pod": {"spec": pod_spec(node, "Never")},
                },
            }],
        },
    }))
    .expect("a Framework")
}

/// The two jobs, created; awaited with [`Jobs::finished`].
pub struct Jobs {
    tfjobs: Api<TFJob>,
    frameworks: Api<Framework>,
}

pub async fn start(ns: &TestNamespace, node: &str) -> Jobs {
    let tfjobs = Api::<TFJob>::namespaced(ns.client.clone(), &ns.name);
    tfjobs
        .create(&PostParams::default(), &tfjob(node))
        .await
        .expect("the TFJob is accepted");
    let frameworks = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    frameworks
        .create(&PostParams::default(), &framework(node))
        .await
        .expect("the Framework is accepted");
    Jobs { tfjobs, frameworks }
}

impl Jobs {
    /// Both jobs' ends, once both ended: the TFJob's last condition and the Framework's
    /// completion with its retries; panics unless both succeeded.
    pub async fn finished(&self) -> String {
        let tfjob = eventually("the TFJob to finish", TIMEOUT, || async {
            let job = self.tfjobs.get(TFJOB).await.ok()?;
            let last = job.status?.conditions.last()?.clone();
            let done =
                matches!(last.type_.as_str(), "Succeeded" | "Failed") && last.status == "True";
            done.then_some(last)
        })
        .await;
        assert_eq!(tfjob.type_, "Succeeded", "{tfjob:?}");
        let status = eventually("the Framework to complete", TIMEOUT, || async {
            let status = self.frameworks.get(FRAMEWORK).await.ok()?.status?;
            (status.state == FrameworkState::Completed).then_some(status)
        })
        .await;
        let completion = status
            .attempt_status
            .completion_status
            .clone()
            .expect("a completion");
        assert_eq!(
            completion.status.code, 0,
            "the Framework succeeded: {completion:?}"
        );
        let task = &status.attempt_status.task_role_statuses[0].task_statuses[0];
        assert!(
            task.retry_policy_status.total_retried_count >= 1,
            "the task was retried after its pod was lost: {task:?}"
        );
        format!(
            "TFJob {}; Framework {:?} (task retried {} time(s))",
            tfjob.type_, completion.status.type_.name, task.retry_policy_status.total_retried_count
        )
    }
}

fn on_node(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Both tasks' pods Running on `node`.
pub async fn await_running_on(pods: &Api<Pod>, node: &str) {
    let what = format!("both tasks to run on {node}");
    eventually(&what, TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let running = list
            .items
            .iter()
            .filter(|p| on_node(p, node) && phase(p) == Some("Running"))
            .filter_map(task_of)
            .count();
        (running == 2).then_some(())
    })
    .await;
}

/// Both tasks' pods being deleted (evicted from the unreachable node).
pub async fn await_evicted(pods: &Api<Pod>) {
    eventually("both pods to be evicted", TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let deleting = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .filter_map(task_of)
            .count();
        (deleting == 2).then_some(())
    })
    .await;
}

/// For `period`, each task keeps its one pod (the evicted one): no second pod is created while
/// the first may still run on a node that is only cut off.
pub async fn assert_not_replaced_for(pods: &Api<Pod>, period: Duration) {
    let until = Instant::now() + period;
    while Instant::now() < until {
        let list = pods.list(&ListParams::default()).await.expect("list pods");
        let mut per_task: BTreeMap<String, usize> = BTreeMap::new();
        for task in list.items.iter().filter_map(task_of) {
            *per_task.entry(task).or_default() += 1;
        }
        assert!(
            per_task.len() == 2 && per_task.values().all(|n| *n == 1),
            "one pod per task while the node is lost: {per_task:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// When each task first ran again on `node`, in a pod not being deleted.
pub async fn await_replaced_on(pods: &Api<Pod>, node: &str) -> BTreeMap<String, Instant> {
    let mut seen: BTreeMap<String, Instant> = BTreeMap::new();
    let deadline = Instant::now() + TIMEOUT;
    while seen.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "both tasks to run again on {node}: {seen:?}"
        );
        let list = pods.list(&ListParams::default()).await.expect("list pods");
        let running = list.items.iter().filter(|p| {
            on_node(p, node)
                && p.metadata.deletion_timestamp.is_none()
                && phase(p) == Some("Running")
        });
        for task in running.filter_map(task_of) {
            seen.entry(task).or_insert_with(Instant::now);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    seen
}

/// Each task's pod was scheduled twice, first to the lost node and then to the other (the
/// scheduler's events outlive the pods).
pub async fn assert_each_task_ran_twice(ns: &TestNamespace) {
    let events = Api::<Event>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().fields("reason=Scheduled"))
        .await
        .expect("list the events");
    let mut nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for event in &events.items {
        let (Some(pod), Some(message)) = (&event.involved_object.name, &event.message) else {
            continue;
        };
        let node = message.rsplit(" to ").next().unwrap_or_default().trim();
        nodes
            .entry(pod.clone())
            .or_default()
            .insert(node.to_string());
    }
    for pod in [format!("{TFJOB}-worker-0"), format!("{FRAMEWORK}-worker-0")] {
        let ran = nodes.get(&pod).map(|n| n.len()).unwrap_or_default();
        assert_eq!(ran, 2, "{pod} ran once on each node: {nodes:?}");
    }
}
