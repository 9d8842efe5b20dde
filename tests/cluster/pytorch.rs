//! PyTorchJob on the real control plane, with the operator of `operator.rs`: upstream's example
//! runs to Succeeded with its exact environment, a failed worker is restarted, a finished job is
//! deleted after its TTL, and a failed job is logged at warn with its reason.

use std::path::Path;

use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use mlkube::operator::training::frameworks::pytorch::PyTorchJob;
use serde_json::json;

use crate::operator::{
    TIMEOUT, await_condition_type, await_running, driven_by_hand, example_in, exit_container,
    pairs, pods, services, start_operator,
};
use crate::operator_identity::{Access, OperatorIdentity, Scope};
use crate::support::{TestNamespace, env, eventually, submit};

fn pytorchjob(value: serde_json::Value) -> PyTorchJob {
    serde_json::from_value(driven_by_hand(value)).expect("a valid PyTorchJob")
}

/// A PyTorchJob of `workers` workers and no Master, with this run policy.
fn workers(name: &str, workers: i32, run_policy: serde_json::Value) -> PyTorchJob {
    pytorchjob(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": { "name": name },
        "spec": {
            "runPolicy": run_policy,
            "pytorchReplicaSpecs": { "Worker": { "replicas": workers, "template": { "spec": {
                "containers": [{ "name": "pytorch", "image": "pytorch:1" }]
            } } } }
        }
    }))
}

#[tokio::test]
async fn pytorch_simple_example_runs_to_success_with_upstreams_environment() {
    let ns = TestNamespace::new("fw-pytorch").await;
    let _operator = start_operator(&ns).await;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let job: PyTorchJob = example_in(&examples, "pytorch-simple.yaml");
    let jobs = submit(&ns, &job).await;

    let names = ["pytorch-simple-master-0", "pytorch-simple-worker-0"];
    let pods = await_running(&ns, "pytorch-simple", &names).await;
    assert_eq!(pods.len(), 2, "one pod per replica: {:?}", pods.keys());
    let services = services(&ns, "pytorch-simple").await;
    assert_eq!(
        services.keys().map(String::as_str).collect::<Vec<_>>(),
        names
    );
    let port = &services["pytorch-simple-master-0"]
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("pytorchjob-port"), 23456)
    );

    let expected = |rank: &str| {
        pairs(&[
            ("PYTHONUNBUFFERED", "1"),
            ("MASTER_PORT", "23456"),
            ("PET_MASTER_PORT", "23456"),
            ("MASTER_ADDR", "pytorch-simple-master-0"),
            ("PET_MASTER_ADDR", "pytorch-simple-master-0"),
            ("WORLD_SIZE", "2"),
            ("RANK", rank),
            ("PET_NODE_RANK", rank),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_NNODES", "2"),
        ])
    };
    let master = &pods["pytorch-simple-master-0"];
    let worker = &pods["pytorch-simple-worker-0"];
    assert_eq!(env(master, "pytorch"), expected("0"));
    assert_eq!(env(worker, "pytorch"), expected("1"));
    assert_eq!(master.labels()["training.kubeflow.org/job-role"], "master");
    assert_eq!(
        master.labels()["training.kubeflow.org/operator-name"],
        "pytorchjob-controller"
    );
    let init = worker
        .spec
        .as_ref()
        .unwrap()
        .init_containers
        .as_ref()
        .unwrap();
    assert_eq!(init[0].name, "init-pytorch");

    let job = await_condition_type(&jobs, "pytorch-simple", "Running", TIMEOUT).await;
    let running = job.status.unwrap().conditions.pop().unwrap();
    assert_eq!(running.reason.as_deref(), Some("PyTorchJobRunning"));
    assert_eq!(
        running.message.as_deref(),
        Some("PyTorchJob pytorch-simple is running.")
    );

    exit_container(&ns, "pytorch-simple-master-0", "pytorch", 0).await;
    let job = await_condition_type(&jobs, "pytorch-simple", "Succeeded", TIMEOUT).await;
    let succeeded = job.status.unwrap().conditions.pop().unwrap();
    assert_eq!(succeeded.reason.as_deref(), Some("PyTorchJobSucceeded"));
    assert_eq!(
        succeeded.message.as_deref(),
        Some("PyTorchJob pytorch-simple is successfully completed.")
    );
}

#[tokio::test]
async fn a_failed_pytorch_worker_is_restarted_by_its_default_on_failure_policy() {
    let ns = TestNamespace::new("fw-pytorch-restart").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(&ns, &workers("flaky", 2, json!({}))).await;
    let before = await_running(&ns, "flaky", &["flaky-worker-0", "flaky-worker-1"]).await;
    let first_uid = before["flaky-worker-1"].uid();

    exit_container(&ns, "flaky-worker-1", "pytorch", 1).await;
    eventually("worker 1 to be recreated", TIMEOUT, || async {
        let pods = await_running(&ns, "flaky", &["flaky-worker-1"]).await;
        (pods["flaky-worker-1"].uid() != first_uid).then_some(())
    })
    .await;
    let job = jobs.get("flaky").await.unwrap();
    assert_eq!(job.status.unwrap().replica_statuses["Worker"].restarts, 1);
    // Running replaces Restarting once the new pod runs; the event stays.
    let restarting = eventually("a PyTorchJobRestarting event", TIMEOUT, || async {
        let events = Api::<Event>::namespaced(ns.client.clone(), &ns.name)
            .list(&ListParams::default())
            .await
            .ok()?;
        let event = events
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("PyTorchJobRestarting"))?;
        Some((event.message?, event.reporting_component))
    })
    .await;
    let (message, reporter) = restarting;
    assert!(
        message.starts_with("PyTorchJob flaky is restarting because 1 Worker replica(s) failed."),
        "{message}"
    );
    assert_eq!(reporter.as_deref(), Some("pytorchjob-controller"));
    assert_eq!(pods(&ns, "flaky").await.len(), 2);
}

#[tokio::test]
async fn a_finished_pytorchjob_is_deleted_after_its_ttl() {
    let ns = TestNamespace::new("fw-pytorch-ttl").await;
    let _operator = start_operator(&ns).await;
    let jobs = submit(
        &ns,
        &workers("short", 1, json!({ "ttlSecondsAfterFinished": 1 })),
    )
    .await;
    await_running(&ns, "short", &["short-worker-0"]).await;
    exit_container(&ns, "short-worker-0", "pytorch", 0).await;
    let job = await_condition_type(&jobs, "short", "Succeeded", TIMEOUT).await;
    let message = job.status.unwrap().conditions.pop().unwrap().message;
    assert_eq!(
        message.as_deref(),
        Some(format!("PyTorchJob {}/short successfully completed.", ns.name).as_str())
    );
    eventually("the job to be deleted after its TTL", TIMEOUT, || async {
        jobs.get_opt("short").await.ok()?.is_none().then_some(())
    })
    .await;
}

/// `mlkube operator --log-format json` for one namespace, as the component's ServiceAccount,
/// with its stderr lines as they come; killed when dropped.
struct LoggedOperator {
    child: std::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    _identity: OperatorIdentity,
}

impl LoggedOperator {
    async fn start(ns: &TestNamespace) -> LoggedOperator {
        crate::operator::install_crd(&ns.client).await;
        let identity = OperatorIdentity::new(ns, Access::scoped(Scope::Namespace)).await;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(["operator", "--namespace", &ns.name, "--log-format", "json"])
            .arg("--kubeconfig")
            .arg(identity.kubeconfig())
            .args([
                "--metrics-addr",
                "127.0.0.1:0",
                "--health-addr",
                "127.0.0.1:0",
            ])
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the mlkube binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = sender.send(line);
            }
        });
        LoggedOperator {
            child,
            lines,
            _identity: identity,
        }
    }

    /// Read log lines, each of which must be a JSON object, until one matches `wanted`.
    async fn await_line(
        &mut self,
        what: &str,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        let mut seen = Vec::new();
        loop {
            let Ok(Some(line)) = tokio::time::timeout_at(deadline, self.lines.recv()).await else {
                panic!(
                    "no log line {what} within {TIMEOUT:?}; seen:\n{}",
                    seen.join("\n")
                );
            };
            let entry: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a log line is not a JSON object ({e}): {line}"));
            if wanted(&entry) {
                return entry;
            }
            seen.push(line);
        }
    }
}

impl Drop for LoggedOperator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_failed_job_is_logged_at_warn_with_its_reason() {
    let ns = TestNamespace::new("fw-log-failed").await;
    let mut operator = LoggedOperator::start(&ns).await;
    let mut job = workers("doomed", 1, json!({}));
    job.spec
        .pytorch_replica_specs
        .get_mut("Worker")
        .unwrap()
        .restart_policy = Some(mlkube::operator::training::api::RestartPolicy::Never);
    let jobs = submit(&ns, &job).await;
    await_running(&ns, "doomed", &["doomed-worker-0"]).await;
    exit_container(&ns, "doomed-worker-0", "pytorch", 1).await;
    let failed = await_condition_type(&jobs, "doomed", "Failed", TIMEOUT).await;
    let message = failed
        .status
        .unwrap()
        .conditions
        .pop()
        .unwrap()
        .message
        .unwrap();

    let job_name = format!("{}/doomed", ns.name);
    let line = operator
        .await_line("saying the job failed", |entry| {
            entry["span"]["job"] == job_name.as_str() && entry["reason"] == "PyTorchJobFailed"
        })
        .await;
    assert_eq!(line["level"], "WARN", "{line}");
    assert_eq!(line["condition"], "Failed", "{line}");
    assert_eq!(line["message"], format!("job failed: {message}"), "{line}");
    assert!(
        message.starts_with("PyTorchJob doomed is failed because 1 Worker replica(s) failed."),
        "{message}"
    );
}
