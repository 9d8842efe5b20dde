//! The volume controller on the real node: the `volume-controller` component's Deployment runs
//! `mlkube operator --controllers volumes` from the operator's image, as its ServiceAccount, in
//! the platform's namespace, and its fetcher and cleaner pods really run there, writing and
//! removing hostPath directories of the node. A pod of the training image looks at the node's
//! directories to check what was (and was not) placed.

use kube::api::DeleteParams;
use mlkube::operator::volumes::api::State;
use serde_json::json;

use crate::support;
use crate::volume_support::{
    PREFIX, READ_SECRET, TRAINING_IMAGE, create, credentials, fetcher_nodes, finished, gone,
    object_store, placed_on, run_pod, s3_volume, sums, upload, volume, volume_controller,
};

/// Python that prints `<path below /data> <sha256>` of every file under /data.
const READ: &str = r#"
import hashlib, os
for root, _, files in os.walk("/data"):
    for f in files:
        path = os.path.join(root, f)
        print(os.path.relpath(path, "/data"), hashlib.sha256(open(path, "rb").read()).hexdigest())
"#;

#[tokio::test]
async fn bad_sources_fail_with_their_cause_and_leave_nothing_on_the_node() {
    volume_controller();
    let client = support::client().await;
    credentials(
        &client,
        "volumes-bad-creds",
        "AKIDEXAMPLE",
        "not-a-real-secret",
    )
    .await;
    let endpoint = "http://127.0.0.1:1";
    let configs = json!([
        { "id": "refused", "replicas": 1, "sourceType": "S3-Dev", "endpointURL": endpoint,
          "sourceURL": "s3://datasets/digits",
          "options": { "awsCredentialsSecretName": "volumes-bad-creds" } },
        { "id": "nosecret", "replicas": 1, "sourceType": "S3-Dev", "endpointURL": endpoint,
          "sourceURL": "s3://datasets/digits",
          "options": { "awsCredentialsSecretName": "no-such-secret" } },
        { "id": "pach", "replicas": 1, "sourceType": "Pachyderm", "options": { "repo": "images" } },
        { "id": "ungranted", "replicas": 1, "sourceType": "S3-Dev", "endpointURL": endpoint,
          "sourceURL": "s3://datasets/digits",
          "options": { "awsCredentialsSecretName": "notebook-hub-token" } },
    ]);
    let (api, vm) = create(&client, "bad-sources", configs).await;
    let ids = ["refused", "nosecret", "pach", "ungranted"];
    let volumes = finished(&api, "bad-sources", &ids).await;
    let message = |id: &str| volume(&volumes, id).message.clone().unwrap_or_default();
    for id in ids {
        assert_eq!(
            volume(&volumes, id).state,
            Some(State::Failed),
            "{id}: {}",
            message(id)
        );
        assert!(volume(&volumes, id).volume_source.is_none());
    }
    assert!(
        message("refused").contains(&format!("source unreachable: {endpoint}"))
            && message("refused")
                .to_lowercase()
                .contains("connection refused"),
        "{}",
        message("refused")
    );
    assert!(
        message("nosecret").contains("bad credentials: Secret no-such-secret has no access key"),
        "{}",
        message("nosecret")
    );
    assert!(message("pach").contains("Pachyderm is not supported"));
    assert!(
        message("ungranted").contains(
            "options.awsCredentialsSecretName \"notebook-hub-token\" is not one of the Secrets this volume controller may give fetchers"
        ),
        "{}",
        message("ungranted")
    );

    // Nothing half-placed: the fetchers' node holds no copy, partial or whole.
    let nodes = fetcher_nodes(&client, &vm).await;
    assert!(!nodes.is_empty(), "the fetchers ran on a node");
    for node in &nodes {
        let placed = placed_on(&client, node, &vm, "look-bad-sources").await;
        assert_eq!(placed, "[]", "on {node}");
    }
    // Deleting it cleans the node: not even the empty directory is left.
    api.delete("bad-sources", &DeleteParams::default())
        .await
        .expect("deleting");
    gone(&api, "bad-sources").await;
    for node in &nodes {
        let placed = placed_on(&client, node, &vm, "look-bad-sources").await;
        assert_eq!(placed, "absent", "on {node}");
    }
}

#[tokio::test]
async fn a_volume_manager_fills_a_nodes_volume_from_the_store_that_a_pod_reads_back_and_deleting_it_removes_it()
 {
    volume_controller();
    object_store();
    let client = support::client().await;
    let uploaded = upload(&client).await;
    assert_eq!(uploaded.len(), 3, "{uploaded:?}");
    let url = format!("s3://data/{PREFIX}");
    let (api, vm) = create(
        &client,
        "digits",
        json!([s3_volume("digits", &url, READ_SECRET)]),
    )
    .await;
    let volumes = finished(&api, "digits", &["digits"]).await;
    let digits = volume(&volumes, "digits");
    assert_eq!(digits.state, Some(State::Completed), "{:?}", digits.message);
    let source =
        serde_json::to_value(digits.volume_source.as_ref().expect("a volume source")).unwrap();
    let affinity =
        serde_json::to_value(digits.node_affinity.as_ref().expect("a node affinity")).unwrap();

    // A pod that copies what the status says reads the same bytes.
    let mut reader = source.clone();
    reader["name"] = json!("data");
    let pod = json!({
        "metadata": { "name": "volumes-read" },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "affinity": { "nodeAffinity": affinity },
            "containers": [{
                "name": "read", "image": TRAINING_IMAGE, "command": ["python3", "-c", READ],
                "volumeMounts": [{ "name": "data", "mountPath": "/data", "readOnly": true }],
            }],
            "volumes": [reader],
        },
    });
    let read = sums(&run_pod(&client, pod).await);
    assert_eq!(
        read, uploaded,
        "the volume holds exactly the objects, byte for byte"
    );

    // Deleting the VolumeManager removes the data from the node.
    let nodes = fetcher_nodes(&client, &vm).await;
    assert_eq!(nodes.len(), 1);
    api.delete("digits", &DeleteParams::default())
        .await
        .expect("deleting");
    gone(&api, "digits").await;
    assert_eq!(
        placed_on(&client, &nodes[0], &vm, "look-digits").await,
        "absent"
    );
}

#[tokio::test]
async fn wrong_credentials_a_missing_bucket_and_a_missing_key_fail_with_their_cause() {
    volume_controller();
    object_store();
    let client = support::client().await;
    credentials(
        &client,
        "volumes-wrong-creds",
        "AKIDWRONG",
        "wrong-secret-key",
    )
    .await;
    let configs = json!([
        s3_volume("wrong", "s3://data/kvc-test", "volumes-wrong-creds"),
        s3_volume("nobucket", "s3://no-such-bucket/x", READ_SECRET),
        s3_volume("nokey", "s3://data/no/such/prefix", READ_SECRET),
    ]);
    let (api, vm) = create(&client, "bad-store", configs).await;
    let volumes = finished(&api, "bad-store", &["wrong", "nobucket", "nokey"]).await;
    let message = |id: &str| volume(&volumes, id).message.clone().unwrap_or_default();
    for id in ["wrong", "nobucket", "nokey"] {
        assert_eq!(
            volume(&volumes, id).state,
            Some(State::Failed),
            "{id}: {}",
            message(id)
        );
    }
    assert!(
        message("wrong").contains("bad credentials: "),
        "{}",
        message("wrong")
    );
    assert!(
        message("nobucket").contains("no such bucket: no-such-bucket"),
        "{}",
        message("nobucket")
    );
    assert!(
        message("nokey").contains("no such key: no object under s3://data/no/such/prefix"),
        "{}",
        message("nokey")
    );
    for node in fetcher_nodes(&client, &vm).await {
        assert_eq!(
            placed_on(&client, &node, &vm, "look-bad-store").await,
            "[]",
            "on {node}"
        );
    }
    api.delete("bad-store", &DeleteParams::default())
        .await
        .expect("deleting");
    gone(&api, "bad-store").await;
}
