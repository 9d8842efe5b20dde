//! KServe's Python SDK, unchanged, against the InferenceService controller on the real nodes:
//! `tests/real_node/kserve_sdk.py` run in a venv with the `kserve` wheel (its version pinned
//! here, with the Kubernetes client it needs), which drives set_credentials, create, wait_isvc_ready, get, a canary by patch, its
//! promotion by replace, and delete, and predicts at `status.url` with KServe's own REST client.
//! The venv lives in ~/.cache/mlkube (outside the checkout), made once and reused while it holds
//! that version.

use std::path::PathBuf;
use std::process::Command;

use crate::gateway::{gateway, gateway_url};
use crate::inference::store_access;
use crate::platform::NAMESPACE;
use crate::serving::digits_models_once;
use crate::support;
use crate::volume_support::object_store;

/// The SDK release the test drives, with the Kubernetes client its release locks (32.0.1, in
/// its uv.lock): with the newest client (37), which validates its arguments with pydantic, the
/// SDK's `create` is refused before any request ("Input should be a valid dictionary"), so a
/// KServe user pins it too.
const KSERVE: [&str; 2] = ["kserve==0.21.0", "kubernetes==32.0.1"];

/// A venv with the SDK, made (or brought to the pinned version) once.
fn venv() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .expect("HOME is set");
    let dir = home.join(".cache/mlkube/kserve-sdk-venv");
    let python = dir.join("bin/python3");
    let has = |python: &PathBuf| {
        let check = format!(
            "import importlib.metadata as m; \
             assert [f'{{p}}=={{m.version(p)}}' for p in ['kserve', 'kubernetes']] == {KSERVE:?}"
        );
        Command::new(python)
            .args(["-c", &check])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has(&python) {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&dir)
        .status()
        .expect("python3 runs");
    assert!(made.success(), "python3 -m venv {}", dir.display());
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(KSERVE)
        .status()
        .expect("pip runs");
    assert!(installed.success(), "pip install {KSERVE:?}");
    assert!(has(&python), "{KSERVE:?} in {}", dir.display());
    python
}

#[tokio::test]
async fn kserves_python_sdk_creates_waits_splits_promotes_and_deletes_unchanged() {
    object_store();
    gateway();
    digits_models_once().await;
    let client = support::client().await;
    let access = store_access(&client).await;
    let key = |name: &str| {
        let bytes =
            (access.keys.get(name)).unwrap_or_else(|| panic!("{name} in the store's read keys"));
        String::from_utf8(bytes.0.clone()).expect("a UTF-8 key")
    };
    let python = venv();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/real_node/kserve_sdk.py");
    let output = Command::new(python)
        .arg(script)
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["--namespace", NAMESPACE, "--gateway", &gateway_url()])
        .args(["--endpoint", &access.endpoint])
        .args([
            "--access-key",
            &key("AWS_ACCESS_KEY_ID"),
            "--secret-key",
            &key("AWS_SECRET_ACCESS_KEY"),
        ])
        .output()
        .expect("the SDK's script runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("KServe's SDK: {}", stdout.trim());
    assert!(
        output.status.success(),
        "the SDK's script failed:\n{stdout}\n{stderr}"
    );
}
