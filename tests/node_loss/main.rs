//! Node loss, on the local cluster with real nodes (`MLKUBE_CLUSTER_NODE=real`, two nodes or
//! more): node 2 fails as a machine does (`cluster/local-cluster.sh stop-node 2`: every process
//! of it killed at once, with no goodbye to the API server) while a TFJob's worker, a
//! Framework's task and a VolumeManager's fill run on it, and comes back after.
//!
//! What Kubernetes does is what a user of any cluster sees: the node goes NotReady, its pods are
//! evicted (the test shortens their toleration of an unreachable node to 5 s) but stay
//! Terminating, as no kubelet confirms the end; the operator must not start a second pod for a
//! task meanwhile (the first may still run on a node that is only cut off). An administrator who
//! knows the node is down says so with the `node.kubernetes.io/out-of-service` taint
//! (Kubernetes' non-graceful node shutdown); the pod garbage collector then removes the pods,
//! and the operator replaces them on the other node, where both jobs finish. The node comes
//! back: nothing runs twice, nothing is lost.
//!
//! A test binary of its own, run after the real-node tests: stopping a node fails whatever else
//! runs on it. It needs the cluster's MLKUBE_CLUSTER_DIR and MLKUBE_CLUSTER_PORT, as
//! `cluster/run-tests.sh` exports them.

mod fill;
#[path = "../real_node/platform.rs"]
#[allow(dead_code)]
mod platform;
#[path = "../cluster/support.rs"]
#[allow(dead_code)]
mod support;
mod timeline;
#[path = "../real_node/volume_support.rs"]
#[allow(dead_code)]
mod volume_support;
mod workloads;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use mlkube::operator::volumes::api::State;
use serde_json::json;

use support::{TestNamespace, eventually};
use timeline::{Census, Timeline};

/// The node that fails, and the one that holds the control plane and takes its work.
const STOPPED: &str = "mlkube-node-2";
const SURVIVOR: &str = "mlkube-node-1";
const NODE_TIMEOUT: Duration = Duration::from_secs(180);
const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// `cluster/local-cluster.sh ARGS...` of the cluster the tests use; panics with its output on
/// failure.
fn local_cluster(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/cluster/local-cluster.sh");
    for setting in ["MLKUBE_CLUSTER_DIR", "MLKUBE_CLUSTER_PORT"] {
        assert!(
            std::env::var_os(setting).is_some(),
            "{setting} is not set: run this test as cluster/run-tests.sh does, with the cluster's settings"
        );
    }
    let output = Command::new(script)
        .args(args)
        .output()
        .expect("local-cluster.sh runs");
    assert!(
        output.status.success(),
        "local-cluster.sh {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The node's Ready condition's status: True, False or Unknown.
async fn readiness(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get(name).await.ok()?;
    let conditions = node.status?.conditions?;
    let ready = conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some(ready.status)
}

async fn await_readiness(nodes: &Api<Node>, name: &str, wanted: &str) {
    let what = format!("{name} to be Ready={wanted}");
    eventually(&what, NODE_TIMEOUT, || async {
        (readiness(nodes, name).await? == wanted).then_some(())
    })
    .await;
}

/// The administrator's word that the node is down (or, with `None`, back): the out-of-service
/// taint set or removed.
async fn out_of_service(nodes: &Api<Node>, on: bool) {
    let node = nodes.get(STOPPED).await.expect("the stopped node");
    let mut taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    taints.retain(|t| t.key != OUT_OF_SERVICE);
    if on {
        let taint = json!({"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"});
        taints.push(serde_json::from_value(taint).expect("a taint"));
    }
    let patch = json!({"spec": {"taints": taints}});
    nodes
        .patch(STOPPED, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("taint the node");
}

/// The test's pods that are on `node` and not being deleted.
async fn live_pods_on(pods: &Api<Pod>, node: &str) -> Vec<String> {
    let list = pods.list(&ListParams::default()).await.expect("list pods");
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter_map(|p| p.metadata.name)
        .collect()
}

#[tokio::test]
async fn a_node_that_fails_mid_job_loses_no_job_and_runs_no_task_twice() {
    platform::app();
    let ns = TestNamespace::new("real-node-loss").await;
    let client = ns.client.clone();
    let nodes = Api::<Node>::all(client.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), &ns.name);
    fill::keep_platform_off(&client, STOPPED).await;
    let (fills, vm) = fill::start(&client, STOPPED).await;
    let watch = workloads::start(&ns, STOPPED).await;
    let mut timeline = Timeline::start();
    let census = Census::start(pods.clone());
    let fill_census = Census::start(Api::namespaced(client.clone(), platform::NAMESPACE));

    workloads::await_running_on(&pods, STOPPED).await;
    fill::await_running_on(&client, STOPPED).await;
    timeline.mark("both tasks run on the node, the fill downloads there");
    let filling = fill::state(&fills).await;
    local_cluster(&["stop-node", "2"]);
    timeline.mark("node stopped");
    fill::slow_link(false);
    assert_eq!(
        filling,
        Some(State::Running),
        "the fill still ran when the node stopped"
    );
    await_readiness(&nodes, STOPPED, "Unknown").await;
    timeline.mark("node NotReady (Unknown)");
    workloads::await_evicted(&pods).await;
    timeline.mark("its pods evicted, still Terminating");
    let waiting = fill::await_waiting(&fills).await;
    timeline.mark(&format!("the fill says: {waiting}"));
    workloads::assert_not_replaced_for(&pods, Duration::from_secs(10)).await;
    timeline.mark("10 s later: no second pod for either task");

    out_of_service(&nodes, true).await;
    timeline.mark("out-of-service taint set");
    for (task, at) in workloads::await_replaced_on(&pods, SURVIVOR).await {
        timeline.mark_at(&format!("{task} running again on {SURVIVOR}"), at);
    }
    let (volume, to_clean) = fill::await_completed(&fills).await;
    timeline.mark(&format!(
        "the fill completed: {}",
        volume.message.unwrap_or_default()
    ));
    let outcome = watch.finished().await;
    timeline.mark(&format!("both jobs finished: {outcome}"));

    local_cluster(&["start-node", "2"]);
    out_of_service(&nodes, false).await;
    await_readiness(&nodes, STOPPED, "True").await;
    timeline.mark("node back, Ready");
    let most = census.stop();
    let most_fetchers = fill_census.stop();
    assert_eq!(
        to_clean,
        [SURVIVOR, STOPPED],
        "both nodes are to be cleaned"
    );
    let partial = fill::held_on(&client, &vm, STOPPED).await;
    assert_eq!(
        partial, "['big.partial']",
        "the lost fetcher's copy is on the node that came back"
    );
    timeline.mark(&format!(
        "{STOPPED} holds the lost fetcher's partial copy: {partial}"
    ));
    fill::delete_and_check(&client, &fills, &vm, &[SURVIVOR, STOPPED]).await;
    timeline.mark("the fill deleted: nothing of it on either node");
    eprintln!("{}", timeline.report());
    assert!(
        most.values().chain(most_fetchers.values()).all(|n| *n <= 1),
        "a task had two live pods at once: {most:?} {most_fetchers:?}"
    );
    assert!(
        live_pods_on(&pods, STOPPED).await.is_empty(),
        "nothing of the jobs runs again on the node that came back"
    );
    workloads::assert_each_task_ran_twice(&ns).await;
}
