//! Predictions through the gateway against the same requests sent straight to a model server's
//! pod, and through the model's plain Service (kube-proxy, no mesh) for comparison: requests per
//! second and p50/p99 latency of each path, and each as a ratio of the straight path's. A
//! benchmark, not a timed test.
//!
//!     MLKUBE_CLUSTER_NODE=real cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
//!     (a served model: docs/serving.md, or cluster/quickstart.sh)
//!     cargo bench --bench serving            # as root: it enters the cluster's network namespace
//!     NAMESPACE=ml SERVING=digits REQUESTS=3000 CONCURRENCY=8 cargo bench --bench serving
//!     SERVING=digits-kserve cargo bench --bench serving   # an InferenceService: KServe's paths
//!
//! The bench enters the real node's network namespace (`mlkube-<API port>`, from KUBECONFIG's
//! server), where the pod, the Service's ClusterIP and the gateway's node port are all one hop
//! away, so the host's forwarder is in no path. It finds the ready pods of the serving
//! component SERVING (default `digits`) in NAMESPACE (default: the one its Deployments are in),
//! and sends one digit's V2 infer request to each path in turn: the pod, the Service, the
//! gateway (the node's address, port 30080, `/v2/models/<model>/infer`). Each path gets
//! CONCURRENCY keep-alive connections and REQUESTS requests in all, after a warm-up of a tenth
//! of them; the three paths are measured in ROUNDS (default 3) interleaved rounds, so that the
//! machine's drift falls on all of them alike. Every answer must be a 200: a failed request
//! fails the bench. Prints a Markdown table on stdout.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::ListParams;
use kube::{Api, Client};
use mlkube::operator::serving::api::InferenceService;
use mlkube::operator::serving::predictor::ISVC_LABEL;

type Http = HttpClient<HttpConnector, Full<Bytes>>;

/// The real node's address and the gateway's node port (cluster/real-node.sh, the local env).
const GATEWAY: &str = "10.96.0.1:30080";
const MLSERVER_PORT: u16 = 8080;

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn number(name: &str, default: usize) -> usize {
    setting(name, &default.to_string())
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a whole number"))
}

/// The API port of KUBECONFIG's cluster: its network namespace is `mlkube-<port>`.
fn cluster_port() -> String {
    let path = std::env::var("KUBECONFIG").expect(
        "KUBECONFIG is not set: run `eval \"$(cluster/local-cluster.sh env)\"` for a real node",
    );
    let text = std::fs::read_to_string(&path).expect("KUBECONFIG reads");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("a server in KUBECONFIG");
    server
        .rsplit(':')
        .next()
        .expect("a port")
        .trim_end_matches('/')
        .to_string()
}

/// Move this (still single-threaded) process into the cluster's network namespace.
fn enter_cluster_network(port: &str) {
    let path = format!("/run/netns/mlkube-{port}");
    let file = File::open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (is the cluster's node real, and are you root?)"));
    // SAFETY: setns on an open namespace file; no threads exist yet to be left behind.
    let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(
        entered,
        0,
        "setns {path}: {}",
        std::io::Error::last_os_error()
    );
}

/// One path: its name, the URL of the infer endpoint, and the Host header to send.
struct Path {
    name: &'static str,
    url: String,
    host: Option<String>,
}

/// How the serving is found: its pods' label, its Service, and the gateway's Host header.
struct Served {
    namespace: String,
    pods: String,
    service: String,
    service_port: u16,
    host: Option<String>,
}

/// SERVING as an InferenceService, if one of that name exists.
async fn inference_service(client: &Client, serving: &str) -> Option<Served> {
    let listed = Api::<InferenceService>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    let isvc = listed
        .items
        .into_iter()
        .find(|i| i.metadata.name.as_deref() == Some(serving))?;
    let namespace = isvc.metadata.namespace.clone().unwrap_or_default();
    let domain = setting("DOMAIN", "example.com");
    Some(Served {
        pods: format!("{ISVC_LABEL}={serving}"),
        service: format!("{serving}-predictor"),
        service_port: 80,
        host: Some(format!("{serving}-{namespace}.{domain}")),
        namespace,
    })
}

/// SERVING as a `serving` component: its Deployments' namespace, its instance label.
async fn serving_component(client: &Client, serving: &str) -> Served {
    let instance = format!("app.kubernetes.io/instance={serving}");
    let deployments: Vec<Deployment> = Api::all(client.clone())
        .list(&ListParams::default().labels(&instance))
        .await
        .expect("list the serving Deployments")
        .items;
    let namespace = setting(
        "NAMESPACE",
        deployments
            .first()
            .and_then(|d| d.metadata.namespace.as_deref())
            .unwrap_or_else(|| panic!("no Deployment of the serving component {serving}")),
    );
    Served {
        namespace,
        pods: instance,
        service: serving.to_owned(),
        service_port: MLSERVER_PORT,
        host: None,
    }
}

/// The three paths: pod, Service, gateway.
async fn paths(client: &Client, serving: &str) -> (String, Vec<Path>) {
    let served = match inference_service(client, serving).await {
        Some(served) => served,
        None => serving_component(client, serving).await,
    };
    let namespace = served.namespace.clone();
    let pods: Vec<Pod> = Api::namespaced(client.clone(), &namespace)
        .list(&ListParams::default().labels(&served.pods))
        .await
        .expect("list its pods")
        .items;
    let ready = pods
        .iter()
        .find(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .unwrap_or_else(|| panic!("no ready pod of {serving} in {namespace}"));
    let pod_ip = ready
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("a pod IP");
    let service: Service = Api::namespaced(client.clone(), &namespace)
        .get(&served.service)
        .await
        .expect("the serving Service");
    let cluster_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    let model = setting("MODEL", serving);
    let infer = |address: String| format!("http://{address}/v2/models/{model}/infer");
    let path = |name, address, host| Path {
        name,
        url: infer(address),
        host,
    };
    let paths = vec![
        path("pod", format!("{pod_ip}:{MLSERVER_PORT}"), None),
        path(
            "service",
            format!("{cluster_ip}:{}", served.service_port),
            None,
        ),
        path("gateway", GATEWAY.to_string(), served.host),
    ];
    (namespace, paths)
}

fn request(path: &Path) -> hyper::Request<Full<Bytes>> {
    let pixels: Vec<f32> = (0..64).map(|i| (i % 17) as f32).collect();
    let body = serde_json::json!({"inputs": [{"name": "pixels", "shape": [1, 64],
        "datatype": "FP32", "data": pixels}]});
    let mut request = hyper::Request::post(&path.url);
    if let Some(host) = &path.host {
        request = request.header("host", host);
    }
    request
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a request")
}

/// `count` requests to `path` over `concurrency` connections: each one's latency, sorted.
async fn run(
    http: &Http,
    path: &Path,
    count: usize,
    concurrency: usize,
) -> (Duration, Vec<Duration>) {
    let started = Instant::now();
    let mut latencies: Vec<Duration> = stream::iter(0..count)
        .map(|_| async {
            let sent = Instant::now();
            let answer = http
                .request(request(path))
                .await
                .unwrap_or_else(|e| panic!("{}: {e:?}", path.url));
            let status = answer.status();
            let body = answer
                .into_body()
                .collect()
                .await
                .expect("the answer's body")
                .to_bytes();
            let answer = String::from_utf8_lossy(&body);
            assert_eq!(status, 200, "{}: {answer}", path.url);
            sent.elapsed()
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    latencies.sort();
    (started.elapsed(), latencies)
}

#[derive(Default, Clone)]
struct Totals {
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Totals {
    fn rps(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }
}

fn main() {
    let port = cluster_port();
    enter_cluster_network(&port);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let serving = setting("SERVING", "digits");
    let (requests, concurrency, rounds) = (
        number("REQUESTS", 3000),
        number("CONCURRENCY", 8),
        number("ROUNDS", 3),
    );
    let client = Client::try_default()
        .await
        .expect("a client from KUBECONFIG");
    let (namespace, paths) = paths(&client, &serving).await;
    let http: Http = HttpClient::builder(TokioExecutor::new()).build_http();
    eprintln!(
        "serving {serving} in {namespace}: {requests} requests per path, {concurrency} connections, {rounds} rounds"
    );
    for path in &paths {
        eprintln!("warming up {}: {}", path.name, path.url);
        run(&http, path, requests / 10, concurrency).await;
    }
    let per_round = requests.div_ceil(rounds);
    let mut totals = vec![Totals::default(); paths.len()];
    for round in 1..=rounds {
        for (path, total) in paths.iter().zip(&mut totals) {
            let (elapsed, latencies) = run(&http, path, per_round, concurrency).await;
            eprintln!(
                "round {round}: {} {:.0} requests/s",
                path.name,
                latencies.len() as f64 / elapsed.as_secs_f64()
            );
            total.elapsed += elapsed;
            total.latencies.extend(latencies);
        }
    }
    print_table(&paths, &totals);
}

fn print_table(paths: &[Path], totals: &[Totals]) {
    let direct = &totals[0];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| path | requests/s | p50 ms | p99 ms | requests/s vs pod | p50 vs pod | p99 vs pod |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (path, t) in paths.iter().zip(totals) {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            path.name,
            t.rps(),
            ms(t.quantile(0.5)),
            ms(t.quantile(0.99)),
            t.rps() / direct.rps(),
            ms(t.quantile(0.5)) / ms(direct.quantile(0.5)),
            ms(t.quantile(0.99)) / ms(direct.quantile(0.99)),
        );
    }
}
