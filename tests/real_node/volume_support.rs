//! What the volume controller's tests on real nodes share: the `volume-controller` and
//! `object-store` components applied once, VolumeManagers created and awaited, objects uploaded
//! to the store, and pods that look at a node's directories. Also used by the node-loss tests.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::{Api, Client, ResourceExt};
use mlkube::operator::volumes::api::{State, VolumeManager, VolumeStatus};
use serde_json::{Value, json};

use crate::platform::{NAMESPACE, app, assert_success, mlkube, set_param};
use crate::support::eventually;

const COMPONENT: &str = "volume-controller";
const ROOT: &str = "/var/lib/mlkube/volumes";
pub const TRAINING_IMAGE: &str = "mlkube/training:0.1.0";
/// Fetchers start from a local image and fail or finish in seconds.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The platform with its volume controller applied (once) and Ready.
pub fn volume_controller() {
    static APPLIED: OnceLock<()> = OnceLock::new();
    APPLIED.get_or_init(|| {
        // The store's read-only Secret, and those the tests of bad credentials make.
        let granted = json!([
            READ_SECRET,
            "volumes-bad-creds",
            "no-such-secret",
            "volumes-wrong-creds"
        ]);
        let granted = granted.to_string();
        set_param(
            app(),
            COMPONENT,
            "credentialSecrets",
            &granted,
            Some("local"),
        );
        let apply = mlkube(
            app(),
            &["apply", "local", "-c", COMPONENT, "--timeout", "5m"],
        );
        assert_success("mlkube apply local -c volume-controller", &apply);
    });
}

/// A Secret `name` in the platform's namespace with this access key, replaced if it exists.
pub async fn credentials(client: &Client, name: &str, id: &str, key: &str) {
    let secrets = Api::<Secret>::namespaced(client.clone(), NAMESPACE);
    let _ = secrets.delete(name, &DeleteParams::default()).await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": name },
        "stringData": { "awsAccessKeyID": id, "awsSecretAccessKey": key },
    }))
    .expect("a valid Secret");
    eventually(&format!("Secret {name} to be created"), TIMEOUT, || async {
        secrets.create(&PostParams::default(), &secret).await.ok()
    })
    .await;
}

/// Create the VolumeManager `name` in the platform's namespace (deleting a leftover first).
pub async fn create(
    client: &Client,
    name: &str,
    configs: Value,
) -> (Api<VolumeManager>, VolumeManager) {
    let api = Api::<VolumeManager>::namespaced(client.clone(), NAMESPACE);
    let _ = api.delete(name, &DeleteParams::default()).await;
    gone(&api, name).await;
    let vm: VolumeManager = serde_json::from_value(json!({
        "apiVersion": "kvc.kubeflow.org/v1", "kind": "VolumeManager",
        "metadata": { "name": name }, "spec": { "volumeConfigs": configs },
    }))
    .expect("a valid VolumeManager");
    let created = api
        .create(&PostParams::default(), &vm)
        .await
        .unwrap_or_else(|e| panic!("creating VolumeManager {name}: {e}"));
    (api, created)
}

/// Wait until the VolumeManager `name` is gone.
pub async fn gone(api: &Api<VolumeManager>, name: &str) {
    eventually(
        &format!("VolumeManager {name} to be gone"),
        TIMEOUT,
        || async { matches!(api.get_opt(name).await, Ok(None)).then_some(()) },
    )
    .await;
}

/// The volumes' statuses once every one of `ids` has finished (Completed or Failed).
pub async fn finished(api: &Api<VolumeManager>, name: &str, ids: &[&str]) -> Vec<VolumeStatus> {
    eventually(
        &format!("the volumes {ids:?} of {name} to finish"),
        TIMEOUT,
        || async {
            let status = api.get(name).await.ok()?.status?;
            let done = ids.iter().all(|id| {
                status.volumes.iter().any(|v| {
                    v.id == *id && matches!(v.state, Some(State::Completed | State::Failed))
                })
            });
            done.then_some(status.volumes)
        },
    )
    .await
}

pub fn volume<'a>(volumes: &'a [VolumeStatus], id: &str) -> &'a VolumeStatus {
    volumes
        .iter()
        .find(|v| v.id == id)
        .unwrap_or_else(|| panic!("no volume {id} in {volumes:?}"))
}

/// The nodes the fetchers of `vm` ran on.
pub async fn fetcher_nodes(client: &Client, vm: &VolumeManager) -> Vec<String> {
    let selector = format!(
        "kvc.kubeflow.org/role=fetch,kvc.kubeflow.org/volume-manager-uid={}",
        vm.uid().unwrap_or_default()
    );
    let mut nodes: Vec<String> = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("listing the fetchers")
        .items
        .into_iter()
        .filter_map(|p| p.spec?.node_name)
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Run `script` in the training image's Python on `node`, with the controller's root directory
/// of that node at `/root`, plus the pod `extra` fields; what it printed.
pub async fn on_node(
    client: &Client,
    name: &str,
    node: &str,
    script: &str,
    extra: Value,
) -> String {
    let mut pod = json!({
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "look", "image": TRAINING_IMAGE, "command": ["python3", "-c", script],
                "volumeMounts": [{ "name": "root", "mountPath": "/root", "readOnly": true }],
            }],
            "volumes": [{ "name": "root", "hostPath": { "path": ROOT, "type": "DirectoryOrCreate" } }],
        },
    });
    merge(&mut pod, extra);
    run_pod(client, pod).await
}

/// Create `pod` in the platform's namespace (replacing a leftover of its name), wait until it
/// has succeeded, and return what it printed.
pub async fn run_pod(client: &Client, pod: Value) -> String {
    run_pod_in(client, NAMESPACE, pod).await
}

/// [`run_pod`] in `namespace`.
pub async fn run_pod_in(client: &Client, namespace: &str, pod: Value) -> String {
    let name = pod["metadata"]["name"].as_str().expect("a name").to_owned();
    let name = name.as_str();
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let _ = pods
        .delete(name, &DeleteParams::default().grace_period(0))
        .await;
    eventually(&format!("pod {name} to be gone"), TIMEOUT, || async {
        matches!(pods.get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
    let pod: Pod = serde_json::from_value(pod).expect("a valid Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {name}: {e}"));
    let phase = eventually(&format!("pod {name} to finish"), TIMEOUT, || async {
        let phase = pods.get(name).await.ok()?.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    let logs = pods
        .logs(name, &LogParams::default())
        .await
        .unwrap_or_else(|e| panic!("the logs of pod {name}: {e}"));
    assert_eq!(phase, "Succeeded", "pod {name} failed:\n{logs}");
    let _ = pods.delete(name, &DeleteParams::default()).await;
    logs
}

/// Merge `extra` into `base`, objects key by key and arrays appended.
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (Value::Array(base), Value::Array(extra)) => base.extend(extra),
        (base, extra) => *base = extra,
    }
}

/// What lies in the node's directory of `vm`: its entries, or `absent`.
pub async fn placed_on(client: &Client, node: &str, vm: &VolumeManager, pod: &str) -> String {
    let uid = vm.uid().unwrap_or_default();
    let script = format!(
        "import os; d='/root/{uid}'; print(sorted(os.listdir(d)) if os.path.isdir(d) else 'absent')"
    );
    on_node(client, pod, node, &script, json!({}))
        .await
        .trim()
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Against the object store (the `object-store` component, applied in the platform's namespace).

const STORE: &str = "object-store";
const STORE_IMAGE: &str = concat!("mlkube/object-store:", env!("CARGO_PKG_VERSION"));
/// The store's administrator keys: uploads write with them.
pub const STORE_SECRET: &str = "object-store-credentials";
/// The store's read-only keys: what the volume controller grants VolumeManagers.
pub const READ_SECRET: &str = "object-store-read-credentials";
pub const PREFIX: &str = "kvc-test/digits";

/// The store's S3 endpoint, as its `<name>-endpoint` ConfigMap gives it to pods.
fn store_endpoint() -> String {
    format!("http://{STORE}.{NAMESPACE}.svc:8333")
}

/// The platform with its object store applied (once) and answering S3 requests.
pub fn object_store() {
    static APPLIED: OnceLock<()> = OnceLock::new();
    APPLIED.get_or_init(|| {
        let apply = mlkube(app(), &["apply", "local", "-c", STORE, "--timeout", "5m"]);
        assert_success("mlkube apply local -c object-store", &apply);
    });
}

/// Python with boto3, as the store's credentials: objects of a few sizes (one in a
/// subdirectory) under PREFIX in the `data` bucket, and `<path below PREFIX> <sha256>` each.
const UPLOAD: &str = r#"
import hashlib, os, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
for name, size in [("train.bin", 3 * 1024 * 1024 + 5), ("test.bin", 1000), ("labels/all.bin", 1)]:
    body = os.urandom(size)
    s3.put_object(Bucket="data", Key=os.environ["PREFIX"] + "/" + name, Body=body)
    print(name, hashlib.sha256(body).hexdigest())
"#;

pub fn sums(logs: &str) -> std::collections::BTreeMap<String, String> {
    logs.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(path, sum)| (path.to_owned(), sum.trim().to_owned()))
        .collect()
}

/// Upload the objects under PREFIX in the `data` bucket; each one's path below PREFIX and sum.
/// Once for all the tests of this binary: a second upload would change the objects under a
/// fill that another test is reading, and two uploads would race for one pod name.
pub async fn upload(client: &Client) -> std::collections::BTreeMap<String, String> {
    static UPLOADED: tokio::sync::Mutex<Option<std::collections::BTreeMap<String, String>>> =
        tokio::sync::Mutex::const_new(None);
    let mut uploaded = UPLOADED.lock().await;
    if uploaded.is_none() {
        *uploaded = Some(upload_once(client).await);
    }
    uploaded.clone().expect("uploaded above")
}

async fn upload_once(client: &Client) -> std::collections::BTreeMap<String, String> {
    sums(&with_store(client, "volumes-upload", PREFIX, UPLOAD).await)
}

/// Run `script`, Python with boto3, in the pod `name` of the store's image, with the store's
/// endpoint and credentials and `PREFIX` set to `prefix`; what it printed.
pub async fn with_store(client: &Client, name: &str, prefix: &str, script: &str) -> String {
    let pod = json!({
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "upload", "image": STORE_IMAGE, "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", script],
                "env": [{ "name": "PREFIX", "value": prefix }],
                "envFrom": [
                    { "configMapRef": { "name": format!("{STORE}-endpoint") } },
                    { "secretRef": { "name": STORE_SECRET } },
                ],
            }],
        },
    });
    run_pod(client, pod).await
}

pub fn s3_volume(id: &str, url: &str, secret: &str) -> Value {
    json!({
        "id": id, "replicas": 1, "sourceType": "S3-Dev", "endpointURL": store_endpoint(),
        "sourceURL": url,
        "options": { "awsCredentialsSecretName": secret, "timeoutForDataDownload": "5m" },
    })
}
