//! The kinds of jobs whose logs are read: the kubeflow.org/v1 training jobs, each described by
//! its framework, and FrameworkController's Framework. What differs between them is data (the
//! resource, the labels their pods carry, their replica types and their container) and how
//! their state is told: a training job's last condition, a Framework's state and completion
//! status, both said in the same words (`Running`, `Succeeded`, `Failed`, ...). Pure.

use serde_json::Value;

use crate::operator::fc::api::{FrameworkAttemptCompletionStatus, FrameworkState};
use crate::operator::fc::objects as fc;
use crate::operator::training::engine::build::{
    LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE,
};
use crate::operator::training::framework::Framework;
use crate::operator::training::registry::ALL;

/// FrameworkController's API group.
pub const FC_GROUP: &str = "frameworkcontroller.microsoft.com";

/// A kind of job.
#[derive(Debug, Clone, Copy)]
pub enum JobKind {
    /// A kubeflow.org/v1 training job of this framework (TFJob, PyTorchJob, ...).
    Training(&'static Framework),
    /// FrameworkController's Framework: TaskRoles of indexed Tasks, each Task one pod
    /// `{framework}-{taskrole}-{index}`.
    Framework,
}

impl PartialEq for JobKind {
    fn eq(&self, other: &JobKind) -> bool {
        self.name() == other.name()
    }
}

impl Eq for JobKind {}

impl From<&'static Framework> for JobKind {
    fn from(framework: &'static Framework) -> JobKind {
        JobKind::Training(framework)
    }
}

impl JobKind {
    /// Every kind, the training jobs first, as the messages list them.
    pub fn all() -> impl Iterator<Item = JobKind> {
        ALL.iter()
            .map(|r| JobKind::Training(r.framework))
            .chain([JobKind::Framework])
    }

    /// `TFJob`, `Framework`.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Training(framework) => framework.kind,
            JobKind::Framework => "Framework",
        }
    }

    /// `tfjobs`, `frameworks`.
    pub fn plural(self) -> &'static str {
        match self {
            JobKind::Training(framework) => framework.plural,
            JobKind::Framework => "frameworks",
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            JobKind::Training(_) => "kubeflow.org",
            JobKind::Framework => FC_GROUP,
        }
    }

    /// The label whose value is the job's name on each of its pods.
    pub fn job_label(self) -> &'static str {
        match self {
            JobKind::Training(_) => LABEL_JOB_NAME,
            JobKind::Framework => fc::FRAMEWORK_NAME,
        }
    }

    /// The labels of a pod's replica type (a TaskRole) and index.
    pub fn replica_labels(self) -> (&'static str, &'static str) {
        match self {
            JobKind::Training(_) => (LABEL_REPLICA_TYPE, LABEL_REPLICA_INDEX),
            JobKind::Framework => (fc::TASKROLE_NAME, fc::TASK_INDEX),
        }
    }

    /// The container whose log is read by default; `None`: the pod's first.
    pub fn container(self) -> Option<&'static str> {
        match self {
            JobKind::Training(framework) => Some(framework.container),
            JobKind::Framework => None,
        }
    }

    /// Where a replica type sorts: as the framework lists its types, or as the Framework
    /// lists its TaskRoles.
    pub fn rank(self, replica_type: &str, object: &Value) -> usize {
        let position = match self {
            JobKind::Training(framework) => framework
                .replica_types
                .iter()
                .position(|t| t.lower() == replica_type),
            JobKind::Framework => task_roles(object).position(|(name, _)| name == replica_type),
        };
        position.unwrap_or(usize::MAX)
    }

    /// The replicas a job's spec asks for, `worker-0` ... as their pods will be named.
    pub fn planned(self, object: &Value) -> Vec<String> {
        let types: Vec<(String, i64)> = match self {
            JobKind::Training(framework) => object["spec"][framework.replica_specs_field]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(key, spec)| {
                    let lower = framework
                        .replica_type(key)
                        .map_or_else(|| key.to_ascii_lowercase(), |t| t.lower().to_string());
                    (lower, spec["replicas"].as_i64().unwrap_or(1))
                })
                .collect(),
            JobKind::Framework => task_roles(object)
                .map(|(name, count)| (name.to_string(), count))
                .collect(),
        };
        types
            .into_iter()
            .flat_map(|(lower, count)| (0..count).map(move |i| format!("{lower}-{i}")))
            .collect()
    }
}

/// A Framework's TaskRoles with their taskNumber, in its spec's order.
fn task_roles(object: &Value) -> impl Iterator<Item = (&str, i64)> {
    object["spec"]["taskRoles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|role| Some((role["name"].as_str()?, role["taskNumber"].as_i64()?)))
}

/// Whether `object` is a Framework.
pub fn is_framework(object: &Value) -> bool {
    object["kind"] == "Framework"
        && object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.split('/').next() == Some(FC_GROUP))
}

/// A Framework's state in the words of a training job's conditions: `Succeeded` or `Failed`
/// once Completed (by its completion status), `Running` while its attempt runs, else its state
/// (`AttemptCreationPending`, ...); `None` before FrameworkController first wrote a status.
pub fn framework_condition(object: &Value) -> Option<&str> {
    let status = &object["status"];
    let state = status["state"].as_str()?;
    // Field by field: a status FrameworkController is still filling in is read as far as it goes.
    let typed = serde_json::from_value::<FrameworkState>(status["state"].clone()).ok();
    let completion = serde_json::from_value::<FrameworkAttemptCompletionStatus>(
        status["attemptStatus"]["completionStatus"].clone(),
    )
    .ok();
    Some(match typed {
        Some(FrameworkState::Completed) => match completion {
            Some(completion) if !completion.status.failed() => "Succeeded",
            _ => "Failed",
        },
        Some(FrameworkState::AttemptRunning) => "Running",
        _ => state,
    })
}

/// Why a Framework completed, from its last attempt's completion status: `code 1
/// (ContainerUnrecognizedFailed): <diagnostics>`.
pub fn framework_completion(object: &Value) -> Option<String> {
    let completion = &object["status"]["attemptStatus"]["completionStatus"];
    let code = completion["code"].as_i64()?;
    let phrase = completion["phrase"].as_str().unwrap_or("no phrase");
    let mut text = format!("code {code} ({phrase})");
    if let Some(diagnostics) = completion["diagnostics"].as_str().filter(|d| !d.is_empty()) {
        text.push_str(": ");
        text.push_str(diagnostics);
    }
    if let Some(trigger) = completion["trigger"]["message"].as_str() {
        let role = completion["trigger"]["taskRoleName"]
            .as_str()
            .unwrap_or("?");
        let index = completion["trigger"]["taskIndex"].as_i64().unwrap_or(-1);
        text.push_str(&format!("; {trigger} (Task {role}-{index})"));
    }
    Some(text)
}

/// How each Task of a Framework's current attempt that failed ended, from its status (its pod
/// is gone once the attempt completed), but those the attempt's completion stopped: the Task's
/// `worker-1` and `container worker exited with code 1 (ContainerUnrecognizedFailed)`.
pub fn failed_tasks(object: &Value) -> Vec<(String, String)> {
    let roles = object["status"]["attemptStatus"]["taskRoleStatuses"].as_array();
    let mut failed = Vec::new();
    for role in roles.into_iter().flatten() {
        let name = role["name"].as_str().unwrap_or("?");
        for task in role["taskStatuses"].as_array().into_iter().flatten() {
            let completion = &task["attemptStatus"]["completionStatus"];
            // -220: stopped because another Task completed the attempt, which says why.
            if completion["type"]["name"] != "Failed" || completion["code"] == -220 {
                continue;
            }
            let label = format!("{name}-{}", task["index"].as_i64().unwrap_or(-1));
            failed.push((label, task_ended(completion)));
        }
    }
    failed
}

/// How a Task's attempt ended: its containers that failed, else its completion code.
fn task_ended(completion: &Value) -> String {
    let code = completion["code"].as_i64().unwrap_or_default();
    let phrase = completion["phrase"].as_str().unwrap_or("no phrase");
    let containers: Vec<String> = completion["pod"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let reason = c["reason"]
                .as_str()
                .map(|r| format!(", {r}"))
                .unwrap_or_default();
            format!(
                "container {} exited with code {}{reason}",
                c["name"].as_str().unwrap_or("?"),
                c["code"].as_i64().unwrap_or_default()
            )
        })
        .collect();
    if containers.is_empty() {
        format!("failed with code {code} ({phrase})")
    } else {
        format!("{} ({phrase})", containers.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A Framework as FrameworkController writes its status: `state`, and a completion of
    /// `type_name` when there is one.
    pub fn framework(state: &str, completion: Option<(&str, i64, &str)>) -> Value {
        let mut object = json!({
            "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"taskRoles": [{"name": "ps", "taskNumber": 1},
                                   {"name": "worker", "taskNumber": 2}]},
            "status": {"startTime": "2026-01-01T00:00:00Z", "runTime": null,
                       "completionTime": null, "state": state,
                       "transitionTime": "2026-01-01T00:00:00Z",
                       "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0,
                                             "retryDelaySec": null},
                       "attemptStatus": {"id": 0, "startTime": "2026-01-01T00:00:00Z",
                                         "runTime": null, "completionTime": null,
                                         "instanceUID": null, "configMapName": "train-attempt",
                                         "configMapUID": null, "completionStatus": null,
                                         "taskRoleStatuses": []}}
        });
        if let Some((name, code, phrase)) = completion {
            object["status"]["attemptStatus"]["completionStatus"] = json!({
                "code": code, "phrase": phrase, "type": {"name": name, "attributes": []},
                "diagnostics": "", "trigger": {"message": "FailedTaskCount 1 has reached MinFailedTaskCount 1 in the TaskRole",
                                               "taskRoleName": "worker", "taskIndex": 1}});
        }
        object
    }

    #[test]
    fn a_framework_is_told_in_the_words_of_a_training_jobs_conditions() {
        assert_eq!(framework_condition(&json!({"kind": "Framework"})), None);
        assert_eq!(
            framework_condition(&framework("AttemptRunning", None)),
            Some("Running")
        );
        assert_eq!(
            framework_condition(&framework("AttemptCreationPending", None)),
            Some("AttemptCreationPending")
        );
        let failed = framework(
            "Completed",
            Some(("Failed", 1, "ContainerUnrecognizedFailed")),
        );
        assert_eq!(framework_condition(&failed), Some("Failed"));
        assert_eq!(
            framework_completion(&failed).as_deref(),
            Some(
                "code 1 (ContainerUnrecognizedFailed); FailedTaskCount 1 has reached \
                 MinFailedTaskCount 1 in the TaskRole (Task worker-1)"
            )
        );
        let succeeded = framework("Completed", Some(("Succeeded", 0, "Succeeded")));
        assert_eq!(framework_condition(&succeeded), Some("Succeeded"));
        assert!(is_framework(&succeeded));
        assert!(!is_framework(
            &json!({"apiVersion": "kubeflow.org/v1", "kind": "Framework"})
        ));
    }

    #[test]
    fn a_frameworks_task_roles_plan_its_replicas_and_sort_them() {
        let object = framework("AttemptRunning", None);
        assert_eq!(
            JobKind::Framework.planned(&object),
            ["ps-0", "worker-0", "worker-1"]
        );
        assert_eq!(JobKind::Framework.rank("worker", &object), 1);
        assert_eq!(JobKind::Framework.rank("other", &object), usize::MAX);
        assert_eq!(JobKind::Framework.job_label(), "FC_FRAMEWORK_NAME");
        assert_eq!(JobKind::Framework.container(), None);
    }

    #[test]
    fn a_failed_task_says_how_its_containers_ended_from_the_status() {
        let mut object = framework(
            "Completed",
            Some(("Failed", 1, "ContainerUnrecognizedFailed")),
        );
        object["status"]["attemptStatus"]["taskRoleStatuses"] = json!([
            {"name": "worker", "taskStatuses": [
                {"index": 0, "attemptStatus": {"completionStatus": {"code": -220,
                    "phrase": "FrameworkAttemptCompletion",
                    "type": {"name": "Failed", "attributes": ["Permanent"]}}}},
                {"index": 1, "attemptStatus": {"completionStatus": {"code": 1,
                    "phrase": "ContainerUnrecognizedFailed",
                    "type": {"name": "Failed", "attributes": []},
                    "pod": {"containers": [{"name": "worker", "code": 1, "reason": "Error"}]}}}},
                {"index": 2, "attemptStatus": {"completionStatus": {"code": 0,
                    "phrase": "Succeeded", "type": {"name": "Succeeded", "attributes": []}}}}]}
        ]);
        assert_eq!(
            failed_tasks(&object),
            [(
                "worker-1".to_string(),
                "container worker exited with code 1, Error (ContainerUnrecognizedFailed)"
                    .to_string()
            )]
        );
    }
}
