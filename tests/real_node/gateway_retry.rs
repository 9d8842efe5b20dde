//! The gateway tries a request again when its connection to a backend is refused before a byte
//! of it went out: one Service, two Ready pods, one of which listens on nothing. Without the
//! retry, about every second request through the gateway would be Traefik's 502; with it, every
//! one is answered by the pod that serves.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use crate::gateway::{
    backend, create_backend, delete_if_present, gateway, gateway_url, get_at, http_route_api,
};
use crate::platform::{GATEWAY, NAMESPACE};
use crate::support::{self, clean_up, eventually};

/// The Service and the Deployment of the pod that serves.
const NAME: &str = "retry-refused";
/// The pod the Service also selects, Ready but with no listener: every connection is refused.
const CLOSED: &str = "retry-refused-closed";
const HOST: &str = "retry-refused.test";
const BODY: &str = "served";
const REQUESTS: u32 = 60;
const TIMEOUT: Duration = Duration::from_secs(180);

/// A pod with the Service's labels and its port's name, Ready at once (its probe asks nothing
/// of the port), that never listens on the port.
fn closed_pod(busybox: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": CLOSED, "labels": { "app.kubernetes.io/name": NAME } },
        "spec": {
            "automountServiceAccountToken": false,
            // `sleep` as the container's first process ignores SIGTERM: no grace to wait out.
            "terminationGracePeriodSeconds": 1,
            "securityContext": { "runAsNonRoot": true, "runAsUser": 65532 },
            "containers": [{
                "name": "closed",
                "image": busybox,
                "command": ["sleep", "3600"],
                "ports": [{ "name": "http", "containerPort": 8080 }],
                "readinessProbe": { "exec": { "command": ["true"] }, "periodSeconds": 1 },
                "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
            }],
        },
    }))
    .expect("a valid Pod")
}

fn route() -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": { "name": NAME },
        "spec": {
            "parentRefs": [{ "name": GATEWAY }],
            "hostnames": [HOST],
            "rules": [{ "backendRefs": [{ "name": NAME, "port": 80 }] }],
        },
    }))
    .expect("a valid HTTPRoute")
}

/// Deletes the route, the pods and the Service when dropped, also when the test fails.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        clean_up("the retry test's route and backends", |client| async move {
            let gone = DeleteParams::background();
            delete_if_present(http_route_api(&client).delete(NAME, &gone).await)?;
            let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
            delete_if_present(deployments.delete(NAME, &gone).await)?;
            let services = Api::<Service>::namespaced(client.clone(), NAMESPACE);
            delete_if_present(services.delete(NAME, &gone).await)?;
            let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
            delete_if_present(pods.delete(CLOSED, &gone).await)
        });
    }
}

#[tokio::test]
async fn a_refused_connection_is_tried_again_on_the_next_backend() {
    let url = gateway_url();
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    gateway();
    let client = support::client().await;
    let busybox = crate::storage::busybox_image(&client).await;
    let _cleanup = Cleanup;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    eventually(
        "the closed pod of an earlier run to be gone",
        TIMEOUT,
        || async { pods.get_opt(CLOSED).await.ok()?.is_none().then_some(()) },
    )
    .await;
    // The closed pod is Ready before the serving one exists: any view of the Service's
    // endpoints that holds the serving pod holds the closed one too.
    pods.create(&PostParams::default(), &closed_pod(&busybox))
        .await
        .expect("create the closed pod");
    eventually("the closed pod to be Ready", TIMEOUT, || async {
        support::pod_is_ready(&pods.get(CLOSED).await.ok()?).then_some(())
    })
    .await;
    create_backend(&client, backend(NAME, BODY, &busybox)).await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    eventually("the serving pod to be Ready", TIMEOUT, || async {
        (deployments.get(NAME).await.ok()?.status?.ready_replicas? == 1).then_some(())
    })
    .await;
    http_route_api(&client)
        .create(&PostParams::default(), &route())
        .await
        .expect("create the HTTPRoute");
    // Until a gateway pod has the route, the fallback answers 404. Once ten answers in a row
    // were not, every pod has it (which pod a request reaches is random): served or, without
    // the retry, a 502 from the closed pod.
    let in_a_row = std::cell::Cell::new(0);
    eventually("every gateway pod to route the host", TIMEOUT, || async {
        let routed = matches!(get_at(address, HOST, "/").await, Some((status, _)) if status != 404);
        in_a_row.set(if routed { in_a_row.get() + 1 } else { 0 });
        (in_a_row.get() >= 10).then_some(())
    })
    .await;

    let mut failed = Vec::new();
    for n in 0..REQUESTS {
        let answer = get_at(address, HOST, "/").await;
        if answer != Some((200, BODY.to_owned())) {
            failed.push(format!("request {n}: {answer:?}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {REQUESTS} requests through {url} were not answered by the serving pod: {failed:?}",
        failed.len()
    );
}
