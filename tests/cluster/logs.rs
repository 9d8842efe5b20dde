//! `mlkube logs` against the real control plane, as far as kwok allows: its simulated nodes
//! serve no container logs, so these tests cover what is decided before a log is read (the job
//! found or not, with what was searched; a job without pods and its state; the pods listed by
//! the operator's labels and named as replicas; a replica that does not exist) and a follow
//! that ends with its job. The pods are made by hand, pinned to no node, so no kubelet is ever
//! asked for a log, except one on a kwok node, whose answer (no log served) must be told apart
//! from a pod that is gone; the lines themselves are tested on a real node.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use mlkube::operator::training::registry;
use serde_json::{Value, json};

use crate::operator::install_crd;
use crate::support::{self, TestNamespace, empty_app, mlkube, mlkube_ok};

/// An upper bound only: on a loaded 2-core machine the binary and the API server need room.
const TIMEOUT: Duration = Duration::from_secs(60);

/// `mlkube logs -n NS ARGS...`, its exit code and stderr.
fn logs(ns: &TestNamespace, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["logs", "-n", &ns.name];
    all.extend(args);
    let output = mlkube(&std::env::temp_dir(), &all);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn jobs(ns: &TestNamespace, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubeflow.org", "v1", kind);
    Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk(&gvk))
}

/// Create a job of `kind` with `workers` workers; no operator runs, so it gets no pods.
async fn create_job(ns: &TestNamespace, kind: &str, name: &str, workers: i64) {
    let framework = registry::ALL
        .iter()
        .map(|r| r.framework)
        .find(|f| f.kind == kind)
        .expect("a training job's kind");
    let template = json!({"spec": {"containers": [
        {"name": framework.container, "image": "example.invalid/train:1"}]}});
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": kind,
        "metadata": {"name": name},
        "spec": {framework.replica_specs_field: {"Worker": {"replicas": workers, "template": template}}}
    }))
    .expect("a job");
    jobs(ns, kind)
        .create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("the {kind} is accepted: {e}"));
}

/// Give the TFJob `name` these conditions, as the operator would.
async fn set_conditions(ns: &TestNamespace, name: &str, conditions: Value) {
    let status = json!({"status": {"conditions": conditions}});
    jobs(ns, "TFJob")
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("the job's status is patched");
}

fn condition(type_: &str) -> Value {
    json!({"type": type_, "status": "True", "reason": format!("TFJob{type_}"),
           "message": type_, "lastUpdateTime": "2026-01-01T00:00:00Z",
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// A pod of replica `worker-{index}` of the TFJob `job`, as the operator labels it, held to no
/// node: it stays Pending and no kubelet is asked for its log.
async fn create_pod(ns: &TestNamespace, job: &str, index: u32) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": format!("{job}-worker-{index}"),
                     "labels": {"training.kubeflow.org/job-name": job,
                                "training.kubeflow.org/operator-name": "tfjob-controller",
                                "training.kubeflow.org/replica-type": "worker",
                                "training.kubeflow.org/replica-index": index.to_string()}},
        "spec": {"nodeSelector": {"mlkube.io/no-such-node": "true"},
                 "containers": [{"name": "tensorflow", "image": "example.invalid/train:1"}]}
    }))
    .expect("a pod");
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
}

#[tokio::test]
async fn a_job_that_does_not_exist_names_what_was_searched_and_the_kind_that_has_it() {
    let ns = TestNamespace::new("logs-missing").await;
    install_crd(&ns.client).await;
    let (code, _, stderr) = logs(&ns, &["tfjob/absent"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tfjob absent not found (searched tfjobs.kubeflow.org in namespace {})",
            ns.name
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: no other kind of training job is called absent"),
        "{stderr}"
    );
    create_job(&ns, "PyTorchJob", "dist", 1).await;
    let (code, _, stderr) = logs(&ns, &["tfjobs/dist"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "hint: there is a pytorchjob of that name: `mlkube logs -n {} pytorchjob/dist`",
            ns.name
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_job_without_pods_says_its_state_and_its_pods_are_listed_as_replicas() {
    let ns = TestNamespace::new("logs-pods").await;
    install_crd(&ns.client).await;
    create_job(&ns, "TFJob", "mnist", 2).await;
    let (code, _, stderr) = logs(&ns, &["tfjob/mnist"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tfjob {}/mnist has no pods yet (no condition yet)",
            ns.name
        )),
        "{stderr}"
    );
    set_conditions(&ns, "mnist", json!([condition("Created")])).await;
    let (code, _, stderr) = logs(&ns, &["TFJob/mnist"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tfjob {}/mnist has no pods yet (Created)",
            ns.name
        )),
        "{stderr}"
    );

    create_pod(&ns, "mnist", 1).await;
    create_pod(&ns, "mnist", 0).await;
    // Another job's pod, which the label selector leaves out.
    create_pod(&ns, "other", 5).await;
    let (code, _, stderr) = logs(&ns, &["tfjob/mnist", "--replica", "worker-7"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tfjob {}/mnist has no replica `worker-7`; its replicas are worker-0, worker-1",
            ns.name
        )),
        "{stderr}"
    );
    // The pods ask for a node that does not exist: once the scheduler says so, that is why.
    for index in [0, 1] {
        unschedulable(&ns, &format!("mnist-worker-{index}")).await;
    }
    let (code, stdout, stderr) = logs(&ns, &["tfjob/mnist"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    for replica in ["worker-0", "worker-1"] {
        assert!(
            stderr.contains(&format!(
                "{replica}: container tensorflow has not started: cannot be scheduled: 0/"
            )),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("didn't match Pod's node affinity/selector"),
        "{stderr}"
    );
}

/// Wait until the scheduler has said it cannot place the pod `name`.
async fn unschedulable(ns: &TestNamespace, name: &str) {
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    support::eventually("the scheduler's verdict", TIMEOUT, || async {
        let pod = pods.get(name).await.ok()?;
        let conditions = pod.status?.conditions?;
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False")
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn following_waits_for_containers_to_start_and_ends_with_the_job() {
    use std::io::{BufRead, BufReader};

    let ns = TestNamespace::new("logs-follow").await;
    install_crd(&ns.client).await;
    create_job(&ns, "TFJob", "mnist", 1).await;
    set_conditions(
        &ns,
        "mnist",
        json!([condition("Created"), condition("Running")]),
    )
    .await;
    create_pod(&ns, "mnist", 0).await;
    unschedulable(&ns, "mnist-worker-0").await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["logs", "-n", &ns.name, "tfjob/mnist", "-f"])
        .env("KUBECONFIG", support::kubeconfig_path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mlkube binary starts");
    let stderr = child.stderr.take().expect("stderr");
    let (first_line, first) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
        let mut all = String::new();
        if let Some(line) = lines.next() {
            let _ = first_line.send(line.clone());
            all = line + "\n";
        }
        for line in lines {
            all += &line;
            all.push('\n');
        }
        all
    });
    // The first note comes once the follow has listed the pod; then the job ends while its
    // only container never started, and nothing is left to follow.
    let note = first
        .recv_timeout(TIMEOUT)
        .expect("the follow tells what it waits for");
    assert!(
        note.starts_with(
            "mlkube: worker-0: waiting for container tensorflow to start: cannot be scheduled: 0/"
        ),
        "{note}"
    );
    set_conditions(
        &ns,
        "mnist",
        json!([
            condition("Created"),
            condition("Running"),
            condition("Succeeded")
        ]),
    )
    .await;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the follow runs") {
            break status;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "the follow did not end with the job"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stderr = reader.join().expect("stderr is read");
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// A new app whose `local` environment is `ns`, with one TFJob component, `train`; the
/// directory it is in goes when the first value is dropped.
fn app_with_a_tf_job(ns: &TestNamespace) -> (tempfile::TempDir, PathBuf) {
    let (tmp, app) = empty_app(ns);
    mlkube_ok(
        &app,
        &[
            "component",
            "add",
            "tf-job",
            "train",
            "--param",
            "image=example.invalid/train:1",
        ],
    );
    (tmp, app)
}

#[tokio::test]
async fn an_environments_jobs_not_applied_yet_say_to_apply_it() {
    let ns = TestNamespace::new("logs-env").await;
    let (_tmp, app) = app_with_a_tf_job(&ns);
    let output = mlkube(&app, &["logs", "local", "-c", "train"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("tfjob {}/", ns.name))
            && stderr.contains("not found on the cluster")
            && stderr.contains("apply it first (`mlkube apply local`)"),
        "{stderr}"
    );
    let output = mlkube(&app, &["logs", "local", "-n", "elsewhere"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "environment `local` has its own namespace, {}",
            ns.name
        )),
        "{stderr}"
    );
}

/// A pod of replica `worker-0` of the TFJob `job` on the kwok node `kwok-node-0`, running until
/// a test says otherwise.
async fn create_pod_on_kwok(ns: &TestNamespace, job: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": format!("{job}-worker-0"),
                     "annotations": {"mlkube.io/simulate": "manual"},
                     "labels": {"training.kubeflow.org/job-name": job,
                                "training.kubeflow.org/operator-name": "tfjob-controller",
                                "training.kubeflow.org/replica-type": "worker",
                                "training.kubeflow.org/replica-index": "0"}},
        "spec": {"nodeName": "kwok-node-0",
                 "containers": [{"name": "tensorflow", "image": "example.invalid/train:1"}]}
    }))
    .expect("a pod");
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
    let name = format!("{job}-worker-0");
    support::eventually("the pod on kwok to run", TIMEOUT, || async {
        let pod = pods.get(&name).await.ok()?;
        let statuses = pod.status?.container_statuses?;
        statuses
            .first()?
            .state
            .as_ref()?
            .running
            .as_ref()
            .map(|_| ())
    })
    .await;
}

#[tokio::test]
async fn a_kwok_node_without_a_kubelet_is_named_by_logs_and_by_a_sweeps_status_not_taken_for_a_gone_pod()
 {
    let ns = TestNamespace::new("logs-kwok").await;
    install_crd(&ns.client).await;
    let (_tmp, app) = app_with_a_tf_job(&ns);
    // The job as the operator would leave it: Succeeded, its worker's pod kept.
    create_job(&ns, "TFJob", "train", 1).await;
    create_pod_on_kwok(&ns, "train").await;
    set_conditions(
        &ns,
        "train",
        json!([
            condition("Created"),
            condition("Running"),
            condition("Succeeded")
        ]),
    )
    .await;
    // kwok's nodes have a loopback address where no kubelet listens: the API server's dial
    // is refused, which is neither a pod that is gone nor a container that has not started.
    let output = mlkube(&app, &["logs", "local", "-c", "train"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the kubelet did not serve the logs of worker-0 (pod ")
            && stderr.contains("node kwok-node-0)")
            && stderr.contains("connection refused")
            && stderr.contains("kwok's simulated nodes serve no logs"),
        "{stderr}"
    );
    assert!(!stderr.contains("is gone"), "{stderr}");

    let output = mlkube(&app, &["status", "local", "-c", "train", "-o", "json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let note = report["jobs"][0]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("the kubelet did not serve the logs of worker-0 (pod ")
            && note.contains("node kwok-node-0)"),
        "{report:#}"
    );
}

/// `mlkube status` and `mlkube logs` of a job whose pod waits for a ConfigMap that is not there,
/// named after the component's `objectStore` param (a typo of the store's name), name that param
/// and the `param set` line that changes it (status in its text and its JSON).
#[tokio::test]
async fn status_and_logs_name_the_param_a_missing_config_map_is_named_after() {
    let ns = TestNamespace::new("status-hint").await;
    install_crd(&ns.client).await;
    let (_tmp, app) = app_with_a_tf_job(&ns);
    mlkube_ok(
        &app,
        &["param", "set", "train", "objectStore", "object-stor"],
    );
    mlkube_ok(&app, &["apply", "local", "--no-wait"]);
    // The pod as a kubelet leaves it when the ConfigMap of the container's envFrom is missing.
    create_pod_on_kwok(&ns, "train").await;
    let message = "configmap \"object-stor-endpoint\" not found";
    let status = json!({"status": {"containerStatuses": [{
        "name": "tensorflow", "image": "example.invalid/train:1", "imageID": "", "ready": false,
        "restartCount": 0,
        "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}}}]}});
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .patch_status(
            "train-worker-0",
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await
        .expect("the pod's status is patched");

    let hint = "hint: the ConfigMap `object-stor-endpoint` is named after param `objectStore` of \
                component `train` (environment `local`), which may name what is not there: \
                `mlkube param set train objectStore <value> --env local`";
    let output = mlkube(&app, &["status", "local"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains(&format!("TFJob.kubeflow.org {}/train\n  {hint}", ns.name)),
        "{stdout}"
    );
    let output = mlkube(&app, &["status", "local", "-o", "json"]);
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let job = &report["members"][0];
    assert!(
        job["reason"].as_str().unwrap_or_default().contains(message),
        "{report:#}"
    );
    assert_eq!(job["hint"], hint, "{report:#}");
    let output = mlkube(&app, &["logs", "local"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("there are no logs to read yet: ")
            && stderr.contains(&format!("\n  {hint}")),
        "{stderr}"
    );
}
