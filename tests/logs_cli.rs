//! `mlkube logs` through the built binary against a stand-in API server on 127.0.0.1 that
//! answers the three requests it makes (the job, its pods, a container's log) as a test tells
//! it: the lines printed, and what happens when the kubelet behind the API server cannot serve
//! logs or never answers. kwok's nodes serve no logs, so these paths have no cluster test; the
//! stand-in replaces no cluster test either: the job, pods and errors are the API server's own
//! shapes.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::json;

/// How the stand-in answers a request for a container's log.
#[derive(Clone, Copy)]
enum LogAnswer {
    /// These lines, with the kubelet's timestamps.
    Lines(&'static [&'static str]),
    /// 500, as the API server answers when it cannot reach the node's kubelet.
    KubeletUnreachable,
    /// Nothing, ever: the API server still waits for the kubelet.
    Silence,
}

/// Serve the job `mnist` in namespace `ml` with pods `mnist-worker-0` and `mnist-worker-1`;
/// returns the server's URL.
fn serve(log: LogAnswer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            if let Some(stream) = answer(stream, log) {
                held.push(stream);
            }
        }
    });
    url
}

/// Answer one request; a connection left unanswered is returned, to be held open.
fn answer(mut stream: TcpStream, log: LogAnswer) -> Option<TcpStream> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? <= 2 {
            break;
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or_default();
    let (code, body) = if path.starts_with("/apis/kubeflow.org/v1/namespaces/ml/tfjobs/mnist") {
        (200, job().to_string())
    } else if path.starts_with("/api/v1/namespaces/ml/pods?") {
        let items = json!([pod(0), pod(1)]);
        let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items});
        (200, list.to_string())
    } else if let Some(rest) = path.strip_prefix("/api/v1/namespaces/ml/pods/") {
        let pod = rest.split('/').next().unwrap_or_default();
        match log {
            LogAnswer::Lines(lines) => {
                let index = usize::from(pod.ends_with('1'));
                (200, lines[index].to_string())
            }
            LogAnswer::KubeletUnreachable => (
                500,
                status(
                    500,
                    "InternalError",
                    &format!(
                        "Get \"https://10.0.0.1:10250/containerLogs/ml/{pod}/tensorflow\": dial \
                         tcp 10.0.0.1:10250: connect: connection refused"
                    ),
                ),
            ),
            LogAnswer::Silence => return Some(stream),
        }
    } else if path.contains("/tfjobs/") {
        let message = "tfjobs.kubeflow.org \"other\" not found";
        (404, status(404, "NotFound", message))
    } else {
        // No other kind of training job is served: the API server names no object then.
        let unserved = "the server could not find the requested resource";
        let mut body: serde_json::Value =
            serde_json::from_str(&status(404, "NotFound", unserved)).expect("a Status");
        body["details"] = json!({});
        (404, body.to_string())
    };
    let reason = if code == 200 { "OK" } else { "Error" };
    let _ = write!(
        stream,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    None
}

fn status(code: u16, reason: &str, message: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
           "reason": reason, "message": message, "details": {"name": "mnist"}})
    .to_string()
}

fn job() -> serde_json::Value {
    json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
           "metadata": {"name": "mnist", "namespace": "ml", "uid": "job-uid"},
           "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}},
           "status": {"conditions": [{"type": "Running", "status": "True"}]}})
}

fn pod(index: u32) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("mnist-worker-{index}"), "namespace": "ml",
                        "uid": format!("uid-{index}"),
                        "labels": {"training.kubeflow.org/job-name": "mnist",
                                   "training.kubeflow.org/replica-type": "worker",
                                   "training.kubeflow.org/replica-index": index.to_string()}},
           "spec": {"nodeName": "node-1", "containers": [{"name": "tensorflow", "image": "tf:1"}]},
           "status": {"phase": "Running", "containerStatuses": [{"name": "tensorflow",
               "image": "tf:1", "imageID": "", "ready": true, "restartCount": 0,
               "state": {"running": {"startedAt": "2026-01-01T10:00:00Z"}}}]}})
}

/// A kubeconfig whose only context points at `server`, namespace `ml`.
fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: stand-in\n\
             clusters:\n- name: stand-in\n  cluster: {{server: \"{server}\"}}\n\
             contexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: me, namespace: ml}}\n\
             users:\n- name: me\n  user: {{token: t}}\n"
        ),
    )
    .expect("write the kubeconfig");
    path
}

fn mlkube_logs(log: LogAnswer, args: &[&str]) -> (Output, Duration) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = kubeconfig(dir.path(), &serve(log));
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .arg("logs")
        .args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("HOME", dir.path())
        .output()
        .expect("the mlkube binary runs");
    (output, started.elapsed())
}

#[test]
fn the_lines_of_every_replica_come_tagged_and_in_the_order_they_were_written() {
    let lines: &[&str] = &[
        "2026-01-01T10:00:01Z w0 step 1\n2026-01-01T10:00:03Z w0 step 2\n",
        "2026-01-01T10:00:02Z w1 step 1\n",
    ];
    let (output, _) = mlkube_logs(LogAnswer::Lines(lines), &["tfjob/mnist"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "worker-0 | w0 step 1\nworker-1 | w1 step 1\nworker-0 | w0 step 2\n"
    );
    let (output, _) = mlkube_logs(
        LogAnswer::Lines(lines),
        &["tfjobs/mnist", "--replica", "worker-1", "--timestamps"],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "worker-1 | 2026-01-01T10:00:02Z w1 step 1\n"
    );
}

#[test]
fn a_kubelet_the_api_server_cannot_reach_is_an_error_naming_the_node() {
    let (output, _) = mlkube_logs(LogAnswer::KubeletUnreachable, &["tfjob/mnist", "-f"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    // Both replicas' kubelets refuse; the streams run side by side, so either may fail first.
    let names_a_replica = ["worker-0", "worker-1"].iter().any(|replica| {
        stderr.contains(&format!(
            "the kubelet did not serve the logs of {replica} (pod ml/mnist-{replica}"
        ))
    });
    assert!(names_a_replica, "{stderr}");
    assert!(stderr.contains("node node-1"), "{stderr}");
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn a_log_that_never_starts_fails_after_the_request_timeout_instead_of_hanging() {
    for follow in [false, true] {
        let mut args = vec!["tfjob/mnist", "--request-timeout", "1s"];
        if follow {
            args.push("-f");
        }
        let (output, took) = mlkube_logs(LogAnswer::Silence, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "follow {follow}: {stderr}");
        // Both replicas' streams wait; followed side by side, either may time out first.
        let names_a_replica = ["worker-0", "worker-1"].iter().any(|replica| {
            stderr.contains(&format!(
                "did not start sending the logs of {replica} (pod ml/mnist-{replica}, node \
                 node-1) within 1s"
            ))
        });
        assert!(names_a_replica, "follow {follow}: {stderr}");
        assert!(stderr.contains("--request-timeout"), "{stderr}");
        assert!(
            took < Duration::from_secs(20),
            "follow {follow}: took {took:?}"
        );
    }
}

#[test]
fn a_job_of_no_such_kind_or_an_api_server_that_never_answers_is_an_error() {
    let (output, _) = mlkube_logs(LogAnswer::Silence, &["job/mnist"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`job` is not a kind of training job") && stderr.contains("hint: "),
        "{stderr}"
    );
    // Accepts connections and never says a word.
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = listener.incoming().flatten().collect();
        drop(held);
    });
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args([
            "logs",
            "tfjob/mnist",
            "--request-timeout",
            "1s",
            "--kubeconfig",
        ])
        .arg(kubeconfig(dir.path(), &url))
        .current_dir(dir.path())
        .output()
        .expect("the mlkube binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did not answer within 1s"), "{stderr}");
}

#[test]
fn a_missing_job_and_a_kind_the_cluster_does_not_serve_are_told_apart() {
    let (output, _) = mlkube_logs(LogAnswer::Silence, &["tfjob/other"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tfjob other not found (searched tfjobs.kubeflow.org in namespace ml)"),
        "{stderr}"
    );
    let (output, _) = mlkube_logs(LogAnswer::Silence, &["pytorchjob/mnist"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "the cluster does not serve pytorchjobs.kubeflow.org, so there is no pytorchjob \
             ml/mnist"
        ),
        "{stderr}"
    );
}

#[test]
fn outside_an_app_a_name_without_a_kind_says_how_to_name_a_job() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["logs", "mnist"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("the mlkube binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`mnist` is not KIND/NAME, and there is no app here")
            && stderr.contains("hint: name a training job as KIND/NAME (e.g. tfjob/mnist"),
        "{stderr}"
    );
}

#[test]
fn in_an_app_a_name_that_is_no_environment_says_how_to_read_a_component_or_a_job() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("platform");
    let mlkube = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(args)
            .arg("--app")
            .arg(&app)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .output()
            .expect("the mlkube binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.code(), stderr)
    };
    let init = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["init", "platform", "--empty"])
        .current_dir(dir.path())
        .output()
        .expect("the mlkube binary runs");
    assert!(init.status.success(), "{init:?}");
    assert_eq!(mlkube(&["component", "add", "tf-job", "digits"]).0, Some(0));
    let known = "nor an environment of the app (it has: local, dev, prod)";
    let (code, stderr) = mlkube(&["logs", "digits"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "mlkube: error: `digits` is not KIND/NAME, {known}\n  hint: `digits` is a component: \
             read its jobs in an environment, `mlkube logs local -c digits`\n"
        )
    );
    let (code, stderr) = mlkube(&["logs", "mnist2"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "mlkube: error: `mnist2` is not KIND/NAME, {known}\n  hint: for a job, name it as \
             KIND/NAME, e.g. tfjob/mnist2 (-n NAMESPACE for its namespace)\n"
        )
    );
}
