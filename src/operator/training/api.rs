//! The `kubeflow.org/v1` types every training job shares (replica specs, run policy, status),
//! the single source of truth of the CRDs with each framework's spec in `frameworks`.
//!
//! Field names, casing and optionality follow Kubeflow's training-operator (release-1.9) so any
//! job written for it deserialises unchanged. Two additions live in the status and are
//! optional, so upstream clients ignore them: per replica type, the indexes that have succeeded
//! (`succeededIndexes`) and how many times the operator recreated a failed pod (`restarts`).
//! They are what lets a garbage-collected completed pod never run again and ExitCode restarts
//! count toward `backoffLimit`.
//!
//! Validation that the schema alone cannot say is written as CEL rules beside the field it
//! guards; `crd` adds the rules that need the object's name or the framework's container.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `runPolicy.managedBy` values that mean "this operator": unset, or upstream's own name (we are
/// a drop-in replacement for it).
pub const MANAGED_BY_US: &str = "kubeflow.org/training-operator";

/// The multi-cluster dispatcher's name; jobs with it are left alone.
pub const MANAGED_BY_MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";

/// How one replica type runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// The Rust side tolerates a missing template (a watch must never choke on one object); the API
// server does not accept one.
#[schemars(extend("required" = ["template"]))]
pub struct ReplicaSpec {
    /// How many pods of this type (default 1). 0 means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,

    /// The pod template; it needs a container named as the framework says (`tensorflow`, ...).
    #[serde(default)]
    #[schemars(schema_with = "template_schema", transform = without_default)]
    pub template: PodTemplateSpec,

    /// What happens when a pod of this type fails (default Never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
}

/// What happens when a replica's pod fails.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RestartPolicy {
    /// The kubelet restarts containers whatever their exit; a failed pod is recreated.
    Always,
    /// The kubelet restarts failed containers; a failed pod is recreated.
    OnFailure,
    /// A failed pod fails the job.
    Never,
    /// A failed pod is recreated when its exit code is retryable (128 and up: killed by a
    /// signal) and fails the job otherwise (1-127: a bug in the program).
    ExitCode,
}

/// Which pods are deleted when the job finishes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CleanPodPolicy {
    All,
    Running,
    None,
}

/// Policies that apply to the whole job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",
        "message": "managedBy is immutable"
    }
]))]
pub struct RunPolicy {
    /// Which pods to delete when the job finishes (default None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<CleanPodPolicy>,

    /// Delete the job this many seconds after it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Fail the job when it has been running this long, counted from `status.startTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub active_deadline_seconds: Option<i64>,

    /// How many restarts (by the kubelet or by recreating pods) before the job fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff_limit: Option<i32>,

    /// Gang scheduling: used when the operator runs with `--gang-scheduler`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,

    /// Delete the job's pods and services and stop; unsetting it resumes the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// The controller in charge: unset or `kubeflow.org/training-operator` means this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self in ['kubeflow.org/training-operator', 'kueue.x-k8s.io/multikueue']",
            "message": "managedBy is kubeflow.org/training-operator or kueue.x-k8s.io/multikueue"
        }
    ]))]
    pub managed_by: Option<String>,
}

/// The PodGroup a gang scheduler admits the job by.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "self == oldSelf", "message": "queue is immutable" }
    ]))]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// What the operator observed and decided, written to the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// The job's history; the last one appended is its current state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,

    /// Pod counts per replica type.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_statuses: BTreeMap<String, ReplicaStatus>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// When the job was last reconciled. Not written: training-operator writes it only while a
    /// gang scheduler holds the job back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,
}

/// One entry of the job's history.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Created, Running, Restarting, Succeeded, Suspended or Failed.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Pod counts of one replica type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub active: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub succeeded: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i32,
    /// This type's pods' label selector. Not written: training-operator deprecated it in favour
    /// of `selector`, and writes it neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// The label selector of this type's pods, as a string; written for the kinds that scale by
    /// it (PyTorchJob, PaddleJob, JAXJob), as upstream writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The indexes whose pod succeeded. They are never run again, even after their pod is gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub succeeded_indexes: Vec<i32>,
    /// How many failed pods of this type the operator deleted to run again. Counts toward
    /// `backoffLimit` together with the kubelet's container restarts.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: i32,
}

/// A required field has no default in the schema, whatever serde falls back to.
fn without_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// `schema` and its subschemas without their descriptions. Kubernetes' descriptions of a pod's
/// fields would make each CRD 520 kB of YAML instead of 205 kB, and `kubectl explain pod.spec`
/// shows them already.
fn without_descriptions(schema: &mut serde_json::Value) {
    let Some(schema) = schema.as_object_mut() else {
        return;
    };
    schema.remove("description");
    for (key, value) in schema.iter_mut() {
        match key.as_str() {
            "properties" => value
                .as_object_mut()
                .into_iter()
                .flat_map(|fields| fields.values_mut())
                .for_each(without_descriptions),
            "items" | "additionalProperties" => without_descriptions(value),
            _ => {}
        }
    }
}

/// The pod template's schema: Kubernetes' own PodTemplateSpec (as k8s-openapi describes it, so a
/// misspelt field is refused as it is on a Deployment), with what mlkube adds: `spec` and a
/// container are required, and a container has a name and an image. The bound on the containers
/// keeps the CEL rule over them within the API server's cost budget.
fn template_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<PodTemplateSpec>().to_value();
    without_descriptions(&mut schema);
    schema["description"] =
        "The pod template of this replica type; one container must be named after the framework."
            .into();
    schema["required"] = serde_json::json!(["spec"]);
    let containers = schema
        .pointer_mut("/properties/spec/properties/containers")
        .and_then(serde_json::Value::as_object_mut)
        .expect("a PodSpec has containers");
    containers.insert("minItems".into(), 1.into());
    containers.insert("maxItems".into(), 64.into());
    let container = containers
        .get_mut("items")
        .and_then(serde_json::Value::as_object_mut)
        .expect("containers is a list");
    container.insert("required".into(), serde_json::json!(["name", "image"]));
    let fields = container
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
        .expect("a container has fields");
    fields["name"]["maxLength"] = 63.into();
    fields["image"]["minLength"] = 1.into();
    fields["image"]["maxLength"] = 4096.into();
    schemars::Schema::try_from(schema).expect("a PodTemplateSpec's schema is an object")
}
