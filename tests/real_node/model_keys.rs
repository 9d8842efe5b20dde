//! Keys of its own for each job that saves a model (issue 46): the object store's model-keys
//! container answers the requests a training-job component renders (a ConfigMap labelled with
//! the store's name, whose `prefix` is the job's modelPath) with a Secret of keys that write only
//! there, refuses a request that overlaps an older one or lies outside the jobs' buckets (a
//! Warning event, the others unaffected), withdraws the keys with the request, and keeps them
//! across a restart of the store. The requests are made here as the component renders them
//! (`components.rs` checks the render; the real-node training tests save their models with
//! such keys).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;
use serde_json::json;

use crate::jobs::finished;
use crate::platform::{NAMESPACE, app, assert_success, mlkube};
use crate::storage::{
    STORE, STORE_IMAGE, StoreApp, put_each, ready_store_pod, restart_store_pod, run_to_completion,
    s3_client_pod_with,
};
use crate::support::{self, eventually};
use crate::volume_support::object_store;

const KEYS_TIMEOUT: Duration = Duration::from_secs(90);

/// A request for keys below `prefix`, as a job component of the store renders it.
async fn request(configmaps: &Api<ConfigMap>, name: &str, prefix: &str) {
    let request: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "mlkube.io/object-store": STORE } },
        "data": { "prefix": prefix },
    }))
    .expect("a ConfigMap");
    configmaps
        .create(&PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("create the request {name}: {e}"));
}

/// The keys in the Secret `name`, once it exists.
async fn keys_of(secrets: &Api<Secret>, name: &str) -> BTreeMap<String, String> {
    eventually(&format!("the Secret {name}"), KEYS_TIMEOUT, || async {
        let secret = secrets.get_opt(name).await.ok()??;
        let data = secret.data?;
        Some(
            data.into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect(),
        )
    })
    .await
}

/// The messages of the Warning events about the object `name`, once there is one.
async fn warnings_about(events: &Api<Event>, name: &str) -> Vec<String> {
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    eventually(
        &format!("a Warning event on {name}"),
        KEYS_TIMEOUT,
        || async {
            let listed = events.list(&about).await.ok()?;
            let messages: Vec<String> = listed
                .items
                .into_iter()
                .filter(|e| e.type_.as_deref() == Some("Warning"))
                .filter_map(|e| e.message)
                .collect();
            (!messages.is_empty()).then_some(messages)
        },
    )
    .await
}

/// Puts an object at the `bucket/key` of argv once a second until the keys are refused, for at
/// most 30 s (the S3 server reloads its identities after the store's filer tells it of a
/// change); prints how the last try ended, and when.
const UNTIL_REFUSED: &str = r#"
import os, sys, time, boto3, botocore
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
bucket, key = sys.argv[1].split("/", 1)
start = time.monotonic()
while True:
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=b"model")
        ended = "allowed"
    except botocore.exceptions.ClientError as error:
        ended = "refused " + error.response["Error"]["Code"]
    if ended != "allowed" or time.monotonic() > start + 30:
        break
    time.sleep(1)
print(sys.argv[1], ended, "after %.0f s" % (time.monotonic() - start))
"#;

/// What a pod holding the keys `keys` (by value, not by Secret) printed as it ran `script` with
/// `targets` as its arguments.
async fn put_with_keys(
    pods: &Api<Pod>,
    name: &str,
    keys: &BTreeMap<String, String>,
    script: &str,
    targets: &[&str],
) -> String {
    let mut pod = s3_client_pod_with(name, script, "unused");
    let container = &mut pod["spec"]["containers"][0];
    container["envFrom"] = json!([{ "configMapRef": { "name": format!("{STORE}-endpoint") } }]);
    container["env"] = json!(
        keys.iter()
            .map(|(k, v)| json!({ "name": k, "value": v }))
            .collect::<Vec<_>>()
    );
    container["command"]
        .as_array_mut()
        .expect("a command")
        .extend(targets.iter().map(|t| json!(t)));
    run_to_completion(pods, pod).await
}

fn assert_printed(printed: &str, lines: &[&str]) {
    for line in lines {
        assert!(printed.contains(line), "expected {line:?}:\n{printed}");
    }
}

#[tokio::test]
async fn each_job_that_saves_a_model_gets_keys_that_write_below_its_path_alone() {
    let store = StoreApp::deploy().await;
    let client = store.namespace.client.clone();
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), store.ns());
    let secrets = Api::<Secret>::namespaced(client.clone(), store.ns());
    let pods = Api::<Pod>::namespaced(client.clone(), store.ns());
    let events = Api::<Event>::namespaced(client.clone(), store.ns());
    request(&configmaps, "a-model-keys", "models/a/v1").await;
    request(&configmaps, "b-model-keys", "models/b").await;
    request(&configmaps, "c-model-keys", "models/a").await;
    request(&configmaps, "d-model-keys", "data/x").await;

    keys_of(&secrets, "a-model-keys").await;
    let targets = [
        "models/a/v1/model.json",
        "models/a/v2/model.json",
        "models/b/model.json",
        "data/x/model.json",
    ];
    let printed = put_each(&pods, "a", "a-model-keys", &targets).await;
    assert_printed(
        &printed,
        &[
            "models/a/v1/model.json allowed",
            "models/a/v2/model.json refused AccessDenied",
            "models/b/model.json refused AccessDenied",
            "data/x/model.json refused AccessDenied",
        ],
    );
    keys_of(&secrets, "b-model-keys").await;
    let printed = put_each(
        &pods,
        "b",
        "b-model-keys",
        &["models/b/1/model.json", "models/a/v1/model.json"],
    )
    .await;
    assert_printed(
        &printed,
        &[
            "models/b/1/model.json allowed",
            "models/a/v1/model.json refused AccessDenied",
        ],
    );

    // The overlapping and the misplaced requests fail alone, saying why; they get no keys.
    let overlap = warnings_about(&events, "c-model-keys").await;
    assert!(
        overlap
            .iter()
            .any(|m| m
                .contains("overlaps models/a/v1, the prefix of the older request a-model-keys")),
        "{overlap:?}"
    );
    let misplaced = warnings_about(&events, "d-model-keys").await;
    assert!(
        misplaced
            .iter()
            .any(|m| m.contains("data/x is in no bucket that jobs may write in (models)")),
        "{misplaced:?}"
    );
    for refused in ["c-model-keys", "d-model-keys"] {
        assert!(
            secrets.get_opt(refused).await.expect("get").is_none(),
            "{refused} got keys"
        );
    }

    // Gone with its request: the Secret (owned by it) and the keys; then c no longer overlaps.
    let a_keys = keys_of(&secrets, "a-model-keys").await;
    configmaps
        .delete("a-model-keys", &DeleteParams::default())
        .await
        .expect("delete a's request");
    eventually(
        "a's Secret to go with its request",
        KEYS_TIMEOUT,
        || async {
            secrets
                .get_opt("a-model-keys")
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    let again = ["models/a/v1/again.json"];
    let printed = put_with_keys(&pods, "a-withdrawn", &a_keys, UNTIL_REFUSED, &again).await;
    assert_printed(
        &printed,
        &["models/a/v1/again.json refused InvalidAccessKeyId"],
    );
    keys_of(&secrets, "c-model-keys").await;

    // A restart of the store keeps the keys it made.
    let before = ready_store_pod(&pods).await;
    restart_store_pod(&pods, &before).await;
    let printed = put_each(
        &pods,
        "b-after-restart",
        "b-model-keys",
        &["models/b/2/model.json"],
    )
    .await;
    assert_printed(&printed, &["models/b/2/model.json allowed"]);
}

/// Adds the component `name` to the shared app unless it is there: an XGBoostJob of the store's
/// image that saves nothing, with `modelPath`.
fn add_job(name: &str, model_path: &str) {
    let listed = mlkube(app(), &["component", "list", "-o", "name"]);
    if String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.trim() == name)
    {
        return;
    }
    let image = format!("image={STORE_IMAGE}");
    let model = format!("modelPath={model_path}");
    let params = [
        &*image,
        r#"command=["python3", "-c", "pass"]"#,
        "objectStore=object-store",
        &model,
    ];
    let mut args = vec!["component", "add", "xgboost-job", name];
    for param in params {
        args.extend(["--param", param]);
    }
    assert_success(
        &format!("mlkube component add {name}"),
        &mlkube(app(), &args),
    );
}

/// `apply` writes a job only once the store answered its request, so its pods never start
/// without their keys; a job whose modelPath overlaps another job's is refused at `apply` with
/// the store's reason, and never written.
#[tokio::test]
async fn apply_writes_a_job_once_its_keys_exist_and_refuses_one_whose_path_another_holds() {
    object_store();
    let client = support::client().await;
    let jobs = Api::<XGBoostJob>::namespaced(client.clone(), NAMESPACE);
    add_job("keys-first", "models/keys-test/v1");
    let apply = mlkube(
        app(),
        &["apply", "local", "-c", "keys-first", "--timeout", "5m"],
    );
    assert_success("mlkube apply local -c keys-first", &apply);
    let (state, message) = finished(&jobs, "keys-first").await;
    assert_eq!(state, "Succeeded", "{message}");
    let events = Api::<Event>::namespaced(client.clone(), NAMESPACE);
    let listed = events
        .list(&ListParams::default())
        .await
        .expect("list the events");
    let missing: Vec<String> = listed
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .filter(|m| m.contains("secret \"keys-first-model-keys\" not found"))
        .collect();
    assert!(
        missing.is_empty(),
        "a pod started before its keys: {missing:?}"
    );

    add_job("keys-second", "models/keys-test");
    let apply = mlkube(
        app(),
        &["apply", "local", "-c", "keys-second", "--timeout", "2m"],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&apply.stdout),
        String::from_utf8_lossy(&apply.stderr)
    );
    assert!(
        !apply.status.success(),
        "the overlapping job was applied:\n{said}"
    );
    assert!(
        said.contains(
            "overlaps models/keys-test/v1, the prefix of the older request keys-first-model-keys"
        ),
        "{said}"
    );
    assert!(
        jobs.get_opt("keys-second").await.expect("get").is_none(),
        "the job was written"
    );
    for (what, args) in [
        (
            "delete",
            &["delete", "local", "-c", "keys-second", "--yes"][..],
        ),
        ("component rm", &["component", "rm", "keys-second"][..]),
    ] {
        assert_success(&format!("mlkube {what} keys-second"), &mlkube(app(), args));
    }
}
