//! The nodes pull from the cluster's registry, as any cluster's nodes do: every node pulls an
//! image whose policy is `Always` (the registry answers for `docker.io/mlkube/...`), a tag the
//! registry does not hold fails the pull with the kubelet's `ErrImagePull`, the registry
//! answers on the host's `MLKUBE_REGISTRY` with the platform's images, and each node keeps the
//! images it pulled unpacked, without their compressed layers (the registry holds those).

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
    let catalog = curl(&format!("http://{registry}/v2/_catalog"), &[]);
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

const TRAINING: &str = concat!("mlkube/training:", env!("CARGO_PKG_VERSION"));

/// `curl` of `url`, which must answer; its body.
fn curl(url: &str, headers: &[&str]) -> String {
    let mut args = vec!["-fsS", "--max-time", "10"];
    for header in headers {
        args.extend(["-H", header]);
    }
    let output = std::process::Command::new("curl")
        .args(&args)
        .arg(url)
        .output()
        .expect("curl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "GET {url}: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `ctr` of the node's containerd, whose socket is `socket`, in the kubelet's namespace; stdout.
fn ctr(socket: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["--namespace", "k8s.io"])
        .args(args)
        .output()
        .expect("ctr runs (Debian's containerd package, as the nodes')");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "ctr {args:?}: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The layers of `image` (`repository:tag`) as the registry's manifest lists them.
fn layers_in_the_registry(registry: &str, image: &str) -> Vec<String> {
    let (repository, tag) = image.split_once(':').expect("a tagged image");
    let accept = "Accept: application/vnd.oci.image.manifest.v1+json";
    let manifest = curl(
        &format!("http://{registry}/v2/{repository}/manifests/{tag}"),
        &[accept],
    );
    let manifest: serde_json::Value = serde_json::from_str(&manifest).expect("a JSON manifest");
    let layers: Vec<String> = manifest["layers"]
        .as_array()
        .expect("the manifest lists layers")
        .iter()
        .filter_map(|layer| Some(layer["digest"].as_str()?.to_owned()))
        .collect();
    assert!(!layers.is_empty(), "{manifest}");
    layers
}

/// The containerd sockets of the cluster's nodes, `<dir>/node-K/containerd.sock`.
fn node_sockets(dir: &str) -> Vec<std::path::PathBuf> {
    let sockets: Vec<_> = std::fs::read_dir(dir)
        .expect("the cluster's directory")
        .filter_map(|entry| Some(entry.ok()?.path().join("containerd.sock")))
        .filter(|socket| {
            socket
                .parent()
                .is_some_and(|p| p.to_string_lossy().contains("/node-"))
        })
        .filter(|socket| socket.exists())
        .collect();
    assert!(
        sockets.len() >= 2,
        "two nodes' containerd sockets in {dir}: {sockets:?}"
    );
    sockets
}

/// Once unpacked, a node needs an image's snapshots, not its compressed layers: every node holds
/// the training image (the largest) and none of the layers the registry's manifest lists for it.
#[test]
fn each_node_keeps_its_images_unpacked_without_their_compressed_layers() {
    let [registry, dir] = ["MLKUBE_REGISTRY", "MLKUBE_CLUSTER_DIR"].map(|name| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is set: eval \"$(cluster/local-cluster.sh env)\" of a real-node cluster")
        })
    });
    let layers = layers_in_the_registry(&registry, TRAINING);
    for socket in &node_sockets(&dir) {
        let images = ctr(socket, &["images", "ls", "-q"]);
        let reference = format!("docker.io/{TRAINING}");
        assert!(
            images.lines().any(|l| l == reference),
            "{socket:?} holds {reference}: {images}"
        );
        let content = ctr(socket, &["content", "ls", "-q"]);
        let kept: Vec<_> = layers
            .iter()
            .filter(|l| content.contains(l.as_str()))
            .collect();
        assert!(
            kept.is_empty(),
            "{socket:?} dropped the unpacked layers, kept {kept:?}"
        );
    }
}
