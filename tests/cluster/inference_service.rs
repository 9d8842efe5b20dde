//! The InferenceService controller (`mlkube operator --controllers serving`) on the kwok
//! cluster, run as the binary with the `training-operator` component's ServiceAccount token
//! (rendered with `servingGateway`, namespace scope): a canary's share follows its readiness
//! (given, held while it is not ready, returned when it stops being ready, with the events that
//! say so), a promotion retires the old revision only once the gateway acknowledged the route
//! that no longer names it, and bad input fails alone with KServe's reason and a message naming
//! the fix, creating nothing. kwok runs no container: the pods turn Ready as
//! `cluster/kwok-stages.yaml` says, and the test plays the kubelet whose readiness probe fails
//! and the gateway that accepts routes. What only real servers and Traefik show (requests
//! split, none failed) is proved on the real node.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::{Api, ResourceExt};
use mlkube::operator::serving::api::InferenceService;
use mlkube::operator::serving::context::route_resource;
use serde_json::{Value, json};

use crate::events::job_events;
use crate::operator_identity::{
    Access, OperatorIdentity, OperatorProcess, Scope, spawn_operator_binary,
};
use crate::support::{TestNamespace, eventually, lock_shared_cluster_objects, within};
use crate::volumes::apply_crd;

const TIMEOUT: Duration = Duration::from_secs(60);
const GATEWAY: &str = "gateway";

fn crd(text: &str) -> Value {
    serde_yaml::from_str(text).expect("the CRD is YAML")
}

/// KServe's CRDs and the Gateway API's HTTPRoute, installed once for every test.
pub(crate) async fn install_crds(ns: &TestNamespace) {
    for text in [
        include_str!("../../crds/inferenceservices.serving.kserve.io.yaml"),
        include_str!("../../crds/servingruntimes.serving.kserve.io.yaml"),
        include_str!("../../crds/clusterservingruntimes.serving.kserve.io.yaml"),
        include_str!("../../crds/httproutes.gateway.networking.k8s.io.yaml"),
    ] {
        apply_crd(ns, crd(text)).await;
    }
}

/// The controller for the test's namespace, as the component's ServiceAccount.
pub(crate) struct Controller {
    _process: OperatorProcess,
    _identity: OperatorIdentity,
}

async fn start(ns: &TestNamespace) -> Controller {
    {
        let _shared = lock_shared_cluster_objects().await;
        install_crds(ns).await;
    }
    spawn_controller(ns).await
}

/// The controller for the test's namespace, once the CRDs are installed.
pub(crate) async fn spawn_controller(ns: &TestNamespace) -> Controller {
    let access = Access::scoped(Scope::Namespace).with_serving(GATEWAY);
    let identity = OperatorIdentity::new(ns, access).await;
    let gateway = format!("{}/{GATEWAY}", ns.name);
    let process = spawn_operator_binary(
        &ns.name,
        &identity,
        &[
            "--controllers",
            "serving",
            "--serving-gateway",
            &gateway,
            "--storage-initializer-image",
            "mlkube/serving:test",
        ],
    );
    Controller {
        _process: process,
        _identity: identity,
    }
}

/// A ServingRuntime of the namespace serving `formats` over V2.
pub(crate) async fn runtime(ns: &TestNamespace, name: &str, formats: Value) {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
        "metadata": { "name": name },
        "spec": {
            "supportedModelFormats": formats,
            "protocolVersions": ["v2"],
            "containers": [{
                "name": "kserve-container", "image": "mlkube/serving:test",
                "args": ["--name", "{{.Name}}", "--model-dir", "/mnt/models"],
                "ports": [{ "containerPort": 8080, "protocol": "TCP" }],
            }],
        },
    }))
    .unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("serving.kserve.io", "v1alpha1", "ServingRuntime"),
        "servingruntimes",
    );
    Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating ServingRuntime {name}: {e}"));
}

/// An InferenceService of the model `model`.
async fn create(ns: &TestNamespace, name: &str, model: Value) -> Api<InferenceService> {
    create_predictor(ns, name, json!({ "model": model })).await
}

/// An InferenceService of `predictor`.
async fn create_predictor(
    ns: &TestNamespace,
    name: &str,
    predictor: Value,
) -> Api<InferenceService> {
    let api = Api::<InferenceService>::namespaced(ns.client.clone(), &ns.name);
    let isvc: InferenceService = serde_json::from_value(json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": { "name": name },
        "spec": { "predictor": predictor },
    }))
    .unwrap();
    api.create(&PostParams::default(), &isvc)
        .await
        .unwrap_or_else(|e| panic!("creating InferenceService {name}: {e}"));
    api
}

fn xgboost(uri: &str) -> Value {
    json!({ "modelFormat": { "name": "xgboost" }, "protocolVersion": "v2", "storageUri": uri })
}

/// The store's keys KServe's way: a Secret annotated with the endpoint, listed by the
/// ServiceAccount `models`.
async fn store_account(ns: &TestNamespace) {
    store_secret(ns, "s3creds").await;
    let account: k8s_openapi::api::core::v1::ServiceAccount = serde_json::from_value(
        json!({ "metadata": { "name": "models" }, "secrets": [{ "name": "s3creds" }] }),
    )
    .unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &account)
        .await
        .expect("the ServiceAccount");
}

/// A Secret `name` with the store's keys, annotated with its endpoint as KServe reads it.
pub(crate) async fn store_secret(ns: &TestNamespace, name: &str) {
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": { "name": name, "annotations": {
            "serving.kserve.io/s3-endpoint": "object-store:9000", "serving.kserve.io/s3-usehttps": "0",
        } },
        "stringData": { "AWS_ACCESS_KEY_ID": "reader", "AWS_SECRET_ACCESS_KEY": "secret" },
    }))
    .unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret");
}

/// The condition `type_` of `isvc`: (status, reason, message).
fn condition(
    isvc: &InferenceService,
    type_: &str,
) -> Option<(String, Option<String>, Option<String>)> {
    let c = isvc
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The predictor's traffic: (revision, percent) in the status' order.
fn traffic(isvc: &InferenceService) -> Vec<(String, i64)> {
    (isvc.status.iter())
        .flat_map(|s| s.components.get("predictor"))
        .flat_map(|p| p.traffic.iter())
        .map(|t| (t.revision_name.clone(), t.percent))
        .collect()
}

/// `name` once `check` holds; on a timeout, the panic shows its status.
async fn until(
    api: &Api<InferenceService>,
    name: &str,
    what: &str,
    check: impl Fn(&InferenceService) -> bool,
) -> InferenceService {
    let found = within(TIMEOUT, || async {
        let isvc = api.get(name).await.ok()?;
        check(&isvc).then_some(isvc)
    })
    .await;
    if let Some(isvc) = found {
        return isvc;
    }
    let last = api.get(name).await.ok().and_then(|i| i.status);
    panic!(
        "timed out waiting for InferenceService {name}: {what}; its status: {}",
        serde_json::to_string_pretty(&last).unwrap_or_default()
    )
}

/// The NetworkPolicy over `name`'s revisions' pods admits the namespace's pods and the
/// gateway's, nobody else's; deleted, it comes back.
async fn the_servers_admit_only_the_namespace_and_the_gateway(ns: &TestNamespace, name: &str) {
    let policies = Api::<NetworkPolicy>::namespaced(ns.client.clone(), &ns.name);
    let policy = format!("{name}-predictor");
    let gateway_pods = json!({ "matchLabels": {
        "app.kubernetes.io/instance": GATEWAY, "app.kubernetes.io/name": "gateway" } });
    let expected = json!({
        "podSelector": { "matchLabels": { "serving.kserve.io/inferenceservice": name } },
        "policyTypes": ["Ingress"],
        "ingress": [{ "from": [
            { "podSelector": {} },
            { "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": ns.name } },
              "podSelector": gateway_pods },
        ] }],
    });
    let live = policies.get(&policy).await.expect("the NetworkPolicy");
    assert_eq!(serde_json::to_value(&live.spec).unwrap(), expected);
    policies
        .delete(&policy, &DeleteParams::default())
        .await
        .expect("the NetworkPolicy is deleted");
    eventually("the NetworkPolicy to be made again", TIMEOUT, || async {
        let again = policies.get_opt(&policy).await.ok()??;
        (again.uid() != live.uid()).then_some(())
    })
    .await;
}

/// Play the gateway for the route `name` until aborted: accept each generation it gets.
pub(crate) fn keep_accepting(ns: &TestNamespace, name: &str) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let (client, namespace) = (ns.client.clone(), ns.name.clone());
    let routes =
        Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &route_resource());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut accepted = None;
        let mut stream = watcher(routes, config).applied_objects().boxed();
        while let Some(route) = stream.next().await {
            let Ok(route) = route else { continue };
            if route.metadata.generation != accepted {
                accepted = route.metadata.generation;
                accept(&client, &namespace, &route).await;
            }
        }
    })
}

/// Play the gateway: accept the route at its current generation.
async fn accept_route(ns: &TestNamespace, name: &str) {
    let api = Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &route_resource());
    let route = eventually(&format!("HTTPRoute {name}"), TIMEOUT, || async {
        api.get(name).await.ok()
    })
    .await;
    accept(&ns.client, &ns.name, &route).await;
}

/// Accept `route` at its generation, as the gateway `GATEWAY` of `namespace`.
async fn accept(client: &kube::Client, namespace: &str, route: &DynamicObject) {
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &route_resource());
    let generation = route.metadata.generation.unwrap_or_default();
    let status = json!({ "status": { "parents": [{
        "parentRef": { "namespace": namespace, "name": GATEWAY },
        "controllerName": "mlkube.io/test-gateway",
        "conditions": [{
            "type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
            "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z",
        }],
    }] } });
    api.patch_status(
        &route.name_any(),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await
    .expect("the route's status is written");
}

/// The backends of the route: (Service, weight).
async fn route_backends(ns: &TestNamespace, name: &str) -> Vec<(String, i64)> {
    let route =
        Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &route_resource())
            .get(name)
            .await
            .expect("the route");
    (route.data["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .into_iter()
        .flatten())
    .map(|b| {
        (
            b["name"].as_str().unwrap_or_default().to_owned(),
            b["weight"].as_i64().unwrap_or_default(),
        )
    })
    .collect()
}

/// Play the kubelet whose readiness probe answers `ready` for every pod of `revision`.
async fn set_ready(ns: &TestNamespace, revision: &str, ready: bool) {
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let selector = format!("serving.mlkube.io/revision={revision}");
    let listed = eventually(&format!("a pod of {revision}"), TIMEOUT, || async {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        (!list.items.is_empty()).then_some(list.items)
    })
    .await;
    let status = if ready { "True" } else { "False" };
    for pod in listed {
        let mut conditions = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        for c in conditions
            .iter_mut()
            .filter(|c| c.type_ == "Ready" || c.type_ == "ContainersReady")
        {
            c.status = status.to_owned();
        }
        let body = json!({ "status": { "conditions": conditions, "containerStatuses": [{
            "name": "kserve-container", "ready": ready, "restartCount": 0, "image": "mlkube/serving:test", "imageID": "",
            "state": { "running": { "startedAt": "2026-01-01T00:00:00Z" } },
        }] } });
        pods.patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(body),
        )
        .await
        .expect("the pod's status is written");
    }
}

#[tokio::test]
async fn a_canary_gets_its_share_only_while_ready_and_promotion_retires_the_old_revision_after_the_route()
 {
    let ns = TestNamespace::new("isvc-canary").await;
    let _controller = start(&ns).await;
    runtime(
        &ns,
        "mlserver",
        json!([{ "name": "xgboost", "autoSelect": true }]),
    )
    .await;
    store_account(&ns).await;
    let predictor =
        json!({ "serviceAccountName": "models", "model": xgboost("s3://models/digits/1/") });
    let api = create_predictor(&ns, "digits", predictor).await;
    let first = until(&api, "digits", "one revision with all traffic", |i| {
        traffic(i).len() == 1
    })
    .await;
    let r1 = traffic(&first)[0].0.clone();
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    let pod = deployments
        .get(&r1)
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let env = serde_json::to_value(&pod.init_containers.unwrap()[0].env).unwrap();
    assert_eq!(
        env[1],
        json!({ "name": "AWS_SECRET_ACCESS_KEY", "valueFrom": { "secretKeyRef": { "name": "s3creds", "key": "AWS_SECRET_ACCESS_KEY" } } })
    );
    assert_eq!(
        env[3],
        json!({ "name": "AWS_ENDPOINT_URL", "value": "http://object-store:9000" })
    );
    assert_eq!(pod.service_account_name.as_deref(), Some("models"));
    accept_route(&ns, "digits").await;
    let ready = until(&api, "digits", "Ready", |i| {
        condition(i, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    let status = ready.status.as_ref().unwrap();
    assert_eq!(
        status.url.as_deref(),
        Some(format!("http://digits-{}.example.com", ns.name).as_str())
    );
    the_servers_admit_only_the_namespace_and_the_gateway(&ns, "digits").await;
    assert_eq!(
        status.components["predictor"]
            .latest_rolledout_revision
            .as_deref(),
        Some(r1.as_str())
    );

    // A canary of the second model: 10% once it is ready.
    let canary = json!({ "spec": { "predictor": { "canaryTrafficPercent": 10, "model": xgboost("s3://models/digits/2/") } } });
    api.patch("digits", &PatchParams::default(), &Patch::Merge(canary))
        .await
        .unwrap();
    let split = until(&api, "digits", "a 10% canary", |i| traffic(i).len() == 2).await;
    let r2 = split.status.as_ref().unwrap().components["predictor"]
        .latest_created_revision
        .clone()
        .unwrap();
    assert_eq!(traffic(&split), [(r2.clone(), 10), (r1.clone(), 90)]);
    assert_eq!(
        route_backends(&ns, "digits").await,
        [(r2.clone(), 10), (r1.clone(), 90)]
    );

    // Its pod stops being ready: its share goes back, and an event says so.
    set_ready(&ns, &r2, false).await;
    let returned = until(
        &api,
        "digits",
        "the canary's share back on the stable revision",
        |i| traffic(i) == [(r1.clone(), 100)],
    )
    .await;
    let (status, reason, message) = condition(&returned, "LatestDeploymentReady").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("False", Some("RevisionNotReady"))
    );
    assert!(
        message
            .unwrap()
            .contains(&format!("so {r1} keeps the 10% asked for it"))
    );
    assert_eq!(route_backends(&ns, "digits").await, [(r1.clone(), 100)]);
    // The route's new weights are written, not yet served: not Ready until the gateway takes
    // them up (as Knative's route under KServe), so waiting for Ready waits for the traffic.
    let (ingress, _, message) = condition(&returned, "IngressReady").unwrap();
    assert_eq!(ingress, "False", "{message:?}");
    assert_eq!(condition(&returned, "Ready").unwrap().0, "False");
    accept_route(&ns, "digits").await;
    until(&api, "digits", "Ready on the stable revision", |i| {
        condition(i, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    eventually("a TrafficReturned event", TIMEOUT, || async {
        (!job_events(&ns, "digits", "TrafficReturned")
            .await
            .is_empty())
        .then_some(())
    })
    .await;

    // Ready again, then promoted: the old revision goes only after the gateway took the route.
    set_ready(&ns, &r2, true).await;
    until(&api, "digits", "the canary back at 10%", |i| {
        traffic(i).len() == 2
    })
    .await;
    let promote = json!({ "spec": { "predictor": { "canaryTrafficPercent": null } } });
    api.patch("digits", &PatchParams::default(), &Patch::Merge(promote))
        .await
        .unwrap();
    let promoted = until(&api, "digits", "promoted", |i| {
        traffic(i) == [(r2.clone(), 100)]
    })
    .await;
    let predictor = &promoted.status.as_ref().unwrap().components["predictor"];
    assert_eq!(
        predictor.previous_rolledout_revision.as_deref(),
        Some(r1.as_str())
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        deployments.get_opt(&r1).await.unwrap().is_some(),
        "kept while the gateway may still send to it"
    );
    accept_route(&ns, "digits").await;
    eventually(&format!("revision {r1} retired"), TIMEOUT, || async {
        deployments.get_opt(&r1).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(deployments.get_opt(&r2).await.unwrap().is_some());
}

#[tokio::test]
async fn bad_input_fails_alone_with_kserves_reason_and_the_fix() {
    let ns = TestNamespace::new("isvc-bad").await;
    let _controller = start(&ns).await;
    runtime(
        &ns,
        "mlserver",
        json!([{ "name": "xgboost", "autoSelect": true, "priority": 1 }]),
    )
    .await;
    runtime(&ns, "other", json!([{ "name": "tensorflow", "autoSelect": true }, { "name": "xgboost", "autoSelect": true, "priority": 1 }])).await;
    let cases = [
        (
            "unknown",
            json!({ "modelFormat": { "name": "onnx" }, "protocolVersion": "v2", "storageUri": "s3://m/x/" }),
            "NoSupportingRuntime",
            "no runtime supports model format onnx",
        ),
        (
            "ambiguous",
            xgboost("s3://m/x/"),
            "AmbiguousRuntime",
            "set predictor.model.runtime to the one to use",
        ),
        (
            "unserved",
            json!({ "modelFormat": { "name": "sklearn" }, "runtime": "mlserver", "protocolVersion": "v2", "storageUri": "s3://m/x/" }),
            "NoSupportingRuntime",
            "does not support model format sklearn (it serves xgboost)",
        ),
        (
            "scheme",
            json!({ "modelFormat": { "name": "tensorflow" }, "protocolVersion": "v2", "storageUri": "gs://bucket/model" }),
            "InvalidPredictorSpec",
            "use s3://bucket/prefix",
        ),
    ];
    for (name, model, _, _) in &cases {
        create(&ns, name, model.clone()).await;
    }
    let api = Api::<InferenceService>::namespaced(ns.client.clone(), &ns.name);
    for (name, _, reason, fix) in &cases {
        let refused = until(&api, name, reason, |i| {
            condition(i, "Ready").is_some_and(|c| c.1.as_deref() == Some(*reason))
        })
        .await;
        let message = condition(&refused, "Ready").unwrap().2.unwrap_or_default();
        assert!(message.contains(fix), "{name}: {message}");
        let events = eventually(&format!("a {reason} event on {name}"), TIMEOUT, || async {
            let events = job_events(&ns, name, reason).await;
            (!events.is_empty()).then_some(events)
        })
        .await;
        assert!(events[0].note.as_deref().unwrap_or_default().contains(fix));
    }
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        deployments.items.is_empty(),
        "nothing created: {:?}",
        deployments
            .items
            .iter()
            .map(|d| d.name_any())
            .collect::<Vec<_>>()
    );
    // One good InferenceService beside them is served all the same.
    let good = create(&ns, "good", json!({ "modelFormat": { "name": "tensorflow" }, "protocolVersion": "v2", "storageUri": "s3://m/x/" })).await;
    until(&good, "good", "a revision", |i| traffic(i).len() == 1).await;
}

/// `maxReplicas` above `minReplicas`: the revision gets an autoscaler on CPU at `scaleTarget`
/// (the Deployment's replicas left to it), written once (the Deployment carries its hash); a
/// new bound rewrites it, and `maxReplicas` back at `minReplicas` deletes it.
#[tokio::test]
async fn an_autoscaler_follows_the_replica_bounds() {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    let ns = TestNamespace::new("isvc-scale").await;
    let _controller = start(&ns).await;
    runtime(
        &ns,
        "mlserver",
        json!([{ "name": "xgboost", "autoSelect": true }]),
    )
    .await;
    store_account(&ns).await;
    let predictor = json!({ "serviceAccountName": "models", "model": xgboost("s3://models/digits/1/"),
                            "minReplicas": 1, "maxReplicas": 3, "scaleTarget": 60 });
    let api = create_predictor(&ns, "digits", predictor).await;
    let first = until(&api, "digits", "a revision", |i| traffic(i).len() == 1).await;
    let revision = traffic(&first)[0].0.clone();
    let hpas = Api::<HorizontalPodAutoscaler>::namespaced(ns.client.clone(), &ns.name);
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    let bounds = |max: i32| {
        let (hpas, revision) = (hpas.clone(), revision.clone());
        async move {
            let spec = hpas.get(&revision).await.ok()?.spec?;
            let target = spec.metrics.as_ref()?[0].resource.as_ref()?;
            let utilization = target.target.average_utilization;
            (spec.max_replicas == max && target.name == "cpu" && utilization == Some(60))
                .then_some(spec.min_replicas)
        }
    };
    let min = eventually("the autoscaler of 1 to 3 at 60% CPU", TIMEOUT, || bounds(3)).await;
    assert_eq!(min, Some(1));
    let marked = eventually(
        "the Deployment marked with the autoscaler's hash",
        TIMEOUT,
        || {
            let (deployments, revision) = (deployments.clone(), revision.clone());
            async move {
                let deployment = deployments.get(&revision).await.ok()?;
                deployment
                    .annotations()
                    .get("serving.mlkube.io/autoscaled")
                    .cloned()
            }
        },
    )
    .await;
    assert_eq!(marked.len(), 8, "{marked}");

    let patch = |max: i32| json!({ "spec": { "predictor": { "maxReplicas": max } } });
    let params = PatchParams::default();
    api.patch("digits", &params, &Patch::Merge(patch(4)))
        .await
        .expect("maxReplicas 4");
    eventually("the autoscaler of 1 to 4", TIMEOUT, || bounds(4)).await;
    api.patch("digits", &params, &Patch::Merge(patch(1)))
        .await
        .expect("maxReplicas 1");
    eventually("the autoscaler deleted", TIMEOUT, || {
        let (hpas, revision) = (hpas.clone(), revision.clone());
        async move { matches!(hpas.get_opt(&revision).await, Ok(None)).then_some(()) }
    })
    .await;
}
