//! The apply's wait on the real control plane when a Deployment's image cannot be pulled: it is
//! reported failed, with the image and the kubelet's message, as soon as its pod says so, and
//! the apply exits 3 without waiting out its timeout.
//!
//! kwok runs every pod it is given, so the Deployment's pod is held to no node and the test
//! plays the kubelet, writing the waiting reason into the pod's status as a kubelet that cannot
//! pull the image does.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{self, TestNamespace, eventually};

const IMAGE: &str = "example.invalid/serving:2.18.0";

/// An upper bound only: a loaded 2-core machine needs room for the controllers and the binary.
const TIMEOUT: Duration = Duration::from_secs(90);

/// A Deployment `serving` whose pod no node takes, as YAML for `--manifest`.
fn manifest(ns: &str) -> String {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "serving", "namespace": ns,
                     "labels": {"mlkube.io/component": "serving"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serving"}},
                 "template": {"metadata": {"labels": {"app": "serving"}},
                              "spec": {"nodeSelector": {"mlkube.io/no-such-node": "true"},
                                       "containers": [{"name": "serving", "image": IMAGE}]}}}});
    serde_yaml::to_string(&deployment).expect("YAML")
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_fails_the_apply_without_waiting_out_its_timeout() {
    let ns = TestNamespace::new("image-pull").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let path = tmp.path().join("objects.yaml");
    std::fs::write(&path, manifest(&ns.name)).expect("write the manifest");
    let started = Instant::now();
    let mut apply = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["apply", &ns.name, "--manifest"])
        .arg(&path)
        .args(["--timeout", "10m"])
        .current_dir(tmp.path())
        .env("KUBECONFIG", support::kubeconfig_path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mlkube binary starts");

    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let pod = eventually("the Deployment's pod", TIMEOUT, || async {
        let list = pods
            .list(&ListParams::default().labels("app=serving"))
            .await
            .ok()?;
        list.items.into_iter().next()?.metadata.name
    })
    .await;
    let message = format!(
        "failed to pull and unpack image \"{IMAGE}\": failed to resolve reference: no such host"
    );
    let status = json!({"status": {"containerStatuses": [{
        "name": "serving", "image": IMAGE, "imageID": "", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ErrImagePull", "message": message}}}]}});
    pods.patch_status(&pod, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("the pod's status is patched");

    let code = loop {
        if let Some(status) = apply.try_wait().expect("the apply runs") {
            break status.code();
        }
        if started.elapsed() > TIMEOUT {
            let _ = apply.kill();
            panic!("the apply still waits after {TIMEOUT:?}, with a 10m timeout");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut stderr = String::new();
    apply
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr is read");
    assert_eq!(code, Some(3), "{stderr}");
    // It stopped as the object failed, not at the timeout, and says so.
    assert!(stderr.contains("mlkube: 1 object(s) failed:"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Deployment.apps {}/serving: image {IMAGE} cannot be pulled: {message} \
             (ErrImagePull); hint: ",
            ns.name
        )),
        "{stderr}"
    );
}
