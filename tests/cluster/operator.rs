//! The TFJob operator on the real control plane: the operator runs in-process (or as a child
//! process where a restart is the point), kwok runs the pods, and the tests play the kubelet by
//! patching pod status (phase, exit codes).
//!
//! Each test runs its own operator scoped to its own namespace, so tests run in parallel. The
//! operator runs as the `training-operator` component's ServiceAccount (see `identity`), in
//! namespace scope unless a test asks for the cluster-scoped RBAC.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Event, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, ResourceExt};
use mlkube::operator::runtime::http::Health;
use mlkube::operator::runtime::manager::Shared;
use mlkube::operator::runtime::metrics::Metrics;
use mlkube::operator::training::engine::build;
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::{controller, registry};
use serde_json::json;

use crate::operator_identity::{Access, OperatorIdentity, Scope, spawn_operator_binary};
use crate::support::{TestNamespace, eventually};

/// An upper bound only: passing tests finish far sooner; a loaded 2-core CI machine needs room.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(120);

/// Install every framework's CRD, FrameworkController's Framework's too (the operator runs it by
/// default), idempotent and shared by every test, and wait until each is served.
pub(crate) async fn install_crd(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply("mlkube-operator-tests").force();
    let all = registry::ALL.iter().map(|r| (r.crd)());
    for crd in all.chain([mlkube::operator::fc::crd::definition()]) {
        let name = crd.name_any();
        crds.patch(&name, &params, &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("the {name} CRD applies: {e}"));
        tokio::time::timeout(
            TIMEOUT,
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("the {name} CRD became Established in time"))
        .expect("watching the CRD");
    }
}

/// An operator for one namespace, running in this process as the component's ServiceAccount;
/// stopped when dropped.
pub(crate) struct Operator {
    task: tokio::task::JoinHandle<()>,
    pub(crate) metrics: Arc<Metrics>,
    _identity: OperatorIdentity,
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) async fn start_operator(ns: &TestNamespace) -> Operator {
    start_operator_with(ns, build::Options::default()).await
}

async fn start_operator_with(ns: &TestNamespace, options: build::Options) -> Operator {
    start_operator_as(ns, Scope::Namespace, options).await
}

/// An operator whose ServiceAccount has the RBAC of `scope`, and PodGroup rules when `options`
/// gang-schedule.
async fn start_operator_as(ns: &TestNamespace, scope: Scope, options: build::Options) -> Operator {
    install_crd(&ns.client).await;
    let mut access = Access::scoped(scope);
    if options.gang_scheduler.is_some() {
        access = access.with_gang_scheduling();
    }
    let identity = OperatorIdentity::new(ns, access).await;
    let metrics = Arc::new(Metrics::default());
    let settings = controller::Settings {
        namespace: Some(ns.name.clone()),
        concurrency: 4,
        options,
        frameworks: registry::ALL.iter().collect(),
    };
    let shared = Shared::new(
        "training",
        identity.client.clone(),
        metrics.clone(),
        &Arc::new(Health::default()),
        // Stopped by aborting the task when the test is done.
        std::future::pending().boxed().shared(),
    );
    let task = tokio::spawn(controller::run(shared, settings));
    Operator {
        task,
        metrics,
        _identity: identity,
    }
}

/// The annotation that asks the local cluster's kwok to leave a pod Running: these tests play
/// the kubelet themselves by patching pod statuses.
pub(crate) const SIMULATE: &str = "mlkube.io/simulate";

/// Mark every pod template of a job of any kind as driven by hand (see [`SIMULATE`]).
pub(crate) fn driven_by_hand(mut job: serde_json::Value) -> serde_json::Value {
    let specs = job
        .get_mut("spec")
        .and_then(serde_json::Value::as_object_mut)
        .into_iter()
        .flat_map(|spec| spec.iter_mut())
        .filter(|(field, _)| field.ends_with("ReplicaSpecs"))
        .filter_map(|(_, specs)| specs.as_object_mut());
    for replicas in specs {
        for replica in replicas.values_mut() {
            replica["template"]["metadata"]["annotations"][SIMULATE] = json!("manual");
        }
    }
    job
}

/// A job from `examples/` (in the repository, or `dir` elsewhere), driven by hand.
pub(crate) fn example_in<K: serde::de::DeserializeOwned>(dir: &Path, file: &str) -> K {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let value: serde_json::Value = serde_yaml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    serde_json::from_value(driven_by_hand(value))
        .unwrap_or_else(|e| panic!("{} is not a job: {e}", path.display()))
}

/// A TFJob from `examples/`, driven by hand.
fn example(file: &str) -> TFJob {
    example_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"),
        file,
    )
}

fn tfjob(value: serde_json::Value) -> TFJob {
    serde_json::from_value(driven_by_hand(value)).expect("a valid TFJob")
}

/// A job of `workers` workers (and `ps` parameter servers) with extra run policy fields.
fn workers_job(
    name: &str,
    workers: i32,
    ps: i32,
    restart: &str,
    run_policy: serde_json::Value,
) -> TFJob {
    let template = json!({ "spec": { "containers": [{ "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] } });
    let mut specs = json!({ "Worker": { "replicas": workers, "restartPolicy": restart, "template": template } });
    if ps > 0 {
        specs["PS"] = json!({ "replicas": ps, "restartPolicy": restart, "template": template });
    }
    tfjob(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": name },
        "spec": { "runPolicy": run_policy, "tfReplicaSpecs": specs }
    }))
}

async fn submit(ns: &TestNamespace, job: &TFJob) -> Api<TFJob> {
    let jobs = Api::<TFJob>::namespaced(ns.client.clone(), &ns.name);
    jobs.create(&PostParams::default(), job)
        .await
        .expect("the TFJob is accepted");
    jobs
}

/// The job's pods by name, as the API server has them now.
pub(crate) async fn pods(ns: &TestNamespace, job: &str) -> BTreeMap<String, Pod> {
    let api = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let list = api
        .list(&ListParams::default().labels(&format!("training.kubeflow.org/job-name={job}")))
        .await
        .expect("list pods");
    list.items.into_iter().map(|p| (p.name_any(), p)).collect()
}

pub(crate) async fn services(ns: &TestNamespace, job: &str) -> BTreeMap<String, Service> {
    let api = Api::<Service>::namespaced(ns.client.clone(), &ns.name);
    let list = api
        .list(&ListParams::default().labels(&format!("training.kubeflow.org/job-name={job}")))
        .await
        .expect("list services");
    list.items.into_iter().map(|s| (s.name_any(), s)).collect()
}

/// Wait until these pods exist and kwok runs them; returns them.
pub(crate) async fn await_running(
    ns: &TestNamespace,
    job: &str,
    names: &[&str],
) -> BTreeMap<String, Pod> {
    let want: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    eventually(
        &format!("pods {want:?} of {job} to be Running"),
        TIMEOUT,
        || async {
            let pods = pods(ns, job).await;
            let running = want.iter().all(|n| {
                pods.get(n).is_some_and(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
            });
            running.then_some(pods)
        },
    )
    .await
}

/// Play the kubelet: the `tensorflow` container of `pod` exits with `code`.
async fn exit(ns: &TestNamespace, pod: &str, code: i32) {
    exit_container(ns, pod, "tensorflow", code).await;
}

/// Play the kubelet: `container` of `pod` exits with `code`, and the pod with it.
pub(crate) async fn exit_container(ns: &TestNamespace, pod: &str, container: &str, code: i32) {
    let api = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let (phase, reason) = match code {
        0 => ("Succeeded", "Completed"),
        137 => ("Failed", "OOMKilled"),
        _ => ("Failed", "Error"),
    };
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({ "status": {
        "phase": phase,
        "containerStatuses": [{
            "name": container, "ready": false, "restartCount": 0,
            "image": "kubeflow/tf-dist-mnist-test:1.0", "imageID": "",
            "state": { "terminated": { "exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now } }
        }]
    }});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap_or_else(|e| panic!("cannot patch the status of pod {pod}: {e}"));
}

/// Wait until the job's last condition has this type, and return the job.
pub(crate) async fn await_condition_type<J: TrainingJob>(
    jobs: &Api<J>,
    name: &str,
    type_: &str,
    timeout: Duration,
) -> J {
    let kind = J::FRAMEWORK.kind;
    eventually(&format!("{kind} {name} to be {type_}"), timeout, || async {
        let job = jobs.get(name).await.ok()?;
        let last = job.status()?.conditions.last()?;
        (last.type_ == type_ && last.status == "True").then_some(job)
    })
    .await
}

/// (name, value) pairs, e.g. of the environment a container is expected to get.
pub(crate) fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn env_of(pod: &Pod, name: &str) -> Option<String> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "tensorflow")?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

async fn event_reasons(ns: &TestNamespace, job: &str) -> Vec<String> {
    let api = Api::<Event>::namespaced(ns.client.clone(), &ns.name);
    let list = api.list(&ListParams::default()).await.expect("list events");
    list.items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(job))
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test]
async fn dist_mnist_example_runs_to_success() {
    let ns = TestNamespace::new("op-mnist").await;
    let _operator = start_operator_as(&ns, Scope::Cluster, build::Options::default()).await;
    let jobs = submit(&ns, &example("dist-mnist.yaml")).await;

    let names = [
        "dist-mnist-ps-0",
        "dist-mnist-ps-1",
        "dist-mnist-worker-0",
        "dist-mnist-worker-1",
        "dist-mnist-worker-2",
        "dist-mnist-worker-3",
    ];
    let pods = await_running(&ns, "dist-mnist", &names).await;
    assert_eq!(
        pods.len(),
        6,
        "exactly one pod per replica: {:?}",
        pods.keys()
    );
    let services = services(&ns, "dist-mnist").await;
    assert_eq!(
        services.keys().map(String::as_str).collect::<Vec<_>>(),
        names
    );
    assert_eq!(
        services["dist-mnist-ps-1"]
            .spec
            .as_ref()
            .unwrap()
            .cluster_ip
            .as_deref(),
        Some("None")
    );

    let worker = &pods["dist-mnist-worker-2"];
    let labels = worker.labels();
    assert_eq!(labels["training.kubeflow.org/replica-type"], "worker");
    assert_eq!(labels["training.kubeflow.org/replica-index"], "2");
    assert_eq!(
        pods["dist-mnist-worker-0"].labels()["training.kubeflow.org/job-role"],
        "master"
    );
    let config: serde_json::Value =
        serde_json::from_str(&env_of(worker, "TF_CONFIG").expect("TF_CONFIG is set")).unwrap();
    assert_eq!(config["task"], json!({ "type": "worker", "index": 2 }));
    assert_eq!(
        config["cluster"]["ps"][1],
        json!(format!("dist-mnist-ps-1.{}.svc:2222", ns.name))
    );

    await_condition_type(&jobs, "dist-mnist", "Running", TIMEOUT).await;
    let status = eventually("every replica to be counted active", TIMEOUT, || async {
        let status = jobs.get("dist-mnist").await.ok()?.status?;
        let active = |t: &str| status.replica_statuses.get(t).map_or(0, |r| r.active);
        (active("Worker") == 4 && active("PS") == 2).then_some(status)
    })
    .await;
    assert!(status.start_time.is_some());

    for worker in [
        "dist-mnist-worker-0",
        "dist-mnist-worker-1",
        "dist-mnist-worker-2",
        "dist-mnist-worker-3",
    ] {
        exit(&ns, worker, 0).await;
    }
    let job = await_condition_type(&jobs, "dist-mnist", "Succeeded", TIMEOUT).await;
    let status = job.status.unwrap();
    assert!(status.completion_time.is_some());
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Running" && c.status == "False")
    );
    // cleanPodPolicy defaults to None: the parameter servers keep running.
    assert!(
        pods_running(&ns, "dist-mnist")
            .await
            .contains(&"dist-mnist-ps-0".to_owned())
    );

    let reasons = eventually("creation and success events", TIMEOUT, || async {
        let reasons = event_reasons(&ns, "dist-mnist").await;
        let wanted = [
            "SuccessfulCreatePod",
            "SuccessfulCreateService",
            "TFJobSucceeded",
        ];
        wanted
            .iter()
            .all(|w| reasons.iter().any(|r| r == w))
            .then_some(reasons)
    })
    .await;
    assert!(
        !reasons.iter().any(|r| r.starts_with("Failed")),
        "{reasons:?}"
    );
}

async fn pods_running(ns: &TestNamespace, job: &str) -> Vec<String> {
    pods(ns, job)
        .await
        .into_iter()
        .filter(|(_, p)| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .map(|(n, _)| n)
        .collect()
}

#[tokio::test]
async fn chief_worker_ps_evaluator_example_succeeds_with_the_chief_and_cleans_running_pods() {
    let ns = TestNamespace::new("op-estimator").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example("estimator-chief-worker-ps-evaluator.yaml")).await;
    let names = [
        "estimator-chief-0",
        "estimator-evaluator-0",
        "estimator-ps-0",
        "estimator-worker-0",
        "estimator-worker-1",
    ];
    let pods = await_running(&ns, "estimator", &names).await;
    assert_eq!(
        pods["estimator-chief-0"].labels()["training.kubeflow.org/job-role"],
        "master"
    );
    let config = env_of(&pods["estimator-evaluator-0"], "TF_CONFIG").unwrap();
    assert!(config.starts_with(r#"{"cluster":{"chief":["#), "{config}");
    assert!(config.contains(r#""evaluator":["#), "{config}");
    await_condition_type(&jobs, "estimator", "Running", TIMEOUT).await;

    // A worker finishing first changes nothing: the Chief decides.
    exit(&ns, "estimator-worker-1", 0).await;
    exit(&ns, "estimator-chief-0", 0).await;
    await_condition_type(&jobs, "estimator", "Succeeded", TIMEOUT).await;
    // cleanPodPolicy Running: every pod still running is deleted, with its service.
    eventually(
        "running pods and their services to be cleaned up",
        TIMEOUT,
        || async {
            let running = pods_running(&ns, "estimator").await;
            let services = services(&ns, "estimator").await;
            (running.is_empty()
                && !services.contains_key("estimator-ps-0")
                && services.contains_key("estimator-chief-0"))
            .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn regression_exit_code_restarts_count_toward_backoff_limit() {
    let ns = TestNamespace::new("op-backoff").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(
        &ns,
        &workers_job(
            "flaky",
            2,
            0,
            "ExitCode",
            json!({ "backoffLimit": 2, "cleanPodPolicy": "Running" }),
        ),
    )
    .await;
    let before = await_running(&ns, "flaky", &["flaky-worker-0", "flaky-worker-1"]).await;
    let first_uid = before["flaky-worker-1"].uid();

    // Killed by a signal: retryable, the pod is recreated.
    exit(&ns, "flaky-worker-1", 137).await;
    let after = eventually("worker 1 to be recreated", TIMEOUT, || async {
        let pods = await_running(&ns, "flaky", &["flaky-worker-1"]).await;
        (pods["flaky-worker-1"].uid() != first_uid).then_some(pods)
    })
    .await;
    assert_eq!(after.len(), 2);
    let job = jobs.get("flaky").await.unwrap();
    assert_eq!(job.status.unwrap().replica_statuses["Worker"].restarts, 1);

    // The second restart would reach backoffLimit 2: the job fails, and says why.
    exit(&ns, "flaky-worker-1", 137).await;
    let job = await_condition_type(&jobs, "flaky", "Failed", TIMEOUT).await;
    let message = job
        .status
        .unwrap()
        .conditions
        .last()
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(message.contains("backoff limit"), "{message}");
    // cleanPodPolicy Running, as at every end of a job.
    eventually("the running worker to be stopped", TIMEOUT, || async {
        pods_running(&ns, "flaky").await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn exit_code_one_fails_the_job_naming_the_code_and_container() {
    let ns = TestNamespace::new("op-exitcode").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &workers_job("buggy", 2, 0, "ExitCode", json!({}))).await;
    await_running(&ns, "buggy", &["buggy-worker-0", "buggy-worker-1"]).await;
    exit(&ns, "buggy-worker-0", 1).await;
    let job = await_condition_type(&jobs, "buggy", "Failed", TIMEOUT).await;
    let condition = job.status.unwrap().conditions.last().cloned().unwrap();
    assert_eq!(condition.reason.as_deref(), Some("TFJobFailed"));
    assert!(
        condition
            .message
            .unwrap()
            .contains("worker 0: exit code 1 of container tensorflow")
    );
}

#[tokio::test]
async fn regression_active_deadline_is_enforced_on_time() {
    let ns = TestNamespace::new("op-deadline").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(
        &ns,
        &workers_job("slow", 1, 1, "Never", json!({ "activeDeadlineSeconds": 3 })),
    )
    .await;
    await_running(&ns, "slow", &["slow-worker-0", "slow-ps-0"]).await;
    // Nothing else happens to the job: only the requeue at the deadline can fail it.
    let job = await_condition_type(&jobs, "slow", "Failed", Duration::from_secs(15)).await;
    let status = job.status.unwrap();
    let message = status.conditions.last().unwrap().message.clone().unwrap();
    assert!(
        message.contains("active longer than specified deadline"),
        "{message}"
    );
    let took =
        status.completion_time.unwrap().0.as_second() - status.start_time.unwrap().0.as_second();
    assert!(
        (3..=6).contains(&took),
        "failed {took}s after starting, the deadline was 3s"
    );
}

/// The component granted no `delete` on TFJobs, so a deployed operator failed every TTL
/// deletion with 403 while this test, run as admin, passed.
#[tokio::test]
async fn regression_ttl_deletes_a_finished_job_as_the_operators_service_account() {
    let ns = TestNamespace::new("op-ttl").await;
    let _operator = start_operator_as(&ns, Scope::Cluster, build::Options::default()).await;
    let jobs = submit(
        &ns,
        &workers_job(
            "short",
            1,
            0,
            "Never",
            json!({ "ttlSecondsAfterFinished": 1 }),
        ),
    )
    .await;
    await_running(&ns, "short", &["short-worker-0"]).await;
    exit(&ns, "short-worker-0", 0).await;
    await_condition_type(&jobs, "short", "Succeeded", TIMEOUT).await;
    eventually("the job to be deleted after its TTL", TIMEOUT, || async {
        jobs.get_opt("short").await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn suspend_removes_pods_and_resume_recreates_them() {
    let ns = TestNamespace::new("op-suspend").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example("suspended.yaml")).await;
    await_condition_type(&jobs, "queued", "Suspended", TIMEOUT).await;
    assert!(pods(&ns, "queued").await.is_empty());

    let resume = json!({ "spec": { "runPolicy": { "suspend": false } } });
    jobs.patch("queued", &PatchParams::default(), &Patch::Merge(resume))
        .await
        .unwrap();
    await_running(&ns, "queued", &["queued-worker-0", "queued-worker-1"]).await;
    let job = await_condition_type(&jobs, "queued", "Running", TIMEOUT).await;
    let suspended = job
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(
        (suspended.status.as_str(), suspended.reason.as_deref()),
        ("False", Some("TFJobResumed"))
    );

    let suspend = json!({ "spec": { "runPolicy": { "suspend": true } } });
    jobs.patch("queued", &PatchParams::default(), &Patch::Merge(suspend))
        .await
        .unwrap();
    await_condition_type(&jobs, "queued", "Suspended", TIMEOUT).await;
    eventually(
        "pods and services to be deleted on suspend",
        TIMEOUT,
        || async {
            (pods(&ns, "queued").await.is_empty() && services(&ns, "queued").await.is_empty())
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn regression_replicas_zero_makes_no_pods_and_no_churn() {
    let ns = TestNamespace::new("op-zero").await;
    let operator = start_operator(&ns).await;
    let jobs = submit(&ns, &workers_job("empty", 0, 1, "Never", json!({}))).await;
    await_running(&ns, "empty", &["empty-ps-0"]).await;
    // Only a PS runs, and there are no workers to wait for: the job is Running.
    await_condition_type(&jobs, "empty", "Running", TIMEOUT).await;
    let created = operator.metrics.render();
    // Let the operator see its own writes settle, then check nothing more was created.
    let settled = eventually("the operator to go idle", TIMEOUT, || async {
        let before = operator.metrics.render();
        tokio::time::sleep(Duration::from_millis(500)).await;
        (before == operator.metrics.render()).then_some(before)
    })
    .await;
    assert!(
        settled.contains("created_pods_total 1\n"),
        "{created}\n{settled}"
    );
    assert!(!settled.contains("deleted_pods_total"), "{settled}");
    assert_eq!(pods(&ns, "empty").await.len(), 1);
}

#[tokio::test]
async fn regression_a_collected_succeeded_pod_is_never_rerun() {
    let ns = TestNamespace::new("op-gc").await;
    let _operator = start_operator(&ns).await;
    let mut job = workers_job("keep", 2, 0, "Never", json!({}));
    job.spec.success_policy =
        Some(mlkube::operator::training::frameworks::tensorflow::SuccessPolicy::AllWorkers);
    let jobs = submit(&ns, &job).await;
    await_running(&ns, "keep", &["keep-worker-0", "keep-worker-1"]).await;
    exit(&ns, "keep-worker-1", 0).await;
    eventually(
        "worker 1 to be remembered as succeeded",
        TIMEOUT,
        || async {
            let job = jobs.get("keep").await.ok()?;
            (job.status?
                .replica_statuses
                .get("Worker")?
                .succeeded_indexes
                == [1])
            .then_some(())
        },
    )
    .await;
    // The pod garbage collector (or a person) removes the completed pod.
    let api = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    api.delete("keep-worker-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("the completed pod to be gone", TIMEOUT, || async {
        (!pods(&ns, "keep").await.contains_key("keep-worker-1")).then_some(())
    })
    .await;
    // Worker 0 finishing completes the job; worker 1 never ran again.
    exit(&ns, "keep-worker-0", 0).await;
    await_condition_type(&jobs, "keep", "Succeeded", TIMEOUT).await;
    assert!(!pods(&ns, "keep").await.contains_key("keep-worker-1"));
}

#[tokio::test]
async fn regression_chief_success_is_not_undone_by_a_later_worker_failure() {
    let ns = TestNamespace::new("op-chief").await;
    let _operator = start_operator(&ns).await;
    let template = json!({ "spec": { "containers": [{ "name": "tensorflow", "image": "tf:1" }] } });
    let jobs = submit(
        &ns,
        &tfjob(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": { "name": "lead" },
            "spec": { "tfReplicaSpecs": {
                "Chief": { "replicas": 1, "template": template },
                "Worker": { "replicas": 1, "template": template }
            } }
        })),
    )
    .await;
    await_running(&ns, "lead", &["lead-chief-0", "lead-worker-0"]).await;
    exit(&ns, "lead-chief-0", 0).await;
    await_condition_type(&jobs, "lead", "Succeeded", TIMEOUT).await;
    exit(&ns, "lead-worker-0", 1).await;
    // Give the operator the worker's failure to react to, then check it did not.
    eventually("the worker failure to be observed", TIMEOUT, || async {
        let pods = pods(&ns, "lead").await;
        (pods.get("lead-worker-0")?.status.as_ref()?.phase.as_deref() == Some("Failed"))
            .then_some(())
    })
    .await;
    let job = await_condition_type(&jobs, "lead", "Succeeded", TIMEOUT).await;
    assert!(
        !job.status
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.type_ == "Failed")
    );
}

#[tokio::test]
async fn the_api_server_rejects_invalid_tfjobs() {
    let ns = TestNamespace::new("op-invalid").await;
    install_crd(&ns.client).await;
    let jobs = Api::<TFJob>::namespaced(ns.client.clone(), &ns.name);
    let template = json!({ "spec": { "containers": [{ "name": "tensorflow", "image": "tf:1" }] } });
    let cases = [
        (
            "two-leaders",
            json!({ "Chief": { "template": template }, "Master": { "template": template } }),
            "at most one of Chief and Master",
        ),
        (
            "no-tf",
            json!({ "Worker": { "template": { "spec": { "containers": [{ "name": "main", "image": "tf:1" }] } } } }),
            "named `tensorflow`",
        ),
        (
            "negative",
            json!({ "Worker": { "replicas": -1, "template": template } }),
            "replicas",
        ),
        (
            "Bad_Name",
            json!({ "Worker": { "template": template } }),
            "DNS-1035",
        ),
        (
            "unknown-type",
            json!({ "Driver": { "template": template } }),
            "replica types are",
        ),
    ];
    for (name, specs, expected) in cases {
        let job = tfjob(
            json!({ "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": { "name": name }, "spec": { "tfReplicaSpecs": specs } }),
        );
        let err = jobs
            .create(&PostParams::default(), &job)
            .await
            .expect_err(name);
        assert!(err.to_string().contains(expected), "{name}: {err}");
    }
}

#[tokio::test]
async fn regression_a_name_too_long_for_its_pods_and_services_is_rejected() {
    let ns = TestNamespace::new("op-long-name").await;
    install_crd(&ns.client).await;
    let jobs = Api::<TFJob>::namespaced(ns.client.clone(), &ns.name);
    let template = json!({ "spec": { "containers": [{ "name": "tensorflow", "image": "tf:1" }] } });
    // 54 characters: `-worker-9` still fits in 63, `-worker-10` does not.
    let name = "a".repeat(54);
    let job = |workers: i32| {
        tfjob(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": { "name": name },
            "spec": { "tfReplicaSpecs": { "Worker": { "replicas": workers, "template": template } } }
        }))
    };
    let err = jobs
        .create(&PostParams::default(), &job(11))
        .await
        .expect_err("eleven workers do not fit");
    assert!(
        err.to_string()
            .contains("too long for its pods and services"),
        "{err}"
    );
    jobs.create(&PostParams::default(), &job(10))
        .await
        .expect("ten workers fit");
}

#[tokio::test]
async fn a_job_managed_by_another_controller_is_left_alone() {
    let ns = TestNamespace::new("op-managed").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(
        &ns,
        &workers_job(
            "elsewhere",
            1,
            0,
            "Never",
            json!({ "managedBy": "kueue.x-k8s.io/multikueue" }),
        ),
    )
    .await;
    // A job of ours submitted after it: once it runs, the operator has seen both.
    submit(
        &ns,
        &workers_job(
            "here",
            1,
            0,
            "Never",
            json!({ "managedBy": "kubeflow.org/training-operator" }),
        ),
    )
    .await;
    await_condition_type(&jobs, "here", "Running", TIMEOUT).await;
    assert!(jobs.get("elsewhere").await.unwrap().status.is_none());
    assert!(pods(&ns, "elsewhere").await.is_empty());
}

#[tokio::test]
async fn killing_and_restarting_the_operator_loses_no_job_and_duplicates_no_pod() {
    let ns = TestNamespace::new("op-restart").await;
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(&ns, Access::scoped(Scope::Cluster)).await;
    let mut first = spawn_operator_binary(&ns.name, &identity, &[]);
    let names: Vec<String> = (0..5).map(|i| format!("job-{i}")).collect();
    let mut jobs = None;
    for name in &names {
        jobs = Some(submit(&ns, &workers_job(name, 2, 1, "Never", json!({}))).await);
    }
    let jobs = jobs.unwrap();
    // Kill it as soon as it has started creating pods, mid-run.
    eventually("the first operator to create pods", TIMEOUT, || async {
        (!pods(&ns, "job-0").await.is_empty()).then_some(())
    })
    .await;
    first.kill();

    // Two replicas, no leader election, racing from the same start.
    let mut second = spawn_operator_binary(&ns.name, &identity, &[]);
    let mut third = spawn_operator_binary(&ns.name, &identity, &[]);
    for name in &names {
        let want = [
            format!("{name}-ps-0"),
            format!("{name}-worker-0"),
            format!("{name}-worker-1"),
        ];
        let want: Vec<&str> = want.iter().map(String::as_str).collect();
        await_running(&ns, name, &want).await;
        await_condition_type(&jobs, name, "Running", TIMEOUT).await;
    }
    let all = Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        all.items.len(),
        15,
        "{:?}",
        all.items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    );
    let uids_before: BTreeMap<String, String> = all
        .items
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    second.kill();
    for name in &names {
        exit(&ns, &format!("{name}-worker-0"), 0).await;
        exit(&ns, &format!("{name}-worker-1"), 0).await;
    }
    for name in &names {
        await_condition_type(&jobs, name, "Succeeded", TIMEOUT).await;
    }
    third.kill();
    let all = Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap();
    let uids_after: BTreeMap<String, String> = all
        .items
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    assert_eq!(
        uids_after, uids_before,
        "no pod was deleted and recreated, none added"
    );
}

#[tokio::test]
async fn leader_election_lets_one_replica_act() {
    use k8s_openapi::api::coordination::v1::Lease;
    use mlkube::operator::runtime::leader::{LeaseConfig, try_acquire};
    let ns = TestNamespace::new("op-lease").await;
    let identity =
        OperatorIdentity::new(&ns, Access::scoped(Scope::Namespace).with_leader_election()).await;
    let api = Api::<Lease>::namespaced(identity.client.clone(), &ns.name);
    let a = LeaseConfig {
        identity: "a".into(),
        ..LeaseConfig::new(ns.name.clone())
    };
    let b = LeaseConfig {
        identity: "b".into(),
        ..LeaseConfig::new(ns.name.clone())
    };
    assert!(try_acquire(&api, &a).await.unwrap());
    assert!(
        !try_acquire(&api, &b).await.unwrap(),
        "b must not take a lease a holds"
    );
    assert!(try_acquire(&api, &a).await.unwrap(), "a renews");
    // An expired lease is taken over; the test, not the operator, makes it expire.
    let expired = json!({ "spec": { "renewTime": "2020-01-01T00:00:00.000000Z" } });
    Api::<Lease>::namespaced(ns.client.clone(), &ns.name)
        .patch(&a.name, &PatchParams::default(), &Patch::Merge(expired))
        .await
        .unwrap();
    assert!(try_acquire(&api, &b).await.unwrap());
    let lease = api.get(&a.name).await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.lease_transitions, Some(1));
}

#[tokio::test]
async fn sigterm_stops_the_leader_promptly_and_hands_over_the_lease() {
    use k8s_openapi::api::coordination::v1::Lease;
    use mlkube::operator::runtime::leader::LEASE_NAME;
    let ns = TestNamespace::new("op-sigterm").await;
    install_crd(&ns.client).await;
    let identity =
        OperatorIdentity::new(&ns, Access::scoped(Scope::Namespace).with_leader_election()).await;
    let mut operator = spawn_operator_binary(&ns.name, &identity, &["--leader-elect"]);
    let leases = Api::<Lease>::namespaced(ns.client.clone(), &ns.name);
    let holder = |lease: Option<Lease>| {
        lease
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    };
    eventually("the operator to take the lease", TIMEOUT, || async {
        holder(leases.get_opt(LEASE_NAME).await.ok().flatten())
    })
    .await;
    // Leading, and so reconciling: the job gets its pods.
    submit(&ns, &workers_job("work", 2, 0, "Never", json!({}))).await;
    await_running(&ns, "work", &["work-worker-0", "work-worker-1"]).await;

    let pid = operator.0.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    // Well within the 20 s shutdown timeout: nothing was in flight.
    let code = eventually("the operator to exit", Duration::from_secs(15), || {
        let exited = operator.0.try_wait().expect("the child can be waited for");
        async move { exited.map(|status| status.code()) }
    })
    .await;
    assert_eq!(code, Some(0), "the operator exits cleanly on SIGTERM");
    let lease = leases
        .get(LEASE_NAME)
        .await
        .expect("the lease is still there");
    assert_eq!(
        holder(Some(lease)),
        None,
        "the lease was handed back, so a standby need not wait for it to run out"
    );
}

/// The PodGroup CRD of `scheduler` (see `install_pod_group_crd`), and an operator that gang-
/// schedules with it; returns the operator and the resource to address PodGroups with.
async fn start_gang_operator(ns: &TestNamespace, scheduler: &str) -> (Operator, ApiResource) {
    let (group, version, _) = build::pod_group_gvk(scheduler);
    let resource = install_pod_group_crd(&ns.client, group, version).await;
    let options = build::Options {
        gang_scheduler: Some(scheduler.to_owned()),
        ..build::Options::default()
    };
    (
        start_operator_as(ns, Scope::Cluster, options).await,
        resource,
    )
}

/// A PodGroup CRD as small as the operator needs (any spec and status), for a gang scheduler
/// that does not run here: the tests check what the operator asks of it, not what it does.
/// Installed idempotently; returns the resource to address PodGroups with.
async fn install_pod_group_crd(client: &Client, group: &str, version: &str) -> ApiResource {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let name = format!("podgroups.{group}");
    let definition = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": name },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups", "singular": "podgroup" },
            "versions": [{
                "name": version, "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
            }]
        }
    });
    crds.patch(
        &name,
        &PatchParams::apply("mlkube-operator-tests").force(),
        &Patch::Apply(definition),
    )
    .await
    .unwrap_or_else(|e| panic!("the {name} CRD applies: {e}"));
    tokio::time::timeout(
        TIMEOUT,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("the {name} CRD became Established in time"))
    .expect("watching the CRD");
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, "PodGroup"),
        "podgroups",
    )
}

/// How many reconciles the operator has finished.
pub(crate) fn reconciles(metrics: &Metrics) -> u64 {
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix("mlkube_operator_reconcile_duration_seconds_count "))
        .and_then(|n| n.parse().ok())
        .expect("the reconcile count is exported")
}

/// A job named `gang` of two workers and one PS, with each replica type's template changed.
fn gang_job(
    run_policy: serde_json::Value,
    worker: impl FnOnce(&mut serde_json::Value),
    ps: impl FnOnce(&mut serde_json::Value),
) -> TFJob {
    let template = json!({ "spec": { "containers": [{ "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] } });
    let (mut worker_template, mut ps_template) = (template.clone(), template);
    worker(&mut worker_template);
    ps(&mut ps_template);
    tfjob(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": "gang" },
        "spec": {
            "runPolicy": run_policy,
            "tfReplicaSpecs": {
                "Worker": { "replicas": 2, "restartPolicy": "OnFailure", "template": worker_template },
                "PS": { "replicas": 1, "restartPolicy": "Never", "template": ps_template }
            }
        }
    }))
}

/// Wait for the job's PodGroup and check that the job controls it; returns its spec.
async fn await_pod_group(
    ns: &TestNamespace,
    resource: &ApiResource,
    job: &TFJob,
) -> serde_json::Value {
    let api = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, resource);
    let name = job.name_any();
    let group = eventually(&format!("PodGroup {name}"), TIMEOUT, || async {
        api.get_opt(&name).await.ok().flatten()
    })
    .await;
    let owners = group.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners.iter().any(|o| o.kind == "TFJob"
            && o.api_version == "kubeflow.org/v1"
            && o.name == name
            && Some(&o.uid) == job.metadata.uid.as_ref()
            && o.controller == Some(true)),
        "PodGroup {name} is not controlled by its TFJob: {owners:?}"
    );
    group.data["spec"].clone()
}

/// Wait until the three pods of the `gang` job exist; returns them.
async fn await_gang_pods(ns: &TestNamespace) -> BTreeMap<String, Pod> {
    let names = ["gang-ps-0", "gang-worker-0", "gang-worker-1"];
    eventually("the pods of gang", TIMEOUT, || async {
        let pods = pods(ns, "gang").await;
        names.iter().all(|n| pods.contains_key(*n)).then_some(pods)
    })
    .await
}

fn scheduler_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.scheduler_name.as_deref()
}

async fn await_event_reasons(ns: &TestNamespace, job: &str, wanted: &[&str]) {
    eventually(&format!("events {wanted:?} on {job}"), TIMEOUT, || async {
        let reasons = event_reasons(ns, job).await;
        wanted
            .iter()
            .all(|w| reasons.iter().any(|r| r == w))
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn gang_scheduling_with_volcano_makes_a_pod_group_of_min_available_and_creates_annotated_pods_once_admitted()
 {
    let ns = TestNamespace::new("op-gang-volcano").await;
    let (operator, resource) = start_gang_operator(&ns, "volcano").await;
    let job = gang_job(
        json!({ "schedulingPolicy": { "minAvailable": 2, "priorityClass": "high" } }),
        // The ReplicaSpec's OnFailure wins over the template's.
        |w| w["spec"]["restartPolicy"] = json!("Always"),
        // Kept, so this pod is not gang-scheduled.
        |p| p["spec"]["schedulerName"] = json!("my-scheduler"),
    );
    let jobs = submit(&ns, &job).await;
    let job = jobs.get("gang").await.expect("the job reads back");

    let spec = await_pod_group(&ns, &resource, &job).await;
    assert_eq!(spec["minMember"], 2, "{spec}");
    assert_eq!(spec["queue"], "default", "{spec}");
    assert_eq!(spec["priorityClassName"], "high", "{spec}");

    // Volcano has not admitted the group (no phase): services come, pods wait.
    eventually("the services of gang", TIMEOUT, || async {
        (services(&ns, "gang").await.len() == 3).then_some(())
    })
    .await;
    // Two more reconciles: at least one started after the services were there, and so had
    // its chance to create pods.
    let seen = reconciles(&operator.metrics);
    eventually("two more reconciles of gang", TIMEOUT, || async {
        (reconciles(&operator.metrics) >= seen + 2).then_some(())
    })
    .await;
    assert_eq!(pods(&ns, "gang").await.len(), 0);
    let groups = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource);
    groups
        .patch_status(
            "gang",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "phase": "Inqueue" } })),
        )
        .await
        .expect("play Volcano: admit the PodGroup");

    let pods = await_gang_pods(&ns).await;
    for (name, pod) in &pods {
        let annotations = pod.annotations();
        assert_eq!(
            annotations
                .get("scheduling.k8s.io/group-name")
                .map(String::as_str),
            Some("gang"),
            "{name}"
        );
        let task = if name.contains("-ps-") {
            "ps"
        } else {
            "worker"
        };
        assert_eq!(
            annotations.get("volcano.sh/task-spec").map(String::as_str),
            Some(task),
            "{name}"
        );
    }
    assert_eq!(scheduler_of(&pods["gang-worker-0"]), Some("volcano"));
    assert_eq!(scheduler_of(&pods["gang-worker-1"]), Some("volcano"));
    assert_eq!(scheduler_of(&pods["gang-ps-0"]), Some("my-scheduler"));
    let restart_policy = pods["gang-worker-0"]
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref());
    assert_eq!(restart_policy, Some("OnFailure"));

    await_event_reasons(
        &ns,
        "gang",
        &[
            build::REASON_TEMPLATE_RESTART_POLICY,
            build::REASON_TEMPLATE_SCHEDULER_NAME,
        ],
    )
    .await;
}

#[tokio::test]
async fn gang_scheduling_with_scheduler_plugins_makes_a_pod_group_of_all_replicas_and_deletes_it_when_done()
 {
    let ns = TestNamespace::new("op-gang-plugins").await;
    let (_operator, resource) = start_gang_operator(&ns, "scheduler-plugins").await;
    let job = gang_job(
        json!({ "schedulingPolicy": { "scheduleTimeoutSeconds": 30 } }),
        |_| {},
        |_| {},
    );
    let jobs = submit(&ns, &job).await;
    let job = jobs.get("gang").await.expect("the job reads back");

    let spec = await_pod_group(&ns, &resource, &job).await;
    assert_eq!(spec["minMember"], 3, "{spec}");
    assert_eq!(spec["scheduleTimeoutSeconds"], 30, "{spec}");
    assert!(spec.get("queue").is_none(), "{spec}");

    let pods = await_gang_pods(&ns).await;
    for (name, pod) in &pods {
        assert_eq!(scheduler_of(pod), Some("scheduler-plugins"), "{name}");
        assert_eq!(
            pod.labels()
                .get("scheduling.x-k8s.io/pod-group")
                .map(String::as_str),
            Some("gang"),
            "{name}"
        );
    }

    // Nothing schedules these pods; play the kubelet anyway. Worker 0 decides success.
    exit(&ns, "gang-worker-0", 0).await;
    exit(&ns, "gang-worker-1", 0).await;
    await_condition_type(&jobs, "gang", "Succeeded", TIMEOUT).await;
    let api = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource);
    eventually("PodGroup gang to be deleted", TIMEOUT, || async {
        matches!(api.get_opt("gang").await, Ok(None)).then_some(())
    })
    .await;
    await_event_reasons(&ns, "gang", &["SuccessfulDeletePodGroup"]).await;
    let reasons = event_reasons(&ns, "gang").await;
    assert!(
        !reasons.iter().any(|r| r.starts_with("SetPodTemplate")),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn gang_pod_group_follows_the_jobs_scheduling_policy_and_keeps_fields_others_set() {
    let ns = TestNamespace::new("op-gang-update").await;
    let (_operator, resource) = start_gang_operator(&ns, "volcano").await;
    let job = gang_job(
        json!({ "schedulingPolicy": { "minAvailable": 3, "priorityClass": "high" } }),
        |_| {},
        |_| {},
    );
    let jobs = submit(&ns, &job).await;
    let job = jobs.get("gang").await.expect("the job reads back");
    let spec = await_pod_group(&ns, &resource, &job).await;
    assert_eq!(spec["minMember"], 3, "{spec}");
    assert_eq!(spec["priorityClassName"], "high", "{spec}");
    let groups = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let created = groups.get("gang").await.expect("the PodGroup reads back");

    // Someone else (Volcano, a person) sets a field the operator does not.
    groups
        .patch(
            "gang",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "minTaskMember": { "worker": 1 } } })),
        )
        .await
        .expect("another writer sets minTaskMember");
    // The job now asks for fewer pods and no priority class.
    let change = json!({ "spec": { "runPolicy": { "schedulingPolicy": {
        "minAvailable": 1, "priorityClass": null
    } } } });
    jobs.patch("gang", &PatchParams::default(), &Patch::Merge(change))
        .await
        .expect("the job's scheduling policy changes");

    let updated = eventually(
        "PodGroup gang to follow the job's scheduling policy",
        TIMEOUT,
        || async {
            let group = groups.get("gang").await.ok()?;
            let spec = &group.data["spec"];
            (spec["minMember"] == 1 && spec.get("priorityClassName").is_none()).then_some(group)
        },
    )
    .await;
    let spec = &updated.data["spec"];
    assert_eq!(spec["minTaskMember"], json!({ "worker": 1 }), "{spec}");
    assert_eq!(spec["queue"], "default", "{spec}");
    assert_eq!(
        updated.uid(),
        created.uid(),
        "updated in place, not recreated"
    );
    assert_eq!(
        updated.owner_references(),
        created.owner_references(),
        "still controlled by the job"
    );
}

#[tokio::test]
async fn gang_pod_group_min_resources_are_computed_from_the_templates_and_follow_min_available() {
    let ns = TestNamespace::new("op-gang-resources").await;
    let (_operator, resource) = start_gang_operator(&ns, "scheduler-plugins").await;
    let job = gang_job(
        json!({ "schedulingPolicy": { "minAvailable": 2 } }),
        |w| {
            w["spec"]["containers"][0]["resources"] =
                json!({ "requests": { "cpu": "500m", "memory": "1Gi" } });
        },
        // Limits only: the API server makes them the requests, and so does the operator.
        |p| {
            p["spec"]["containers"][0]["resources"] =
                json!({ "limits": { "cpu": "1", "memory": "512Mi" } });
        },
    );
    let jobs = submit(&ns, &job).await;
    let job = jobs.get("gang").await.expect("the job reads back");

    // Two pods: the PS first, then one worker.
    let spec = await_pod_group(&ns, &resource, &job).await;
    assert_eq!(spec["minMember"], 2, "{spec}");
    assert_eq!(
        spec["minResources"],
        json!({ "cpu": "1500m", "memory": "1536Mi" }),
        "{spec}"
    );

    // All three pods: the minimum grows with them.
    let change = json!({ "spec": { "runPolicy": { "schedulingPolicy": { "minAvailable": 3 } } } });
    jobs.patch("gang", &PatchParams::default(), &Patch::Merge(change))
        .await
        .expect("the job's minAvailable changes");
    let groups = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let spec = eventually("PodGroup gang to need three pods", TIMEOUT, || async {
        let spec = groups.get("gang").await.ok()?.data["spec"].clone();
        (spec["minMember"] == 3).then_some(spec)
    })
    .await;
    assert_eq!(
        spec["minResources"],
        json!({ "cpu": "2", "memory": "2560Mi" }),
        "{spec}"
    );
}

/// A worker pod as an earlier job of the same name left it behind (deleted with
/// `--cascade=orphan`): the job's four labels, and no owner.
fn left_behind_worker(job: &str, index: i32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{job}-worker-{index}"),
            "annotations": { SIMULATE: "manual" },
            "labels": {
                "training.kubeflow.org/operator-name": "tfjob-controller",
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": index.to_string(),
            }
        },
        "spec": { "containers": [{ "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] }
    }))
    .expect("a valid Pod")
}

fn is_controlled_by(object: &impl ResourceExt, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

#[tokio::test]
async fn an_orphan_pod_with_the_job_labels_is_adopted_into_its_slot_and_another_controllers_is_left_alone()
 {
    use k8s_openapi::api::core::v1::ConfigMap;
    let ns = TestNamespace::new("op-adopt").await;
    let pod_api = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let pp = PostParams::default();
    let orphan = pod_api
        .create(&pp, &left_behind_worker("adopt", 0))
        .await
        .expect("the orphan pod is created");
    // The same labels, but a ConfigMap controls it.
    let keeper: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "keeper" } })).unwrap();
    let keeper = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .create(&pp, &keeper)
        .await
        .expect("the ConfigMap is created");
    let mut foreign = left_behind_worker("adopt", 0);
    foreign.metadata.name = Some("kept-by-a-configmap".into());
    foreign.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "keeper".into(),
            uid: keeper.uid().expect("the ConfigMap has a UID"),
            controller: Some(true),
            block_owner_deletion: None,
        },
    ]);
    let foreign = pod_api
        .create(&pp, &foreign)
        .await
        .expect("the ConfigMap's pod is created");

    let operator = start_operator(&ns).await;
    let jobs = submit(&ns, &workers_job("adopt", 2, 0, "Never", json!({}))).await;
    let job_uid = jobs
        .get("adopt")
        .await
        .expect("the job reads back")
        .uid()
        .expect("the job has a UID");

    let adopted = eventually("the orphan to be adopted", TIMEOUT, || async {
        let pod = pod_api.get("adopt-worker-0").await.ok()?;
        is_controlled_by(&pod, &job_uid).then_some(pod)
    })
    .await;
    let owner = adopted
        .owner_references()
        .iter()
        .find(|o| o.uid == job_uid)
        .expect("the job's owner reference");
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.block_owner_deletion
        ),
        ("kubeflow.org/v1", "TFJob", "adopt", Some(true))
    );

    // The adopted pod fills worker 0's slot: it counts, and is not made again.
    await_running(&ns, "adopt", &["adopt-worker-0", "adopt-worker-1"]).await;
    eventually("both workers to be counted active", TIMEOUT, || async {
        let status = jobs.get("adopt").await.ok()?.status?;
        (status.replica_statuses.get("Worker")?.active == 2).then_some(())
    })
    .await;
    let all = pods(&ns, "adopt").await;
    let controlled: Vec<&str> = all
        .iter()
        .filter(|(_, p)| is_controlled_by(*p, &job_uid))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(controlled, ["adopt-worker-0", "adopt-worker-1"]);
    assert_eq!(
        all["adopt-worker-0"].uid(),
        orphan.uid(),
        "adopted, not recreated"
    );
    let metrics = operator.metrics.render();
    assert!(metrics.contains("created_pods_total 1\n"), "{metrics}");
    assert!(!metrics.contains("deleted_pods_total"), "{metrics}");

    let kept = &all["kept-by-a-configmap"];
    assert_eq!(kept.uid(), foreign.uid());
    assert_eq!(kept.owner_references(), foreign.owner_references());
    assert!(kept.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn a_pod_relabelled_away_from_its_job_is_released_not_deleted() {
    let ns = TestNamespace::new("op-release").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &workers_job("move", 1, 0, "Never", json!({}))).await;
    let job_uid = jobs
        .get("move")
        .await
        .expect("the job reads back")
        .uid()
        .expect("the job has a UID");
    let before = await_running(&ns, "move", &["move-worker-0"]).await;
    let pod_api = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let relabel =
        json!({ "metadata": { "labels": { "training.kubeflow.org/job-name": "elsewhere" } } });
    pod_api
        .patch(
            "move-worker-0",
            &PatchParams::default(),
            &Patch::Merge(relabel),
        )
        .await
        .expect("the pod is relabelled");

    let released = eventually("the relabelled pod to be released", TIMEOUT, || async {
        let pod = pod_api.get("move-worker-0").await.ok()?;
        (!pod.owner_references().iter().any(|o| o.uid == job_uid)).then_some(pod)
    })
    .await;
    assert_eq!(released.uid(), before["move-worker-0"].uid());
    assert!(released.metadata.deletion_timestamp.is_none());
}

/// Adopting a service needs `patch` on services, which no other test asks of the operator.
#[tokio::test]
async fn an_orphan_service_with_the_job_labels_is_adopted_not_recreated() {
    let ns = TestNamespace::new("op-adopt-service").await;
    let service_api = Api::<Service>::namespaced(ns.client.clone(), &ns.name);
    let orphan: Service = serde_json::from_value(json!({
        "metadata": { "name": "keep-worker-0", "labels": left_behind_worker("keep", 0).metadata.labels },
        "spec": { "clusterIP": "None", "ports": [{ "name": "tfjob-port", "port": 2222 }] }
    }))
    .expect("a valid Service");
    let orphan = service_api
        .create(&PostParams::default(), &orphan)
        .await
        .expect("the orphan service is created");

    let _operator = start_operator(&ns).await;
    let job = submit(&ns, &workers_job("keep", 1, 0, "Never", json!({}))).await;
    let job = job.get("keep").await.expect("the job reads back");
    let adopted = eventually("the orphan service to be adopted", TIMEOUT, || async {
        let service = service_api.get("keep-worker-0").await.ok()?;
        is_controlled_by(&service, &job.uid()?).then_some(service)
    })
    .await;
    assert_eq!(adopted.uid(), orphan.uid(), "adopted, not recreated");
}

#[tokio::test]
async fn a_failure_that_repeats_is_one_event_with_a_count_not_an_event_per_retry() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    use k8s_openapi::api::events::v1::Event as SeriesEvent;
    let ns = TestNamespace::new("op-event-series").await;
    // No pod may be created here: every retry fails the same way.
    let quota: ResourceQuota = serde_json::from_value(
        json!({ "metadata": { "name": "no-pods" }, "spec": { "hard": { "pods": "0" } } }),
    )
    .expect("a valid ResourceQuota");
    Api::<ResourceQuota>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &quota)
        .await
        .expect("the quota is created");
    let _operator = start_operator(&ns).await;
    submit(&ns, &workers_job("quota", 1, 0, "Never", json!({}))).await;

    let events = Api::<SeriesEvent>::namespaced(ns.client.clone(), &ns.name);
    let failed_creates = || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let failed: Vec<SeriesEvent> = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("FailedCreatePod"))
            .filter(|e| {
                e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("exceeded quota"))
            })
            .collect();
        Some(failed)
    };
    // The operator retries every few seconds; the third failure makes a count of three.
    let repeated = eventually("a FailedCreatePod series of three", TIMEOUT, || async {
        let failed = failed_creates().await?;
        failed
            .iter()
            .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 3))
            .then_some(failed)
    })
    .await;
    assert_eq!(
        repeated.len(),
        1,
        "one event for the repeated failure: {repeated:?}"
    );
    let event = &repeated[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("tfjob-controller")
    );
    let regarding = event.regarding.as_ref().expect("the event names the job");
    assert_eq!(
        (regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("TFJob"), Some("quota"))
    );
}

/// The cells of `kubectl get <plural>` for each job in the namespace, by column name, as the
/// API server computes them from the CRD's printer columns.
async fn printed_columns(
    ns: &TestNamespace,
    plural: &str,
) -> Vec<std::collections::BTreeMap<String, serde_json::Value>> {
    let path = format!("/apis/kubeflow.org/v1/namespaces/{}/{plural}", ns.name);
    let mut request = kube::core::Request::new(path)
        .list(&ListParams::default())
        .expect("a list request");
    request.headers_mut().insert(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io"
            .parse()
            .expect("a header value"),
    );
    let table: serde_json::Value = ns
        .client
        .request(request)
        .await
        .expect("the API server prints a table");
    let names: Vec<String> = table["columnDefinitions"]
        .as_array()
        .expect("column definitions")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let cells = row["cells"].as_array().expect("cells");
            names.iter().cloned().zip(cells.iter().cloned()).collect()
        })
        .collect()
}

#[tokio::test]
async fn the_workers_column_reads_a_replica_key_written_in_capitals() {
    let ns = TestNamespace::new("tfjob-columns").await;
    install_crd(&ns.client).await;
    let replicas = |count: i32| {
        json!({ "replicas": count, "template": { "spec": {
            "containers": [{ "name": "tensorflow", "image": "tf:1" }]
        } } })
    };
    for (name, worker_key, ps_key) in [("capitals", "WORKER", "PS"), ("lower", "worker", "ps")] {
        let job = tfjob(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": { "name": name },
            "spec": { "tfReplicaSpecs": { worker_key: replicas(3), ps_key: replicas(2) } }
        }));
        submit(&ns, &job).await;
    }
    let rows = printed_columns(&ns, "tfjobs").await;
    let cells: Vec<_> = rows
        .iter()
        .map(|row| {
            (
                row["Name"].clone(),
                row["Workers"].clone(),
                row["PS"].clone(),
            )
        })
        .collect();
    assert_eq!(
        cells,
        [
            (json!("capitals"), json!(3), json!(2)),
            (json!("lower"), json!(3), json!(2)),
        ]
    );
}
