//! MXJob, XGBoostJob, JAXJob and PaddleJob on the real control plane, with the operator of
//! `operator.rs`: upstream's example of each runs unmodified (only marked as driven by hand) to
//! Succeeded with its exact environment, a failed pod is restarted, and a finished job is
//! deleted after its TTL.
//!
//! Upstream's JAXJob and PaddleJob examples name the namespace `kubeflow`: those two tests run
//! there, one at a time, with an operator of their own for it.

use std::mem::ManuallyDrop;
use std::path::Path;

use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, CustomResourceExt, ResourceExt};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::jax::JAXJob;
use mlkube::operator::training::frameworks::mxnet::MXJob;
use mlkube::operator::training::frameworks::paddle::PaddleJob;
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;
use serde_json::json;

use crate::operator::{
    TIMEOUT, await_condition_type, await_running, driven_by_hand, example_in, exit_container,
    pairs, pods, services, start_operator,
};
use crate::support::{TestNamespace, client, env, eventually, submit};

fn example<J: serde::de::DeserializeOwned>(file: &str) -> J {
    example_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"),
        file,
    )
}

/// The job's last condition's reason and message.
fn last_condition<J: TrainingJob>(job: &J) -> (String, String) {
    let last = job.status().and_then(|s| s.conditions.last()).cloned();
    let last = last.expect("the job has a condition");
    (
        last.reason.unwrap_or_default(),
        last.message.unwrap_or_default(),
    )
}

fn condition(reason: &str, message: &str) -> (String, String) {
    (reason.to_owned(), message.to_owned())
}

#[tokio::test]
async fn mxnet_dist_example_runs_to_success_with_upstreams_environment() {
    let ns = TestNamespace::new("fw-mxnet").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example::<MXJob>("mxnet-dist.yaml")).await;

    let names = [
        "mxnet-job-scheduler-0",
        "mxnet-job-server-0",
        "mxnet-job-worker-0",
    ];
    let pods = await_running(&ns, "mxnet-job", &names).await;
    assert_eq!(pods.len(), 3, "one pod per replica: {:?}", pods.keys());
    let services = services(&ns, "mxnet-job").await;
    assert_eq!(
        services.keys().map(String::as_str).collect::<Vec<_>>(),
        names
    );

    let config = |role: &str| {
        format!(
            r#"{{"cluster":{{"scheduler":[{{"url":"mxnet-job-scheduler-0","port":9991}}],"server":[{{"url":"mxnet-job-server-0","port":9991}}],"worker":[{{"url":"mxnet-job-worker-0","port":9991}}]}},"labels":{{"scheduler":"","server":"","worker":""}},"task":{{"type":"{role}","index":0}}}}"#
        )
    };
    let expected = |role: &str| {
        let config = config(role);
        let mut env = pairs(&[
            ("MX_CONFIG", &config),
            ("DMLC_PS_ROOT_PORT", "9991"),
            ("DMLC_PS_ROOT_URI", "mxnet-job-scheduler-0"),
            ("DMLC_NUM_SERVER", "1"),
            ("DMLC_NUM_WORKER", "1"),
            ("DMLC_ROLE", role),
            ("DMLC_USE_KUBERNETES", "1"),
        ]);
        if role == "worker" {
            env.extend(pairs(&[("DMLC_WORKER_ID", "0")]));
        }
        env
    };
    for role in ["scheduler", "server", "worker"] {
        let pod = &pods[&format!("mxnet-job-{role}-0")];
        assert_eq!(env(pod, "mxnet"), expected(role), "{role}");
    }
    let master_role = |name: &str| {
        pods[name]
            .labels()
            .get("training.kubeflow.org/job-role")
            .cloned()
    };
    assert_eq!(master_role("mxnet-job-server-0").as_deref(), Some("master"));
    assert_eq!(master_role("mxnet-job-scheduler-0"), None);

    let job = await_condition_type(&jobs, "mxnet-job", "Running", TIMEOUT).await;
    assert_eq!(
        last_condition(&job),
        condition("MXJobRunning", "MXJob mxnet-job is running.")
    );
    exit_container(&ns, "mxnet-job-scheduler-0", "mxnet", 0).await;
    let job = await_condition_type(&jobs, "mxnet-job", "Succeeded", TIMEOUT).await;
    assert_eq!(
        last_condition(&job),
        condition(
            "MXJobSucceeded",
            "MXJob mxnet-job is successfully completed."
        )
    );
}

#[tokio::test]
async fn mxnet_tune_example_runs_to_success_with_its_tuner() {
    let ns = TestNamespace::new("fw-mxnet-tune").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example::<MXJob>("mxnet-tune-gpu.yaml")).await;

    let job = "auto-tuning-job";
    let names = [
        format!("{job}-tuner-0"),
        format!("{job}-tunerserver-0"),
        format!("{job}-tunertracker-0"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let pods = await_running(&ns, job, &names).await;
    assert_eq!(pods.len(), 3, "one pod per replica: {:?}", pods.keys());
    let config = r#"{"cluster":{"tuner":[{"url":"auto-tuning-job-tuner-0","port":9991}],"tunerserver":[{"url":"auto-tuning-job-tunerserver-0","port":9991}],"tunertracker":[{"url":"auto-tuning-job-tunertracker-0","port":9991}]},"labels":{"tuner":"","tunerserver":"","tunertracker":""},"task":{"type":"tuner","index":0}}"#;
    assert_eq!(
        env(&pods[names[0]], "mxnet"),
        pairs(&[
            ("MX_CONFIG", config),
            ("DMLC_PS_ROOT_PORT", "0"),
            ("DMLC_PS_ROOT_URI", ""),
            ("DMLC_NUM_SERVER", "0"),
            ("DMLC_NUM_WORKER", "0"),
            ("DMLC_ROLE", "tuner"),
            ("DMLC_USE_KUBERNETES", "1"),
        ])
    );

    // Upstream never marks a tuning job Succeeded; here the Tuner decides.
    exit_container(&ns, names[0], "mxnet", 0).await;
    let done = await_condition_type(&jobs, job, "Succeeded", TIMEOUT).await;
    assert_eq!(
        last_condition(&done),
        condition(
            "MXJobSucceeded",
            &format!("MXJob {job} is successfully completed.")
        )
    );
}

#[tokio::test]
async fn xgboost_iris_example_runs_to_success_with_upstreams_environment() {
    let ns = TestNamespace::new("fw-xgboost").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example::<XGBoostJob>("xgboost-iris-train.yaml")).await;

    let job = "xgboost-dist-iris-test-train";
    let names = [
        format!("{job}-master-0"),
        format!("{job}-worker-0"),
        format!("{job}-worker-1"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let pods = await_running(&ns, job, &names).await;
    assert_eq!(pods.len(), 3, "one pod per replica: {:?}", pods.keys());

    let workers = format!("{job}-worker-0,{job}-worker-1");
    let master_addr = format!("{job}-master-0");
    let expected = |rank: &str| {
        pairs(&[
            ("MASTER_PORT", "9991"),
            ("MASTER_ADDR", &master_addr),
            ("WORLD_SIZE", "3"),
            ("RANK", rank),
            ("PYTHONUNBUFFERED", "1"),
            ("WORKER_PORT", "9991"),
            ("WORKER_ADDRS", &workers),
        ])
    };
    for (pod, rank) in names.iter().zip(["0", "1", "2"]) {
        assert_eq!(env(&pods[*pod], "xgboost"), expected(rank), "{pod}");
    }
    assert_eq!(
        pods[names[0]].labels()["training.kubeflow.org/job-role"],
        "master"
    );

    let running = await_condition_type(&jobs, job, "Running", TIMEOUT).await;
    assert_eq!(
        last_condition(&running),
        condition(
            "XGBoostJobRunning",
            &format!("XGBoostJob {job} is running.")
        )
    );
    exit_container(&ns, names[0], "xgboost", 0).await;
    let done = await_condition_type(&jobs, job, "Succeeded", TIMEOUT).await;
    assert_eq!(
        last_condition(&done),
        condition(
            "XGBoostJobSucceeded",
            &format!("XGBoostJob {job} is successfully completed.")
        )
    );
}

/// The `kubeflow` namespace upstream's JAXJob and PaddleJob examples name, held by one test at
/// a time and never deleted (other things may live there).
async fn kubeflow_namespace() -> (
    ManuallyDrop<TestNamespace>,
    tokio::sync::MutexGuard<'static, ()>,
) {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let guard = LOCK.lock().await;
    let client = client().await;
    let namespace: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": "kubeflow" } })).unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("cannot create the kubeflow namespace: {e}"),
    }
    let ns = TestNamespace {
        client,
        name: "kubeflow".to_owned(),
    };
    (ManuallyDrop::new(ns), guard)
}

/// Delete a job of an earlier run, and wait until it and its pods are gone.
async fn delete_job<J: TrainingJob + CustomResourceExt>(ns: &TestNamespace, name: &str) {
    let jobs = Api::<J>::namespaced(ns.client.clone(), &ns.name);
    let _ = jobs.delete(name, &DeleteParams::foreground()).await;
    eventually(
        &format!("{name} and its pods to be gone"),
        TIMEOUT,
        || async {
            let gone = jobs.get_opt(name).await.ok()?.is_none() && pods(ns, name).await.is_empty();
            gone.then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn jax_cpu_demo_example_runs_to_success_with_upstreams_environment() {
    let (ns, _guard) = kubeflow_namespace().await;
    delete_job::<JAXJob>(&ns, "jaxjob-simple").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example::<JAXJob>("jax-cpu-demo.yaml")).await;

    let names = ["jaxjob-simple-worker-0", "jaxjob-simple-worker-1"];
    let pods = await_running(&ns, "jaxjob-simple", &names).await;
    assert_eq!(pods.len(), 2, "one pod per replica: {:?}", pods.keys());
    for (pod, id) in names.iter().zip(["0", "1"]) {
        let expected = pairs(&[
            ("PYTHONUNBUFFERED", "1"),
            ("COORDINATOR_PORT", "6666"),
            ("COORDINATOR_ADDRESS", "jaxjob-simple-worker-0"),
            ("NUM_PROCESSES", "2"),
            ("PROCESS_ID", id),
        ]);
        assert_eq!(env(&pods[*pod], "jax"), expected, "{pod}");
    }
    let services = services(&ns, "jaxjob-simple").await;
    let port = &services["jaxjob-simple-worker-0"]
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("jaxjob-port"), 6666)
    );

    let running = await_condition_type(&jobs, "jaxjob-simple", "Running", TIMEOUT).await;
    assert_eq!(
        last_condition(&running),
        condition("JAXJobRunning", "JAXJob kubeflow/jaxjob-simple is running.")
    );
    exit_container(&ns, names[0], "jax", 0).await;
    exit_container(&ns, names[1], "jax", 0).await;
    let done = await_condition_type(&jobs, "jaxjob-simple", "Succeeded", TIMEOUT).await;
    assert_eq!(
        last_condition(&done),
        condition(
            "JAXJobSucceeded",
            "JAXJob kubeflow/jaxjob-simple successfully completed."
        )
    );
    delete_job::<JAXJob>(&ns, "jaxjob-simple").await;
}

#[tokio::test]
async fn paddle_simple_cpu_example_runs_to_success_with_upstreams_environment() {
    let (ns, _guard) = kubeflow_namespace().await;
    delete_job::<PaddleJob>(&ns, "paddle-simple-cpu").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &example::<PaddleJob>("paddle-simple-cpu.yaml")).await;

    let names = ["paddle-simple-cpu-worker-0", "paddle-simple-cpu-worker-1"];
    let pods = await_running(&ns, "paddle-simple-cpu", &names).await;
    assert_eq!(pods.len(), 2, "one pod per replica: {:?}", pods.keys());
    let common = [
        ("PYTHONUNBUFFERED", "1"),
        ("PADDLE_JOB_ID", "paddle-simple-cpu"),
        ("PADDLE_NNODES", "2"),
    ];
    let mut rendezvous = pairs(&common);
    rendezvous.extend(pairs(&[
        ("POD_IP_DUMMY", "<status.podIP>"),
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):37777"),
    ]));
    assert_eq!(env(&pods[names[0]], "paddle"), rendezvous);
    let mut other = pairs(&common);
    other.extend(pairs(&[(
        "PADDLE_MASTER",
        "paddle-simple-cpu-worker-0:37777",
    )]));
    assert_eq!(env(&pods[names[1]], "paddle"), other);
    let restart = pods[names[0]].spec.as_ref().unwrap().restart_policy.clone();
    assert_eq!(restart.as_deref(), Some("OnFailure"));

    let running = await_condition_type(&jobs, "paddle-simple-cpu", "Running", TIMEOUT).await;
    assert_eq!(
        last_condition(&running),
        condition(
            "PaddleJobRunning",
            "PaddleJob kubeflow/paddle-simple-cpu is running."
        )
    );
    exit_container(&ns, names[0], "paddle", 0).await;
    exit_container(&ns, names[1], "paddle", 0).await;
    let done = await_condition_type(&jobs, "paddle-simple-cpu", "Succeeded", TIMEOUT).await;
    assert_eq!(
        last_condition(&done),
        condition(
            "PaddleJobSucceeded",
            "PaddleJob kubeflow/paddle-simple-cpu successfully completed."
        )
    );
    delete_job::<PaddleJob>(&ns, "paddle-simple-cpu").await;
}

/// A job of one replica of `rtype` (the one that decides success) in `container`, with this
/// restart policy and run policy, driven by hand.
fn one_replica<J: TrainingJob>(
    name: &str,
    rtype: &str,
    container: &str,
    restart: &str,
    run_policy: serde_json::Value,
) -> J {
    let framework = J::FRAMEWORK;
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": framework.kind,
        "metadata": { "name": name },
        "spec": {
            "runPolicy": run_policy,
            (framework.replica_specs_field): { rtype: {
                "replicas": 1, "restartPolicy": restart,
                "template": { "spec": { "containers": [{ "name": container, "image": "busybox:1" }] } }
            } }
        }
    });
    serde_json::from_value(driven_by_hand(job)).expect("a valid job")
}

/// A failed pod of a job restarting OnFailure is recreated, counted and announced with the
/// framework's `Restarting` reason.
async fn a_failed_pod_is_restarted<J: TrainingJob>(prefix: &str, rtype: &str, container: &str) {
    let ns = TestNamespace::new(prefix).await;
    let _operator = start_operator(&ns).await;
    let job: J = one_replica("flaky", rtype, container, "OnFailure", json!({}));
    let jobs = submit(&ns, &job).await;
    let pod = format!("flaky-{}-0", rtype.to_lowercase());
    let before = await_running(&ns, "flaky", &[&pod]).await;
    let first_uid = before[&pod].uid();

    exit_container(&ns, &pod, container, 1).await;
    eventually(&format!("{pod} to be recreated"), TIMEOUT, || async {
        let pods = await_running(&ns, "flaky", &[&pod]).await;
        (pods[&pod].uid() != first_uid).then_some(())
    })
    .await;
    let job = jobs.get("flaky").await.unwrap();
    assert_eq!(job.status().unwrap().replica_statuses[rtype].restarts, 1);
    let reason = J::FRAMEWORK.reason("Restarting");
    eventually(&format!("a {reason} event"), TIMEOUT, || async {
        let events = Api::<Event>::namespaced(ns.client.clone(), &ns.name)
            .list(&ListParams::default())
            .await
            .ok()?;
        events
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason.as_str()))
    })
    .await;
    assert_eq!(pods(&ns, "flaky").await.len(), 1);
}

/// A job that succeeded is deleted once its TTL is over.
async fn a_finished_job_is_deleted_after_its_ttl<J: TrainingJob>(
    prefix: &str,
    rtype: &str,
    container: &str,
) {
    let ns = TestNamespace::new(prefix).await;
    let _operator = start_operator(&ns).await;
    let run_policy = json!({ "ttlSecondsAfterFinished": 1 });
    let job: J = one_replica("short", rtype, container, "Never", run_policy);
    let jobs = submit(&ns, &job).await;
    let pod = format!("short-{}-0", rtype.to_lowercase());
    await_running(&ns, "short", &[&pod]).await;
    exit_container(&ns, &pod, container, 0).await;
    let done = await_condition_type(&jobs, "short", "Succeeded", TIMEOUT).await;
    assert_eq!(last_condition(&done).0, J::FRAMEWORK.reason("Succeeded"));
    eventually("the job to be deleted after its TTL", TIMEOUT, || async {
        jobs.get_opt("short").await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_failed_mxnet_scheduler_is_restarted() {
    a_failed_pod_is_restarted::<MXJob>("fw-mxnet-restart", "Scheduler", "mxnet").await;
}

#[tokio::test]
async fn a_failed_xgboost_master_is_restarted() {
    a_failed_pod_is_restarted::<XGBoostJob>("fw-xgb-restart", "Master", "xgboost").await;
}

#[tokio::test]
async fn a_failed_jax_worker_is_restarted() {
    a_failed_pod_is_restarted::<JAXJob>("fw-jax-restart", "Worker", "jax").await;
}

#[tokio::test]
async fn a_failed_paddle_worker_is_restarted() {
    a_failed_pod_is_restarted::<PaddleJob>("fw-paddle-restart", "Worker", "paddle").await;
}

#[tokio::test]
async fn a_finished_mxjob_is_deleted_after_its_ttl() {
    a_finished_job_is_deleted_after_its_ttl::<MXJob>("fw-mxnet-ttl", "Scheduler", "mxnet").await;
}

#[tokio::test]
async fn a_finished_xgboostjob_is_deleted_after_its_ttl() {
    a_finished_job_is_deleted_after_its_ttl::<XGBoostJob>("fw-xgb-ttl", "Master", "xgboost").await;
}

#[tokio::test]
async fn a_finished_jaxjob_is_deleted_after_its_ttl() {
    a_finished_job_is_deleted_after_its_ttl::<JAXJob>("fw-jax-ttl", "Worker", "jax").await;
}

#[tokio::test]
async fn a_finished_paddlejob_is_deleted_after_its_ttl() {
    a_finished_job_is_deleted_after_its_ttl::<PaddleJob>("fw-paddle-ttl", "Worker", "paddle").await;
}

/// What upstream's webhooks reject, the API server rejects by the CRDs' rules.
#[tokio::test]
async fn the_api_server_rejects_what_upstreams_webhooks_reject() {
    let ns = TestNamespace::new("fw-invalid").await;
    let _operator = start_operator(&ns).await;
    let replica = |replicas: i32, container: &str| {
        json!({ "replicas": replicas, "template": { "spec": {
            "containers": [{ "name": container, "image": "busybox:1" }]
        } } })
    };
    let cases = [
        (
            "XGBoostJob",
            "xgbReplicaSpecs",
            json!({ "Worker": replica(1, "xgboost") }),
            "a Master replica type is required",
        ),
        (
            "XGBoostJob",
            "xgbReplicaSpecs",
            json!({ "Master": replica(2, "xgboost") }),
            "Master replicas must be 1",
        ),
        (
            "JAXJob",
            "jaxReplicaSpecs",
            json!({ "Chief": replica(1, "jax") }),
            "the only replica type is Worker",
        ),
        (
            "PaddleJob",
            "paddleReplicaSpecs",
            json!({ "PS": replica(1, "paddle") }),
            "replica types are Master and Worker",
        ),
        (
            "MXJob",
            "mxReplicaSpecs",
            json!({ "Scheduler": replica(2, "mxnet") }),
            "there can be only one Scheduler replica",
        ),
        (
            "PaddleJob",
            "paddleReplicaSpecs",
            json!({ "Worker": replica(1, "main") }),
            "one container must be named `paddle`",
        ),
    ];
    for (kind, field, specs, expected) in cases {
        let plural = format!("{}s", kind.to_lowercase());
        let resource = kube::api::ApiResource {
            group: "kubeflow.org".into(),
            version: "v1".into(),
            api_version: "kubeflow.org/v1".into(),
            kind: kind.into(),
            plural,
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        let job: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": { "name": "invalid" },
            "spec": { (field): specs }
        }))
        .unwrap();
        let error = api
            .create(&PostParams::default(), &job)
            .await
            .expect_err(&format!("a {kind} the webhook rejects: {expected}"));
        assert!(
            error.to_string().contains(expected),
            "{kind}: expected `{expected}` in: {error}"
        );
    }
}
