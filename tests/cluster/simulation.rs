//! Training jobs run to their end on the local cluster by themselves: kwok's stages
//! (`cluster/kwok-stages.yaml`) give the pods of a TFJob a lifetime and an exit, and the
//! operator, run as the binary beside the cluster as the quickstart runs it, turns those exits
//! into the job's conditions. Nothing here patches a pod's status.
//!
//! The jobs are untyped (`DynamicObject`), read from `examples/` or written as JSON, so these
//! tests hold whatever shape the operator's Rust types take.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::operator_identity::{Access, NamespaceOperator, Scope};
use crate::support::{TestNamespace, eventually};

/// An upper bound only: the jobs here finish in seconds; a loaded 2-core CI machine needs room.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The TFJob API of the test namespace, once the CRD from `crds/` is applied and served.
async fn tfjobs(ns: &TestNamespace) -> Api<DynamicObject> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/tfjobs.kubeflow.org.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let crd: CustomResourceDefinition = serde_yaml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()));
    // The same field manager as the operator tests, so the shared CRD has one test owner.
    Api::<CustomResourceDefinition>::all(ns.client.clone())
        .patch(
            &crd.name_any(),
            &PatchParams::apply("mlkube-operator-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .expect("the TFJob CRD applies");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1", "TFJob"),
        "tfjobs",
    );
    let jobs = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource);
    eventually("the TFJob API to be served", TIMEOUT, || async {
        jobs.list(&ListParams::default().limit(1))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    jobs
}

/// A namespace of the test's own, its TFJob API, and an operator watching it as the
/// component's ServiceAccount.
async fn with_operator(prefix: &str) -> (TestNamespace, Api<DynamicObject>, NamespaceOperator) {
    let ns = TestNamespace::new(prefix).await;
    let jobs = tfjobs(&ns).await;
    let operator = NamespaceOperator::start(&ns, Access::scoped(Scope::Namespace)).await;
    (ns, jobs, operator)
}

async fn submit(jobs: &Api<DynamicObject>, job: Value) {
    let job: DynamicObject = serde_json::from_value(job).expect("a TFJob object");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("the TFJob is accepted");
}

/// `examples/<file>` as JSON.
fn example(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

/// A job whose replica types (name, replicas, restartPolicy, pod annotations) are given.
fn job(name: &str, replicas: &[(&str, i32, &str, Value)]) -> Value {
    let specs: serde_json::Map<String, Value> = replicas
        .iter()
        .map(|(rtype, count, restart, annotations)| {
            let spec = json!({
                "replicas": count,
                "restartPolicy": restart,
                "template": {
                    "metadata": { "annotations": annotations },
                    "spec": { "containers": [{ "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] }
                }
            });
            ((*rtype).to_owned(), spec)
        })
        .collect();
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": name },
        "spec": { "tfReplicaSpecs": specs }
    })
}

/// The job's conditions as (type, status, message), oldest first.
fn conditions(job: &DynamicObject) -> Vec<(String, String, String)> {
    let listed = job.data["status"]["conditions"].as_array().cloned();
    let text = |c: &Value, field: &str| c[field].as_str().unwrap_or_default().to_owned();
    listed
        .unwrap_or_default()
        .iter()
        .map(|c| (text(c, "type"), text(c, "status"), text(c, "message")))
        .collect()
}

/// Wait until the job's last condition is `type_`, and return the job.
async fn await_last_condition(jobs: &Api<DynamicObject>, name: &str, type_: &str) -> DynamicObject {
    eventually(&format!("TFJob {name} to be {type_}"), TIMEOUT, || async {
        let job = jobs.get(name).await.ok()?;
        let last = conditions(&job).pop()?;
        (last.0 == type_ && last.1 == "True").then_some(job)
    })
    .await
}

async fn pod(ns: &TestNamespace, name: &str) -> Pod {
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("cannot read pod {name}: {e}"))
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn tensorflow_container(pod: &Pod) -> Option<ContainerStatus> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find(|c| c.name == "tensorflow").cloned()
}

fn exit_code(container: &ContainerStatus) -> Option<i32> {
    Some(container.state.as_ref()?.terminated.as_ref()?.exit_code)
}

#[tokio::test]
async fn dist_mnist_example_goes_created_running_succeeded_by_itself() {
    let (ns, jobs, _operator) = with_operator("sim-mnist").await;
    submit(&jobs, example("dist-mnist.yaml")).await;

    let job = await_last_condition(&jobs, "dist-mnist", "Succeeded").await;
    let types: Vec<String> = conditions(&job).into_iter().map(|c| c.0).collect();
    assert_eq!(types, ["Created", "Running", "Succeeded"]);
    let names = [
        "ps-0", "ps-1", "worker-0", "worker-1", "worker-2", "worker-3",
    ];
    for name in names.map(|n| format!("dist-mnist-{n}")) {
        let pod = pod(&ns, &name).await;
        assert_eq!(phase(&pod), "Succeeded", "pod {name}");
        let container = tensorflow_container(&pod).expect("a container status");
        assert_eq!(exit_code(&container), Some(0), "pod {name}");
    }
}

#[tokio::test]
async fn a_worker_exiting_with_the_annotated_code_fails_the_job_and_says_so() {
    let (ns, jobs, _operator) = with_operator("sim-fail").await;
    let failing =
        json!({ "mlkube.io/simulate-exit-code": "3", "mlkube.io/simulate-duration": "1s" });
    submit(&jobs, job("crash", &[("Worker", 1, "Never", failing)])).await;

    let job = await_last_condition(&jobs, "crash", "Failed").await;
    let (_, _, message) = conditions(&job).pop().unwrap();
    assert!(
        message.contains("worker 0: exit code 3 of container tensorflow"),
        "{message}"
    );
    let pod = pod(&ns, "crash-worker-0").await;
    assert_eq!(phase(&pod), "Failed");
    let container = tensorflow_container(&pod).expect("a container status");
    assert_eq!(exit_code(&container), Some(3));
    assert_eq!(
        container
            .state
            .unwrap()
            .terminated
            .unwrap()
            .reason
            .as_deref(),
        Some("Error")
    );
}

#[tokio::test]
async fn a_pod_annotated_manual_stays_running_while_the_others_finish() {
    let (ns, jobs, _operator) = with_operator("sim-manual").await;
    let quick = json!({ "mlkube.io/simulate-duration": "1s" });
    let manual = json!({ "mlkube.io/simulate": "manual", "mlkube.io/simulate-duration": "1s" });
    let replicas = [("Worker", 1, "Never", quick), ("PS", 1, "Never", manual)];
    submit(&jobs, job("mixed", &replicas)).await;

    // Both pods started together and would end after the same second: the worker did.
    await_last_condition(&jobs, "mixed", "Succeeded").await;
    assert_eq!(phase(&pod(&ns, "mixed-worker-0").await), "Succeeded");
    let ps = pod(&ns, "mixed-ps-0").await;
    assert_eq!(phase(&ps), "Running", "the manual pod was left alone");
    let container = tensorflow_container(&ps).expect("a container status");
    assert!(container.state.unwrap().running.is_some());
    assert_eq!(container.restart_count, 0);
}

#[tokio::test]
async fn on_failure_restarts_the_container_in_place_with_the_exit_in_last_state() {
    let (ns, jobs, _operator) = with_operator("sim-restart").await;
    let failing =
        json!({ "mlkube.io/simulate-exit-code": "2", "mlkube.io/simulate-duration": "1s" });
    submit(&jobs, job("flaky", &[("Worker", 1, "OnFailure", failing)])).await;

    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let restarted = eventually("the worker to restart twice", TIMEOUT, || async {
        let pod = pods.get("flaky-worker-0").await.ok()?;
        let restarts = tensorflow_container(&pod)?.restart_count;
        (restarts >= 2).then_some(pod)
    })
    .await;
    assert_eq!(phase(&restarted), "Running", "the pod itself never ends");
    let container = tensorflow_container(&restarted).expect("a container status");
    assert!(container.state.as_ref().unwrap().running.is_some());
    let last = container.last_state.unwrap().terminated.unwrap();
    assert_eq!(last.exit_code, 2);
    assert_eq!(last.reason.as_deref(), Some("Error"));
}
