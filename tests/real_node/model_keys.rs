//! Keys of its own for each job that saves a model (issue 46): the object store's model-keys
//! container answers the requests a training-job component renders (a ConfigMap labelled with
//! the store's name, whose `prefix` is the job's modelPath) with a Secret of keys that write only
//! there, refuses a request that overlaps an older one, lies outside the jobs' buckets or asks
//! anew for a prefix that holds a model (a Warning event, the others unaffected), withdraws the
//! keys with the request, and keeps them across a restart of the store. The requests are made here as the component renders them
//! (`components.rs` checks the render; the real-node training tests save their models with
//! such keys).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;
use serde_json::{Value, json};

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
    request_for_jobs(configmaps, name, prefix, json!([])).await;
}

/// A request for keys below `prefix` naming `jobs` (as a sweep's: each saves in a path of its
/// own below the prefix).
async fn request_for_jobs(configmaps: &Api<ConfigMap>, name: &str, prefix: &str, jobs: Value) {
    let request: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "mlkube.io/object-store": STORE } },
        "data": { "prefix": prefix, "jobs": jobs.to_string() },
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

/// The messages of the Warning events about the object `name`, once one of them says `text`.
async fn warned(events: &Api<Event>, name: &str, text: &str) -> Vec<String> {
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    eventually(
        &format!("a Warning event on {name} that says {text:?}"),
        KEYS_TIMEOUT,
        || async {
            let listed = events.list(&about).await.ok()?;
            let messages: Vec<String> = listed
                .items
                .into_iter()
                .filter(|e| e.type_.as_deref() == Some("Warning"))
                .filter_map(|e| e.message)
                .collect();
            messages
                .iter()
                .any(|m| m.contains(text))
                .then_some(messages)
        },
    )
    .await
}

/// Changes the jobs the request `name` names.
async fn name_jobs(configmaps: &Api<ConfigMap>, name: &str, jobs: Value) {
    let patch = json!({ "data": { "jobs": jobs.to_string() } });
    configmaps
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("name the jobs of {name}: {e}"));
}

/// Deletes the request `name` and waits until its Secret went with it.
async fn withdraw(configmaps: &Api<ConfigMap>, secrets: &Api<Secret>, name: &str) {
    configmaps
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete the request {name}: {e}"));
    eventually(
        &format!("the Secret {name} to go with its request"),
        KEYS_TIMEOUT,
        || async { secrets.get_opt(name).await.ok()?.is_none().then_some(()) },
    )
    .await;
}

/// Puts an object at the `bucket/key` of argv[2] once a second until the put ends as argv[1]
/// says (`allowed` or `refused`), for at most 60 s (the S3 server reloads its identities after
/// the store's filer tells it of a change, and the store looks at a running job every 5 s); prints
/// how the last try ended, and when.
const UNTIL: &str = r#"
import os, sys, time, boto3, botocore
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
awaited, target = sys.argv[1:3]
bucket, key = target.split("/", 1)
start = time.monotonic()
while True:
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=b"model")
        ended = "allowed"
    except botocore.exceptions.ClientError as error:
        ended = "refused " + error.response["Error"]["Code"]
    if ended.startswith(awaited) or time.monotonic() > start + 60:
        break
    time.sleep(1)
print(target, ended, "after %.0f s" % (time.monotonic() - start))
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
    request(&configmaps, "c-model-keys", "models/a/v1/sub").await;
    request(&configmaps, "d-model-keys", "data/x").await;
    let job = |name: &str| json!({ "apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob", "name": name, "path": format!("models/e/{name}") });
    let sweep = json!([job("e-1"), job("e-2")]);
    request_for_jobs(&configmaps, "e-model-keys", "models/e", sweep).await;
    // Written by hand: jobs that are not Kubeflow jobs, or not objects, are left out.
    let secret = json!({ "apiVersion": "v1", "kind": "Secret", "name": "object-store-credentials", "path": "models/f/x" });
    request_for_jobs(
        &configmaps,
        "f-model-keys",
        "models/f",
        json!([secret, { "path": "models/f/y" }, 5]),
    )
    .await;

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

    // A sweep's keys write in its jobs' paths alone (until each job succeeds).
    keys_of(&secrets, "e-model-keys").await;
    let trials = [
        "models/e/e-1/model.json",
        "models/e/e-2/model.json",
        "models/e/model.json",
    ];
    let printed = put_each(&pods, "e", "e-model-keys", &trials).await;
    assert_printed(
        &printed,
        &[
            "models/e/e-1/model.json allowed",
            "models/e/e-2/model.json allowed",
            "models/e/model.json refused AccessDenied",
        ],
    );

    keys_of(&secrets, "f-model-keys").await;

    // A path that holds a file gets no write access back: named again (a job made again, a
    // sweep grown over it), e-1 stays refused while e-3, new in the same change, may write.
    let e_keys = keys_of(&secrets, "e-model-keys").await;
    name_jobs(&configmaps, "e-model-keys", json!([job("e-2")])).await;
    let dropped = ["refused", "models/e/e-1/again.json"];
    let printed = put_with_keys(&pods, "e-dropped", &e_keys, UNTIL, &dropped).await;
    assert_printed(&printed, &["models/e/e-1/again.json refused AccessDenied"]);
    name_jobs(
        &configmaps,
        "e-model-keys",
        json!([job("e-1"), job("e-2"), job("e-3")]),
    )
    .await;
    let added = ["allowed", "models/e/e-3/model.json"];
    let printed = put_with_keys(&pods, "e-grown", &e_keys, UNTIL, &added).await;
    assert_printed(&printed, &["models/e/e-3/model.json allowed"]);
    let printed = put_with_keys(&pods, "e-held", &e_keys, UNTIL, &dropped).await;
    assert_printed(&printed, &["models/e/e-1/again.json refused AccessDenied"]);

    // The overlapping and the misplaced requests fail alone, saying why; they get no keys.
    warned(
        &events,
        "c-model-keys",
        "overlaps models/a/v1, the prefix of the older request a-model-keys",
    )
    .await;
    warned(
        &events,
        "d-model-keys",
        "data/x is in no bucket that jobs may write in (models)",
    )
    .await;
    for refused in ["c-model-keys", "d-model-keys"] {
        assert!(
            secrets.get_opt(refused).await.expect("get").is_none(),
            "{refused} got keys"
        );
    }

    // Gone with its request: the Secret (owned by it) and the keys; then c no longer overlaps.
    let a_keys = keys_of(&secrets, "a-model-keys").await;
    withdraw(&configmaps, &secrets, "a-model-keys").await;
    let again = ["refused", "models/a/v1/again.json"];
    let printed = put_with_keys(&pods, "a-withdrawn", &a_keys, UNTIL, &again).await;
    assert_printed(
        &printed,
        &["models/a/v1/again.json refused InvalidAccessKeyId"],
    );
    keys_of(&secrets, "c-model-keys").await;
    let written = ["models/a/v1/sub/model.json"];
    let printed = put_each(&pods, "c", "c-model-keys", &written).await;
    assert_printed(&printed, &["models/a/v1/sub/model.json allowed"]);

    // A version is written once: made again (a new uid), c's request gets no new keys there.
    withdraw(&configmaps, &secrets, "c-model-keys").await;
    request(&configmaps, "c-model-keys", "models/a/v1/sub").await;
    warned(
        &events,
        "c-model-keys",
        "models/a/v1/sub holds a model already (models/a/v1/sub/model.json), and a model version \
         is written once",
    )
    .await;
    assert!(
        secrets
            .get_opt("c-model-keys")
            .await
            .expect("get")
            .is_none(),
        "keys to write over a saved version"
    );

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
/// image that runs the Python `code` and saves nothing, with `modelPath`.
fn add_job(name: &str, model_path: &str, code: &str) {
    let listed = mlkube(app(), &["component", "list", "-o", "name"]);
    if String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.trim() == name)
    {
        return;
    }
    let image = format!("image={STORE_IMAGE}");
    let model = format!("modelPath={model_path}");
    let command = format!("command={}", json!(["python3", "-c", code]));
    let params = [&*image, &*command, "objectStore=object-store", &model];
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
/// without their keys, and once the job succeeded, or failed, its keys no longer write; a job
/// whose modelPath overlaps another job's is refused at `apply` with the store's reason, and
/// never written.
#[tokio::test]
async fn apply_writes_a_job_once_its_keys_exist_and_refuses_one_whose_path_another_holds() {
    object_store();
    let client = support::client().await;
    let jobs = Api::<XGBoostJob>::namespaced(client.clone(), NAMESPACE);
    add_job("keys-first", "models/keys-test/v1", "pass");
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
    // Its job succeeded: the version is written, and its keys no longer write there.
    let secrets = Api::<Secret>::namespaced(client.clone(), NAMESPACE);
    let keys = keys_of(&secrets, "keys-first-model-keys").await;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let name = format!("keys-first-after-{}", now.expect("a clock").as_secs());
    let late = ["refused", "models/keys-test/v1/late.json"];
    let printed = put_with_keys(&pods, &name, &keys, UNTIL, &late).await;
    assert_printed(
        &printed,
        &["models/keys-test/v1/late.json refused AccessDenied"],
    );
    // A job that failed: its keys no longer write in its path either (`--no-wait` still waits
    // for the keys, and not for the job, which fails).
    add_job(
        "keys-failed",
        "models/keys-test/failed",
        "raise SystemExit(1)",
    );
    let apply = mlkube(app(), &["apply", "local", "-c", "keys-failed", "--no-wait"]);
    assert_success("mlkube apply local -c keys-failed --no-wait", &apply);
    let (state, message) = finished(&jobs, "keys-failed").await;
    assert_eq!(state, "Failed", "{message}");
    let keys = keys_of(&secrets, "keys-failed-model-keys").await;
    let late = ["refused", "models/keys-test/failed/late.json"];
    let printed = put_with_keys(&pods, &format!("{name}-failed"), &keys, UNTIL, &late).await;
    assert_printed(
        &printed,
        &["models/keys-test/failed/late.json refused AccessDenied"],
    );

    add_job("keys-second", "models/keys-test", "pass");
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
    assert!(said.contains("mlkube: 1 object(s) failed:"), "{said}");
    assert!(
        jobs.get_opt("keys-second").await.expect("get").is_none(),
        "the job was written"
    );
    for name in ["keys-second", "keys-failed"] {
        let delete = ["delete", "local", "-c", name, "--yes"];
        for args in [&delete[..], &["component", "rm", name]] {
            let what = format!("mlkube {}", args.join(" "));
            assert_success(&what, &mlkube(app(), args));
        }
    }
}
