//! A VolumeManager's replicas across the cluster's real nodes (`type=real`), and a job that
//! reads it running only where its data is. Written for a cluster of several real nodes; on one
//! node each test proves the other side of the same rule: `replicas: 2` is refused, saying so.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::{Api, Client, ResourceExt};
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::volumes::api::{State, VolumeStatus};
use serde_json::json;

use crate::jobs::finished;
use crate::platform::NAMESPACE;
use crate::support::{self, eventually};
use crate::volume_support::{
    READ_SECRET, create, fetcher_nodes, gone, object_store, placed_on, s3_volume, upload, volume,
    volume_controller,
};

const TRAINING_IMAGE: &str = "mlkube/training:0.1.0";

/// The names of the real nodes, sorted.
async fn real_nodes(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels("type=real"))
        .await
        .expect("listing the nodes")
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "the cluster has a real node");
    names
}

/// The node names a volume's status selects.
fn selected(volume: &VolumeStatus) -> Vec<String> {
    let affinity = serde_json::to_value(&volume.node_affinity).expect("an affinity serializes");
    serde_json::from_value(
        affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchFields"][0]["values"]
            .clone(),
    )
    .unwrap_or_default()
}

/// A volume `id` of the uploaded digits with `replicas`, kept to the real nodes.
fn digits(id: &str, replicas: i64) -> serde_json::Value {
    let mut config = s3_volume(id, "s3://data/kvc-test/digits", READ_SECRET);
    config["replicas"] = json!(replicas);
    config["nodeAffinity"] = json!({ "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [
            { "key": "type", "operator": "In", "values": ["real"] }] }] } });
    config
}

#[tokio::test]
async fn two_replicas_are_placed_on_two_real_nodes_or_refused_on_one() {
    volume_controller();
    object_store();
    let client = support::client().await;
    upload(&client).await;
    let nodes = real_nodes(&client).await;
    let (api, vm) = create(&client, "spread", json!([digits("digits", 2)])).await;
    let volumes = crate::volume_support::finished(&api, "spread", &["digits"]).await;
    let digits = volume(&volumes, "digits");
    let message = digits.message.clone().unwrap_or_default();
    if nodes.len() == 1 {
        assert_eq!(digits.state, Some(State::Failed), "{message}");
        assert_eq!(
            message,
            format!("replicas 2 needs 2 nodes; 1 is eligible: {}", nodes[0])
        );
        assert!(
            fetcher_nodes(&client, &vm).await.is_empty(),
            "nothing is placed"
        );
    } else {
        assert_eq!(digits.state, Some(State::Completed), "{message}");
        let placed = fetcher_nodes(&client, &vm).await;
        assert_eq!(placed.len(), 2, "two replicas, two nodes: {placed:?}");
        assert_eq!(selected(digits), placed);
        assert!(
            message.ends_with(&format!(": {}", placed.join(", "))),
            "{message}"
        );
        for node in &placed {
            let held = placed_on(&client, node, &vm, "look-spread").await;
            assert_eq!(held, "['digits']", "on {node}");
        }
    }
    api.delete("spread", &DeleteParams::default())
        .await
        .expect("deleting");
    gone(&api, "spread").await;
}

/// Python that prints the node it runs on (from the downward API) and what /data/digits holds.
const READ_ON_NODE: &str =
    "import os; print(os.environ['NODE'], sorted(os.listdir('/data/digits')))";

/// A job's pods once each has ended: a TFJob succeeds when its worker 0 does, while the other
/// workers may still be starting.
async fn ended_pods(client: &Client, job: &str, count: usize) -> Vec<Pod> {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let selector = format!("training.kubeflow.org/job-name={job}");
    eventually(
        "each of the job's pods to end",
        crate::volume_support::TIMEOUT,
        || async {
            let items = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?
                .items;
            let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
            let ended = items
                .iter()
                .all(|p| matches!(phase(p).as_deref(), Some("Succeeded" | "Failed")));
            (items.len() == count && ended).then_some(items)
        },
    )
    .await
}

#[tokio::test]
async fn a_job_reading_a_volume_runs_only_on_the_node_that_holds_it() {
    volume_controller();
    object_store();
    let client = support::client().await;
    upload(&client).await;
    let (api, vm) = create(&client, "one-copy", json!([digits("digits", 1)])).await;
    let volumes = crate::volume_support::finished(&api, "one-copy", &["digits"]).await;
    let placed = volume(&volumes, "digits");
    assert_eq!(placed.state, Some(State::Completed), "{:?}", placed.message);
    let holder = fetcher_nodes(&client, &vm).await;
    assert_eq!(selected(placed), holder);

    let jobs = Api::<TFJob>::namespaced(client.clone(), NAMESPACE);
    let _ = jobs
        .delete("one-copy-reader", &DeleteParams::default())
        .await;
    eventually(
        "the last run's job to be gone",
        crate::volume_support::TIMEOUT,
        || async { matches!(jobs.get_opt("one-copy-reader").await, Ok(None)).then_some(()) },
    )
    .await;
    let container = json!({ "name": "tensorflow", "image": TRAINING_IMAGE,
        "command": ["python3", "-c", READ_ON_NODE],
        "env": [{ "name": "NODE", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } }] });
    let job: TFJob = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": "one-copy-reader",
            "annotations": { "data.mlkube.io/volume-manager": "one-copy" } },
        "spec": {
            "runPolicy": { "cleanPodPolicy": "None" },
            "tfReplicaSpecs": { "Worker": { "replicas": 3, "restartPolicy": "Never",
                "template": { "spec": { "containers": [container] } } } } },
    }))
    .expect("a valid TFJob");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("creating the TFJob");
    let (state, message) = finished(&jobs, "one-copy-reader").await;
    assert_eq!(state, "Succeeded", "{message}");
    let pods = ended_pods(&client, "one-copy-reader", 3).await;
    let pods_api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for pod in &pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(
            node.as_ref(),
            holder.first(),
            "{} runs on the node that holds the data",
            pod.name_any()
        );
        let logs = pods_api
            .logs(&pod.name_any(), &LogParams::default())
            .await
            .unwrap_or_else(|e| panic!("the logs of pod {}: {e}", pod.name_any()));
        assert_eq!(
            logs.trim(),
            format!("{} ['labels', 'test.bin', 'train.bin']", holder[0]),
            "{} reads the data there",
            pod.name_any()
        );
    }
    let _ = jobs
        .delete("one-copy-reader", &DeleteParams::default())
        .await;
    api.delete("one-copy", &DeleteParams::default())
        .await
        .expect("deleting");
    gone(&api, "one-copy").await;
}
