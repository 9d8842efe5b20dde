//! Jobs that cannot start, as a newcomer meets them: an image the node cannot pull and a pod no
//! node has room for. `mlkube status`, `mlkube logs` (with and without `-f`) and a component's
//! job report (`status -c`) each say why, with the image or the scheduler's words, and nothing
//! waits forever. Each job is a `tf-job` component of an app of the test's own, applied alone.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use crate::platform::{self, assert_success, mlkube};
use crate::support::{self, TestNamespace, eventually};

/// Long enough for a loaded 2-core node to create, schedule and try a pod.
const TIMEOUT: Duration = Duration::from_secs(180);

/// An app of its own in `dir` (a new directory, whose name names the app) whose `local`
/// environment is `ns`, with the tf-job component `name` (`params` set), applied alone without
/// waiting.
fn job_app(dir: &Path, ns: &TestNamespace, name: &str, params: &[&str]) {
    let app = dir.to_str().expect("a UTF-8 path");
    let output = mlkube(Path::new("/"), &["init", app, "--namespace", &ns.name]);
    assert_success("mlkube init", &output);
    let mut add = vec!["component", "add", "tf-job", name];
    for param in params {
        add.extend(["--param", param]);
    }
    assert_success("mlkube component add", &mlkube(dir, &add));
    let output = mlkube(dir, &["apply", "local", "-c", name, "--no-wait"]);
    assert_success("mlkube apply local -c", &output);
}

/// The job's first pod, once `ready` holds for it.
async fn pod_when(ns: &TestNamespace, job: &str, what: &str, ready: fn(&Pod) -> bool) -> Pod {
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let selector = format!("training.kubeflow.org/job-name={job}");
    eventually(what, TIMEOUT, || async {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        list.items.into_iter().find(ready)
    })
    .await
}

/// `mlkube ARGS` in `dir`, which must end within [`TIMEOUT`]: a hang fails the test.
fn mlkube_ends(dir: &Path, args: &[&str]) -> Output {
    let child = support::mlkube_command(dir, args)
        .spawn()
        .expect("the mlkube binary starts");
    let pid = child.id();
    let started = Instant::now();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    while !waiter.is_finished() {
        if started.elapsed() > TIMEOUT {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("mlkube {} did not end within {TIMEOUT:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    waiter.join().expect("the waiter").expect("mlkube's output")
}

/// The reason `status -o json` gives for member `kind/name`, and its state.
fn member(app: &Path, kind: &str, name: &str) -> (String, String, Option<i32>) {
    let output = mlkube(app, &["status", "local", "-o", "json"]);
    let status: Value = serde_json::from_slice(&output.stdout).expect("status JSON");
    let found = status["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|m| m["kind"] == kind && m["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name}: {status:#}"))
        .clone();
    let text = |field: &str| found[field].as_str().unwrap_or_default().to_string();
    (text("state"), text("reason"), output.status.code())
}

fn waiting_on_pull(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses.into_iter().flatten().any(|s| {
        let reason = s.state.as_ref().and_then(|st| st.waiting.as_ref());
        let reason = reason.and_then(|w| w.reason.as_deref()).unwrap_or_default();
        matches!(reason, "ErrImagePull" | "ImagePullBackOff")
    })
}

#[tokio::test]
async fn an_image_the_node_cannot_pull_is_named_by_status_and_logs_and_ends_a_follow() {
    platform::app();
    let ns = TestNamespace::new("real-badimg").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("badimg-app");
    let image = "mlkube/no-such-image:0.0.1";
    job_app(&dir, &ns, "badimg", &[&format!("image={image}")]);
    pod_when(&ns, "badimg", "the pod's pull to fail", waiting_on_pull).await;
    let said = format!("image {image} cannot be pulled");

    let (state, reason, code) = member(&dir, "TFJob", "badimg");
    assert_eq!((state.as_str(), code), ("failed", Some(3)), "{reason}");
    assert!(reason.contains(&said), "{reason}");

    for args in [&["logs", "local"][..], &["logs", "local", "-f"]] {
        let output = mlkube_ends(&dir, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&said), "{args:?}: {stderr}");
    }
}

fn unschedulable(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.status == "False")
}

#[tokio::test]
async fn a_pod_no_node_has_room_for_says_what_it_lacks_in_status_logs_and_the_job_report() {
    platform::app();
    let ns = TestNamespace::new("real-toobig").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("toobig-app");
    job_app(&dir, &ns, "toobig", &["cpuRequest=64"]);
    pod_when(
        &ns,
        "toobig",
        "the scheduler to give up on the pod",
        unschedulable,
    )
    .await;
    let said = "Insufficient cpu";

    let (state, reason, code) = member(&dir, "TFJob", "toobig");
    assert_eq!((state.as_str(), code), ("progressing", Some(3)), "{reason}");
    assert!(reason.contains(said), "{reason}");

    let output = mlkube_ends(&dir, &["logs", "local"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot be scheduled") && stderr.contains(said),
        "{stderr}"
    );

    let output = mlkube(&dir, &["status", "local", "-c", "toobig", "-o", "json"]);
    let report: Value = serde_json::from_slice(&output.stdout).expect("report JSON");
    let note = report["jobs"][0]["note"].as_str().unwrap_or_default();
    assert!(note.contains(said), "{report:#}");
}
