//! The local control plane does what every other cluster test relies on: CRDs become
//! Established, server-side apply records its field manager, pods are scheduled to kwok nodes
//! and run, Deployments roll out, and the garbage collector removes dependents of a deleted owner.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::{TestNamespace, eventually};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn crd_becomes_established() {
    let ns = TestNamespace::new("smoke-crd").await;
    let group = format!("{}.smoke.mlkube.io", ns.name);
    let name = format!("widgets.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": name },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                    "spec": { "type": "object", "properties": { "size": { "type": "integer" } } }
                } } }
            }]
        }
    }))
    .unwrap();
    let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();

    let established = tokio::time::timeout(
        TIMEOUT,
        await_condition(crds.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .expect("the CRD became Established in time")
    .unwrap();
    assert!(established.is_some());

    crds.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn server_side_apply_records_the_field_manager() {
    let ns = TestNamespace::new("smoke-ssa").await;
    let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let desired = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "settings" },
        "data": { "learning-rate": "0.01" }
    });
    config_maps
        .patch(
            "settings",
            &PatchParams::apply("mlkube-smoke"),
            &Patch::Apply(&desired),
        )
        .await
        .unwrap();

    let live = config_maps.get("settings").await.unwrap();
    assert_eq!(live.data.unwrap()["learning-rate"], "0.01");
    let managers: Vec<_> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|entry| (entry.manager, entry.operation))
        .collect();
    assert_eq!(
        managers,
        [(Some("mlkube-smoke".into()), Some("Apply".into()))]
    );
}

#[tokio::test]
async fn pod_is_scheduled_to_a_kwok_node_and_runs() {
    let ns = TestNamespace::new("smoke-pod").await;
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "trainer" },
        "spec": { "containers": [{ "name": "tensorflow", "image": "tensorflow/tensorflow:2.15.0" }] }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let running = tokio::time::timeout(
        TIMEOUT,
        await_condition(pods.clone(), "trainer", |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref())
                .is_some_and(|s| s.phase.as_deref() == Some("Running"))
        }),
    )
    .await
    .expect("the pod reached Running in time")
    .unwrap()
    .unwrap();
    let node = running
        .spec
        .unwrap()
        .node_name
        .expect("a running pod has a node");
    assert!(
        node.starts_with("kwok-"),
        "scheduled to {node}, not a kwok node"
    );
}

#[tokio::test]
async fn deployment_rolls_out_and_its_pods_are_garbage_collected() {
    let ns = TestNamespace::new("smoke-gc").await;
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "serving" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "serving" } },
            "template": {
                "metadata": { "labels": { "app": "serving" } },
                "spec": { "containers": [{ "name": "server", "image": "tensorflow/serving:2.15.0" }] }
            }
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    tokio::time::timeout(
        TIMEOUT,
        await_condition(deployments.clone(), "serving", |d: Option<&Deployment>| {
            d.and_then(|d| d.status.as_ref())
                .is_some_and(|s| s.available_replicas == Some(2))
        }),
    )
    .await
    .expect("the Deployment became available in time")
    .unwrap();
    let selector = ListParams::default().labels("app=serving");
    assert_eq!(pods.list(&selector).await.unwrap().items.len(), 2);

    // The pods belong to a ReplicaSet that belongs to the Deployment: deleting the owner in the
    // background leaves the rest to the garbage collector.
    deployments
        .delete("serving", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the Deployment's pods to be garbage-collected",
        TIMEOUT,
        || {
            let pods = pods.clone();
            let selector = selector.clone();
            async move {
                // A pod that is only terminating still counts as present.
                let left = pods.list(&selector).await.ok()?;
                left.items.is_empty().then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn dependent_config_map_is_garbage_collected_with_its_owner() {
    let ns = TestNamespace::new("smoke-owner").await;
    let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let owner = config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "owner" } })).unwrap(),
        )
        .await
        .unwrap();
    let dependent: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "dependent",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.uid().unwrap()
            }]
        }
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();

    config_maps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the dependent ConfigMap to be garbage-collected",
        TIMEOUT,
        || {
            let config_maps = config_maps.clone();
            async move {
                config_maps
                    .get_opt("dependent")
                    .await
                    .ok()?
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}
