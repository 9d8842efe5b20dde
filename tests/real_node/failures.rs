//! Jobs that fail for real: a worker's exit code, an OOM kill through a memory limit, and a
//! crash loop up to the backoff limit. Each ends Failed with a message that names the cause, and
//! with `cleanPodPolicy: None` its pods and their logs are still there for `mlkube logs`.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use serde_json::json;

use crate::jobs::{finished, logs_of_failed, submit};
use crate::support::TestNamespace;

const TRAINING_IMAGE: &str = "mlkube/training:0.1.0";

/// A TFJob of one Worker running `script` in the training image's Python, its pods kept.
fn job(name: &str, script: &str, restart_policy: &str, backoff_limit: u32, memory: &str) -> TFJob {
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": { "name": name },
        "spec": {
            "runPolicy": { "cleanPodPolicy": "None", "backoffLimit": backoff_limit },
            "tfReplicaSpecs": { "Worker": {
                "replicas": 1,
                "restartPolicy": restart_policy,
                "template": { "spec": { "containers": [{
                    "name": "tensorflow",
                    "image": TRAINING_IMAGE,
                    "command": ["python3", "-c", script],
                    "resources": {
                        "requests": { "cpu": "50m", "memory": memory },
                        "limits": { "memory": memory },
                    },
                }]}},
            }},
        },
    }))
    .expect("a valid TFJob")
}

async fn pods_of(ns: &TestNamespace, job: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().labels(&format!("training.kubeflow.org/job-name={job}")))
        .await
        .expect("list the job's pods")
        .items
}

#[tokio::test]
async fn an_exit_code_fails_the_job_naming_it_and_the_logs_stay_readable() {
    let ns = TestNamespace::new("real-exit").await;
    let script = "import sys; print('no data in /data/train', flush=True); sys.exit(3)";
    let (jobs, name) = submit(&ns, job("exits", script, "Never", 3, "128Mi")).await;
    let (state, message) = finished(&jobs, &name).await;
    assert_eq!(state, "Failed", "{message}");
    assert!(
        message.contains("exit code 3"),
        "the message names the exit code: {message}"
    );
    assert_eq!(
        pods_of(&ns, &name).await.len(),
        1,
        "cleanPodPolicy None keeps the pod"
    );
    for args in [&[][..], &["-f"]] {
        let (logs, notes) = logs_of_failed(&ns, "tfjob/exits", args);
        assert!(logs.contains("worker-0 | no data in /data/train"), "{logs}");
        assert!(
            notes.contains("worker-0: container tensorflow ended with exit code 3"),
            "{args:?}: {notes}"
        );
        assert!(
            notes.contains(&format!("tfjob {}/exits failed: ", ns.name)),
            "{args:?}: {notes}"
        );
    }
}

#[tokio::test]
async fn a_memory_limit_kills_the_worker_and_the_job_fails_as_oom_killed() {
    let ns = TestNamespace::new("real-oom").await;
    let script =
        "print('loading', flush=True)\nheld = []\nwhile True: held.append(bytearray(8 << 20))";
    let (jobs, name) = submit(&ns, job("greedy", script, "Never", 3, "64Mi")).await;
    let (state, message) = finished(&jobs, &name).await;
    assert_eq!(state, "Failed", "{message}");
    assert!(
        message.contains("OOMKilled"),
        "the message names the OOM kill: {message}"
    );
    let (logs, notes) = logs_of_failed(&ns, "tfjob/greedy", &[]);
    assert!(logs.contains("worker-0 | loading"), "{logs}");
    assert!(
        notes.contains("worker-0: container tensorflow was OOMKilled (exit code 137)"),
        "{notes}"
    );
}

#[tokio::test]
async fn a_crash_loop_fails_the_job_at_its_backoff_limit_and_keeps_its_pods_and_logs() {
    let ns = TestNamespace::new("real-crash").await;
    let script = "import sys; print('cannot reach the parameter store', flush=True); sys.exit(1)";
    let (jobs, name) = submit(&ns, job("crashes", script, "OnFailure", 2, "128Mi")).await;
    let (state, message) = finished(&jobs, &name).await;
    assert_eq!(state, "Failed", "{message}");
    assert!(
        message.contains("backoff limit"),
        "the message says why: {message}"
    );
    assert!(
        message.contains("exit code 1"),
        "and how the container ended: {message}"
    );
    let pods = pods_of(&ns, &name).await;
    assert_eq!(
        pods.len(),
        1,
        "cleanPodPolicy None keeps the pod at the backoff limit"
    );
    let restarts = pods[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c[0].restart_count)
        .unwrap_or_default();
    assert!(
        restarts >= 2,
        "the kubelet restarted it up to the limit: {restarts}"
    );
    // The container's last run: between restarts the kubelet keeps only the newest dead one.
    let (logs, _) = logs_of_failed(&ns, "tfjob/crashes", &[]);
    assert!(
        logs.contains("worker-0 | cannot reach the parameter store"),
        "{logs}"
    );
}
