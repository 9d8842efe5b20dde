//! KServe's InferenceService on the real nodes, run by the operator in the cluster as its
//! component's ServiceAccount (the platform's operator has `servingGateway: gateway`): the
//! digits model's versions (the XGBoostJobs' v1 and v2 in the object store) served by the
//! `kserve-mlserver` ClusterServingRuntime behind Traefik, requests from the host through the
//! gateway's port with KServe's host name. A canary at 10% gets its share (2,000 requests), a
//! promotion retires the old revision with no request failed, a canary whose model the store
//! does not hold never gets traffic and says why, and a canary that stops being ready (its model
//! unloaded through MLServer's repository API) gives its share back by itself: the time that
//! takes and the requests that failed meanwhile are printed.
//!
//! Each version's revision serves with `--version <v>` appended to the runtime's arguments (as
//! KServe appends a model's `args`), so an answer's `model_version` names its revision.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use mlkube::operator::serving::api::InferenceService;
use serde_json::json;

use crate::gateway::gateway;
use crate::platform::NAMESPACE;
use crate::serving::{Http, digits_models_once, predict_at};
use crate::support;
use crate::volume_support::{object_store, run_pod, run_pod_in};

const NAME: &str = "isvc-digits";
const ACCOUNT: &str = "isvc-models";
const SPLIT_REQUESTS: usize = 2000;
const TIMEOUT: Duration = Duration::from_secs(300);

/// The InferenceService tests' rollouts, one at a time: each counts the requests that failed
/// through the gateway while its own routes change, and none should count another's.
pub static ROLLOUTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// KServe's host name of the InferenceService `name`, which its route answers.
fn host(name: &str) -> String {
    format!("{name}-{NAMESPACE}.example.com")
}

/// One prediction of `name` through the gateway with KServe's host name: the version that
/// answered.
pub async fn predict(http: &Http, name: &str) -> Result<String, String> {
    predict_at(http, name, Some(&host(name))).await
}

/// What a request loop saw: the versions that answered, and each failure with its time.
type Seen = (Vec<String>, Vec<(SystemTime, String)>);

/// Requests to `name` one after another until `stop`.
pub fn request_loop(
    http: Http,
    stop: Arc<AtomicBool>,
    name: &'static str,
) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let (mut seen, mut failed) = (Vec::new(), Vec::new());
        while !stop.load(Ordering::Relaxed) {
            match predict(&http, name).await {
                Ok(version) => seen.push(version),
                Err(why) => failed.push((SystemTime::now(), why)),
            }
        }
        (seen, failed)
    })
}

/// The object store's endpoint (host and port) and its read-only keys' Secret data.
pub struct StoreAccess {
    pub endpoint: String,
    pub keys: std::collections::BTreeMap<String, k8s_openapi::ByteString>,
}

pub async fn store_access(client: &Client) -> StoreAccess {
    let config = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .get("object-store-endpoint")
        .await
        .expect("the store's endpoint ConfigMap");
    let url = (config.data.unwrap_or_default())
        .remove("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL");
    let keys = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .get("object-store-read-credentials")
        .await
        .expect("the store's read keys");
    StoreAccess {
        endpoint: url.trim_start_matches("http://").to_owned(),
        keys: keys.data.unwrap_or_default(),
    }
}

/// The store's read-only keys KServe's way: a Secret annotated with the store's endpoint, listed
/// by the ServiceAccount the predictor runs as.
async fn store_account(client: &Client) {
    let access = store_access(client).await;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "isvc-store", "annotations": {
            "serving.kserve.io/s3-endpoint": access.endpoint,
            "serving.kserve.io/s3-usehttps": "0",
        } },
        "data": access.keys,
    });
    let account = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": { "name": ACCOUNT }, "secrets": [{ "name": "isvc-store" }],
    });
    let params = PatchParams::apply("isvc-test").force();
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .patch("isvc-store", &params, &Patch::Apply(secret))
        .await
        .expect("the Secret");
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .patch(ACCOUNT, &params, &Patch::Apply(account))
        .await
        .expect("the ServiceAccount");
}

/// Apply the InferenceService serving `version` from `uri`, with `canary` percent.
async fn serve(api: &Api<InferenceService>, version: &str, uri: &str, canary: Option<i64>) {
    let mut isvc = json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": { "name": NAME },
        "spec": { "predictor": {
            "serviceAccountName": ACCOUNT,
            "model": {
                "modelFormat": { "name": "xgboost" }, "protocolVersion": "v2", "storageUri": uri,
                "args": ["--version", version],
                "resources": { "requests": { "cpu": "100m", "memory": "256Mi" } },
            },
        } },
    });
    if let Some(percent) = canary {
        isvc["spec"]["predictor"]["canaryTrafficPercent"] = json!(percent);
    }
    api.patch(
        NAME,
        &PatchParams::apply("isvc-test").force(),
        &Patch::Apply(isvc),
    )
    .await
    .expect("the InferenceService is applied");
}

pub fn traffic(isvc: &InferenceService) -> Vec<(String, i64)> {
    (isvc.status.iter())
        .flat_map(|s| s.components.get("predictor"))
        .flat_map(|p| p.traffic.iter())
        .map(|t| (t.revision_name.clone(), t.percent))
        .collect()
}

pub fn latest_created(isvc: &InferenceService) -> Option<String> {
    isvc.status
        .as_ref()?
        .components
        .get("predictor")?
        .latest_created_revision
        .clone()
}

pub fn condition(isvc: &InferenceService, type_: &str) -> Option<(String, String)> {
    let c = isvc
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.message.clone().unwrap_or_default()))
}

pub async fn until(
    api: &Api<InferenceService>,
    name: &str,
    what: &str,
    check: impl Fn(&InferenceService) -> bool,
) -> InferenceService {
    let found = support::within(TIMEOUT, || async {
        let isvc = api.get(name).await.ok()?;
        // A status of the spec applied last, not of one before.
        let current = isvc.status.as_ref()?.observed_generation == isvc.metadata.generation;
        (current && check(&isvc)).then_some(isvc)
    })
    .await;
    if let Some(isvc) = found {
        return isvc;
    }
    let status = api.get(name).await.ok().and_then(|i| i.status);
    panic!(
        "timed out waiting for {what}; the status: {}",
        serde_json::to_string_pretty(&status).unwrap_or_default()
    );
}

/// Until `version` of `name` answers `times` requests in a row through the gateway.
pub async fn answered_by(http: &Http, name: &str, version: &str, times: usize) {
    let what = format!("{version} to answer {times} requests in a row");
    support::eventually(&what, Duration::from_secs(60), || async {
        for _ in 0..times {
            if predict(http, name).await.ok()? != version {
                return None;
            }
        }
        Some(())
    })
    .await;
}

#[tokio::test]
async fn inference_services_split_promote_hold_and_return_a_canarys_share_through_the_gateway() {
    let _alone = ROLLOUTS.lock().await;
    object_store();
    gateway();
    digits_models_once().await;
    let client = support::client().await;
    store_account(&client).await;
    let api = Api::<InferenceService>::namespaced(client.clone(), NAMESPACE);
    let http: Http = HttpClient::builder(TokioExecutor::new()).build_http();
    // A failed run's InferenceService would lend its revisions to this one.
    if api
        .get_opt(NAME)
        .await
        .expect("read the InferenceService")
        .is_some()
    {
        api.delete(NAME, &DeleteParams::foreground())
            .await
            .expect("a failed run's InferenceService is deleted");
        support::eventually("a failed run's InferenceService to go", TIMEOUT, || async {
            matches!(api.get_opt(NAME).await, Ok(None)).then_some(())
        })
        .await;
    }

    serve(&api, "v1", "s3://models/xgboost-digits/v1/", None).await;
    let first = until(&api, NAME, "v1 Ready", |i| {
        condition(i, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    let r1 = latest_created(&first).expect("a revision");
    answered_by(&http, NAME, "v1", 5).await;

    // create → canary → promote → old revision gone, with no request failed.
    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(http.clone(), stop.clone(), NAME);
    serve(&api, "v2", "s3://models/xgboost-digits/v2/", Some(10)).await;
    let split = until(&api, NAME, "v2 at 10%", |i| traffic(i).len() == 2).await;
    let r2 = latest_created(&split).expect("a revision");
    split_is_ninety_ten(&http).await;
    serve(&api, "v2", "s3://models/xgboost-digits/v2/", None).await;
    until(&api, NAME, "v2 promoted", |i| {
        traffic(i) == [(r2.clone(), 100)]
    })
    .await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    support::eventually(&format!("{r1} retired"), TIMEOUT, || async {
        matches!(deployments.get_opt(&r1).await, Ok(None)).then_some(())
    })
    .await;
    answered_by(&http, NAME, "v2", 20).await;
    stop.store(true, Ordering::Relaxed);
    let (seen, failed) = looping.await.expect("the request loop");
    let count = |v: &str| seen.iter().filter(|s| *s == v).count();
    eprintln!(
        "create → canary → promote: {} requests, v1 {}, v2 {}, {} failed",
        seen.len() + failed.len(),
        count("v1"),
        count("v2"),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );

    a_canary_without_a_model_never_gets_traffic(&api, &http, &r2).await;
    an_unready_canary_gives_its_share_back(&client, &api, &http, &r2).await;
    api.delete(NAME, &DeleteParams::background())
        .await
        .expect("the InferenceService is deleted");
}

/// 2,000 requests at 10%: v2's share within 10% ± 2.5%.
async fn split_is_ninety_ten(http: &Http) {
    answered_by(http, NAME, "v2", 1).await;
    let mut v2 = 0;
    for _ in 0..SPLIT_REQUESTS {
        v2 += usize::from(predict(http, NAME).await.expect("a prediction at 10%") == "v2");
    }
    let share = v2 as f64 / SPLIT_REQUESTS as f64;
    eprintln!(
        "canaryTrafficPercent 10: v2 answered {v2} of {SPLIT_REQUESTS} ({:.1}%)",
        share * 100.0
    );
    assert!((0.075..=0.125).contains(&share), "v2's share {share}");
}

/// A canary whose prefix holds no model: its storage initializer fails saying so, the status
/// says why, and v2 answers every request.
async fn a_canary_without_a_model_never_gets_traffic(
    api: &Api<InferenceService>,
    http: &Http,
    stable: &str,
) {
    serve(api, "v4", "s3://models/xgboost-digits/nothing/", Some(10)).await;
    let held = until(api, NAME, "the empty canary held", |i| {
        condition(i, "LatestDeploymentReady").is_some_and(|c| c.1.contains("holds no objects"))
    })
    .await;
    let (_, message) = condition(&held, "LatestDeploymentReady").unwrap();
    eprintln!("the empty canary: {message}");
    assert!(
        message.contains(&format!("so {stable} keeps the 10% asked for it")),
        "{message}"
    );
    assert_eq!(traffic(&held), [(stable.to_owned(), 100)]);
    for _ in 0..100 {
        assert_eq!(predict(http, NAME).await.expect("a prediction"), "v2");
    }
}

/// A ready canary whose model is unloaded: the share goes back to the stable revision by itself.
/// Measured from the moment of the unload (the pod that makes it prints it; one clock): when the
/// status said the share was back, and when the last request failed.
async fn an_unready_canary_gives_its_share_back(
    client: &Client,
    api: &Api<InferenceService>,
    http: &Http,
    stable: &str,
) {
    serve(api, "v3", "s3://models/xgboost-digits/v1/", Some(10)).await;
    let split = until(api, NAME, "v3 at 10%", |i| traffic(i).len() == 2).await;
    let canary = latest_created(&split).expect("a revision");
    answered_by(http, NAME, "v3", 1).await;
    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(http.clone(), stop.clone(), NAME);
    let back = share_back_at(api.clone(), stable.to_owned());
    let ip = canary_ip(client, &canary).await;
    another_namespace_cannot_reach_the_servers(client, &ip).await;
    let unloaded = unload(client, &ip).await;
    let back = back.await.expect("the status watch");
    answered_by(http, NAME, "v2", 20).await;
    stop.store(true, Ordering::Relaxed);
    let (seen, failed) = looping.await.expect("the request loop");
    let since = |t: SystemTime| t.duration_since(unloaded).unwrap_or_default().as_secs_f64();
    let last_failure = failed.iter().map(|(at, _)| *at).max();
    eprintln!(
        "an unready canary: its share back in the status {:.1} s after the unload; {} of {} \
         requests failed, the last {:.1} s after the unload: {:?}",
        since(back),
        failed.len(),
        seen.len() + failed.len(),
        last_failure.map_or(0.0, since),
        failed
            .iter()
            .map(|(_, why)| why)
            .take(2)
            .collect::<Vec<_>>()
    );
    assert!(
        since(back) < 10.0,
        "the share came back {:.1} s after the unload",
        since(back)
    );
    let held = api.get(NAME).await.unwrap();
    assert!(condition(&held, "LatestDeploymentReady").is_some_and(|c| c.0 == "False"));
}

/// The InferenceService's NetworkPolicy, enforced by the nodes' policy controller: a pod of
/// another namespace cannot open a connection to a revision's server (its health asked, which
/// changes nothing), so MLServer's repository API is out of its reach; a pod of the
/// InferenceService's own namespace unloads the model right after. A new pod is refused
/// everywhere until the policy controller has its address, so the outsider asks for 30 s, more
/// than the unloading pod ever needs.
async fn another_namespace_cannot_reach_the_servers(client: &Client, ip: &str) {
    let outsider = support::TestNamespace::new("isvc-outsider").await;
    let script = format!(
        r#"
import time, urllib.error, urllib.request
answered, deadline = None, time.time() + 30
while time.time() < deadline:
    try:
        answered = urllib.request.urlopen("http://{ip}:8080/v2/health/ready", timeout=3).status
    except urllib.error.HTTPError as e:
        answered = e.code
    except OSError as e:
        error = e
    if answered is not None:
        break
    time.sleep(0.5)
print("answered", answered) if answered is not None else print("unreachable", error)
"#
    );
    let pod = json!({
        "metadata": { "name": "isvc-outsider" },
        "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{ "name": "reach", "image": concat!("mlkube/training:", env!("CARGO_PKG_VERSION")),
                "command": ["python3", "-c", script] }] },
    });
    let printed = run_pod_in(client, &outsider.name, pod).await;
    assert!(
        printed.contains("unreachable"),
        "a pod of another namespace reached the canary's server: {printed}"
    );
}

/// The IP of the canary's pod.
async fn canary_ip(client: &Client, canary: &str) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let selector = format!("serving.mlkube.io/revision={canary}");
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    (listed.items[0].status.as_ref())
        .and_then(|s| s.pod_ip.clone())
        .expect("the canary's pod IP")
}

/// When the status first shows all traffic on `stable` again, polled every 100 ms.
fn share_back_at(
    api: Api<InferenceService>,
    stable: String,
) -> tokio::task::JoinHandle<SystemTime> {
    tokio::spawn(async move {
        let deadline = Instant::now() + TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(isvc) = api.get(NAME).await
                && traffic(&isvc) == [(stable.clone(), 100)]
            {
                return SystemTime::now();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the canary's share did not come back to {stable}");
    })
}

/// Unload the model from the server at `ip` through MLServer's repository API, from a pod; when
/// the server answered.
async fn unload(client: &Client, ip: &str) -> SystemTime {
    let url = format!("http://{ip}:8080/v2/repository/models/{NAME}/unload");
    // The nodes' policy controller admits a new pod's address a moment after it starts: until
    // then a connection is refused, so the pod tries again for up to 30 s.
    let script = format!(
        r#"
import time, urllib.error, urllib.request
deadline = time.time() + 30
while True:
    try:
        status = urllib.request.urlopen(urllib.request.Request("{url}", method="POST"), timeout=10).status
        break
    except urllib.error.HTTPError:
        raise
    except urllib.error.URLError as e:
        if not isinstance(e.reason, ConnectionRefusedError) or time.time() > deadline:
            raise
        time.sleep(0.5)
print(status, time.time())
"#
    );
    let pod = json!({
        "metadata": { "name": "isvc-unload" },
        "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{ "name": "unload", "image": concat!("mlkube/training:", env!("CARGO_PKG_VERSION")),
                "command": ["python3", "-c", script] }] },
    });
    let printed = run_pod(client, pod).await;
    let line = printed.lines().last().unwrap_or_default();
    let (status, at) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("the unload printed {printed}"));
    assert_eq!(status, "200", "the unload answered: {printed}");
    let seconds: f64 = at.trim().parse().expect("a time");
    SystemTime::UNIX_EPOCH + Duration::from_secs_f64(seconds)
}
