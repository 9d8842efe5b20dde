//! Serving what was trained, the way the Kubeflow talk ends its story, on the real node: two
//! XGBoostJobs from the `xgboost-job` prototype save v1 and v2 of the digits model in the object
//! store; the `serving` prototype with runtime `mlserver` serves them behind the gateway
//! component (Traefik) with a Gateway API HTTPRoute; requests through the host's gateway port
//! split by `trafficRule`, a rollout v1 → 90/10 → v2 → v1 pruned fails no request, and a version
//! whose model is not in the store never gets traffic. A TFJob's SavedModel is served the same
//! way. Each model's held-out accuracy, recomputed through its server, is the job's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;
use serde_json::{Value, json};

use crate::gateway::{gateway, gateway_url};
use crate::jobs::{ended, finished};
use crate::platform::{NAMESPACE, app, assert_success, mlkube, set_param};
use crate::support;
use crate::volume_support::{object_store, run_pod};

const TRAINING_IMAGE: &str = concat!("mlkube/training:", env!("CARGO_PKG_VERSION"));
const SERVING: &str = "digits";
const SPLIT_REQUESTS: usize = 2000;

pub type Http = HttpClient<HttpConnector, Full<Bytes>>;

fn has_component(name: &str) -> bool {
    let listed = mlkube(app(), &["component", "list", "-o", "name"]);
    assert_success("mlkube component list", &listed);
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.trim() == name)
}

/// `mlkube component add PROTOTYPE NAME --param P...` unless the app has it.
fn add(prototype: &str, name: &str, params: &[&str]) {
    if has_component(name) {
        return;
    }
    let mut args = vec!["component", "add", prototype, name];
    for param in params {
        args.extend(["--param", param]);
    }
    assert_success(
        &format!("mlkube component add {name}"),
        &mlkube(app(), &args),
    );
}

/// `mlkube apply local -c COMPONENT ARGS...`, its output.
pub fn apply(component: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["apply", "local", "-c", component, "--timeout", "5m"];
    all.extend_from_slice(args);
    mlkube(app(), &all)
}

/// What a training job of `prototype` named `name` runs: `script` with `args`, saving its model
/// at `models/<path>`.
struct Training<'a> {
    prototype: &'a str,
    name: &'a str,
    script: &'a str,
    path: &'a str,
    args: &'a str,
}

/// The job `training` describes, run afresh unless it has succeeded as the app renders it now:
/// a model version is written once, so that job is kept (the drain's test, a process of its own,
/// serves the models the suite's process saved).
async fn train<J: TrainingJob>(jobs: &Api<J>, training: Training<'_>) {
    let Training {
        prototype,
        name,
        script,
        path,
        args,
    } = training;
    let image = format!("image={TRAINING_IMAGE}");
    let command = format!(r#"command=["python3", "/opt/mlkube/examples/{script}"]"#);
    let model = format!("modelPath=models/{path}");
    let args = format!("args={args}");
    let params = [&*image, &command, &model, &args, "objectStore=object-store"];
    add(prototype, name, &params);
    if succeeded_unchanged(jobs, name).await {
        return;
    }
    let delete = mlkube(app(), &["delete", "local", "-c", name, "--yes"]);
    assert_success(&format!("mlkube delete local -c {name}"), &delete);
    assert_success(&format!("apply {name}"), &apply(name, &["--no-wait"]));
}

/// Whether the job `name` has succeeded and `mlkube diff` finds its component unchanged.
async fn succeeded_unchanged<J: TrainingJob>(jobs: &Api<J>, name: &str) -> bool {
    let Ok(Some(job)) = jobs.get_opt(name).await else {
        return false;
    };
    let succeeded = ended(&job).is_some_and(|(end, _)| end == "Succeeded");
    succeeded
        && mlkube(app(), &["diff", "local", "-c", name])
            .status
            .success()
}

/// The `metric accuracy=` a job's lead replica logged.
fn job_accuracy(job: &str) -> String {
    let logs = mlkube(app(), &["logs", "-n", NAMESPACE, job]);
    assert_success(&format!("mlkube logs {job}"), &logs);
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    accuracy(&logs).unwrap_or_else(|| panic!("{job} logged no accuracy:\n{logs}"))
}

fn accuracy(text: &str) -> Option<String> {
    let at = text.find("metric accuracy=")? + "metric accuracy=".len();
    Some(text[at..].split_whitespace().next()?.to_string())
}

/// The held-out accuracy recomputed through `url` by examples/training/digits_predict.py.
async fn served_accuracy(pod: &str, url: &str, model: &str, scale: &str) -> String {
    let command = json!([
        "python3",
        "/opt/mlkube/examples/digits_predict.py",
        "--url",
        url,
        "--model",
        model,
        "--scale",
        scale
    ]);
    let pod = json!({
        "metadata": { "name": pod },
        "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{ "name": "predict", "image": TRAINING_IMAGE, "command": command }] },
    });
    let printed = run_pod(&support::client().await, pod).await;
    accuracy(&printed).unwrap_or_else(|| panic!("no accuracy from {url}:\n{printed}"))
}

fn assert_close(served: &str, trained: &str, what: &str) {
    eprintln!("{what}: accuracy {served} through the server, {trained} as the job logged it");
    let (s, t): (f64, f64) = (served.parse().unwrap(), trained.parse().unwrap());
    // float32 inputs may move a prediction at a tie: at most one of the 450 digits.
    assert!(
        (s - t).abs() <= 1.0 / 450.0 + 1e-9,
        "{what}: served {served}, trained {trained}"
    );
}

/// One prediction through the gateway: the version that answered, or why it failed.
pub async fn predict(http: &Http, model: &str) -> Result<String, String> {
    predict_at(http, model, None).await
}

/// [`predict`], with the Host header `host` (a route's host name) when given.
pub async fn predict_at(http: &Http, model: &str, host: Option<&str>) -> Result<String, String> {
    let pixels: Vec<f32> = (0..64).map(|i| (i % 17) as f32).collect();
    let body = json!({"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": pixels}]});
    let mut request = hyper::Request::post(format!("{}/v2/models/{model}/infer", gateway_url()));
    if let Some(host) = host {
        request = request.header("host", host);
    }
    let request = request
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a request");
    let answer = http.request(request).await.map_err(|e| format!("{e:?}"))?;
    let status = answer.status();
    let bytes = answer
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status != 200 {
        return Err(format!("{status}: {text}"));
    }
    let json: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    Ok(json["model_version"].as_str().unwrap_or("?").to_string())
}

fn route_weights(route: &DynamicObject) -> Vec<(String, i64)> {
    route.data["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            (
                b["name"].as_str().unwrap_or("?").to_string(),
                b["weight"].as_i64().unwrap_or(1),
            )
        })
        .collect()
}

async fn live_route() -> DynamicObject {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    let api: Api<DynamicObject> = Api::namespaced_with(
        support::client().await,
        NAMESPACE,
        &ApiResource::from_gvk(&gvk),
    );
    api.get(SERVING).await.expect("the serving route")
}

/// The serving component: MLServer for the XGBoost digits, versions from the store by name,
/// behind the gateway; `trafficRule` as given.
fn serve(rule: &str) {
    serve_digits(SERVING, rule);
}

/// A serving component `name` like [`serve`]'s: its route serves the model `name`.
pub fn serve_digits(name: &str, rule: &str) {
    add(
        "serving",
        name,
        &[
            "runtime=mlserver",
            "modelFormat=xgboost",
            "objectStore=object-store",
            "gateway=gateway",
            "modelBasePath=s3://models/xgboost-digits/{version}/",
            "readyTimeout=30",
            "cpuRequest=100m",
            "memoryRequest=256Mi",
        ],
    );
    set_param(app(), name, "trafficRule", rule, None);
}

/// Requests to `model` through the gateway, one after another, until `stop`: (versions seen,
/// failures).
pub fn request_loop(
    http: Http,
    stop: Arc<AtomicBool>,
    model: &'static str,
) -> tokio::task::JoinHandle<(Vec<String>, Vec<String>)> {
    tokio::spawn(async move {
        let (mut seen, mut failed) = (Vec::new(), Vec::new());
        while !stop.load(Ordering::Relaxed) {
            match predict(&http, model).await {
                Ok(version) => seen.push(version),
                Err(why) => failed.push(why),
            }
        }
        (seen, failed)
    })
}

/// What a request loop saw, said as `what` with the count per version: no request failed, and
/// both versions answered.
pub fn assert_none_failed(what: &str, seen: &[String], failed: &[String]) {
    let count = |v: &str| seen.iter().filter(|s| *s == v).count();
    eprintln!(
        "{what}: {} requests, v1 {}, v2 {}, {} failed",
        seen.len() + failed.len(),
        count("v1"),
        count("v2"),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{what}: {} of {} requests failed: {:?}",
        failed.len(),
        seen.len() + failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(
        count("v1") > 0 && count("v2") > 0,
        "{what}: the loop saw both versions: {}",
        seen.len()
    );
}

/// v1 and v2 of the digits model in the store, saved by two XGBoostJobs (kept once succeeded).
pub async fn digits_models() {
    let jobs = Api::<XGBoostJob>::namespaced(support::client().await, NAMESPACE);
    let version = |name, path, args| Training {
        prototype: "xgboost-job",
        name,
        script: "xgboost_digits.py",
        path,
        args,
    };
    train(&jobs, version("xgb-v1", "xgboost-digits/v1", "[]")).await;
    let tuned = r#"["--rounds=80", "--max-depth=6", "--learning-rate=0.2"]"#;
    train(&jobs, version("xgb-v2", "xgboost-digits/v2", tuned)).await;
    for job in ["xgb-v1", "xgb-v2"] {
        let (state, message) = finished(&jobs, job).await;
        assert_eq!(state, "Succeeded", "{job}: {message}");
    }
}

/// [`digits_models`], once for every test of the run that serves them.
pub async fn digits_models_once() {
    static TRAINED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    TRAINED.get_or_init(digits_models).await;
}

#[tokio::test]
async fn the_talks_flow_serves_v1_splits_promotes_v2_and_prunes_v1_without_a_failed_request() {
    object_store();
    gateway();
    digits_models_once().await;

    serve("v1:100");
    assert_success("apply v1", &apply(SERVING, &["--prune", "--yes"]));
    // Through the gateway's Service: the policy admits nothing else to the servers.
    let served = served_accuracy("predict-v1", "http://gateway:8000", SERVING, "1").await;
    assert_close(&served, &job_accuracy("xgboostjob/xgb-v1"), "v1");

    let http: Http = HttpClient::builder(TokioExecutor::new()).build_http();
    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(http.clone(), stop.clone(), SERVING);
    serve("v1:90,v2:10");
    assert_success("apply the canary", &apply(SERVING, &["--prune", "--yes"]));
    split_is_ninety_ten(&http, SERVING).await;
    serve("v2:100");
    assert_success(
        "apply the promotion",
        &apply(SERVING, &["--prune", "--yes"]),
    );
    promoted(&http).await;
    stop.store(true, Ordering::Relaxed);
    let (seen, failed) = looping.await.expect("the request loop");
    assert_none_failed("rollout", &seen, &failed);

    only_the_gateway_reaches_the_servers().await;
    a_version_without_a_model_never_gets_traffic(&http).await;
}

/// The serving component's NetworkPolicy, enforced by the nodes' policy controller: a pod that
/// is not the gateway's cannot open a connection to a model server, so MLServer's repository API
/// (unload) is out of its reach, and the gateway routes no repository path; the same pod's
/// request through the gateway is served, and one for a mistyped model gets the gateway
/// fallback's 404 that says so. The gateway's readiness is asked first, through the examples'
/// client, which tries a refused connection again, as a client of a cluster that enforces
/// NetworkPolicies must: a new pod's first connections may be refused for a moment.
async fn only_the_gateway_reaches_the_servers() {
    let script = format!(
        r#"
import socket, urllib.error, urllib.request
from digits_predict import urlopen_retrying
def post(url):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return "unreachable"
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        return f"{{e.code}} {{e.read().decode()}}"
print("gateway-ready", urlopen_retrying(urllib.request.Request("http://gateway:8000/v2/models/{SERVING}/ready")).status)
print("direct", post("http://{SERVING}-v2:8080/v2/repository/models/{SERVING}/unload"))
print("gateway-repository", post("http://gateway:8000/v2/repository/models/{SERVING}/unload"))
print("gateway-typo", get("http://gateway:8000/v2/models/digts/ready"))
"#
    );
    let pod = json!({
        "metadata": { "name": "unload-from-a-pod" },
        "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{ "name": "unload", "image": TRAINING_IMAGE,
                "workingDir": "/opt/mlkube/examples", "command": ["python3", "-c", script] }] },
    });
    let printed = run_pod(&support::client().await, pod).await;
    for line in [
        "direct unreachable",
        "gateway-repository 404",
        "gateway-ready 200",
        // A mistyped model: the gateway's fallback says so, where Traefik said a bare 404.
        r#"gateway-typo 404 {"error":"no route of this gateway takes GET /v2/models/digts/ready","hint":"no model named \"digts\" is routed here"#,
    ] {
        assert!(
            printed.contains(line),
            "expected {line:?}, the pod printed:\n{printed}"
        );
    }
}

/// 2,000 requests to `model` at 90/10: v2's share within 10% ± 2.5%.
pub async fn split_is_ninety_ten(http: &Http, model: &str) {
    answered_by(http, model, "v2", 1).await;
    let mut v2 = 0;
    for _ in 0..SPLIT_REQUESTS {
        let version = predict(http, model).await.expect("a prediction at 90/10");
        v2 += usize::from(version == "v2");
    }
    let share = v2 as f64 / SPLIT_REQUESTS as f64;
    eprintln!(
        "{model}'s split at v1:90,v2:10: v2 answered {v2} of {SPLIT_REQUESTS} ({:.1}%)",
        share * 100.0
    );
    assert!((0.075..=0.125).contains(&share), "v2's share {share}");
}

/// Until `version` of `model` answers `times` requests in a row: the gateway's status says it took a route
/// up a moment before its proxy routes by it (meanwhile a retiring version still serves).
async fn answered_by(http: &Http, model: &str, version: &str, times: usize) {
    let what = format!("{version} to answer {times} requests in a row through the gateway");
    support::eventually(&what, Duration::from_secs(30), || async {
        for _ in 0..times {
            if predict(http, model).await.ok()? != version {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// After the promotion: v2 alone answers, and v1's Deployment and Service are gone.
async fn promoted(http: &Http) {
    // 20 in a row at the old 90/10 would happen once in 10^20: the new route is in use.
    answered_by(http, SERVING, "v2", 20).await;
    for _ in 0..50 {
        assert_eq!(
            predict(http, SERVING)
                .await
                .expect("a prediction at v2:100"),
            "v2"
        );
    }
    let deployments = Api::<Deployment>::namespaced(support::client().await, NAMESPACE);
    support::eventually(
        "v1's Deployment to be pruned",
        Duration::from_secs(60),
        || async { matches!(deployments.get_opt("digits-v1").await, Ok(None)).then_some(()) },
    )
    .await;
    assert_eq!(
        route_weights(&live_route().await),
        [("digits-v2".to_string(), 100)]
    );
}

/// v3's model path holds nothing: the apply fails naming it and why, the route keeps v2:100,
/// status says why; then v3 is taken out again.
async fn a_version_without_a_model_never_gets_traffic(http: &Http) {
    serve("v2:90,v3:10");
    let failed = apply(SERVING, &["--prune", "--yes"]);
    let stderr = String::from_utf8_lossy(&failed.stderr).into_owned();
    assert_eq!(failed.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("digits-v3") && stderr.contains("holds no objects"),
        "{stderr}"
    );
    assert!(
        stderr.contains("HTTPRoute") && stderr.contains("keeps its live weights"),
        "{stderr}"
    );
    assert_eq!(
        route_weights(&live_route().await),
        [("digits-v2".to_string(), 100)]
    );
    assert_eq!(
        predict(http, SERVING).await.expect("v2 still answers"),
        "v2"
    );
    let status = mlkube(app(), &["status", "local"]);
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    let text = format!("{text}\n{}", String::from_utf8_lossy(&status.stderr));
    let v3 = text
        .lines()
        .find(|l| l.contains("digits-v3") && l.contains("Deployment"));
    assert!(v3.is_some_and(|l| l.contains("holds no objects")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(" v3 ") && l.contains("0/1") && l.contains("not routed")),
        "{text}"
    );
    serve("v2:100");
    assert_success("take v3 out", &apply(SERVING, &["--prune", "--yes"]));
}

#[tokio::test]
async fn a_tensorflow_models_accuracy_through_mlserver_is_its_jobs() {
    object_store();
    let client = support::client().await;
    let jobs = Api::<TFJob>::namespaced(client.clone(), NAMESPACE);
    let training = Training {
        prototype: "tf-job",
        name: "tf-serve",
        script: "tf_digits.py",
        path: "tf-digits-served/v1",
        args: r#"["--epochs=10"]"#,
    };
    train(&jobs, training).await;
    let (state, message) = finished(&jobs, "tf-serve").await;
    assert_eq!(state, "Succeeded", "{message}");
    add(
        "serving",
        "tf-digits",
        &[
            "runtime=mlserver",
            "modelFormat=tensorflow",
            "objectStore=object-store",
            "modelBasePath=s3://models/tf-digits-served/{version}/",
            "cpuRequest=100m",
        ],
    );
    assert_success("apply tf-digits", &apply("tf-digits", &[]));
    let served = served_accuracy("predict-tf", "http://tf-digits:8080", "tf-digits", "16").await;
    assert_close(
        &served,
        &job_accuracy("tfjob/tf-serve"),
        "the TensorFlow model",
    );
    a_model_unloaded_through_the_repository_api_is_loaded_again(&client).await;
}

/// A pod the policy admits (this model has no gateway, so pods of its namespace call it
/// directly) may unload its model through MLServer's repository API; the model's readiness is
/// the container's liveness, so the kubelet restarts it and it loads the model again instead of
/// answering 400 for good.
async fn a_model_unloaded_through_the_repository_api_is_loaded_again(client: &Client) {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    // Every replica serves before the unload, so the restart counted after it is the unload's.
    let before = support::eventually(
        "the model's servers to be ready before the unload",
        Duration::from_secs(120),
        || ready_restarts(&pods),
    )
    .await;
    // The examples' client, which tries a refused connection again: this new pod is admitted
    // by the policy a moment after it starts.
    let script = "import urllib.request; from digits_predict import urlopen_retrying; \
        urlopen_retrying(urllib.request.Request(\
        'http://tf-digits:8080/v2/repository/models/tf-digits/unload', method='POST')); \
        print('unloaded')";
    let pod = json!({
        "metadata": { "name": "unload-tf" },
        "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{ "name": "unload", "image": TRAINING_IMAGE,
                "workingDir": "/opt/mlkube/examples", "command": ["python3", "-c", script] }] },
    });
    assert!(run_pod(client, pod).await.contains("unloaded"));
    support::eventually(
        "the unloaded model's server to be restarted and ready again",
        Duration::from_secs(120),
        || async { ready_restarts(&pods).await.filter(|&after| after > before) },
    )
    .await;
    let served = served_accuracy(
        "predict-tf-again",
        "http://tf-digits:8080",
        "tf-digits",
        "16",
    )
    .await;
    assert_close(
        &served,
        &job_accuracy("tfjob/tf-serve"),
        "the model loaded again",
    );
}

/// How often tf-digits' containers have restarted, once every one of its pods is ready.
async fn ready_restarts(pods: &Api<Pod>) -> Option<i32> {
    let selector = ListParams::default().labels("app.kubernetes.io/instance=tf-digits");
    let listed = pods.list(&selector).await.ok()?.items;
    let restarts = |pod: &Pod| {
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone());
        statuses
            .into_iter()
            .flatten()
            .map(|c| c.restart_count)
            .sum::<i32>()
    };
    listed
        .iter()
        .all(support::pod_is_ready)
        .then(|| listed.iter().map(restarts).sum())
}
