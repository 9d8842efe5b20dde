//! The VolumeManager fill the lost node runs: one 40 MB object of the platform's object store,
//! fetched over node 2's link slowed to 8 Mbit/s (tc's token bucket on its port of the nodes'
//! bridge), so that the fill still runs when the node stops. The store and the controllers are
//! first moved to the surviving node: a node-local store lost with its node is another story.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams, LogParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use mlkube::operator::volumes::api::{State, VolumeManager, VolumeStatus};
use serde_json::json;

use crate::platform::NAMESPACE;
use crate::support::eventually;
use crate::volume_support::{
    READ_SECRET, create, gone, object_store, placed_on, s3_volume, volume_controller, with_store,
};

const NAME: &str = "node-loss-fill";
const ID: &str = "big";
const PREFIX: &str = "node-loss/big";
const STORE: &str = "object-store";
const TIMEOUT: Duration = Duration::from_secs(300);

/// Python with boto3: one object of 40 MB under PREFIX.
const UPLOAD: &str = r#"
import os, boto3
boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"]).put_object(
    Bucket="data", Key=os.environ["PREFIX"] + "/part", Body=os.urandom(40 * 1024 * 1024))
print("uploaded")
"#;

/// The parts the jobs and the fill need (the operator, the volume controller and the object
/// store) moved off `stopped`: `stopped` cordoned, the store's StatefulSet scaled to 0 and its
/// claim (bound to its node) deleted, the controllers' pods there deleted for their Deployments
/// to start them again, the store scaled back, and `stopped` uncordoned once they run. The
/// platform's other pods stay where they are (a claim may bind them to `stopped`).
pub async fn keep_platform_off(client: &Client, stopped: &str) {
    volume_controller();
    object_store();
    let parts = [STORE, "volume-controller", crate::platform::operator()];
    let is_part = |pod: &Pod| {
        let name = pod.name_any();
        is_platform(pod)
            && parts
                .iter()
                .any(|part| name.starts_with(&format!("{part}-")))
    };
    cordon(client, stopped, true).await;
    let sets = Api::<StatefulSet>::namespaced(client.clone(), NAMESPACE);
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), NAMESPACE);
    if node_of(&pods, &format!("{STORE}-0")).await.as_deref() == Some(stopped) {
        scale(&sets, 0).await;
        let claim = format!("data-{STORE}-0");
        let _ = claims.delete(&claim, &DeleteParams::default()).await;
        eventually("the store's claim to be gone", TIMEOUT, || async {
            matches!(claims.get_opt(&claim).await, Ok(None)).then_some(())
        })
        .await;
        scale(&sets, 1).await;
    }
    for pod in pods.list(&ListParams::default()).await.expect("list").items {
        let on = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if on == Some(stopped) && is_part(&pod) {
            let _ = pods.delete(&pod.name_any(), &DeleteParams::default()).await;
        }
    }
    let what = format!("the operator, the volume controller and the store to run off {stopped}");
    eventually(&what, TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let ready = list.items.iter().filter(|p| is_part(p)).all(|p| {
            let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
            on != Some(stopped) && is_ready(p)
        });
        ready.then_some(())
    })
    .await;
    cordon(client, stopped, false).await;
}

async fn node_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.ok()??.spec?.node_name
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    (conditions.into_iter().flatten()).any(|c| c.type_ == "Ready" && c.status == "True")
}

/// A pod of the platform's Deployments and StatefulSets (not a test's, nor a fetcher).
fn is_platform(pod: &Pod) -> bool {
    let owners = pod.metadata.owner_references.iter().flatten();
    owners
        .into_iter()
        .any(|o| matches!(o.kind.as_str(), "ReplicaSet" | "StatefulSet"))
}

async fn scale(sets: &Api<StatefulSet>, replicas: i32) {
    let patch = json!({"spec": {"replicas": replicas}});
    sets.patch(STORE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("scale the store");
    let what = format!("the store to have {replicas} pod(s)");
    eventually(&what, TIMEOUT, || async {
        let status = sets.get(STORE).await.ok()?.status?;
        (status.replicas == replicas && status.ready_replicas.unwrap_or(0) == replicas)
            .then_some(())
    })
    .await;
}

async fn cordon(client: &Client, node: &str, on: bool) {
    let patch = json!({"spec": {"unschedulable": on}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("cordon or uncordon the node");
}

/// Node 2's port of the nodes' bridge slowed to 8 Mbit/s toward the node, or (`on` false)
/// back to full speed.
pub fn slow_link(on: bool) {
    let port = std::env::var("MLKUBE_CLUSTER_PORT").expect("MLKUBE_CLUSTER_PORT is set");
    let mut tc = Command::new("ip");
    tc.args(["netns", "exec", &format!("mlkube-{port}"), "tc", "qdisc"]);
    if on {
        tc.args(["replace", "dev", "veth-n2", "root", "tbf", "rate", "8mbit"]);
        tc.args(["burst", "16kb", "latency", "400ms"]);
    } else {
        tc.args(["del", "dev", "veth-n2", "root"]);
    }
    let output = tc.output().expect("ip netns exec tc runs");
    assert!(output.status.success(), "tc: {output:?}");
}

/// The fill, created: the object uploaded, the link slowed, the VolumeManager preferring
/// `node` and leaving an unreachable node after 5 s.
pub async fn start(client: &Client, node: &str) -> (Api<VolumeManager>, VolumeManager) {
    let uploaded = with_store(client, "node-loss-upload", PREFIX, UPLOAD).await;
    assert_eq!(uploaded.trim(), "uploaded");
    slow_link(true);
    let mut config = s3_volume(ID, &format!("s3://data/{PREFIX}"), READ_SECRET);
    config["nodeAffinity"] = json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]});
    let tolerate = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
    config["tolerations"] = json!([
        tolerate("node.kubernetes.io/unreachable"),
        tolerate("node.kubernetes.io/not-ready")
    ]);
    create(client, NAME, json!([config])).await
}

/// The fill's one volume, once `done` says its status is what is awaited.
async fn await_volume(
    api: &Api<VolumeManager>,
    what: &str,
    done: impl Fn(&VolumeStatus) -> bool,
) -> VolumeStatus {
    eventually(what, TIMEOUT, || async {
        let status = api.get(NAME).await.ok()?.status?;
        let volume = status.volumes.into_iter().find(|v| v.id == ID)?;
        done(&volume).then_some(volume)
    })
    .await
}

/// The fill's fetcher running on `node` and downloading (its log says so: it has listed the
/// store and made its partial copy), its copy not done.
pub async fn await_running_on(client: &Client, node: &str) {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let fetcher = format!("{NAME}-{ID}-0");
    let what = format!("the fill's fetcher to download on {node}");
    eventually(&what, TIMEOUT, || async {
        let pod = pods.get_opt(&fetcher).await.ok()??;
        let on = pod.spec.as_ref()?.node_name.as_deref() == Some(node);
        let running = pod.status?.phase.as_deref() == Some("Running");
        let log = pods.logs(&fetcher, &LogParams::default()).await.ok()?;
        (on && running && log.contains("downloading")).then_some(())
    })
    .await;
}

/// The volume's state now (to check that the fill still ran when the node stopped).
pub async fn state(api: &Api<VolumeManager>) -> Option<State> {
    let status = api.get(NAME).await.ok()?.status?;
    status.volumes.into_iter().find(|v| v.id == ID)?.state
}

/// The message of the volume while its fetcher is evicted and not yet gone.
pub async fn await_waiting(api: &Api<VolumeManager>) -> String {
    let volume = await_volume(api, "the fill to say its fetcher is lost", |v| {
        (v.message.as_deref()).is_some_and(|m| m.contains("placed again once its pod is gone"))
    })
    .await;
    volume.message.unwrap_or_default()
}

/// The volume, Completed, and the status's nodes to clean.
pub async fn await_completed(api: &Api<VolumeManager>) -> (VolumeStatus, Vec<String>) {
    let volume = await_volume(api, "the fill to complete", |v| {
        matches!(v.state, Some(State::Completed | State::Failed))
    })
    .await;
    assert_eq!(volume.state, Some(State::Completed), "{:?}", volume.message);
    let status = api
        .get(NAME)
        .await
        .expect("the fill")
        .status
        .expect("a status");
    (volume, status.nodes_to_clean)
}

/// What `node` holds of the fill: its entries, or `absent`.
pub async fn held_on(client: &Client, vm: &VolumeManager, node: &str) -> String {
    placed_on(client, node, vm, "node-loss-look").await
}

/// Delete the VolumeManager; once it is gone, neither node holds anything of it.
pub async fn delete_and_check(
    client: &Client,
    api: &Api<VolumeManager>,
    vm: &VolumeManager,
    nodes: &[&str],
) {
    api.delete(NAME, &DeleteParams::default())
        .await
        .expect("deleting the fill");
    gone(api, NAME).await;
    for node in nodes {
        let held = held_on(client, vm, node).await;
        assert_eq!(held, "absent", "nothing of the fill is left on {node}");
    }
}
