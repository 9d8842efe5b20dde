//! A PyTorchJob on the real node: its worker's `init-pytorch` container (the operator's, running
//! upstream's `nslookup` loop in the dnsutils image the node holds, the platform's
//! `pytorchInitImage`, since upstream's alpine:3.10 cannot be pulled here) waits until the
//! Master's name resolves over cluster DNS through the pod's search domains; then the worker reaches the Master at
//! `MASTER_ADDR:MASTER_PORT`, as torch.distributed would. The training image has no PyTorch, so
//! plain sockets play its rendezvous.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use mlkube::operator::training::frameworks::pytorch::PyTorchJob;
use serde_json::json;

use crate::jobs::{finished, logs, submit};
use crate::platform::PYTORCH_INIT_IMAGE;
use crate::support::TestNamespace;

const TRAINING_IMAGE: &str = "mlkube/training:0.1.0";

/// The Master accepts one connection and says so; the worker connects and says whom it reached.
const SCRIPT: &str = "
import os, socket, sys
host, port = os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])
if os.environ['RANK'] == '0':
    s = socket.create_server(('', port))
    conn, _ = s.accept()
    print('master: rank', conn.recv(16).decode(), 'joined', flush=True)
else:
    for _ in range(60):
        try:
            c = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            import time; time.sleep(1)
    else:
        sys.exit('worker: could not reach the master')
    c.sendall(os.environ['RANK'].encode())
    print('worker: reached', host, flush=True)
";

fn job() -> PyTorchJob {
    let replica = |count: i32| {
        json!({"replicas": count, "restartPolicy": "OnFailure",
               "template": {"spec": {"containers": [{
                   "name": "pytorch", "image": TRAINING_IMAGE,
                   "command": ["python3", "-c", SCRIPT],
                   "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "rendezvous"},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"},
                 "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(1)}},
    }))
    .expect("a valid PyTorchJob")
}

#[tokio::test]
async fn a_pytorch_worker_waits_for_its_master_with_the_init_image_the_node_holds() {
    let ns = TestNamespace::new("real-pytorch").await;
    let (jobs, name) = submit(&ns, job()).await;
    let (state, message) = finished(&jobs, &name).await;
    assert_eq!(state, "Succeeded", "{message}");
    let logs = logs(&ns, "pytorchjob/rendezvous", &["--all-containers"]);
    assert!(logs.contains("master: rank 1 joined"), "{logs}");
    assert!(
        logs.contains("worker: reached rendezvous-master-0"),
        "{logs}"
    );
    let (image, exit_code) = init_container(&ns, "rendezvous-worker-0").await;
    assert_eq!(image, PYTORCH_INIT_IMAGE, "the platform's init image");
    assert_eq!(
        exit_code,
        Some(0),
        "init-pytorch ended resolving the Master"
    );
}

/// The image of the pod's `init-pytorch` container and how it ended.
async fn init_container(ns: &TestNamespace, pod: &str) -> (String, Option<i32>) {
    let pod = Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .get(pod)
        .await
        .unwrap_or_else(|e| panic!("get the pod {pod}: {e}"));
    let spec = pod.spec.expect("a pod has a spec");
    let init = spec
        .init_containers
        .into_iter()
        .flatten()
        .find(|c| c.name == "init-pytorch");
    let image = init
        .and_then(|c| c.image)
        .expect("the worker has an init-pytorch container");
    let status = pod
        .status
        .and_then(|s| s.init_container_statuses)
        .unwrap_or_default();
    let exit_code = status
        .iter()
        .find(|s| s.name == "init-pytorch")
        .and_then(|s| s.state.as_ref()?.terminated.as_ref())
        .map(|t| t.exit_code);
    (image, exit_code)
}
