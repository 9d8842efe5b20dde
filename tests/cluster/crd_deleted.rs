//! A framework's CRD deleted, and installed again, while the operator runs its jobs.
//!
//! Deleting a CRD also deletes every job of its kind, and a CRD shared by every test of a run
//! cannot go away under them: each test that starts an operator applies all the CRDs again.
//! So this runs on a control plane of its own (see `parity::BareControlPlane`), with no nodes:
//! the test plays the kubelet by patching pod statuses, as the kwok tests do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::mxnet::MXJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::registry::{Registered, by_name};
use serde_json::json;

use crate::operator::{TIMEOUT, driven_by_hand};
use crate::operator_identity::{Access, OperatorIdentity, OperatorProcess, Scope};
use crate::parity::{BareControlPlane, free_port, get};
use crate::support::eventually;

const NAMESPACE: &str = "crd-deleted";
const MXJOB_CRD: &str = "mxjobs.kubeflow.org";

/// While the operator runs TFJobs and MXJobs, the MXJob CRD is deleted: the MXJob controller
/// stops with one warning, `/readyz` says why, nothing is created for the deleted jobs, and
/// TFJobs still run. Installed again, the CRD's jobs run again, and SIGTERM still exits at
/// once.
#[tokio::test]
async fn regression_a_crd_deleted_while_its_framework_runs_stops_only_that_framework_until_it_is_back()
 {
    let mut running = Running::start().await;
    let client = running.plane.client.clone();
    let mxjobs = Api::<MXJob>::namespaced(client.clone(), NAMESPACE);
    mxjobs
        .create(&PostParams::default(), &mxjob("before"))
        .await
        .expect("the MXJob is accepted");
    await_pod(&client, "before-scheduler-0").await;
    let problems_before = problem_lines(&running.log).len();

    running.delete_mxjob_crd().await;
    let creations = (
        plane_requests(&client, "POST", "pods").await,
        plane_requests(&client, "POST", "services").await,
    );

    // TFJobs run on meanwhile.
    let tfjobs = Api::<TFJob>::namespaced(client.clone(), NAMESPACE);
    tfjobs
        .create(&PostParams::default(), &tfjob("meanwhile"))
        .await
        .expect("the TFJob is accepted");
    await_pod(&client, "meanwhile-worker-0").await;
    exit_container(&client, "meanwhile-worker-0", "tensorflow").await;
    await_succeeded(&tfjobs, "meanwhile").await;
    assert_eq!(
        (
            plane_requests(&client, "POST", "pods").await,
            plane_requests(&client, "POST", "services").await,
        ),
        (creations.0 + 1.0, creations.1 + 1.0),
        "the TFJob's pod and service are all the operator created since the CRD went"
    );

    // Installed again, a job created at once is run as soon as the operator sees the CRD.
    running.plane.install(mxnet()).await;
    mxjobs
        .create(&PostParams::default(), &mxjob("after"))
        .await
        .expect("the MXJob is accepted once its CRD is back");
    readyz(running.health_port, "200", &[]).await;
    await_pod(&client, "after-scheduler-0").await;
    exit_container(&client, "after-scheduler-0", "mxnet").await;
    await_succeeded(&mxjobs, "after").await;

    let problems = problem_lines(&running.log)[problems_before..].to_vec();
    assert_eq!(problems.len(), 1, "one warning, no retries: {problems:#?}");
    assert!(
        problems[0].contains(&format!("the {MXJOB_CRD} CRD was deleted")),
        "{problems:#?}"
    );
    assert!(
        problems[0].contains("leave mxnet out of --frameworks"),
        "{problems:#?}"
    );
    running.sigterm_exits_at_once().await;
}

/// SIGTERM while a framework waits for its deleted CRD stops the operator at once.
#[tokio::test]
async fn regression_sigterm_while_a_deleted_crd_is_awaited_exits_at_once() {
    let mut running = Running::start().await;
    running.delete_mxjob_crd().await;
    running.sigterm_exits_at_once().await;
}

fn mxnet() -> &'static Registered {
    by_name("mxnet").expect("the mxnet framework")
}

/// The operator binary for TFJobs and MXJobs, ready, on a control plane of its own with both
/// CRDs.
struct Running {
    operator: OperatorProcess,
    _identity: OperatorIdentity,
    health_port: u16,
    log: PathBuf,
    /// Last: it stops after the operator.
    plane: BareControlPlane,
}

impl Running {
    async fn start() -> Self {
        let plane = BareControlPlane::start().await;
        plane
            .install(by_name("tensorflow").expect("the tensorflow framework"))
            .await;
        plane.install(mxnet()).await;
        create_namespace(&plane.client).await;
        let identity = OperatorIdentity::on(
            &plane.client,
            &plane.kubeconfig,
            NAMESPACE,
            Access::scoped(Scope::Namespace),
        )
        .await;
        let health_port = free_port();
        let log = plane.dir.path().join("operator.log");
        let operator = spawn_operator(&identity, health_port, &log);
        readyz(health_port, "200", &[]).await;
        Running {
            operator,
            _identity: identity,
            health_port,
            log,
            plane,
        }
    }

    /// Delete the MXJob CRD, and wait until `/readyz` names it.
    async fn delete_mxjob_crd(&self) {
        Api::<CustomResourceDefinition>::all(self.plane.client.clone())
            .delete(MXJOB_CRD, &DeleteParams::default())
            .await
            .expect("the MXJob CRD is deleted");
        readyz(
            self.health_port,
            "503",
            &["MXJobs are not run: the CRD mxjobs.kubeflow.org is not installed"],
        )
        .await;
    }

    async fn sigterm_exits_at_once(&mut self) {
        // SAFETY: a plain signal to the child this test started.
        let pid = i32::try_from(self.operator.0.id()).expect("a pid fits in i32");
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let asked = std::time::Instant::now();
        let status = loop {
            if let Some(status) = self.operator.0.try_wait().expect("the operator's status") {
                break status;
            }
            assert!(
                asked.elapsed() < TIMEOUT,
                "the operator did not exit on SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(status.success(), "{status}");
        let took = asked.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "SIGTERM to exit took {took:?}"
        );
    }
}

/// The test's namespace, with the `default` ServiceAccount pods need (this control plane runs
/// no controller-manager to create it).
async fn create_namespace(client: &Client) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } })).unwrap(),
        )
        .await
        .expect("the namespace is created");
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "default" } })).unwrap(),
        )
        .await
        .expect("the default ServiceAccount is created");
}

/// `mlkube operator` for TFJobs and MXJobs in the test's namespace, as `identity`, logging JSON
/// to `log`.
fn spawn_operator(identity: &OperatorIdentity, health_port: u16, log: &Path) -> OperatorProcess {
    OperatorProcess(
        std::process::Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(["operator", "--namespace", NAMESPACE, "--log-format", "json"])
            .args(["--frameworks", "tensorflow,mxnet"])
            .arg("--kubeconfig")
            .arg(identity.kubeconfig())
            .args(["--metrics-addr", "127.0.0.1:0", "--health-addr"])
            .arg(format!("127.0.0.1:{health_port}"))
            .env("RUST_LOG", "info")
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAMESPACE")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).expect("the operator's log file"))
            .spawn()
            .expect("the mlkube binary starts"),
    )
}

/// Wait until `/readyz` answers `status` with these lines.
async fn readyz(port: u16, status: &str, lines: &[&str]) {
    eventually(
        &format!("/readyz to answer {status} with {lines:?}"),
        TIMEOUT,
        || async {
            let (line, body) = get(port, "/readyz").await?;
            let named: Vec<&str> = body.lines().filter(|l| *l != "ok").collect();
            (line.contains(&format!(" {status} ")) && named == lines).then_some(())
        },
    )
    .await;
}

/// A job of one replica, driven by hand.
fn mxjob(name: &str) -> MXJob {
    let template =
        json!({ "spec": { "containers": [{ "name": "mxnet", "image": "mxjob/mxnet:gpu" }] } });
    serde_json::from_value(driven_by_hand(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "MXJob",
        "metadata": { "name": name },
        "spec": { "jobMode": "MXTrain", "mxReplicaSpecs": {
            "Scheduler": { "replicas": 1, "restartPolicy": "Never", "template": template }
        } }
    })))
    .expect("a valid MXJob")
}

fn tfjob(name: &str) -> TFJob {
    let template = json!({ "spec": { "containers": [{ "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] } });
    serde_json::from_value(driven_by_hand(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": name },
        "spec": { "tfReplicaSpecs": {
            "Worker": { "replicas": 1, "restartPolicy": "Never", "template": template }
        } }
    })))
    .expect("a valid TFJob")
}

async fn await_pod(client: &Client, name: &str) {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    eventually(&format!("pod {name}"), TIMEOUT, || async {
        pods.get_opt(name).await.ok().flatten().map(|_| ())
    })
    .await;
}

/// Play the kubelet: `container` of `pod` exits 0, and the pod with it.
async fn exit_container(client: &Client, pod: &str, container: &str) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({ "status": {
        "phase": "Succeeded",
        "containerStatuses": [{
            "name": container, "ready": false, "restartCount": 0, "image": "x", "imageID": "",
            "state": { "terminated": { "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now } }
        }]
    }});
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap_or_else(|e| panic!("cannot patch the status of pod {pod}: {e}"));
}

async fn await_succeeded<J: TrainingJob>(jobs: &Api<J>, name: &str) {
    let kind = J::FRAMEWORK.kind;
    eventually(&format!("{kind} {name} to succeed"), TIMEOUT, || async {
        let job = jobs.get(name).await.ok()?;
        let value = serde_json::to_value(&job).ok()?;
        let conditions = value["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Succeeded" && c["status"] == "True")
            .then_some(())
    })
    .await;
}

/// The operator's JSON log lines at WARN or ERROR, as their message and error.
fn problem_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["level"] == "WARN" || line["level"] == "ERROR")
        .map(|line| format!("{} {}", line["message"], line["error"]))
        .collect()
}

/// How many `verb` requests for `resource` (a plural) the API server has served.
async fn plane_requests(client: &Client, verb: &str, resource: &str) -> f64 {
    let metrics = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("the API server's metrics");
    let (verb, resource) = (
        format!("verb=\"{verb}\""),
        format!("resource=\"{resource}\""),
    );
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(&verb) && l.contains(&resource))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
