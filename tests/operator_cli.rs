//! `mlkube operator` as a user runs it, without a cluster: flag mistakes and a missing
//! kubeconfig are reported with a hint and exit code 2.

use std::process::Command;

fn operator(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .arg("operator")
        .args(args)
        .env("KUBECONFIG", "/nonexistent/mlkube-test-kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("the mlkube binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

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
fn no_usable_kubeconfig_says_how_to_give_one() {
    let (code, stderr) = operator(&[
        "--metrics-addr",
        "127.0.0.1:0",
        "--health-addr",
        "127.0.0.1:0",
    ]);
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
