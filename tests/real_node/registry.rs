//! The nodes pull from the cluster's registry, as any cluster's nodes do: every node pulls an
//! image whose policy is `Always` (the registry answers for `docker.io/mlkube/...`), a tag the
//! registry does not hold fails the pull with the kubelet's `ErrImagePull`, and the registry
//! answers on the host's `MLKUBE_REGISTRY` with the platform's images.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::storage::busybox_image;
use crate::support::{TestNamespace, eventually};

const TIMEOUT: Duration = Duration::from_secs(120);

/// The real nodes' names.
async fn node_names(ns: &TestNamespace) -> Vec<String> {
    let nodes = Api::<Node>::all(ns.client.clone())
        .list(&ListParams::default().labels("type=real"))
        .await
        .expect("list the nodes");
    nodes
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

fn pod_on(name: &str, node: &str, image: &str, policy: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": policy, "command": ["true"]}],
        },
    }))
    .expect("a Pod")
}

/// The messages of the pod's events of `reason`.
async fn events_of(ns: &TestNamespace, pod: &str, reason: &str) -> Vec<String> {
    let fields = format!("involvedObject.name={pod},reason={reason}");
    let events = Api::<Event>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().fields(&fields))
        .await
        .expect("list the events");
    events.items.into_iter().filter_map(|e| e.message).collect()
}

#[tokio::test]
async fn every_node_pulls_from_the_registry_when_told_to_pull_always() {
    let ns = TestNamespace::new("real-pull").await;
    let image = busybox_image(&ns.client).await;
    let nodes = node_names(&ns).await;
    assert!(
        nodes.len() >= 2,
        "the real-node tests run on two nodes or more: {nodes:?}"
    );
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    for (i, node) in nodes.iter().enumerate() {
        let pod = pod_on(&format!("always-{i}"), node, &image, "Always");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create the pod");
    }
    for (i, node) in nodes.iter().enumerate() {
        let name = format!("always-{i}");
        eventually(&format!("{name} to succeed"), TIMEOUT, || async {
            let phase = pods.get(&name).await.ok()?.status?.phase?;
            (phase == "Succeeded").then_some(())
        })
        .await;
        let pulled = events_of(&ns, &name, "Pulled").await;
        assert!(
            pulled
                .iter()
                .any(|m| m.starts_with("Successfully pulled image")),
            "{name} on {node} was pulled, not found on the node: {pulled:?}"
        );
    }
}

#[tokio::test]
async fn a_tag_the_registry_lacks_fails_the_pull_with_err_image_pull() {
    let ns = TestNamespace::new("real-pull-fail").await;
    let nodes = node_names(&ns).await;
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let image = "mlkube/busybox:no-such-tag";
    let pod = pod_on("missing", &nodes[0], image, "IfNotPresent");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let reason = eventually("the pull to fail", TIMEOUT, || async {
        let status = pods.get("missing").await.ok()?.status?;
        let waiting = status.container_statuses?.first()?.state.clone()?.waiting?;
        let reason = waiting.reason?;
        matches!(reason.as_str(), "ErrImagePull" | "ImagePullBackOff").then_some(reason)
    })
    .await;
    let failed = events_of(&ns, "missing", "Failed").await;
    assert!(
        failed
            .iter()
            .any(|m| m.contains(image) && m.contains("not found")),
        "{reason}: the kubelet says the registry has no such tag: {failed:?}"
    );
}

#[test]
fn the_registry_answers_on_the_hosts_address_with_the_platforms_images() {
    let registry = std::env::var("MLKUBE_REGISTRY").expect(
        "MLKUBE_REGISTRY is set: eval \"$(cluster/local-cluster.sh env)\" of a real-node cluster",
    );
    let output = std::process::Command::new("curl")
        .args([
            "-fsS",
            "--max-time",
            "10",
            &format!("http://{registry}/v2/_catalog"),
        ])
        .output()
        .expect("curl runs");
    let catalog = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for image in [
        "mlkube/pause",
        "mlkube/mlkube",
        "mlkube/training",
        "mlkube/serving",
    ] {
        assert!(
            catalog.contains(&format!("\"{image}\"")),
            "{image} in {catalog}"
        );
    }
}
