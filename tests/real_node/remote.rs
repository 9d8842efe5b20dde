//! docs/images.md's way from the local cluster to one of your own, tried against the local cluster
//! as if it were a remote one: an environment added with `--server`, the images pushed with
//! `mlkube images push` to a registry the cluster pulls from under a path of the test's own,
//! `imageRegistry` pointing the environment there, then `diff` and `apply`. The object store
//! (one image, namespaced objects only) is the component applied; its pod runs the image the
//! nodes pulled by that registry's name.

use std::path::Path;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;

use crate::platform::{assert_success, mlkube, set_param};
use crate::support::{self, TestNamespace};

const COMPONENT: &str = "object-store";
const CHECKOUT: &str = env!("CARGO_MANIFEST_DIR");

/// The API server's address in the tests' kubeconfig: https://127.0.0.1:<port>.
fn server() -> String {
    let kubeconfig = std::fs::read_to_string(support::kubeconfig_path()).expect("read KUBECONFIG");
    let line = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "));
    line.expect("the kubeconfig names its server").to_string()
}

/// `mlkube ARGS` in `dir`, insisting that it succeeds; its stdout.
fn run(dir: &Path, args: &[&str]) -> String {
    let output = mlkube(dir, args);
    assert_success(&format!("mlkube {}", args.join(" ")), &output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn the_way_to_your_own_cluster_works_against_the_local_one_as_if_remote() {
    let registry = std::env::var("MLKUBE_REGISTRY").expect(
        "MLKUBE_REGISTRY is set: eval \"$(cluster/local-cluster.sh env)\" of a real-node cluster",
    );
    let ns = TestNamespace::new("real-remote").await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("remote-app");
    let path = app.to_str().expect("a UTF-8 path");
    run(dir.path(), &["init", path, "--namespace", &ns.name]);
    let to = format!("{registry}/{}", ns.name);

    run(
        &app,
        &[
            "env",
            "add",
            "remote",
            "--namespace",
            &ns.name,
            "--server",
            &server(),
        ],
    );
    run(
        &app,
        &[
            "images",
            "push",
            &to,
            COMPONENT,
            "--insecure",
            "--source",
            CHECKOUT,
        ],
    );
    set_param(&app, "global", "imageRegistry", &to, Some("remote"));
    let image = format!("{to}/object-store:{}", env!("CARGO_PKG_VERSION"));
    // Exit 1: there are changes, as with diff(1).
    let diff = mlkube(&app, &["diff", "remote", "-c", COMPONENT]);
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(diff.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains(&image),
        "the diff shows the image as the cluster will pull it:\n{shown}"
    );
    run(
        &app,
        &["apply", "remote", "-c", COMPONENT, "--timeout", "5m"],
    );

    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let pod = pods.get("object-store-0").await.expect("the store's pod");
    let images: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.image.clone())
        .collect();
    assert!(
        images.contains(&image),
        "the store runs {image}: {images:?}"
    );
    let events = Api::<Event>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().fields("involvedObject.name=object-store-0,reason=Pulled"))
        .await
        .expect("list the events");
    let pulled: Vec<String> = events.items.into_iter().filter_map(|e| e.message).collect();
    assert!(
        pulled.iter().any(|m| m.contains(&format!("\"{image}\""))),
        "a node pulled {image} from the registry: {pulled:?}"
    );
}
