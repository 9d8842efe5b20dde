//! The objects an InferenceService's predictor is served by, as they are written. Pure.
//!
//! - per revision `<name>-predictor-<hash>` (the hash of its pod template): a Deployment of its pod template, a Service over
//!   its pods (port 80 to the serving container's first port, as KServe's), and a
//!   HorizontalPodAutoscaler when `maxReplicas` exceeds `minReplicas`;
//! - `<name>-predictor`: the address (`status.address`), a Service over the rolled-out
//!   revision's pods;
//! - `<name>-predictor`: a NetworkPolicy admitting only the namespace's pods and the
//!   gateway's to every revision's pods;
//! - `<name>`: the HTTPRoute on the platform's Gateway for KServe's host names
//!   (`<name>-<namespace>.<domain>` and `<name>-predictor-<namespace>.<domain>`), every path
//!   to the revisions by their traffic percents.
//!
//! Every object is owned by the InferenceService (a controller reference), so deleting it
//! deletes them, and carries its name in `serving.kserve.io/inferenceservice`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec,
    MetricTarget, ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{PodTemplateSpec, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use serde_json::{Value, json};

use super::api::InferenceService;
use super::predictor::{HASH_LABEL, ISVC_LABEL, REVISION_LABEL};

/// The port every predictor Service listens on, as KServe's.
pub const SERVICE_PORT: i32 = 80;
/// The serving container's port when it names none (KServe's default).
pub const DEFAULT_CONTAINER_PORT: i32 = 8080;
/// How long a revision's pod is Ready before it counts as available (`minReadySeconds`), and
/// its revision as ready for requests: the gateway learns a new endpoint a moment after the
/// pod turns Ready (Traefik's provider throttles, a second each), and a status that said Ready
/// earlier would send a client's first request to a route with no server yet (503).
pub const MIN_READY_SECONDS: i32 = 3;

/// Where the HTTPRoute hangs and the host names it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ingress {
    /// The Gateway's namespace and name.
    pub gateway: (String, String),
    /// KServe's ingress domain: hosts are `<name>-<namespace>.<domain>`.
    pub domain: String,
}

/// The longest InferenceService name served: its revisions' names (`<name>-predictor-` and
/// the template's eight hex digits) stay DNS labels, as Services' names must be.
pub const MAX_NAME: usize = 63 - "-predictor-".len() - 8;

/// The name of the revision that runs the pod template of hash `hash`: the same template,
/// the same revision, so a rollback to an earlier spec finds its revision if it is still there.
pub fn revision_name(isvc: &str, hash: &str) -> String {
    format!("{isvc}-predictor-{hash}")
}

/// The host name of `isvc`'s route, as KServe's default domain template makes it.
pub fn host(isvc: &InferenceService, ingress: &Ingress) -> String {
    format!("{}-{}.{}", name(isvc), namespace(isvc), ingress.domain)
}

/// The in-cluster address of the predictor.
pub fn address(isvc: &InferenceService) -> String {
    format!(
        "http://{}-predictor.{}.svc.cluster.local",
        name(isvc),
        namespace(isvc)
    )
}

fn name(isvc: &InferenceService) -> String {
    isvc.metadata.name.clone().unwrap_or_default()
}

fn namespace(isvc: &InferenceService) -> String {
    isvc.metadata.namespace.clone().unwrap_or_default()
}

fn owner(isvc: &InferenceService) -> OwnerReference {
    OwnerReference {
        api_version: InferenceService::api_version(&()).into_owned(),
        kind: InferenceService::kind(&()).into_owned(),
        name: name(isvc),
        uid: isvc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn meta(isvc: &InferenceService, object: &str, extra: &[(&str, &str)]) -> ObjectMeta {
    let labels = [
        (ISVC_LABEL, name(isvc).as_str()),
        ("component", "predictor"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    ObjectMeta {
        name: Some(object.to_owned()),
        namespace: isvc.metadata.namespace.clone(),
        labels: Some(labels),
        owner_references: Some(vec![owner(isvc)]),
        ..ObjectMeta::default()
    }
}

fn selector(isvc: &InferenceService, revision: &str) -> BTreeMap<String, String> {
    [
        (ISVC_LABEL, name(isvc)),
        (REVISION_LABEL, revision.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Revision `revision`'s Deployment, running `template` (hash `hash`). Without `replicas`
/// when an autoscaler owns the count.
pub fn deployment(
    isvc: &InferenceService,
    revision: &str,
    template: &PodTemplateSpec,
    hash: &str,
) -> Deployment {
    let mut template = template.clone();
    let labels = template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    labels.insert(REVISION_LABEL.into(), revision.into());
    labels.insert(HASH_LABEL.into(), hash.into());
    let predictor = &isvc.spec.predictor;
    let autoscaled = autoscaler_bounds(isvc).is_some();
    Deployment {
        metadata: meta(
            isvc,
            revision,
            &[(REVISION_LABEL, revision), (HASH_LABEL, hash)],
        ),
        spec: Some(DeploymentSpec {
            replicas: (!autoscaled).then(|| predictor.min_replicas.unwrap_or(1).max(1)),
            min_ready_seconds: Some(MIN_READY_SECONDS),
            selector: LabelSelector {
                match_labels: Some(selector(isvc, revision)),
                ..LabelSelector::default()
            },
            template,
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// The serving container's first port in `template`.
pub fn container_port(template: &PodTemplateSpec) -> i32 {
    (template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.ports.as_ref()?.first())
        .map_or(DEFAULT_CONTAINER_PORT, |p| p.container_port)
}

/// A Service named `object` over revision `revision`'s pods.
pub fn service(isvc: &InferenceService, object: &str, revision: &str, port: i32) -> Service {
    Service {
        metadata: meta(isvc, object, &[]),
        spec: Some(ServiceSpec {
            selector: Some(selector(isvc, revision)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: SERVICE_PORT,
                target_port: Some(IntOrString::Int(port)),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The gateway component's labels on its pods (Traefik's), by the Gateway's name.
const GATEWAY_POD_LABELS: [(&str, &str); 1] = [("app.kubernetes.io/name", "gateway")];
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

/// `<name>-predictor`, over every revision's pods: only pods of the InferenceService's own
/// namespace (its tenant's, who may call `status.address`) and the gateway's pods open
/// connections to them. So MLServer's repository API (`unload`), which the route never sends,
/// is out of other namespaces' reach. The kubelet's probes come from the node, which a policy
/// does not restrict.
pub fn network_policy(isvc: &InferenceService, ingress: &Ingress) -> NetworkPolicy {
    let (gateway_namespace, gateway) = &ingress.gateway;
    let gateway_pods = (GATEWAY_POD_LABELS.iter())
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain([(INSTANCE_LABEL.to_owned(), gateway.clone())])
        .collect();
    let gateway_namespace = [(
        "kubernetes.io/metadata.name".to_owned(),
        gateway_namespace.clone(),
    )];
    let peers = vec![
        NetworkPolicyPeer {
            pod_selector: Some(LabelSelector::default()),
            ..NetworkPolicyPeer::default()
        },
        NetworkPolicyPeer {
            namespace_selector: Some(labels(gateway_namespace.into_iter().collect())),
            pod_selector: Some(labels(gateway_pods)),
            ..NetworkPolicyPeer::default()
        },
    ];
    let isvc_pods = [(ISVC_LABEL.to_owned(), name(isvc))].into_iter().collect();
    NetworkPolicy {
        metadata: meta(isvc, &format!("{}-predictor", name(isvc)), &[]),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(labels(isvc_pods)),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(peers),
                ports: None,
            }]),
            egress: None,
        }),
    }
}

fn labels(match_labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(match_labels),
        ..LabelSelector::default()
    }
}

/// `minReplicas` and `maxReplicas` when they leave an autoscaler room.
pub fn autoscaler_bounds(isvc: &InferenceService) -> Option<(i32, i32)> {
    let predictor = &isvc.spec.predictor;
    let min = predictor.min_replicas.unwrap_or(1).max(1);
    let max = predictor.max_replicas?;
    (max > min).then_some((min, max))
}

/// Revision `revision`'s autoscaler: `scaleMetric` (cpu, or memory) at `scaleTarget` percent
/// of the request (80 by default, as KServe's).
pub fn autoscaler(isvc: &InferenceService, revision: &str) -> Option<HorizontalPodAutoscaler> {
    let (min, max) = autoscaler_bounds(isvc)?;
    let predictor = &isvc.spec.predictor;
    let metric = predictor
        .scale_metric
        .clone()
        .unwrap_or_else(|| "cpu".into());
    Some(HorizontalPodAutoscaler {
        metadata: meta(isvc, revision, &[(REVISION_LABEL, revision)]),
        spec: Some(HorizontalPodAutoscalerSpec {
            min_replicas: Some(min),
            max_replicas: max,
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: revision.into(),
            },
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: metric,
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(predictor.scale_target.unwrap_or(80)),
                        ..MetricTarget::default()
                    },
                }),
                ..MetricSpec::default()
            }]),
            behavior: None,
        }),
        status: None,
    })
}

/// The HTTPRoute sending every path of the InferenceService's hosts to `traffic`'s revisions.
pub fn route(isvc: &InferenceService, ingress: &Ingress, traffic: &[(String, i64)]) -> Value {
    let (gateway_namespace, gateway) = &ingress.gateway;
    let hosts = [
        host(isvc, ingress),
        format!(
            "{}-predictor-{}.{}",
            name(isvc),
            namespace(isvc),
            ingress.domain
        ),
    ];
    let backends: Vec<Value> = (traffic.iter())
        .map(|(revision, percent)| json!({ "name": revision, "port": SERVICE_PORT, "weight": percent }))
        .collect();
    let meta = serde_json::to_value(meta(isvc, &name(isvc), &[])).unwrap_or_default();
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta,
        "spec": {
            "parentRefs": [{ "namespace": gateway_namespace, "name": gateway }],
            "hostnames": hosts,
            "rules": [{
                "matches": [{ "path": { "type": "PathPrefix", "value": "/" } }],
                "backendRefs": backends,
            }],
        },
    })
}

/// Whether a live route's spec says what `desired` says: the Gateway, the host names and the
/// backends with their weights (the API server adds defaults: group and kind of each
/// reference, a match's defaults).
pub fn same_route(live: &Value, desired: &Value) -> bool {
    let summary = |spec: &Value| {
        let parents: Vec<(Value, Value)> = (spec["parentRefs"].as_array().into_iter().flatten())
            .map(|p| (p["namespace"].clone(), p["name"].clone()))
            .collect();
        let backends: Vec<(Value, Value, Value)> = (spec["rules"].as_array().into_iter().flatten())
            .flat_map(|r| r["backendRefs"].as_array().into_iter().flatten())
            .map(|b| (b["name"].clone(), b["port"].clone(), b["weight"].clone()))
            .collect();
        (parents, spec["hostnames"].clone(), backends)
    };
    summary(live) == summary(desired)
}

/// The revisions a live route names with a weight, and whether the gateway acknowledged
/// (Accepted) the route's latest generation.
pub fn routed(route: &kube::api::DynamicObject) -> (Vec<String>, bool) {
    let generation = route.metadata.generation;
    let route = &route.data;
    let acknowledged = (route["status"]["parents"].as_array().into_iter().flatten())
        .flat_map(|p| p["conditions"].as_array().into_iter().flatten())
        .any(|c| {
            c["type"] == "Accepted"
                && c["status"] == "True"
                && c["observedGeneration"].as_i64() == generation
        });
    let named = (route["spec"]["rules"].as_array().into_iter().flatten())
        .flat_map(|r| r["backendRefs"].as_array().into_iter().flatten())
        .filter(|b| b["weight"].as_i64() != Some(0))
        .filter_map(|b| b["name"].as_str().map(str::to_owned))
        .collect();
    (named, acknowledged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_name_leaves_its_revisions_dns_labels() {
        let name = "a".repeat(MAX_NAME);
        assert_eq!(revision_name(&name, "0123abcd").len(), 63);
    }

    #[test]
    fn a_live_route_with_the_api_servers_defaults_is_the_same_route() {
        let isvc = InferenceService::new("digits", Default::default());
        let ingress = Ingress {
            gateway: ("mlkube".into(), "gateway".into()),
            domain: "example.com".into(),
        };
        let desired = route(&isvc, &ingress, &[("r1".into(), 90), ("r2".into(), 10)]);
        let mut live = desired["spec"].clone();
        live["parentRefs"][0]["group"] = json!("gateway.networking.k8s.io");
        live["rules"][0]["backendRefs"][0]["kind"] = json!("Service");
        assert!(same_route(&live, &desired["spec"]));
        live["rules"][0]["backendRefs"][0]["weight"] = json!(100);
        assert!(!same_route(&live, &desired["spec"]));
    }

    #[test]
    fn a_route_is_acknowledged_only_for_its_latest_generation() {
        let route = |observed: i64| {
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": { "name": "digits", "generation": 3 },
                "spec": { "rules": [{ "backendRefs": [{ "name": "a", "weight": 90 }, { "name": "b", "weight": 0 }] }] },
                "status": { "parents": [{ "conditions": [{ "type": "Accepted", "status": "True", "observedGeneration": observed }] }] },
            })
        };
        let routed = |observed| routed(&serde_json::from_value(route(observed)).unwrap());
        assert_eq!(routed(2), (vec!["a".to_owned()], false));
        assert!(routed(3).1);
    }
}
