//! Data in and a model out, on the real node: the training image's digits uploaded to the
//! object store, placed on the node by the volume controller, read by an XGBoostJob made by the
//! `xgboost-job` prototype from its params alone (`dataVolumeManager`, `objectStore`,
//! `modelPath`), whose Master saves its model in the store, where it is listed afterwards.

use kube::{Api, Client};
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;
use mlkube::operator::volumes::api::State;
use serde_json::{Value, json};

use crate::jobs::finished;
use crate::platform::{NAMESPACE, app, assert_success, mlkube};
use crate::support;
use crate::volume_support::{
    READ_SECRET, STORE_SECRET, create, object_store, run_pod, s3_volume, volume, volume_controller,
};

const COMPONENT: &str = "xgb-store";
const VOLUME_MANAGER: &str = "models-digits";
const DATA: &str = "s3://data/models-test/";
const MODEL: &str = "models/xgb-store/1";
const TRAINING_IMAGE: &str = concat!("mlkube/training:", env!("CARGO_PKG_VERSION"));

/// A pod of the training image running `digits_store.py ARGS` with the store's endpoint and keys.
fn store_pod(name: &str, args: &[&str]) -> Value {
    let mut command = vec!["python3", "/opt/mlkube/examples/digits_store.py"];
    command.extend_from_slice(args);
    json!({
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "store", "image": TRAINING_IMAGE, "command": command,
                "envFrom": [
                    { "configMapRef": { "name": "object-store-endpoint" } },
                    { "secretRef": { "name": STORE_SECRET } },
                ],
            }],
        },
    })
}

/// The component, made by the prototype from params only, applied again from scratch.
fn apply_job() {
    let dir = app();
    let listed = mlkube(dir, &["component", "list", "-o", "name"]);
    assert_success("mlkube component list", &listed);
    if !String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.trim() == COMPONENT)
    {
        let image = format!("image={TRAINING_IMAGE}");
        let model = format!("modelPath={MODEL}");
        let data = format!("dataVolumeManager={VOLUME_MANAGER}");
        let add = mlkube(
            dir,
            &[
                "component",
                "add",
                "xgboost-job",
                COMPONENT,
                "--param",
                &image,
                "--param",
                r#"command=["python3", "/opt/mlkube/examples/xgboost_digits.py"]"#,
                "--param",
                r#"args=["--data=/data/digits"]"#,
                "--param",
                "objectStore=object-store",
                "--param",
                &model,
                "--param",
                &data,
                "--param",
                "cleanPodPolicy=None",
            ],
        );
        assert_success("mlkube component add xgboost-job", &add);
    }
    let delete = mlkube(dir, &["delete", "local", "-c", COMPONENT, "--yes"]);
    assert_success("mlkube delete local -c xgb-store", &delete);
    let apply = mlkube(dir, &["apply", "local", "-c", COMPONENT, "--no-wait"]);
    assert_success("mlkube apply local -c xgb-store", &apply);
}

#[tokio::test]
async fn a_job_from_its_prototype_reads_the_placed_digits_and_saves_its_model_in_the_store() {
    volume_controller();
    object_store();
    let client = support::client().await;
    let uploaded = run_pod(
        &client,
        store_pod("models-upload", &["upload-dataset", DATA]),
    )
    .await;
    assert!(
        uploaded.contains(&format!("uploaded digits.csv.gz to {DATA}digits.csv.gz")),
        "{uploaded}"
    );
    let (managers, _) = create(
        &client,
        VOLUME_MANAGER,
        json!([s3_volume("digits", DATA, READ_SECRET)]),
    )
    .await;
    let started = std::time::Instant::now();
    let volumes = crate::volume_support::finished(&managers, VOLUME_MANAGER, &["digits"]).await;
    let placed = volume(&volumes, "digits");
    assert_eq!(placed.state, Some(State::Completed), "{:?}", placed.message);
    eprintln!("the digits placed in {:.1?}", started.elapsed());

    apply_job();
    let jobs = Api::<XGBoostJob>::namespaced(client.clone(), NAMESPACE);
    let (state, message) = finished(&jobs, COMPONENT).await;
    let job = format!("xgboostjob/{COMPONENT}");
    let logs = mlkube(app(), &["logs", "-n", NAMESPACE, &job]);
    assert_success(&format!("mlkube logs {job}"), &logs);
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert_eq!(state, "Succeeded", "{message}\n{logs}");
    let saved = format!("master-0 | model saved to s3://{MODEL}/ (1 file");
    assert!(
        logs.contains(&saved),
        "the Master says where it saved the model:\n{logs}"
    );

    let listed = run_pod(
        &client,
        store_pod("models-list", &["list", &format!("s3://{MODEL}/")]),
    )
    .await;
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&format!("s3://{MODEL}/model.json "))),
        "the model is in the store at its versioned path:\n{listed}"
    );
    the_saved_version_is_never_written_again(&client, &listed).await;
}

/// A second run for the saved version ends before it trains, and a save over it (as a job that
/// passed the check just before the first one saved would make) is refused at the put: the
/// version keeps what `listed` showed.
async fn the_saved_version_is_never_written_again(client: &Client, listed: &str) {
    let again = format!(
        "python3 /opt/mlkube/examples/xgboost_digits.py --model-uri s3://{MODEL}/; echo \"exit $?\""
    );
    let said = run_script(client, "models-again", &again).await;
    let refused = format!(
        "error: cannot save the model to s3://{MODEL}/: a model is saved there already \
         (s3://{MODEL}/model.json), and a model version is written once (nothing was trained)\n\
         hint: give the job a version of its own (a new modelPath, e.g. .../v2); the saved one \
         stays as it is"
    );
    assert!(said.contains(&refused), "{said}");
    assert!(said.trim_end().ends_with("exit 2"), "{said}");

    let over = format!(
        "cd /opt/mlkube/examples && mkdir /tmp/m && echo '{{}}' > /tmp/m/model.json && \
         python3 -c 'import digits_store; digits_store.save_model(\"/tmp/m\", \"s3://{MODEL}/\")'; \
         echo \"exit $?\""
    );
    let said = run_script(client, "models-over", &over).await;
    let refused = format!(
        "error: could not write to s3://{MODEL}/: PreconditionFailed: s3://{MODEL}/model.json is \
         saved already, and a model version is written once\n"
    );
    assert!(said.contains(&refused), "{said}");
    assert!(said.trim_end().ends_with("exit 2"), "{said}");

    let now = run_pod(
        client,
        store_pod("models-list-again", &["list", &format!("s3://{MODEL}/")]),
    )
    .await;
    assert_eq!(now, listed, "the saved version is unchanged");
}

/// What `sh -c SCRIPT` printed in a store pod named NAME.
async fn run_script(client: &Client, name: &str, script: &str) -> String {
    let mut pod = store_pod(name, &[]);
    pod["spec"]["containers"][0]["command"] = json!(["sh", "-c", script]);
    run_pod(client, pod).await
}

/// A model URI whose bucket does not exist (a typo) fails the training script at its start,
/// before it reads or trains anything, not at the upload after the training.
#[tokio::test]
async fn a_models_bucket_that_does_not_exist_fails_the_script_before_it_trains() {
    object_store();
    let client = support::client().await;
    let script = "python3 /opt/mlkube/examples/xgboost_digits.py --model-uri s3://modles/digits/1/; \
                  echo \"exit $?\"";
    let said = run_script(&client, "models-typo", script).await;
    assert!(
        said.contains(
            "error: cannot save the model to s3://modles/digits/1/: the bucket 'modles' does not \
             exist (nothing was trained)\nhint: check the model's URI (a job's modelPath), or \
             create the bucket 'modles'"
        ),
        "{said}"
    );
    assert!(said.trim_end().ends_with("exit 2"), "{said}");
}
