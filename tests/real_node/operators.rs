//! Two operators on one cluster: the platform runs a cluster-wide operator (the shared app's
//! `local` environment); applying a second app's operator beside it is refused before anything
//! is written, naming the first and how to scope one, by `apply` and its `--dry-run` alike. A
//! second operator scoped to its own namespace would still share its jobs with the
//! cluster-wide one, so it is refused too.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;

use crate::platform::{self, assert_success, mlkube, set_param};
use crate::support::TestNamespace;

#[tokio::test]
async fn a_second_operator_beside_the_platforms_cluster_wide_one_is_refused_and_nothing_written() {
    platform::app();
    let ns = TestNamespace::new("real-second-op").await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("second");
    let path = app.to_str().expect("a UTF-8 path");
    let output = mlkube(dir.path(), &["init", path, "--namespace", &ns.name]);
    assert_success("mlkube init", &output);
    let holder = format!("environment {}/local", platform::APP_NAME);
    for scope in ["cluster", "namespace"] {
        set_param(&app, "training-operator", "deploymentScope", scope, None);
        for dry_run in [true, false] {
            let mut args = vec!["apply", "local", "-c", "training-operator"];
            if dry_run {
                args.push("--dry-run");
            }
            let output = mlkube(&app, &args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("already runs one cluster-wide of {holder}"))
                    && stderr.contains(&format!("Deployment.apps {}/", platform::NAMESPACE)),
                "{scope} {args:?}: {stderr}"
            );
            assert!(
                stderr.contains("hint: that operator already runs"),
                "{stderr}"
            );
        }
    }
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        deployments
            .get_opt("training-operator")
            .await
            .expect("read the Deployment")
            .is_none(),
        "nothing was written"
    );
}
