//! KServe's serving API as mlkube reads and writes it: the `serving.kserve.io/v1beta1`
//! InferenceService and the `serving.kserve.io/v1alpha1` ServingRuntime and
//! ClusterServingRuntime, with the CRDs under `crds/` (`serving.kserve.io`).
//!
//! Field names follow KServe's Go types, so an object written for KServe reads unchanged. What
//! the controller acts on is typed; the rest of a predictor (the pod's fields: nodeSelector,
//! tolerations, volumes, ...) and of a model (the container's: env, resources, ...) is kept as
//! written and merged into the pods as KServe merges it. Every field the API server may leave
//! out is optional: a watch must never choke on one object; what is wrong is said in its status.

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The group of every kind here.
pub const GROUP: &str = "serving.kserve.io";

/// A model served behind one address, revision after revision.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "serving.kserve.io",
    version = "v1beta1",
    kind = "InferenceService",
    plural = "inferenceservices",
    shortname = "isvc",
    namespaced,
    status = "InferenceServiceStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct InferenceServiceSpec {
    #[serde(default)]
    pub predictor: PredictorSpec,
    /// Transformers, explainers and anything else KServe's spec has beside the predictor: kept,
    /// and refused in the status (only predictors are served here).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The predictor: a model on a runtime (`model`), or the user's own containers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PredictorSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSpec>,
    /// A custom predictor: the pod's containers, the first one serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// `cpu` (the only metric served here) or `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_metric: Option<String>,
    /// The metric's target, in percent of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_target: Option<i32>,
    /// The share of requests the latest revision gets while the one rolled out before keeps
    /// the rest; unset (or 100) promotes the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_traffic_percent: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// The predictor's other fields: the pod's (nodeSelector, tolerations, volumes, ...) and
    /// KServe's extensions this controller does not act on, kept as written.
    #[serde(flatten)]
    pub pod: BTreeMap<String, Value>,
}

/// A model: its format, where it is stored, and optionally the runtime to serve it with.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_format: Option<ModelFormat>,
    /// A ServingRuntime of the namespace or a ClusterServingRuntime, by name; unset: the one
    /// that auto-selects the format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_uri: Option<String>,
    /// `v1`, `v2`, `grpc-v1` or `grpc-v2`; unset is `v1`, as in KServe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The container's fields (args, env, resources, image, ...), merged over the runtime's.
    #[serde(flatten)]
    pub container: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelFormat {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// What the controller reports, in KServe's shape (Knative's conditions).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InferenceServiceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Addressable>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub components: BTreeMap<String, ComponentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_status: Option<ModelStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_mode: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Addressable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// One of the status' conditions, as Knative writes them (KServe's clients read `type`,
/// `status`, `reason` and `message`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// A component's revisions and where its traffic goes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Addressable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_created_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_ready_revision: Option<String>,
    /// The revision the last promotion gave all traffic to: the stable one a canary splits
    /// with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_rolledout_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_rolledout_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traffic: Vec<TrafficTarget>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TrafficTarget {
    #[serde(default)]
    pub revision_name: String,
    #[serde(default)]
    pub percent: i64,
    #[serde(default)]
    pub latest_revision: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// The model's state, as KServe's clients read it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// `UpToDate`, `InProgress`, `BlockedByFailedLoad` or `InvalidSpec`.
    #[serde(default)]
    pub transition_status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<ModelStates>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_info: Option<FailureInfo>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ModelStates {
    /// `Pending`, `Loading`, `Loaded` or `FailedToLoad`.
    #[serde(default)]
    pub active_model_state: String,
    #[serde(default)]
    pub target_model_state: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FailureInfo {
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// Pods that serve some model formats: a runtime of one namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "serving.kserve.io",
    version = "v1alpha1",
    kind = "ServingRuntime",
    plural = "servingruntimes",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ServingRuntimeSpec {
    #[serde(default)]
    pub supported_model_formats: Vec<SupportedModelFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_model: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocol_versions: Vec<String>,
    /// Multi-node runtimes (vLLM's workers): never selected here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_spec: Option<Value>,
    /// The pod's containers, the one named `kserve-container` (else the first) serving.
    #[serde(default)]
    pub containers: Vec<Value>,
    /// The pod's other fields (volumes, nodeSelector, tolerations, ...), merged under the
    /// predictor's.
    #[serde(flatten)]
    pub pod: BTreeMap<String, Value>,
}

/// A runtime every namespace may use: the same spec, cluster-scoped.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "serving.kserve.io",
    version = "v1alpha1",
    kind = "ClusterServingRuntime",
    plural = "clusterservingruntimes",
    schema = "disabled"
)]
pub struct ClusterServingRuntimeSpec {
    #[serde(flatten)]
    pub spec: ServingRuntimeSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SupportedModelFormat {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_select: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}
