//! `mlkube operator` as a user runs it, without a cluster: flag mistakes and a missing
//! kubeconfig are reported with a hint and exit code 2.

use std::path::Path;
use std::process::Command;

fn operator(args: &[&str]) -> (i32, String) {
    operator_with_kubeconfig(Path::new("/nonexistent/mlkube-test-kubeconfig"), args)
}

/// `mlkube operator` with `KUBECONFIG` set to `kubeconfig`: exit code and stderr.
fn operator_with_kubeconfig(kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .arg("operator")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("the mlkube binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Free ports for the metrics and probes, so no run collides with another.
const FREE_PORTS: [&str; 4] = [
    "--metrics-addr",
    "127.0.0.1:0",
    "--health-addr",
    "127.0.0.1:0",
];

#[test]
fn a_listen_address_without_a_colon_is_rejected_with_a_hint() {
    let (code, stderr) = operator(&["--metrics-addr", "8080"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("`8080` is not a listen address"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: write it as `:8080`"), "{stderr}");
}

#[test]
fn an_unknown_framework_is_rejected_naming_the_frameworks() {
    let (code, stderr) = operator(&["--frameworks", "tensorflow,caffe"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "no framework caffe; the frameworks are tensorflow, pytorch, mxnet, xgboost, jax, paddle, mpi"
        ),
        "{stderr}"
    );
}

#[test]
fn a_frameworkcontroller_configuration_it_would_refuse_stops_the_operator_naming_the_field() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("frameworkcontroller.yaml");
    let bad = "podFailureSpec:\n- code: 205\n  podPatterns: [{reasonRegex: x}]\n";
    std::fs::write(&file, bad).expect("write the file");
    let path = file.to_str().expect("a UTF-8 path");
    let (code, stderr) = operator(&["--fc-config", path]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot use FrameworkController's configuration {path}: podFailureSpec[0]: code \
             205 is reserved"
        )) && stderr.contains("hint: correct the field it names"),
        "{stderr}"
    );
    let missing = dir.path().join("absent.yaml");
    let (code, stderr) = operator(&["--fc-config", missing.to_str().expect("UTF-8")]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("absent.yaml: No such file"), "{stderr}");
}

#[test]
fn no_usable_kubeconfig_says_how_to_give_one() {
    let (code, stderr) = operator(&FREE_PORTS);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("mlkube: error: cannot configure a client"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: pass --kubeconfig FILE, set KUBECONFIG, or run in a cluster"),
        "{stderr}"
    );
}

#[test]
fn a_kubeconfig_that_is_a_directory_is_named_and_its_cause_said_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().display().to_string();
    let args = [&FREE_PORTS[..], &["--kubeconfig", &path]].concat();
    let (code, stderr) = operator_with_kubeconfig(dir.path(), &args);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "mlkube: error: cannot read kubeconfig {path}
"
        )),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Is a directory").count(),
        1,
        "the cause once: {stderr}"
    );
    assert!(!stderr.contains("Os {"), "{stderr}");
}

#[test]
fn a_kubeconfig_that_is_not_yaml_says_where_and_ends_with_the_hint() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, "apiVersion: [\n").expect("the kubeconfig is written");
    let (code, stderr) = operator_with_kubeconfig(&kubeconfig, &FREE_PORTS);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with("mlkube: error: cannot configure a client from the environment\n"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("failed to parse kubeconfig YAML").count(),
        1,
        "the cause once: {stderr}"
    );
    assert!(
        stderr.ends_with("hint: pass --kubeconfig FILE, set KUBECONFIG, or run in a cluster\n"),
        "{stderr}"
    );
}

/// A stand-in API server on 127.0.0.1 for one job in namespace `ns`: it lists the job (with no
/// status) and no pods or services, leaves every watch open, and never answers a write. The
/// operator's first reconcile so hangs on writing the job's status: the situation the shutdown
/// timeout exists for. Only the real control plane can show the operator works; this shows
/// it stops when the API server does not answer.
fn unresponsive_api_server() -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("the bound address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("the socket clones"));
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    return;
                }
                // Headers up to the blank line; any body is left unread.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let (method, path) = request_line
                    .split_once(' ')
                    .map(|(m, rest)| (m, rest.split(' ').next().unwrap_or("")))
                    .unwrap_or(("", ""));
                let list = |api_version: &str, kind: &str, items: &str| {
                    format!(
                        r#"{{"apiVersion":"{api_version}","kind":"{kind}","metadata":{{"resourceVersion":"1"}},"items":[{items}]}}"#
                    )
                };
                let body = if method != "GET" || path.contains("watch=") {
                    None
                } else if path.ends_with("/apis/kubeflow.org/v1") {
                    // Discovery: the operator starts only the frameworks whose kind is served.
                    Some(
                        r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"kubeflow.org/v1","resources":[{"name":"tfjobs","singularName":"tfjob","namespaced":true,"kind":"TFJob","verbs":["get","list","watch"]}]}"#
                            .to_string(),
                    )
                } else if path.contains("/tfjobs") {
                    Some(list(
                        "kubeflow.org/v1",
                        "TFJobList",
                        r#"{"apiVersion":"kubeflow.org/v1","kind":"TFJob","metadata":{"name":"stuck","namespace":"ns","uid":"u-1","resourceVersion":"1"},"spec":{"tfReplicaSpecs":{"Worker":{"replicas":1,"template":{"spec":{"containers":[{"name":"tensorflow","image":"busybox"}]}}}}}}"#,
                    ))
                } else if path.contains("/pods") {
                    Some(list("v1", "PodList", ""))
                } else if path.contains("/services") {
                    Some(list("v1", "ServiceList", ""))
                } else {
                    None
                };
                let mut stream = stream;
                match body {
                    Some(body) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                    // Hold the connection open without a word.
                    None => loop {
                        std::thread::park();
                    },
                }
            });
        }
    });
    addr
}

/// A kubeconfig in `dir` whose one context is `server`, with no credentials.
fn kubeconfig_for(dir: &Path, server: &str) -> std::path::PathBuf {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stub\n  cluster:\n    server: {server}\nusers:\n- name: stub\n  user: {{}}\ncontexts:\n- name: stub\n  context:\n    cluster: stub\n    user: stub\ncurrent-context: stub\n"
        ),
    )
    .expect("the kubeconfig is written");
    kubeconfig
}

/// The lines `child` writes on its piped stderr, as they come.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr is piped");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    lines
}

/// `mlkube operator` for namespace `ns` of an `unresponsive_api_server`, once its reconcile of
/// `ns/stuck` has started (and hangs); with the log lines seen so far and those to come.
struct StuckOperator {
    child: std::process::Child,
    seen: Vec<String>,
    lines: std::sync::mpsc::Receiver<String>,
    dir: std::path::PathBuf,
}

impl StuckOperator {
    fn start(test: &str) -> StuckOperator {
        StuckOperator::start_with(test, &[])
    }

    /// As `start`, with more arguments for `mlkube operator`.
    fn start_with(test: &str, args: &[&str]) -> StuckOperator {
        let server = unresponsive_api_server();
        let dir = std::env::temp_dir().join(format!("mlkube-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let kubeconfig = kubeconfig_for(&dir, &format!("http://{server}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(["operator", "--namespace", "ns", "--shutdown-timeout", "1s"])
            .args(FREE_PORTS)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .env("RUST_LOG", "mlkube=debug")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the mlkube binary starts");
        // The reconcile has started once the operator logs it (JSON lines on a pipe).
        let lines = stderr_lines(&mut child);
        let wait = std::time::Duration::from_secs(30);
        let mut seen = Vec::new();
        let started = std::time::Instant::now();
        while !seen.iter().any(|l: &String| l.contains("ns/stuck")) {
            match lines.recv_timeout(wait.saturating_sub(started.elapsed())) {
                Ok(line) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "the operator never started reconciling ns/stuck:\n{}",
                        seen.join("\n")
                    );
                }
            }
        }
        StuckOperator {
            child,
            seen,
            lines,
            dir,
        }
    }
}

impl Drop for StuckOperator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_reconcile_stuck_on_an_unresponsive_api_server_does_not_outlive_the_shutdown_timeout() {
    let mut operator = StuckOperator::start("shutdown");
    let sent = Command::new("kill")
        .args(["-TERM", &operator.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let signalled = std::time::Instant::now();
    let status = loop {
        if let Some(status) = operator
            .child
            .try_wait()
            .expect("the child can be waited for")
        {
            break status;
        }
        assert!(
            signalled.elapsed() < std::time::Duration::from_secs(15),
            "the operator outlived its 1 s shutdown timeout by far"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Every line it wrote before it exited: the reader thread may lag behind on a busy machine,
    // and ends at the pipe's end.
    let lines: Vec<String> = operator.lines.iter().collect();
    operator.seen.extend(lines);
    let log = operator.seen.join("\n");
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains("reconciles still running after the shutdown timeout"),
        "{log}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn the_running_operator_keeps_transparent_huge_pages_off() {
    let operator = StuckOperator::start("thp");
    let status = std::fs::read_to_string(format!("/proc/{}/status", operator.child.id()))
        .expect("the operator's /proc status reads");
    let thp = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(str::trim);
    assert_eq!(thp, Some("0"), "{status}");
}

#[test]
fn log_format_json_writes_one_json_object_per_line() {
    let operator = StuckOperator::start_with("log-json", &["--log-format", "json"]);
    assert!(operator.seen.len() >= 2, "{:?}", operator.seen);
    for line in &operator.seen {
        let entry: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"));
        for field in ["timestamp", "level", "message", "target"] {
            assert!(entry[field].is_string(), "no {field} at top level: {line}");
        }
        assert!(
            entry.get("fields").is_none(),
            "fields are not nested: {line}"
        );
    }
    let starting = operator
        .seen
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["message"] == "starting the training-job operator")
        .expect("the operator logs that it starts");
    assert_eq!(starting["level"], "INFO");
    assert_eq!(starting["target"], "mlkube::operator");
    assert_eq!(
        starting["namespace"], "ns",
        "the event's fields are at top level"
    );
    let reconcile = operator
        .seen
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["span"]["job"] == "ns/stuck")
        .expect("a line inside the reconcile of ns/stuck");
    assert!(reconcile["message"].is_string(), "{reconcile}");
}

#[test]
fn log_format_text_writes_readable_lines() {
    let operator = StuckOperator::start_with("log-text", &["--log-format", "text"]);
    let starting = operator
        .seen
        .iter()
        .find(|l| l.contains("starting the training-job operator"))
        .expect("the operator logs that it starts");
    assert!(!starting.starts_with('{'), "{starting}");
    assert!(starting.contains(" INFO "), "{starting}");
    assert!(starting.contains("namespace=\"ns\""), "{starting}");
}

#[test]
fn frameworkcontroller_in_frameworks_is_the_old_spelling_of_the_fc_controller() {
    let flags = ["--frameworks", "tensorflow,frameworkcontroller"];
    let operator = StuckOperator::start_with("fc-old-spelling", &flags);
    let note = (operator.seen.iter())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| {
            e["level"] == "WARN"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("deprecated"))
        })
        .expect("a warning that the spelling is deprecated");
    assert!(
        note["message"]
            .as_str()
            .unwrap()
            .contains("--controllers training,fc"),
        "{note}"
    );
    let starting = (operator.seen.iter())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["message"] == "starting the training-job operator")
        .expect("the operator logs that it starts");
    assert_eq!(starting["controllers"], "training,fc", "{starting}");
}

#[test]
fn an_unknown_log_format_is_rejected_naming_the_formats() {
    let (code, stderr) = operator(&["--log-format", "yaml"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("[possible values: text, json]"), "{stderr}");
}

/// A kubeconfig in `dir` for a server on 127.0.0.1 that refuses connections: a port that was
/// free a moment ago and has no listener now.
fn kubeconfig_of_a_refusing_server(dir: &Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    kubeconfig_for(dir, &format!("http://127.0.0.1:{port}"))
}

/// The operator keeps retrying a server that refuses it; its warnings say why, down to the
/// refused connection, on one line and without a debug dump.
#[test]
fn against_a_server_that_refuses_the_warnings_name_the_refused_connection() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = kubeconfig_of_a_refusing_server(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["operator", "--log-format", "json", "--namespace", "ns"])
        .args(FREE_PORTS)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the mlkube binary starts");
    let lines = stderr_lines(&mut child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    let warning = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            let _ = child.kill();
            panic!("no warning from mlkube::operator:\n{}", seen.join("\n"));
        };
        seen.push(line.clone());
        let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let ours = entry["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("mlkube::operator"));
        if ours && entry["level"] == "WARN" {
            break entry;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let error = warning["error"].as_str().unwrap_or_default();
    assert!(error.contains("Connection refused"), "{warning}");
    assert_eq!(
        error.matches("client error (Connect)").count(),
        1,
        "each cause once: {warning}"
    );
    assert!(!error.contains("Os {"), "{warning}");
}
