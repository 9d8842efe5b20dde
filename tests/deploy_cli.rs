//! The cluster verbs through the built binary, where no cluster is needed: the wrong-cluster
//! refusal happens before anything is sent.

use std::path::Path;
use std::process::{Command, Output};

const PINNED: &str = "https://prod.example.invalid:6443";

fn mlkube(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(args)
        .current_dir(dir)
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the mlkube binary runs")
}

/// An app pinned to the `PINNED` server, and a kubeconfig whose only context points elsewhere.
fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let init = mlkube(
        tmp.path(),
        &["init", app.to_str().unwrap(), "--server", PINNED],
    );
    assert!(
        init.status.success(),
        "init failed: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: laptop\n\
         clusters:\n- name: laptop\n  cluster: {server: \"https://127.0.0.1:1\"}\n\
         contexts:\n- name: laptop\n  context: {cluster: laptop, user: me}\n\
         users:\n- name: me\n  user: {token: t}\n",
    )
    .expect("write the kubeconfig");
    (tmp, app, kubeconfig)
}

#[test]
fn every_cluster_verb_refuses_an_environment_pinned_to_another_server() {
    let (_tmp, app, kubeconfig) = setup();
    let kubeconfig = kubeconfig.to_str().unwrap();
    for verb in [
        vec!["diff", "local"],
        vec!["apply", "local", "--yes"],
        vec!["prune", "local", "--yes"],
        vec!["delete", "local", "--yes"],
        vec!["validate", "local"],
    ] {
        let mut args = verb.clone();
        args.extend(["--kubeconfig", kubeconfig]);
        let out = mlkube(&app, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {stderr}");
        assert!(
            stderr.contains(PINNED),
            "{verb:?} names the pinned server: {stderr}"
        );
        assert!(
            stderr.contains("`laptop` points at https://127.0.0.1:1"),
            "{verb:?} names what was found: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "{verb:?} printed data: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn the_context_flag_cannot_send_a_pinned_environment_elsewhere() {
    let (_tmp, app, kubeconfig) = setup();
    let out = mlkube(
        &app,
        &[
            "diff",
            "local",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--context",
            "laptop",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refusing to use context `laptop`"),
        "{stderr}"
    );
    assert!(stderr.contains("hint:"), "{stderr}");
}

/// A kubeconfig whose only context points at `server`.
fn kubeconfig_for(dir: &Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("silent.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: silent\n\
             clusters:\n- name: silent\n  cluster: {{server: \"{server}\", insecure-skip-tls-verify: true}}\n\
             contexts:\n- name: silent\n  context: {{cluster: silent, user: me}}\n\
             users:\n- name: me\n  user: {{token: t}}\n"
        ),
    )
    .expect("write the kubeconfig");
    path
}

#[test]
fn an_api_server_that_never_answers_fails_after_the_request_timeout() {
    // Accepts every connection and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let init = mlkube(tmp.path(), &["init", app.to_str().unwrap()]);
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    for scheme in ["https", "http"] {
        let kubeconfig = kubeconfig_for(tmp.path(), &format!("{scheme}://127.0.0.1:{port}"));
        for verb in ["diff", "apply", "prune", "delete", "validate", "status"] {
            let out = mlkube(
                &app,
                &[
                    verb,
                    "local",
                    "--yes",
                    "--request-timeout",
                    "1s",
                    "--kubeconfig",
                    kubeconfig.to_str().unwrap(),
                ]
                .into_iter()
                .filter(|a| *a != "--yes" || matches!(verb, "apply" | "prune" | "delete"))
                .collect::<Vec<_>>(),
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{scheme} {verb}: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "127.0.0.1:{port} (context `silent`) did not answer within 1s"
                )),
                "{scheme} {verb}: {stderr}"
            );
            assert!(
                stderr.contains("--request-timeout"),
                "{scheme} {verb}: {stderr}"
            );
        }
    }
}

#[test]
fn a_failed_apply_prune_or_delete_with_json_output_still_prints_one_document() {
    // Accepts every connection and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let init = mlkube(tmp.path(), &["init", app.to_str().unwrap()]);
    assert!(init.status.success());
    let kubeconfig = kubeconfig_for(tmp.path(), &format!("https://127.0.0.1:{port}"));
    for verb in ["apply", "prune", "delete"] {
        let out = mlkube(
            &app,
            &[
                verb,
                "local",
                "--yes",
                "-o",
                "json",
                "--request-timeout",
                "1s",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb}: {stderr}");
        let document: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{verb}: one JSON document on stdout ({e}): {stderr}"));
        let message = document["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("did not answer within 1s"),
            "{verb}: {document:#}"
        );
        assert!(
            document["error"]["hints"][0]
                .as_str()
                .is_some_and(|h| h.contains("--request-timeout")),
            "{verb}: {document:#}"
        );
        assert_eq!(document["objects"], serde_json::json!([]), "{verb}");
        assert_eq!(document["interrupted"], false, "{verb}");
    }
}

/// A KUBECONFIG naming a file that is gone (a local cluster's, after its `down`) says so and how
/// to get one back, whether it comes from the environment or from --kubeconfig.
#[test]
fn a_kubeconfig_that_is_gone_says_the_cluster_may_be_down_and_how_to_start_it() {
    let (tmp, app, _) = setup();
    let gone = tmp.path().join("mlkube-local-cluster/admin.kubeconfig");
    let gone_name = gone.to_str().unwrap();
    let from_env = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["diff", "local"])
        .current_dir(&app)
        .env("KUBECONFIG", &gone)
        .env("HOME", tmp.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("the mlkube binary runs");
    let from_flag = mlkube(&app, &["diff", "local", "--kubeconfig", gone_name]);
    for out in [from_env, from_flag] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("cannot read kubeconfig"), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "hint: {gone_name} does not exist; if it was a local cluster's, that cluster is down: \
                 `cluster/local-cluster.sh up` starts it again"
            )),
            "{stderr}"
        );
    }
}
