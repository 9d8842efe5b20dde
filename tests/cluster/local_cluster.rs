//! What `cluster/local-cluster.sh status` says of the cluster the tests run on: the operator
//! counts as found when its component's Deployment is in the cluster, not only when one runs
//! beside it.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::support::TestNamespace;

/// `cluster/local-cluster.sh ARGS` with the environment of the tests (their cluster's state
/// directory and port): its stdout.
fn local_cluster(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/local-cluster.sh");
    let output = Command::new(script)
        .args(args)
        .output()
        .expect("cluster/local-cluster.sh runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn status_names_the_operator_deployment_in_the_cluster() {
    let test = TestNamespace::new("local-cluster-status").await;
    // As the training-operator component renders it (its pods' name label is the prototype's
    // first name); what it runs does not matter here.
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "training-operator",
                     "labels": {"app.kubernetes.io/name": "tf-job-operator"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "tf-job-operator"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "tf-job-operator"}},
                "spec": {"containers": [{"name": "operator", "image": "mlkube/operator:0.1.0"}]}
            }
        }
    }))
    .expect("a Deployment");
    Api::<Deployment>::namespaced(test.client.clone(), &test.name)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create the Deployment");

    let status = local_cluster(&["status"]);
    let name = format!("Deployment {}/training-operator", test.name);
    let said = match local_cluster(&["node-kind"]).trim() {
        "real" => format!("running in the cluster: {name}, "),
        _ => format!(
            "{name} is in the cluster, but kwok runs no container: only an operator beside the \
             cluster runs jobs"
        ),
    };
    assert!(status.contains(&said), "no `{said}` in:\n{status}");
}
