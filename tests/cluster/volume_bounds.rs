//! No VolumeManager stalls or kills the volume controller (issue 46). The CRD refuses at
//! admission what the controller could not place (a wrong-shaped toleration or nodeAffinity,
//! replicas past any cluster's nodes, an id too long for a directory, a label the API refuses,
//! two volumes with one id), saying which field; and objects stored before the CRD said so
//! fail alone in the controller, each with its status and a `VolumeFailed` warning, while a
//! good VolumeManager beside them is placed and the controller never exits.

use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use mlkube::operator::volumes::api::{State, VolumeManager};
use serde_json::{Value, json};

use crate::events::job_events;
use crate::support::{TestNamespace, eventually, lock_shared_cluster_objects};
use crate::volumes::{apply_crd, crd, create, pods, reaches, s3_volume, start};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Each bad entry: the VolumeManager's name, its one volumeConfig, the field the API names,
/// and what the controller's message says.
fn bad_entries() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let with = |field: &str, value: Value| {
        let mut config = s3_volume("digits", 1, json!({}));
        config[field] = value;
        config
    };
    vec![
        (
            "typed",
            with("tolerations", json!([{ "key": 5 }])),
            "tolerations[0].key",
            "tolerations is not a list of core/v1 Tolerations",
        ),
        (
            "affinity",
            with(
                "nodeAffinity",
                json!({ "requiredDuringSchedulingIgnoredDuringExecution": "kwok-node-0" }),
            ),
            "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            "nodeAffinity is not a core/v1 NodeAffinity",
        ),
        (
            "many",
            with("replicas", json!(1_000_000_000_000_i64)),
            "replicas",
            "replicas must be at most 5000",
        ),
        (
            "long",
            with("id", json!("x".repeat(300))),
            "id",
            "use at most 63 ASCII letters",
        ),
        (
            "labelled",
            with("labels", json!({ "bad key!": "x" })),
            "labels",
            "label key \"bad key!\"",
        ),
    ]
}

/// The VolumeManager `name` with `configs`, of any shape.
fn manager(name: &str, configs: Value) -> VolumeManager {
    serde_json::from_value(json!({
        "apiVersion": "kvc.kubeflow.org/v1", "kind": "VolumeManager",
        "metadata": { "name": name }, "spec": { "volumeConfigs": configs },
    }))
    .expect("any shape reads")
}

/// The CRD as it was before it bounded these fields: tolerations and nodeAffinity of any
/// shape, no maximum on replicas, ids and labels of any form.
fn loosened(mut crd: Value) -> Value {
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let configs = &mut spec["properties"]["volumeConfigs"];
    configs
        .as_object_mut()
        .unwrap()
        .remove("x-kubernetes-validations");
    let fields = &mut configs["items"]["properties"];
    let anything = json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    fields["tolerations"] = json!({ "type": "array", "items": anything });
    fields["nodeAffinity"] = anything;
    fields["replicas"] = json!({ "type": "integer", "minimum": 1 });
    fields["id"] = json!({ "type": "string", "minLength": 1 });
    fields["labels"] = json!({ "type": "object", "additionalProperties": { "type": "string" } });
    crd
}

#[tokio::test]
async fn the_crd_refuses_what_the_controller_could_not_place_naming_the_field() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-refused").await;
    apply_crd(&ns, crd()).await;
    let api = Api::<VolumeManager>::namespaced(ns.client.clone(), &ns.name);
    let twice = json!([
        s3_volume("digits", 1, json!({})),
        s3_volume("digits", 1, json!({}))
    ]);
    let mut entries: Vec<(&str, Value, &str)> = bad_entries()
        .into_iter()
        .map(|(name, config, field, _)| (name, json!([config]), field))
        .collect();
    entries.push(("twice", twice, "each volumeConfig needs an id of its own"));
    for (name, configs, says) in entries {
        match api
            .create(&PostParams::default(), &manager(name, configs))
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{name}: {status:?}");
                assert!(status.message.contains(says), "{name}: {}", status.message);
            }
            other => panic!("{name} was not refused: {other:?}"),
        }
    }
}

#[tokio::test]
async fn objects_stored_before_the_crd_bounded_them_fail_alone_and_the_controller_goes_on() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-stored").await;
    apply_crd(&ns, loosened(crd())).await;
    let mut bad = bad_entries();
    // The API server takes up a changed schema a moment after the write.
    let api = Api::<VolumeManager>::namespaced(ns.client.clone(), &ns.name);
    let first = manager(bad[0].0, json!([bad[0].1]));
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually("the loosened schema to be served", TIMEOUT, || async {
        api.create(&dry_run, &first).await.ok()
    })
    .await;
    for (name, config, _, _) in &bad {
        create(&ns, name, json!([config])).await;
    }
    // Passes admission either way: a duration, but past any download's time limit.
    let mut slow = s3_volume("digits", 1, json!({}));
    slow["options"]["timeoutForDataDownload"] = json!("18446744073709551615");
    create(&ns, "slow", json!([slow])).await;
    bad.push((
        "slow",
        Value::Null,
        "",
        "longer than the most a download may take",
    ));

    // The controller starts (and installs the bounded CRD again) with them all stored.
    let mut controller = start(&ns).await;
    let (api, good) = create(&ns, "good", json!([s3_volume("digits", 1, json!({}))])).await;
    reaches(&api, "good", State::Completed).await;
    for (name, _, _, says) in &bad {
        let vm = reaches(&api, name, State::Failed).await;
        let message = vm.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains(says), "{name}: {message}");
        let event = eventually(&format!("{name}'s VolumeFailed event"), TIMEOUT, || async {
            job_events(&ns, name, "VolumeFailed").await.pop()
        })
        .await;
        assert_eq!(event.type_.as_deref(), Some("Warning"), "{name}");
        assert!(event.note.unwrap_or_default().contains(says), "{name}");
    }
    let fetchers = pods(&ns, "fetch").await;
    let good_uid = good.metadata.uid.expect("a uid");
    assert!(
        fetchers.iter().all(
            |p| p.metadata.labels.as_ref().unwrap()["kvc.kubeflow.org/volume-manager-uid"]
                == good_uid
        ),
        "only the good VolumeManager's data is placed"
    );
    assert_eq!(fetchers.len(), 1);
    let exited = controller.process.0.try_wait().expect("asking the process");
    assert!(exited.is_none(), "the controller exited: {exited:?}");
}
