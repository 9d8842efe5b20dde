//! The serving component's route for TF Serving's REST API, as Traefik serves it: a path prefix
//! matches whole path segments, so `/v1/models/<model>:predict` (one segment, `<model>:predict`)
//! is not under the prefix `/v1/models/<model>`, and the route must match it exactly. The route
//! is the component's own, as `mlkube show` renders it; its backend, under the name and port the
//! route sends to, is a busybox `httpd` serving one file per path (no TF Serving image is built
//! here), so an answer from it says the gateway routed that path.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::gateway::{
    create_backend, delete_if_present, gateway, gateway_url, get_path, http_route_api,
};
use crate::platform::{NAMESPACE, assert_success, mlkube};
use crate::support::{self, clean_up, eventually};

const MODEL: &str = "tfpaths";
const TIMEOUT: Duration = Duration::from_secs(120);
/// Each path a client of TF Serving calls, and what the stand-in backend answers there.
const PATHS: [(&str, &str); 3] = [
    ("/v1/models/tfpaths:predict", "predicted"),
    ("/v1/models/tfpaths/metadata", "metadata"),
    (
        "/v1/models/tfpaths/versions/1:predict",
        "version 1 predicted",
    ),
];

/// The serving component's HTTPRoute for a TF Serving model on the platform's gateway, as an
/// app of its own renders it (nothing is applied from that app).
fn rendered_route() -> Value {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("app");
    let path = app.to_str().expect("a UTF-8 path");
    let init = ["init", path, "--empty", "--namespace", NAMESPACE];
    assert_success("mlkube init", &mlkube(dir.path(), &init));
    let params = ["runtime=tensorflow-serving", "gateway=gateway"];
    let mut add = vec!["component", "add", "serving", MODEL];
    for param in params {
        add.extend(["--param", param]);
    }
    assert_success("mlkube component add serving", &mlkube(&app, &add));
    let shown = mlkube(&app, &["show", "local", "-o", "json"]);
    assert_success("mlkube show", &shown);
    let objects: Value = serde_json::from_slice(&shown.stdout).expect("JSON");
    let objects = objects["items"].as_array().cloned().unwrap_or_default();
    objects
        .into_iter()
        .find(|o| o["kind"] == "HTTPRoute")
        .expect("the component renders an HTTPRoute")
}

/// A busybox `httpd` as the Service `name`, on `port`, serving [`PATHS`].
fn backend(name: &str, port: i64, busybox: &str) -> (Deployment, Service) {
    let files: String = PATHS
        .iter()
        .map(|(path, body)| {
            format!("mkdir -p \"$(dirname /tmp/www{path})\" && echo '{body}' >'/tmp/www{path}' && ")
        })
        .collect();
    let labels = json!({ "app.kubernetes.io/name": name });
    let deployment = json!({
        "metadata": { "name": name, "labels": labels },
        "spec": { "replicas": 1, "selector": { "matchLabels": labels }, "template": {
            "metadata": { "labels": labels },
            "spec": {
                "automountServiceAccountToken": false,
                "securityContext": { "runAsNonRoot": true, "runAsUser": 65532 },
                "containers": [{
                    "name": "httpd", "image": busybox,
                    "command": ["sh", "-c", format!("{files}exec httpd -f -p 8080 -h /tmp/www")],
                    "ports": [{ "name": "http", "containerPort": 8080 }],
                    "readinessProbe": { "tcpSocket": { "port": "http" }, "periodSeconds": 1 },
                    "securityContext": { "allowPrivilegeEscalation": false,
                        "capabilities": { "drop": ["ALL"] } },
                }],
            },
        }},
    });
    let service = json!({
        "metadata": { "name": name, "labels": labels },
        "spec": { "selector": labels, "ports": [{ "name": "rest", "port": port, "targetPort": "http" }] },
    });
    (
        serde_json::from_value(deployment).expect("a valid Deployment"),
        serde_json::from_value(service).expect("a valid Service"),
    )
}

/// Deletes the route and its backend when dropped.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let name = self.0.clone();
        clean_up(
            "the TF Serving route and its backend",
            |client| async move {
                let gone = DeleteParams::background();
                delete_if_present(http_route_api(&client).delete(MODEL, &gone).await)?;
                let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
                delete_if_present(deployments.delete(&name, &gone).await)?;
                let services = Api::<Service>::namespaced(client, NAMESPACE);
                delete_if_present(services.delete(&name, &gone).await)
            },
        );
    }
}

#[tokio::test]
async fn tf_servings_own_predict_url_is_routed_as_its_metadata_is() {
    gateway();
    let client = support::client().await;
    let route = rendered_route();
    let backend_ref = &route["spec"]["rules"][0]["backendRefs"][0];
    let name = backend_ref["name"]
        .as_str()
        .expect("a backend name")
        .to_owned();
    let port = backend_ref["port"].as_i64().expect("a backend port");
    let _cleanup = Cleanup(name.clone());
    let busybox = crate::storage::busybox_image(&client).await;
    create_backend(&client, backend(&name, port, &busybox)).await;
    let route: DynamicObject = serde_json::from_value(route).expect("a valid HTTPRoute");
    http_route_api(&client)
        .create(&PostParams::default(), &route)
        .await
        .expect("create the component's HTTPRoute");

    let address = gateway_url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    for (path, body) in PATHS {
        let answer = eventually(
            &format!("{path} answered through the gateway"),
            TIMEOUT,
            || {
                let address = address.clone();
                async move {
                    let (status, text) = get_path(&address, path).await?;
                    (status == 200 && text == body).then_some(text)
                }
            },
        )
        .await;
        assert_eq!(answer, body);
    }
}
