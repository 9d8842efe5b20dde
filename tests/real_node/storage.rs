//! Storage on the real node: claims of the default StorageClass (local-path-provisioner, which
//! `local-cluster.sh` runs beside the node) bind and keep what a pod wrote; the object-store
//! component, deployed by `mlkube apply` from a default app, answers S3 requests with the
//! credentials it generated, never printed, and keeps every object across a restart of its pod.
//!
//! Pods of the tests do the reading and writing, as a user's pods would: busybox for files,
//! boto3 (in the object store's image) for S3, with the endpoint and credentials taken by
//! reference from the component's ConfigMap and Secret. Debian's boto3 (1.26) predates
//! `AWS_ENDPOINT_URL`, so the scripts pass `S3_ENDPOINT` themselves.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::platform::{assert_success, create_secret, mlkube, set_param};
use crate::story::pod_story;
use crate::support::{self, TestNamespace, eventually, within};

pub(crate) const STORE: &str = "object-store";
pub(crate) const STORE_IMAGE: &str = concat!("mlkube/object-store:", env!("CARGO_PKG_VERSION"));
const POD_TIMEOUT: Duration = Duration::from_secs(180);

/// The busybox image the node holds (its tag is Debian's busybox version, so it is looked up).
pub async fn busybox_image(client: &Client) -> String {
    let nodes = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list the nodes");
    nodes
        .items
        .iter()
        .flat_map(|n| n.status.iter().flat_map(|s| s.images.iter().flatten()))
        .flat_map(|i| i.names.iter().flatten())
        .find(|name| name.starts_with("docker.io/mlkube/busybox:"))
        .cloned()
        .expect("the node holds the busybox image (image/node-images.sh builds it)")
}

/// Create the pod `pod` (JSON), wait until it ends, and return its logs; panics with them if it
/// failed.
pub(crate) async fn run_to_completion(pods: &Api<Pod>, pod: Value) -> String {
    let name = pod["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_string();
    let pod: Pod = serde_json::from_value(pod).expect("a valid Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create the pod {name}: {e}"));
    let ended = || async {
        let phase = pods.get(&name).await.ok()?.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    };
    let Some(phase) = within(POD_TIMEOUT, ended).await else {
        let story = pod_story(pods, &name).await;
        panic!("the pod {name} did not end within {POD_TIMEOUT:?}:\n{story}");
    };
    let logs = pods
        .logs(&name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("the logs of {name}: {e}"));
    assert_eq!(phase, "Succeeded", "the pod {name} failed:\n{logs}");
    logs
}

/// A pod that runs `script` with `sh` from `image`, the claim `claim` mounted at /data.
fn shell_pod(name: &str, image: &str, claim: &str, script: &str) -> Value {
    json!({
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "securityContext": { "runAsUser": 65532, "runAsNonRoot": true },
            "containers": [{
                "name": "sh",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-ec", script],
                "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
            }],
            "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": claim } }],
        },
    })
}

#[tokio::test]
async fn a_claim_of_the_default_storage_class_binds_and_keeps_what_a_pod_wrote() {
    let ns = TestNamespace::new("volume").await;
    let image = busybox_image(&ns.client).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(ns.client.clone(), &ns.name);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": "scratch" },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": "64Mi" } },
        },
    }))
    .expect("a valid claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("create the claim");
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let write = "head -c 1048576 /dev/urandom > /data/blob && sha256sum /data/blob";
    let written = run_to_completion(&pods, shell_pod("writer", &image, "scratch", write)).await;
    // Another pod, started after the first one ended: what it reads came from the volume.
    let read = "sha256sum /data/blob";
    let read_back = run_to_completion(&pods, shell_pod("reader", &image, "scratch", read)).await;
    assert!(written.contains("/data/blob"), "{written}");
    assert_eq!(read_back, written, "the reader sees the writer's bytes");

    let bound = claims.get("scratch").await.expect("the claim");
    let spec = bound.spec.expect("a claim has a spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("local-path"));
    let status = bound.status.expect("a bound claim has a status");
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    let volume = Api::<PersistentVolume>::all(ns.client.clone())
        .get(
            spec.volume_name
                .as_deref()
                .expect("a bound claim names its volume"),
        )
        .await
        .expect("the claim's volume");
    let affinity = serde_json::to_string(&volume.spec.expect("a spec").node_affinity).unwrap();
    // Both pods ran where the volume is: the first pod's node, to which the volume is pinned,
    // so the second went there too, whatever other node was free.
    let node_of = |pod: Pod| pod.spec.and_then(|s| s.node_name).expect("a scheduled pod");
    let writer = node_of(pods.get("writer").await.expect("the writer"));
    let reader = node_of(pods.get("reader").await.expect("the reader"));
    assert!(
        affinity.contains(&format!("\"{writer}\"")),
        "the volume is pinned to the node that holds it, {writer}: {affinity}"
    );
    assert_eq!(reader, writer, "the reader ran on the volume's node");
}

/// The store's app and namespace, removed when the test ends (also when it fails).
pub(crate) struct StoreApp {
    pub(crate) namespace: TestNamespace,
    pub(crate) app: PathBuf,
    _dir: tempfile::TempDir,
}

impl StoreApp {
    /// `mlkube init` and `mlkube apply local -c object-store`, which waits until the store
    /// answers S3 requests.
    pub(crate) async fn deploy() -> Self {
        let store = Self::init().await;
        let apply = mlkube(
            &store.app,
            &["apply", "local", "-c", STORE, "--timeout", "5m"],
        );
        assert_success("mlkube apply local -c object-store", &apply);
        store
    }

    /// `mlkube init` alone.
    async fn init() -> Self {
        let namespace = TestNamespace::new("store").await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let app = dir.path().join("store-app");
        let path = app.to_str().expect("a UTF-8 path");
        assert_success(
            "mlkube init",
            &mlkube(dir.path(), &["init", path, "--namespace", &namespace.name]),
        );
        StoreApp {
            namespace,
            app,
            _dir: dir,
        }
    }

    pub(crate) fn ns(&self) -> &str {
        &self.namespace.name
    }
}

/// Python with boto3 that uploads objects of random sizes to both buckets and prints one line
/// `<bucket>/<key> <sha256>` each; then checks that an unsigned request is refused.
///
/// Debian's botocore (1.29) asks for `Expect: 100-continue` on every PutObject; after an empty
/// one, which the store answers at once (no body to continue), botocore's next PutObject on that
/// connection waits out its read timeout (60 s) before it goes on. Later botocore asks only for
/// bodies over 1 MiB, and so does this script, as a user's current client would.
const UPLOAD: &str = r#"
import hashlib, os, boto3, botocore
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
def expect_only_large_bodies(request, **kwargs):
    if int(request.headers.get("Content-Length", 0)) <= 1024 * 1024:
        request.headers.pop("Expect", None)
s3.meta.events.register("before-send.s3.PutObject", expect_only_large_bodies)
for bucket in os.environ["S3_BUCKETS"].split(","):
    for i, size in enumerate([0, 1, 4096, 5 * 1024 * 1024 + 17]):
        body = os.urandom(size)
        key = f"set/{i}-{size}.bin"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        print(f"{bucket}/{key} {hashlib.sha256(body).hexdigest()}")
anonymous = boto3.client(
    "s3", endpoint_url=os.environ["S3_ENDPOINT"], config=Config(signature_version=botocore.UNSIGNED)
)
try:
    anonymous.list_objects_v2(Bucket="data")
    print("anonymous allowed")
except botocore.exceptions.ClientError as error:
    print("anonymous refused", error.response["Error"]["Code"])
"#;

/// Python with boto3 that lists every object of both buckets and prints `<bucket>/<key>
/// <sha256>` of what it downloads.
const DOWNLOAD: &str = r#"
import hashlib, os, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
for bucket in os.environ["S3_BUCKETS"].split(","):
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            print(f"{bucket}/{item['Key']} {hashlib.sha256(body).hexdigest()}")
"#;

/// After DOWNLOAD, an upload and a delete, each printed `allowed` or `refused <code>`: the
/// read-only keys must be refused both.
const TRY_WRITES: &str = r#"
import botocore
for action, call in [
    ("upload", lambda: s3.put_object(Bucket="models", Key="set/overwritten", Body=b"x")),
    ("delete", lambda: s3.delete_object(Bucket="data", Key="set/1-1.bin")),
]:
    try:
        call()
        print(action, "allowed")
    except botocore.exceptions.ClientError as error:
        print(action, "refused", error.response["Error"]["Code"])
"#;

/// A pod that runs `script` with python3 and boto3, reaching the store by reference: the
/// endpoint from the component's ConfigMap, the credentials from its Secret.
fn s3_client_pod(name: &str, script: &str) -> Value {
    s3_client_pod_with(name, script, &format!("{STORE}-credentials"))
}

/// As [`s3_client_pod`], with the credentials of the Secret `secret`.
pub(crate) fn s3_client_pod_with(name: &str, script: &str, secret: &str) -> Value {
    json!({
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "securityContext": { "runAsUser": 1000, "runAsNonRoot": true },
            "containers": [{
                "name": "client",
                "image": STORE_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", script],
                "envFrom": [
                    { "configMapRef": { "name": format!("{STORE}-endpoint") } },
                    { "secretRef": { "name": secret } },
                ],
            }],
        },
    })
}

/// `<bucket>/<key>` to checksum, from the lines a client pod printed.
fn checksums(logs: &str) -> BTreeMap<String, String> {
    logs.lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(object, _)| object.contains('/'))
        .map(|(object, sum)| (object.to_string(), sum.to_string()))
        .collect()
}

/// The uid of the store's pod once it is Ready.
pub(crate) async fn ready_store_pod(pods: &Api<Pod>) -> String {
    let name = format!("{STORE}-0");
    eventually("the store's pod to be Ready", POD_TIMEOUT, || async {
        let pod = pods.get(&name).await.ok()?;
        support::pod_is_ready(&pod)
            .then(|| pod.metadata.uid.clone())
            .flatten()
    })
    .await
}

/// Deletes the store's pod, whose uid is `before`, and waits until its successor is Ready.
pub(crate) async fn restart_store_pod(pods: &Api<Pod>, before: &str) {
    pods.delete(&format!("{STORE}-0"), &DeleteParams::default())
        .await
        .expect("delete the store's pod");
    eventually("a new store pod", POD_TIMEOUT, || async {
        let uid = ready_store_pod(pods).await;
        (uid != before).then_some(uid)
    })
    .await;
}

#[tokio::test]
async fn the_object_store_keeps_every_object_across_a_restart_of_its_pod() {
    let store = StoreApp::deploy().await;
    let client = store.namespace.client.clone();
    let pods = Api::<Pod>::namespaced(client.clone(), store.ns());
    let before = ready_store_pod(&pods).await;

    let uploaded = run_to_completion(&pods, s3_client_pod("upload", UPLOAD)).await;
    assert!(
        uploaded.contains("anonymous refused AccessDenied"),
        "{uploaded}"
    );
    let written = checksums(&uploaded);
    assert_eq!(
        written.len(),
        8,
        "four objects in each of two buckets: {uploaded}"
    );

    restart_store_pod(&pods, &before).await;

    let downloaded = run_to_completion(&pods, s3_client_pod("download", DOWNLOAD)).await;
    assert_eq!(
        checksums(&downloaded),
        written,
        "every object, byte for byte, after the restart"
    );
    // The read-only keys read every object, and may neither write nor delete one.
    let reader = s3_client_pod_with(
        "read-only",
        &format!("{DOWNLOAD}{TRY_WRITES}"),
        &format!("{STORE}-read-credentials"),
    );
    let read = run_to_completion(&pods, reader).await;
    assert_eq!(checksums(&read), written, "what the read-only keys read");
    for refused in ["upload refused AccessDenied", "delete refused AccessDenied"] {
        assert!(read.contains(refused), "expected {refused:?}:\n{read}");
    }
    assert_store_healthy(&store);
}

/// A pod that tries `tries` times, a second apart, to open a connection to the store's S3 port,
/// and prints `reached` or `unreachable`: the policy controller admits a new pod's address a
/// moment after the pod starts.
fn reach_pod(name: &str, store_namespace: &str, tries: u32) -> Value {
    let script = format!(
        "import socket, time\nfor attempt in range({tries}):\n    try:\n        socket.create_connection(('{STORE}.{store_namespace}.svc', 8333), timeout=3).close()\n        print('reached')\n        break\n    except OSError as e:\n        error = e\n        time.sleep(1)\nelse:\n    print('unreachable', error)\n"
    );
    json!({
        "metadata": { "name": name },
        "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{ "name": "reach", "image": STORE_IMAGE, "command": ["python3", "-c", script] }] },
    })
}

/// The store's NetworkPolicy, enforced by the nodes' policy controller: pods of another
/// namespace cannot open a connection to it until `grantedNamespaces` names that namespace,
/// while pods of the store's own namespace always can.
#[tokio::test]
async fn the_store_admits_its_own_namespace_and_the_granted_ones_only() {
    let store = StoreApp::deploy().await;
    let user = TestNamespace::new("store-user").await;
    let own = Api::<Pod>::namespaced(store.namespace.client.clone(), store.ns());
    let other = Api::<Pod>::namespaced(user.client.clone(), &user.name);
    let reached = |logs: String| logs.lines().any(|l| l == "reached");

    assert!(reached(
        run_to_completion(&own, reach_pod("own", store.ns(), 30)).await
    ));
    let refused = run_to_completion(&other, reach_pod("before-grant", store.ns(), 3)).await;
    assert!(
        refused.starts_with("unreachable"),
        "an ungranted namespace: {refused}"
    );

    let granted = format!("[\"{}\"]", user.name);
    set_param(&store.app, STORE, "grantedNamespaces", &granted, None);
    let apply = mlkube(
        &store.app,
        &["apply", "local", "-c", STORE, "--timeout", "5m"],
    );
    assert_success("mlkube apply local -c object-store", &apply);
    let after = run_to_completion(&other, reach_pod("after-grant", store.ns(), 30)).await;
    assert!(reached(after.clone()), "a granted namespace: {after}");
}

/// Puts one object at each `bucket/key` of argv and prints `<bucket/key> allowed` or `<bucket/key>
/// refused <code>`.
const TRY_PUTS: &str = r#"
import os, sys, boto3, botocore
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
for target in sys.argv[1:]:
    bucket, key = target.split("/", 1)
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=b"model")
        print(target, "allowed")
    except botocore.exceptions.ClientError as error:
        print(target, "refused", error.response["Error"]["Code"])
"#;

/// After TRY_PUTS, reads the first object back.
const READ_FIRST: &str = r#"
bucket, key = sys.argv[1].split("/", 1)
print("read back", s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
"#;

/// A writer's keys (the `writers` param) write below its prefix and nowhere else.
#[tokio::test]
async fn writer_keys_write_only_below_their_prefix() {
    let store = StoreApp::init().await;
    let writers = r#"{"digits-v1": ["models/digits/v1"]}"#;
    set_param(&store.app, STORE, "writers", writers, None);
    let apply = mlkube(
        &store.app,
        &["apply", "local", "-c", STORE, "--timeout", "5m"],
    );
    assert_success("mlkube apply local -c object-store", &apply);
    let pods = Api::<Pod>::namespaced(store.namespace.client.clone(), store.ns());
    let writer = format!("{STORE}-writer-digits-v1");
    let targets = [
        "models/digits/v1/model.json",
        "models/digits/v2/model.json",
        "data/digits.csv",
    ];
    let printed = put_each(&pods, "writer", &writer, &targets).await;
    for line in [
        "models/digits/v1/model.json allowed",
        "models/digits/v2/model.json refused AccessDenied",
        "data/digits.csv refused AccessDenied",
        "read back model",
    ] {
        assert!(printed.contains(line), "expected {line:?}:\n{printed}");
    }
}

/// What a pod `name` with the keys of `secret` printed as it put an object at each of
/// `targets` ("bucket/key") and read the first back.
pub(crate) async fn put_each(
    pods: &Api<Pod>,
    name: &str,
    secret: &str,
    targets: &[&str],
) -> String {
    let mut pod = s3_client_pod_with(name, &format!("{TRY_PUTS}{READ_FIRST}"), secret);
    pod["spec"]["containers"][0]["command"]
        .as_array_mut()
        .expect("a command")
        .extend(targets.iter().map(|t| json!(t)));
    run_to_completion(pods, pod).await
}

/// The states `mlkube status local -o json` reports for the store's objects, by kind.
fn store_states(store: &StoreApp) -> BTreeMap<String, String> {
    let status = mlkube(&store.app, &["status", "local", "-o", "json"]);
    let report: Value = serde_json::from_slice(&status.stdout).unwrap_or_else(|e| {
        panic!(
            "mlkube status -o json prints JSON ({e}): {}",
            String::from_utf8_lossy(&status.stderr)
        )
    });
    report["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|m| m["component"] == STORE)
        .map(|m| {
            let kind = m["kind"].as_str().unwrap_or("?").to_string();
            (
                kind + "/" + m["name"].as_str().unwrap_or("?"),
                m["state"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

/// `mlkube status local -o json` reports every object of the store healthy (the StatefulSet is
/// healthy only while its pod is Ready: a signed ListBuckets answered). The app's other
/// components are not applied here, so only the store's members are read.
fn assert_store_healthy(store: &StoreApp) {
    let states = store_states(store);
    assert!(
        states.contains_key(&format!("StatefulSet/{STORE}")),
        "{states:?}"
    );
    assert!(states.values().all(|s| s == "healthy"), "{states:?}");
}

/// With `credentialsSecret` naming a Secret that does not exist, the store never serves: its
/// init container says which Secret and how to make it, and `status` does not call it
/// healthy. Once the user creates the Secret, the store serves with those keys.
#[tokio::test]
async fn a_store_given_a_missing_secret_says_so_and_serves_once_it_exists() {
    let store = StoreApp::init().await;
    set_param(
        &store.app,
        STORE,
        "credentialsSecret",
        "team-keys",
        Some("local"),
    );
    let apply = mlkube(&store.app, &["apply", "local", "-c", STORE, "--no-wait"]);
    assert_success("mlkube apply --no-wait", &apply);
    let pods = Api::<Pod>::namespaced(store.namespace.client.clone(), store.ns());
    let params = kube::api::LogParams {
        container: Some("credentials".into()),
        ..Default::default()
    };
    let said = eventually("the init container's error", POD_TIMEOUT, || async {
        let logs = pods.logs(&format!("{STORE}-0"), &params).await.ok()?;
        logs.contains("error:").then_some(logs)
    })
    .await;
    let ns = store.ns();
    assert!(
        said.contains(&format!(
            "the Secret {ns}/team-keys with the object store's credentials does not exist"
        )) && said.contains("hint: kubectl create secret generic team-keys"),
        "{said}"
    );
    let states = store_states(&store);
    assert_ne!(
        states[&format!("StatefulSet/{STORE}")],
        "healthy",
        "{states:?}"
    );

    let keys = json!({ "AWS_ACCESS_KEY_ID": "team", "AWS_SECRET_ACCESS_KEY": "a-secret-of-the-teams-own-42" });
    create_secret(&store.namespace.client, ns, "team-keys", keys).await;
    // The init container retries with the kubelet's back-off (10 s, 20 s, 40 s, ... 5 min);
    // as a user would, the test does not wait for it: a new pod starts at once.
    pods.delete(&format!("{STORE}-0"), &DeleteParams::default())
        .await
        .expect("delete the store's pod");
    ready_store_pod(&pods).await;
    let listed = run_to_completion(&pods, s3_client_pod_with("list", LIST, "team-keys")).await;
    assert_eq!(
        listed.trim(),
        "data models",
        "the buckets, with the team's keys"
    );
    assert_store_healthy(&store);
}

/// Python with boto3 that prints the names of the buckets, space-separated.
const LIST: &str = r#"
import os, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
print(" ".join(sorted(b["Name"] for b in s3.list_buckets()["Buckets"])))
"#;

#[tokio::test]
async fn the_object_stores_credentials_are_generated_once_and_never_printed() {
    let store = StoreApp::deploy().await;
    let secrets = Api::<Secret>::namespaced(store.namespace.client.clone(), store.ns());
    let secret = secrets
        .get(&format!("{STORE}-credentials"))
        .await
        .expect("the store made its credentials Secret");
    // Owned by nothing: the keys outlive the store, as its data volume does.
    assert_eq!(secret.metadata.owner_references, None);
    let read = secrets
        .get(&format!("{STORE}-read-credentials"))
        .await
        .expect("the store made its read-only Secret");
    let key_values = |secret: &Secret| -> Vec<String> {
        let data = secret.data.clone().expect("the Secret has data");
        ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
            .iter()
            .map(|key| {
                let bytes = &data.get(*key).unwrap_or_else(|| panic!("no {key}")).0;
                String::from_utf8(bytes.clone()).expect("UTF-8")
            })
            .collect()
    };
    let mut values = key_values(&secret);
    let read_values = key_values(&read);
    assert!(values[1].len() >= 32, "a long random secret key");
    assert_ne!(values, read_values, "two pairs of keys");
    values.extend(read_values);
    for args in [
        &["show", "local", "-c", STORE][..],
        &["diff", "local", "-c", STORE],
        &["status", "local"],
    ] {
        let output = mlkube(&store.app, args);
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        for value in &values {
            assert!(
                !text.contains(value.as_str()),
                "`mlkube {}` prints a credential",
                args.join(" ")
            );
        }
    }
    // A second apply keeps the credentials: they are made once, not per apply or per pod.
    let apply = mlkube(
        &store.app,
        &["apply", "local", "-c", STORE, "--timeout", "5m"],
    );
    assert_success("a second apply", &apply);
    let again = secrets
        .get(&format!("{STORE}-credentials"))
        .await
        .expect("the Secret");
    assert_eq!(again.metadata.uid, secret.metadata.uid);
    // Deleted and added again, the store keeps both pairs of keys: nobody's copy goes stale.
    let delete = mlkube(&store.app, &["delete", "local", "-c", STORE, "--yes"]);
    assert_success("mlkube delete local -c object-store", &delete);
    let apply = mlkube(
        &store.app,
        &["apply", "local", "-c", STORE, "--timeout", "5m"],
    );
    assert_success("an apply after the delete", &apply);
    for kept in [&secret, &read] {
        let name = kept.metadata.name.clone().expect("a name");
        let now = secrets.get(&name).await.expect("the Secret");
        assert_eq!(now.metadata.uid, kept.metadata.uid, "{name} kept");
    }
}
