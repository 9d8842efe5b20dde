//! FrameworkController's `frameworkcontroller.microsoft.com/v1` Framework: its spec and its
//! status tree, field for field as FrameworkController writes them, so a Framework written for
//! it (and a client reading its status) works unchanged.
//!
//! The spec is validated by the CRD's schema (names without `-`, TaskRole names unique, counts
//! in range, the executionType enum), and again by the controller (`check`); nothing is
//! defaulted, as FrameworkController defaults nothing: a
//! missing number is 0 and a missing flag false. The pod template is kept as JSON, because the
//! `{{FC_...}}` placeholders are replaced in its text before it is read as a pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most Tasks a Framework may have, over all its TaskRoles. The status holds one
/// TaskStatus per Task, of up to 1,416 bytes of JSON (names as long as the schema allows, every
/// time, UID and address set, the longest predefined completion with its pod's detail, but no
/// container's own message; see the tests), and the whole object must fit in etcd's request
/// limit of 1.5 MiB: 800 of them take 1.13 MB, which leaves 440 kB for the spec (twice, with a
/// client's last-applied annotation), the metadata and the rest of the status. (With short
/// names and Tasks still waiting for their pods a Task takes about 560 bytes, which is why
/// Frameworks of about 2,800 Tasks were the first to fail every status write; on the local
/// cluster 1,100 of the largest Tasks still fit, 1,200 are refused by etcd.)
pub const MAX_TASKS: i32 = 800;
/// The most TaskRoles a Framework may have: the CRD's rule that their names are unique costs
/// the square of their number, which the API server must be able to bound.
pub const MAX_TASK_ROLES: usize = 100;

/// A Framework: TaskRoles of indexed Tasks, each Task one pod at a time, with retry and
/// completion policies.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "frameworkcontroller.microsoft.com",
    version = "v1",
    kind = "Framework",
    plural = "frameworks",
    namespaced,
    status = "FrameworkStatus",
    schema = "derived"
)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkSpec {
    #[serde(default)]
    pub description: Option<String>,
    /// Create: only the status exists; Start: run; Stop: complete at once.
    #[serde(default)]
    pub execution_type: ExecutionType,
    /// The Framework's RetryPolicy: whether a completed FrameworkAttempt is retried.
    #[serde(default)]
    pub retry_policy: RetryPolicySpec,
    /// At most 100 TaskRoles, each named differently, of at most 800 Tasks in all.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[schemars(length(max = MAX_TASK_ROLES))]
    pub task_roles: Vec<TaskRoleSpec>,
}

/// What the Framework is asked to do.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ExecutionType {
    /// Keep it in AttemptCreationPending: create objects it owns first, then Start it.
    Create,
    #[default]
    Start,
    /// Complete it now (code -210), whatever runs.
    Stop,
}

/// A RetryPolicy, of the Framework or of each Task.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicySpec {
    /// Retry transient failures without counting them, and never retry permanent ones.
    #[serde(default)]
    pub fancy_retry_policy: bool,
    /// -2: always retry (also on success); -1: retry every failure; N: retry up to N counted
    /// failures.
    #[serde(default)]
    #[schemars(range(min = -2))]
    pub max_retry_count: i32,
}

/// One TaskRole: `taskNumber` Tasks built from one template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRoleSpec {
    /// Joined with `-` into pod names, so letters and digits only; unique in the Framework.
    #[schemars(regex(pattern = r"^[a-z0-9]{1,63}$"), length(max = 63))]
    pub name: String,
    /// At most 800, and at most 800 over all TaskRoles: the status holds every Task.
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_TASKS))]
    pub task_number: i32,
    #[serde(default)]
    pub framework_attempt_completion_policy: CompletionPolicySpec,
    #[serde(default)]
    pub task: TaskSpec,
}

/// When this TaskRole's Tasks complete the FrameworkAttempt.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletionPolicySpec {
    /// Fail the attempt once this many Tasks failed; -1 (or 0) never.
    #[serde(default)]
    #[schemars(range(min = -1))]
    pub min_failed_task_count: i32,
    /// Succeed the attempt once this many Tasks succeeded; -1 (or 0) never.
    #[serde(default)]
    #[schemars(range(min = -1))]
    pub min_succeeded_task_count: i32,
}

/// How every Task of a TaskRole runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    #[serde(default)]
    pub retry_policy: RetryPolicySpec,
    /// null: never force-delete a pod (at most one instance of a Task runs); N: force-delete it
    /// once it has been deleting N seconds.
    #[serde(default)]
    pub pod_graceful_deletion_timeout_sec: Option<i64>,
    /// The pod template (`core/v1` PodTemplateSpec), `{{FC_...}}` placeholders allowed.
    #[serde(default)]
    #[schemars(schema_with = "preserved_object")]
    pub pod: serde_json::Value,
}

fn preserved_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// The status: null until the controller first sees the Framework.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkStatus {
    pub start_time: Time,
    pub run_time: Option<Time>,
    pub completion_time: Option<Time>,
    pub state: FrameworkState,
    pub transition_time: Time,
    pub retry_policy_status: RetryPolicyStatus,
    pub attempt_status: FrameworkAttemptStatus,
}

/// The counters of a RetryPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicyStatus {
    pub total_retried_count: i32,
    pub accountable_retried_count: i32,
    /// Set while a decided retry waits for its delay.
    pub retry_delay_sec: Option<i64>,
}

/// The current FrameworkAttempt: one ConfigMap, and the pods it owns.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkAttemptStatus {
    pub id: i32,
    pub start_time: Time,
    pub run_time: Option<Time>,
    pub completion_time: Option<Time>,
    /// `{id}_{configMapUID}`.
    #[serde(rename = "instanceUID")]
    pub instance_uid: Option<String>,
    pub config_map_name: String,
    #[serde(rename = "configMapUID")]
    pub config_map_uid: Option<String>,
    pub completion_status: Option<FrameworkAttemptCompletionStatus>,
    pub task_role_statuses: Vec<TaskRoleStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskRoleStatus {
    pub name: String,
    #[serde(rename = "instanceUID")]
    pub instance_uid: String,
    pub pod_graceful_deletion_timeout_sec: Option<i64>,
    pub task_statuses: Vec<TaskStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub index: i32,
    #[serde(rename = "instanceUID")]
    pub instance_uid: String,
    pub start_time: Time,
    pub run_time: Option<Time>,
    pub completion_time: Option<Time>,
    pub state: TaskState,
    pub transition_time: Time,
    /// Marked by ScaleDown: the Task is completed and never reused.
    pub deletion_pending: bool,
    pub retry_policy_status: RetryPolicyStatus,
    pub attempt_status: TaskAttemptStatus,
}

/// The current attempt of a Task: one pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskAttemptStatus {
    pub id: i32,
    pub start_time: Time,
    pub run_time: Option<Time>,
    pub completion_time: Option<Time>,
    /// `{id}_{podUID}`.
    #[serde(rename = "instanceUID")]
    pub instance_uid: Option<String>,
    pub pod_name: String,
    #[serde(rename = "podUID")]
    pub pod_uid: Option<String>,
    pub pod_node_name: Option<String>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(rename = "podHostIP")]
    pub pod_host_ip: Option<String>,
    pub completion_status: Option<TaskAttemptCompletionStatus>,
}

/// How an attempt ended: a code, its phrase and type, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CompletionStatus {
    pub code: i32,
    pub phrase: String,
    #[serde(rename = "type")]
    pub type_: CompletionType,
    pub diagnostics: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CompletionType {
    pub name: CompletionTypeName,
    pub attributes: Vec<CompletionTypeAttribute>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionTypeName {
    Succeeded,
    Failed,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionTypeAttribute {
    /// Would likely differ on a retry.
    Transient,
    /// Would fail the same way again.
    Permanent,
    /// Caused by contention for resources.
    Conflict,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkAttemptCompletionStatus {
    #[serde(flatten)]
    pub status: CompletionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<CompletionPolicyTrigger>,
}

/// Which Task made the completion policy complete the attempt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CompletionPolicyTrigger {
    pub message: String,
    pub task_role_name: String,
    pub task_index: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TaskAttemptCompletionStatus {
    #[serde(flatten)]
    pub status: CompletionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodCompletionStatus>,
}

/// What the pod said when it ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodCompletionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerCompletionStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerCompletionStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub code: i32,
}

/// A FrameworkAttempt's state; the ConfigMap is its ground truth.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameworkState {
    AttemptCreationPending,
    AttemptCreationRequested,
    AttemptPreparing,
    AttemptRunning,
    AttemptDeletionPending,
    AttemptDeletionRequested,
    AttemptDeleting,
    AttemptCompleted,
    Completed,
}

/// A TaskAttempt's state; the pod is its ground truth.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    AttemptCreationPending,
    AttemptCreationRequested,
    AttemptPreparing,
    AttemptRunning,
    AttemptDeletionPending,
    AttemptDeletionRequested,
    AttemptDeleting,
    AttemptCompleted,
    Completed,
}

/// The status is FrameworkController's tree, which its CRD leaves unchecked.
impl JsonSchema for FrameworkStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FrameworkStatus".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        preserved_object(generator)
    }
}

impl CompletionStatus {
    pub fn failed(&self) -> bool {
        self.type_.name == CompletionTypeName::Failed
    }

    pub fn has(&self, attribute: CompletionTypeAttribute) -> bool {
        self.type_.attributes.contains(&attribute)
    }
}

impl TaskStatus {
    pub fn completed(&self) -> bool {
        self.state == TaskState::Completed
    }

    /// The completion of the current attempt, once there is one.
    pub fn completion(&self) -> Option<&CompletionStatus> {
        self.attempt_status
            .completion_status
            .as_ref()
            .map(|c| &c.status)
    }
}

impl FrameworkStatus {
    pub fn completing(&self) -> bool {
        self.attempt_status.completion_status.is_some()
    }
}
