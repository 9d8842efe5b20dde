//! The operator faults a real node showed (issue 23), proved on the local cluster with the
//! operator binary run as the quickstart runs it, as the component's ServiceAccount:
//!
//! - `init-pytorch` took its image from nowhere but the code, so a cluster that cannot pull
//!   `alpine:3.10` could not run a PyTorchJob with a Master; `--pytorch-init-container-image`
//!   sets it;
//! - a job failed at its backoff limit lost its pods whatever its `cleanPodPolicy`, and with them
//!   the logs that explain the failure, and its message did not say which container ended how.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::pytorch::PyTorchJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use serde_json::json;

use crate::operator::{TIMEOUT, await_condition_type, install_crd, services};
use crate::operator_identity::{
    Access, OperatorIdentity, OperatorProcess, Scope, spawn_operator_binary,
};
use crate::support::{TestNamespace, eventually, submit};

/// The operator binary for `ns` with `flags`, as the component's namespace-scoped
/// ServiceAccount, with every framework's CRD installed.
async fn operator_binary(
    ns: &TestNamespace,
    flags: &[&str],
) -> (OperatorProcess, OperatorIdentity) {
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(ns, Access::scoped(Scope::Namespace)).await;
    let process = spawn_operator_binary(&ns.name, &identity, flags);
    (process, identity)
}

/// Panic at once, rather than at a timeout, when the operator has exited (a flag it rejects).
fn still_running(operator: &mut OperatorProcess) {
    if let Ok(Some(status)) = operator.0.try_wait() {
        panic!("the operator exited ({status}); its stderr is above");
    }
}

/// Pod `name` of the test's namespace, once it exists.
async fn await_pod(ns: &TestNamespace, operator: &mut OperatorProcess, name: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    eventually(&format!("pod {name} to be created"), TIMEOUT, || {
        still_running(operator);
        let pods = pods.clone();
        async move { pods.get_opt(name).await.ok().flatten() }
    })
    .await
}

#[tokio::test]
async fn the_pytorch_init_container_takes_its_image_from_the_operators_flag() {
    const IMAGE: &str = "mirror.internal/library/alpine:3.19";
    let ns = TestNamespace::new("fault-init-image").await;
    let (mut operator, _identity) =
        operator_binary(&ns, &["--pytorch-init-container-image", IMAGE]).await;
    let replica = json!({ "replicas": 1, "template": { "spec": {
        "containers": [{ "name": "pytorch", "image": "pytorch:1" }]
    } } });
    let job: PyTorchJob = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": { "name": "mirrored" },
        "spec": { "pytorchReplicaSpecs": { "Master": replica, "Worker": replica } }
    }))
    .expect("a valid PyTorchJob");
    submit(&ns, &job).await;

    let worker = await_pod(&ns, &mut operator, "mirrored-worker-0").await;
    let init = worker
        .spec
        .and_then(|s| s.init_containers)
        .expect("the worker has init containers");
    let images: Vec<_> = init
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_deref()))
        .collect();
    assert_eq!(images, [("init-pytorch", Some(IMAGE))]);
}

/// The last condition's message of a job.
fn last_message<J: TrainingJob>(job: &J) -> String {
    job.status()
        .and_then(|s| s.conditions.last())
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// The `tensorflow` container's restarts, if the pod says.
fn restarts(pod: &Pod) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    Some(
        statuses
            .iter()
            .find(|c| c.name == "tensorflow")?
            .restart_count,
    )
}

#[tokio::test]
async fn a_job_failed_at_its_backoff_limit_keeps_its_pods_with_clean_pod_policy_none() {
    let ns = TestNamespace::new("fault-backoff").await;
    let (mut operator, _identity) = operator_binary(&ns, &[]).await;
    // kwok restarts the container in place every second, each run exiting 1 (see
    // cluster/kwok-stages.yaml): a crash loop, as the kubelet runs one.
    let crashing =
        json!({ "mlkube.io/simulate-exit-code": "1", "mlkube.io/simulate-duration": "1s" });
    let job: TFJob = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": "crashing" },
        "spec": {
            "runPolicy": { "backoffLimit": 1, "cleanPodPolicy": "None" },
            "tfReplicaSpecs": { "Worker": {
                "replicas": 1,
                "restartPolicy": "OnFailure",
                "template": {
                    "metadata": { "annotations": crashing },
                    "spec": { "containers": [{ "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] }
                }
            } }
        }
    }))
    .expect("a valid TFJob");
    let jobs = submit(&ns, &job).await;

    let failed = await_condition_type(&jobs, "crashing", "Failed", TIMEOUT).await;
    let message = last_message(&failed);
    assert!(
        message.starts_with(
            "Job crashing has failed because it has reached the specified backoff limit"
        ),
        "{message}"
    );
    assert!(
        message.contains("worker 0: exit code 1 of container tensorflow"),
        "{message}"
    );

    // Each restart after the failure is a pod update the operator reconciles the finished job
    // on: two more, and the pod still there, show the cleanup left it alone.
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let at_failure = pods
        .get("crashing-worker-0")
        .await
        .ok()
        .and_then(|p| restarts(&p))
        .expect("the worker is kept at the backoff limit");
    eventually("the kept worker to restart twice more", TIMEOUT, || {
        still_running(&mut operator);
        let pods = pods.clone();
        async move {
            let pod = pods.get_opt("crashing-worker-0").await.ok()?;
            let pod = pod.unwrap_or_else(|| panic!("the worker was deleted"));
            assert!(
                pod.metadata.deletion_timestamp.is_none(),
                "the worker is being deleted"
            );
            (restarts(&pod)? >= at_failure + 2).then_some(())
        }
    })
    .await;
    assert!(
        services(&ns, "crashing")
            .await
            .contains_key("crashing-worker-0"),
        "its service is kept too"
    );
    let listed = pods
        .list(&ListParams::default().labels("training.kubeflow.org/job-name=crashing"))
        .await
        .expect("list pods");
    let names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["crashing-worker-0"]);
}
