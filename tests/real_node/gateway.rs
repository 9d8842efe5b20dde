//! The gateway component on the real node: Traefik, applied by `mlkube apply` into the
//! platform's app with the `local` environment's NodePort 30080, serves an HTTPRoute whose two
//! backends are weighted 80/20, reached from the host through the cluster's gateway forwarder
//! (`MLKUBE_GATEWAY_URL`, which `cluster/local-cluster.sh env` prints), with the least RBAC
//! the component grants and no request of Traefik's forbidden.

use std::cell::Cell;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, LogParams, PostParams,
};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::platform::{GATEWAY, NAMESPACE, app};
use crate::support::{self, clean_up, eventually};

const ROUTE: &str = "weighted-split";
/// The route's host name: the route matches it alone, so other tests' routes on the same
/// Gateway never take these requests.
const HOST: &str = "weighted-split.test";
/// (backend, weight, the body it answers).
const BACKENDS: [(&str, u32, &str); 2] = [
    ("weighted-split-a", 80, "backend a"),
    ("weighted-split-b", 20, "backend b"),
];
const REQUESTS: u32 = 400;
/// Answers in a row from a backend before the count begins (see the test).
const SETTLED: u32 = 20;
const TIMEOUT: Duration = Duration::from_secs(180);

/// The gateway component in the platform's app, its `local` environment's Service a NodePort on
/// 30080, applied once by `mlkube apply` (which waits until Traefik is Ready) when the app is
/// set up, before the operator whose InferenceServices' routes hang on it. Two Traefik pods,
/// spread over the nodes, so that a drain of one node leaves the routes served (drain.rs).
pub fn gateway() {
    app();
}

/// `http://127.0.0.1:<port>`, the host's way to the node port.
pub fn gateway_url() -> String {
    std::env::var("MLKUBE_GATEWAY_URL").unwrap_or_else(|_| {
        panic!(
            "MLKUBE_GATEWAY_URL is not set: run `eval \"$(cluster/local-cluster.sh env)\"` for a \
             cluster with a real node (MLKUBE_CLUSTER_NODE=real)"
        )
    })
}

pub fn http_route_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk))
}

/// A Deployment of one busybox `httpd` answering `body` on port 8080, and its Service on 80.
pub fn backend(name: &str, body: &str, busybox: &str) -> (Deployment, Service) {
    let labels = json!({ "app.kubernetes.io/name": name });
    let deployment = json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "automountServiceAccountToken": false,
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 65532 },
                    "containers": [{
                        "name": "httpd",
                        "image": busybox,
                        "command": ["sh", "-c", "mkdir -p /tmp/www && echo \"$BODY\" >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"],
                        "env": [{ "name": "BODY", "value": body }],
                        "ports": [{ "name": "http", "containerPort": 8080 }],
                        "readinessProbe": { "httpGet": { "path": "/", "port": "http" }, "periodSeconds": 1 },
                        "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
                    }],
                },
            },
        },
    });
    let service = json!({
        "metadata": { "name": name, "labels": labels },
        "spec": { "selector": labels, "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] },
    });
    (
        serde_json::from_value(deployment).expect("a valid Deployment"),
        serde_json::from_value(service).expect("a valid Service"),
    )
}

/// Creates a backend's Deployment and Service in the platform's namespace.
pub async fn create_backend(client: &Client, (deployment, service): (Deployment, Service)) {
    let name = deployment.metadata.name.clone().unwrap_or_default();
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap_or_else(|e| panic!("create the Deployment {name}: {e}"));
    Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &service)
        .await
        .unwrap_or_else(|e| panic!("create the Service {name}: {e}"));
}

fn route() -> DynamicObject {
    let backend_refs: Vec<Value> = BACKENDS
        .iter()
        .map(|(name, weight, _)| json!({ "name": name, "port": 80, "weight": weight }))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": { "name": ROUTE },
        "spec": {
            "parentRefs": [{ "name": GATEWAY }],
            "hostnames": [HOST],
            "rules": [{ "backendRefs": backend_refs }],
        },
    }))
    .expect("a valid HTTPRoute")
}

/// Deletes the route and the backends when dropped, also when the test fails: they live in the
/// platform's namespace, which outlives the test.
struct Backends;

impl Drop for Backends {
    fn drop(&mut self) {
        clean_up("the weighted route and its backends", |client| async move {
            let gone = DeleteParams::background();
            delete_if_present(http_route_api(&client).delete(ROUTE, &gone).await)?;
            for (name, _, _) in BACKENDS {
                let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
                delete_if_present(deployments.delete(name, &gone).await)?;
                let services = Api::<Service>::namespaced(client.clone(), NAMESPACE);
                delete_if_present(services.delete(name, &gone).await)?;
            }
            Ok(())
        });
    }
}

pub fn delete_if_present<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// One GET of `/` with the route's host name through the gateway: the status code and the body,
/// or None when the connection fails. The body is read to its Content-Length, not to the
/// connection's end, which the host's forwarder (socat) delays by half a second.
async fn get(address: &str) -> Option<(u16, String)> {
    get_path(address, "/").await
}

/// [`get`] of `path`.
pub async fn get_path(address: &str, path: &str) -> Option<(u16, String)> {
    get_at(address, HOST, path).await
}

/// [`get`] of `path` with the host name `host`.
pub async fn get_at(address: &str, host: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = stream.read(&mut chunk).await.ok()?;
        response.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&response);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            });
            if read == 0 || length.is_some_and(|n| body.len() >= n) {
                let status = head.split_whitespace().nth(1)?.parse().ok()?;
                return Some((status, body.trim().to_owned()));
            }
        }
        if read == 0 {
            return None;
        }
    }
}

/// The `status` of the condition `kind` that the gateway's controller wrote for the route.
fn route_condition(route: &DynamicObject, kind: &str) -> Option<String> {
    route.data["status"]["parents"]
        .as_array()?
        .iter()
        .filter(|p| p["controllerName"] == "traefik.io/gateway-controller")
        .flat_map(|p| p["conditions"].as_array().into_iter().flatten())
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(str::to_owned))
}

/// The gateway's pods.
async fn gateway_pods(client: &Client) -> Vec<Pod> {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let selector = format!("app.kubernetes.io/name=gateway,app.kubernetes.io/instance={GATEWAY}");
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list the gateway's pods");
    listed.items
}

/// Everything Traefik's containers logged since they started.
async fn traefik_logs(client: &Client) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let mut logs = String::new();
    for pod in gateway_pods(client).await {
        let name = pod.metadata.name.expect("a pod has a name");
        let params = LogParams {
            container: Some("traefik".into()),
            ..LogParams::default()
        };
        logs += &pods
            .logs(&name, &params)
            .await
            .unwrap_or_else(|e| panic!("the logs of {name}: {e}"));
    }
    logs
}

#[tokio::test]
async fn an_httproute_splits_requests_by_weight_through_the_hosts_gateway_port() {
    let url = gateway_url();
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    gateway();
    let client = support::client().await;
    let busybox = crate::storage::busybox_image(&client).await;
    let _cleanup = Backends;
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    for (name, _, body) in BACKENDS {
        create_backend(&client, backend(name, body, &busybox)).await;
    }
    let routes = http_route_api(&client);
    routes
        .create(&PostParams::default(), &route())
        .await
        .expect("create the HTTPRoute");

    eventually("both backends Ready", TIMEOUT, || async {
        for (name, _, _) in BACKENDS {
            let deployment = deployments.get(name).await.ok()?;
            (deployment.status?.ready_replicas? == 1).then_some(())?;
        }
        Some(())
    })
    .await;
    eventually(
        "Traefik to accept the route and resolve its backends",
        TIMEOUT,
        || async {
            let route = routes.get(ROUTE).await.ok()?;
            let accepted = route_condition(&route, "Accepted")? == "True";
            let resolved = route_condition(&route, "ResolvedRefs")? == "True";
            (accepted && resolved).then_some(())
        },
    )
    .await;
    // Traefik takes the route and each backend's endpoints from separate events, and each of
    // its pods (one per node) on its own: wait until both backends have answered through it,
    // and the last SETTLED requests in a row were answered by one of them, before counting.
    // Which pod a request reaches is random, so SETTLED answers in a row all from one pod whose
    // view is complete while the other's is not has odds of 2^-(SETTLED-1).
    let seen = [Cell::new(false), Cell::new(false)];
    let in_a_row = Cell::new(0);
    eventually(
        "both backends to answer through every gateway pod",
        TIMEOUT,
        || async {
            let answer = get(&address).await;
            let backend = answer.and_then(|(status, body)| {
                let i = BACKENDS.iter().position(|(_, _, b)| *b == body)?;
                (status == 200).then_some(i)
            });
            match backend {
                Some(i) => {
                    seen[i].set(true);
                    in_a_row.set(in_a_row.get() + 1);
                }
                None => in_a_row.set(0),
            }
            (seen.iter().all(Cell::get) && in_a_row.get() >= SETTLED).then_some(())
        },
    )
    .await;

    let mut answers = [0u32; 2];
    for n in 0..REQUESTS {
        let (status, body) = get(&address)
            .await
            .unwrap_or_else(|| panic!("request {n} through {url}: no answer"));
        assert_eq!(status, 200, "request {n} through {url}: {body}");
        let i = BACKENDS
            .iter()
            .position(|(_, _, b)| *b == body)
            .unwrap_or_else(|| panic!("request {n}: an answer from neither backend: {body:?}"));
        answers[i] += 1;
    }
    for ((name, weight, _), count) in BACKENDS.iter().zip(answers) {
        let share = f64::from(count) / f64::from(REQUESTS);
        let expected = f64::from(*weight) / 100.0;
        assert!(
            (share - expected).abs() <= 0.05,
            "{name} (weight {weight}) answered {count} of {REQUESTS} requests ({share:.3}), \
             expected {expected:.2} ± 0.05; all: {answers:?}"
        );
    }

    let logs = traefik_logs(&client).await;
    let errors: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(" ERR ") && l.contains("providerName=http"))
        .collect();
    assert!(
        errors.is_empty(),
        "Traefik could not take the routes gateway-routes served it:\n{}",
        errors.join("\n")
    );
    assert_traefik_holds_no_token(&client).await;
}

/// No gateway pod gives Traefik a ServiceAccount token (the API server mounts one in every
/// container unless the pod says not to): only the routes sidecar reads the cluster.
async fn assert_traefik_holds_no_token(client: &Client) {
    let pods = gateway_pods(client).await;
    assert!(!pods.is_empty(), "no gateway pod");
    for pod in pods {
        let spec = pod.spec.expect("a pod has a spec");
        let traefik = (spec.containers.iter())
            .find(|c| c.name == "traefik")
            .expect("the traefik container");
        let mounts: Vec<&str> = (traefik.volume_mounts.iter().flatten())
            .map(|m| m.mount_path.as_str())
            .collect();
        assert!(
            !mounts.iter().any(|m| m.contains("serviceaccount")),
            "Traefik mounts a ServiceAccount token: {mounts:?}"
        );
    }
}
