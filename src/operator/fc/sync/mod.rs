//! The pure decision core: from a Framework (spec and status), the ConfigMap and pods in the
//! caches and the time, the next status and the creations and deletions to make.
//!
//! # Expected flow
//! Each call moves the Framework one step along FrameworkController's state machines
//! (Framework: AttemptCreationPending → CreationRequested → Preparing → Running →
//! DeletionPending → DeletionRequested → Deleting → AttemptCompleted → a new attempt or
//! Completed; each Task the same with its pod), as far as one sync of FrameworkController
//! moves it: the Tasks are synced in order in the same call, and a Task that completes is
//! counted by the completion policy before the next one. The controller carries out the
//! actions, records their results (a created object's UID, a delete sent) with [`record`],
//! and writes the status once; its own status write triggers the next call.
//!
//! # Guarantees
//! - Persist before act: an action follows only from a state the decision started from (a
//!   Task's AttemptCreationPending before its pod is created, AttemptDeletionPending before
//!   its pod is deleted, the same for the ConfigMap), never from one it moves to, so every
//!   action's reason is stored before it is carried out and a lost write or a restart can
//!   never act twice on one decision.
//! - A new attempt starts (or the Framework completes) only once its ConfigMap is gone from
//!   the cache; the ConfigMap is deleted in the foreground and owns every pod of the attempt,
//!   so then no pod of it runs: at most one running attempt.
//! - A Task's pod is created only when no pod of its name is cached; one owned by the current
//!   ConfigMap but not recorded (a create whose answer was lost) is deleted, never adopted.
//! - A completion status, once set on an attempt, is never replaced.
//! - A spec the controller cannot run ([`check::refusal`]: TaskRole names not unique, too
//!   many Tasks, a pod template of the wrong shape) fails the Framework as Stop would, with the
//!   refusal's completion and no retry, and the plan says so once ([`Plan::refused`]); nothing
//!   is created for it, and its status lists no Task it has not listed already.
//!
//! Here: what the caches show, the plan and its record, the new statuses and the transitions
//! with the times they stamp. `framework` moves the Framework's state machine (one attempt,
//! its ConfigMap, its RetryPolicy), `task` each Task's (its pod, its RetryPolicy), `policy` is
//! the FrameworkAttemptCompletionPolicy and `scale` ScaleUp and ScaleDown.

mod framework;
mod policy;
mod scale;
mod task;
#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::api::{
    Framework, FrameworkAttemptCompletionStatus, FrameworkAttemptStatus, FrameworkSpec,
    FrameworkState as FS, FrameworkStatus, RetryPolicyStatus, TaskAttemptStatus, TaskRoleSpec,
    TaskRoleStatus, TaskState as TS, TaskStatus,
};
use super::check::{self, Refusal};
use super::completion::{self as cc};
use super::config::FcConfig;
use super::objects::{config_map_name, pod_name};
use framework::sync_framework;
use scale::scale;
use task::complete_task;

/// What the caches show of one Framework's objects.
pub struct Observed<'a> {
    pub now: Timestamp,
    /// The Framework is being deleted: no new attempt starts.
    pub framework_deleting: bool,
    /// The cached ConfigMap named as the Framework's attempts are, whoever owns it.
    pub config_map: Option<&'a ConfigMap>,
    /// The cached pod of this name, whoever owns it.
    pub pod: &'a dyn Fn(&str) -> Option<&'a Pod>,
    /// The delay before retrying a transient conflict, drawn by the caller in the
    /// configuration's range (`conflict_delay_sec`).
    pub conflict_delay_sec: i64,
    /// A fresh random UUID for each new TaskRole and Task instance.
    pub new_uid: &'a dyn Fn() -> String,
    /// FrameworkController's configuration: how failed pods are classified.
    pub config: &'a FcConfig,
}

/// One creation or deletion, carried out after the status is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    CreateConfigMap,
    DeleteConfigMap {
        uid: String,
    },
    CreatePod {
        role: String,
        index: i32,
    },
    /// `force`: with grace period 0, once a graceful deletion outlived its timeout.
    DeletePod {
        name: String,
        uid: String,
        force: bool,
    },
}

/// What the controller does next.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub status: FrameworkStatus,
    pub actions: Vec<Action>,
    /// Look again after this long (a timeout or a retry delay), if nothing changes first.
    pub wake_after: Option<Duration>,
    /// Why the Framework cannot go on (an object of its name that it does not own).
    pub blocked: Option<String>,
    /// Why the spec cannot run, on the decision that fails the Framework for it (or ends it
    /// instead of a retry): to be reported once.
    pub refused: Option<Refusal>,
}

/// The result of a carried-out action, for [`record`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    ConfigMapCreated {
        uid: String,
    },
    ConfigMapDeleteSent,
    PodCreated {
        role: String,
        index: i32,
        uid: String,
    },
    /// The API server refused the pod for good: the Task's attempt completes with `code`.
    PodRefused {
        role: String,
        index: i32,
        code: cc::Code,
        message: String,
    },
    PodDeleteSent {
        name: String,
        force: bool,
    },
}

/// The work area of one decision.
struct Step<'a, 'o> {
    spec: &'a FrameworkSpec,
    framework: &'a str,
    /// The Framework's UID, which its ConfigMaps name as their controller.
    uid: Option<String>,
    observed: &'a Observed<'o>,
    now: Time,
    actions: Vec<Action>,
    wake_after: Option<Duration>,
    blocked: Option<String>,
    /// Why the spec cannot run, if it cannot.
    refusal: Option<&'a Refusal>,
    /// This decision acted on `refusal`.
    refused: bool,
}

impl Step<'_, '_> {
    fn wake(&mut self, after: Duration) {
        self.wake_after = Some(self.wake_after.map_or(after, |w| w.min(after)));
    }

    /// Wake when `since + timeout` has come; true once it has.
    /// Whether a created ConfigMap or pod not cached since `since` is lost, by the
    /// configuration's `objectLocalCacheCreationTimeoutSec`; if not yet, wake when it would be.
    fn cache_timed_out(&mut self, since: &Time) -> bool {
        self.timed_out(since, self.observed.config.cache_creation_timeout)
    }

    /// The diagnostics of an object of `kind` not cached in time.
    fn not_cached(&self, kind: &str) -> String {
        let timeout = go_duration(self.observed.config.cache_creation_timeout);
        format!(
            "{kind} does not appear in the local cache within timeout {timeout}, so consider it \
             was deleted and explicitly delete it"
        )
    }

    fn timed_out(&mut self, since: &Time, timeout: Duration) -> bool {
        let elapsed = self.observed.now.duration_since(since.0);
        let elapsed = Duration::try_from(elapsed).unwrap_or_default();
        if elapsed >= timeout {
            return true;
        }
        self.wake(timeout - elapsed + Duration::from_millis(100));
        false
    }
}

/// Decide the next step of `framework`.
pub fn decide(framework: &Framework, observed: &Observed) -> Plan {
    let now = Time(observed.now);
    let name = framework.name_any();
    let completed = (framework.status.as_ref()).is_some_and(|s| s.state == FS::Completed);
    let refusal = (!completed)
        .then(|| check::refusal(&framework.spec))
        .flatten();
    let Some(status) = framework.status.clone() else {
        // A refused spec's Tasks never run, and may be too many to write, or to hold.
        let spec = match refusal {
            Some(_) => &FrameworkSpec::default(),
            None => &framework.spec,
        };
        return Plan {
            status: new_status(spec, &name, now, observed.new_uid),
            actions: Vec::new(),
            wake_after: None,
            blocked: None,
            refused: None,
        };
    };
    let mut status = status;
    let mut step = Step {
        spec: &framework.spec,
        framework: &name,
        uid: framework.uid(),
        observed,
        now,
        actions: Vec::new(),
        wake_after: None,
        blocked: None,
        refusal: refusal.as_ref(),
        refused: false,
    };
    // A rescale is written before it acts; a spec refused is not scaled to.
    if refusal.is_some() || !scale(&mut step, &mut status) {
        sync_framework(&mut step, &mut status);
    }
    let refused = step.refused.then(|| refusal.clone()).flatten();
    Plan {
        status,
        actions: step.actions,
        wake_after: step.wake_after,
        blocked: step.blocked,
        refused,
    }
}

/// The status of a Framework first seen: its first attempt, waiting to be created.
pub fn new_status(
    spec: &FrameworkSpec,
    framework: &str,
    now: Time,
    new_uid: &dyn Fn() -> String,
) -> FrameworkStatus {
    FrameworkStatus {
        start_time: now.clone(),
        run_time: None,
        completion_time: None,
        state: FS::AttemptCreationPending,
        transition_time: now.clone(),
        retry_policy_status: RetryPolicyStatus::default(),
        attempt_status: new_attempt(spec, framework, 0, now, new_uid),
    }
}

fn new_attempt(
    spec: &FrameworkSpec,
    framework: &str,
    id: i32,
    now: Time,
    new_uid: &dyn Fn() -> String,
) -> FrameworkAttemptStatus {
    FrameworkAttemptStatus {
        id,
        start_time: now.clone(),
        run_time: None,
        completion_time: None,
        instance_uid: None,
        config_map_name: config_map_name(framework),
        config_map_uid: None,
        completion_status: None,
        task_role_statuses: (spec.task_roles.iter())
            .map(|role| new_role(role, framework, now.clone(), new_uid))
            .collect(),
    }
}

fn new_role(
    role: &TaskRoleSpec,
    framework: &str,
    now: Time,
    new_uid: &dyn Fn() -> String,
) -> TaskRoleStatus {
    TaskRoleStatus {
        name: role.name.clone(),
        instance_uid: new_uid(),
        pod_graceful_deletion_timeout_sec: role.task.pod_graceful_deletion_timeout_sec,
        task_statuses: (0..role.task_number.max(0))
            .map(|index| new_task(framework, &role.name, index, now.clone(), new_uid()))
            .collect(),
    }
}

fn new_task(framework: &str, role: &str, index: i32, now: Time, uid: String) -> TaskStatus {
    TaskStatus {
        index,
        instance_uid: uid,
        start_time: now.clone(),
        run_time: None,
        completion_time: None,
        state: TS::AttemptCreationPending,
        transition_time: now.clone(),
        deletion_pending: false,
        retry_policy_status: RetryPolicyStatus::default(),
        attempt_status: new_task_attempt(framework, role, index, 0, now),
    }
}

fn new_task_attempt(
    framework: &str,
    role: &str,
    index: i32,
    id: i32,
    now: Time,
) -> TaskAttemptStatus {
    TaskAttemptStatus {
        id,
        start_time: now,
        run_time: None,
        completion_time: None,
        instance_uid: None,
        pod_name: pod_name(framework, role, index),
        pod_uid: None,
        pod_node_name: None,
        pod_ip: None,
        pod_host_ip: None,
        completion_status: None,
    }
}

/// Enter `state`, stamping the times FrameworkController stamps.
fn transition(status: &mut FrameworkStatus, state: FS, now: &Time) {
    if status.state == state {
        return;
    }
    status.state = state;
    status.transition_time = now.clone();
    match state {
        FS::AttemptRunning => {
            status.run_time.get_or_insert_with(|| now.clone());
            status
                .attempt_status
                .run_time
                .get_or_insert_with(|| now.clone());
        }
        FS::AttemptCompleted => status.attempt_status.completion_time = Some(now.clone()),
        FS::Completed => status.completion_time = Some(now.clone()),
        _ => {}
    }
}

fn transition_task(task: &mut TaskStatus, state: TS, now: &Time) {
    if task.state == state {
        return;
    }
    task.state = state;
    task.transition_time = now.clone();
    match state {
        TS::AttemptRunning => {
            task.run_time.get_or_insert_with(|| now.clone());
            task.attempt_status
                .run_time
                .get_or_insert_with(|| now.clone());
        }
        TS::AttemptCompleted => task.attempt_status.completion_time = Some(now.clone()),
        TS::Completed => task.completion_time = Some(now.clone()),
        _ => {}
    }
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    (meta.owner_references.iter().flatten())
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

fn tasks_mut(attempt: &mut FrameworkAttemptStatus) -> impl Iterator<Item = &mut TaskStatus> {
    (attempt.task_role_statuses.iter_mut()).flat_map(|r| r.task_statuses.iter_mut())
}

fn framework_completion(code: cc::Code, diagnostics: &str) -> FrameworkAttemptCompletionStatus {
    FrameworkAttemptCompletionStatus {
        status: code.status(diagnostics),
        trigger: None,
    }
}

const SCALED_DOWN: &str = "User has requested to delete the Task by Framework ScaleDown";

/// Record a carried-out action in the status; the controller writes it next.
pub fn record(status: &mut FrameworkStatus, done: Done, now: Timestamp) {
    let now = Time(now);
    match done {
        Done::ConfigMapCreated { uid } => {
            let attempt = &mut status.attempt_status;
            attempt.instance_uid = Some(format!("{}_{uid}", attempt.id));
            attempt.config_map_uid = Some(uid);
            transition(status, FS::AttemptCreationRequested, &now);
        }
        Done::ConfigMapDeleteSent => {
            if status.state == FS::AttemptDeletionPending {
                transition(status, FS::AttemptDeletionRequested, &now);
            }
        }
        Done::PodCreated { role, index, uid } => {
            if let Some(task) = task_mut(status, &role, index) {
                let attempt = &mut task.attempt_status;
                attempt.instance_uid = Some(format!("{}_{uid}", attempt.id));
                attempt.pod_uid = Some(uid);
                transition_task(task, TS::AttemptCreationRequested, &now);
            }
        }
        Done::PodRefused {
            role,
            index,
            code,
            message,
        } => {
            if let Some(task) = task_mut(status, &role, index) {
                complete_task(task, true, Some(code.task(message)), &now);
            }
        }
        Done::PodDeleteSent { name, force } => {
            let task =
                tasks_mut(&mut status.attempt_status).find(|t| t.attempt_status.pod_name == name);
            if let Some(task) = task
                && task.state == TS::AttemptDeletionPending
                && !force
            {
                transition_task(task, TS::AttemptDeletionRequested, &now);
            }
        }
    }
}

fn task_mut<'a>(
    status: &'a mut FrameworkStatus,
    role: &str,
    index: i32,
) -> Option<&'a mut TaskStatus> {
    (status.attempt_status.task_role_statuses.iter_mut())
        .find(|r| r.name == role)?
        .task_statuses
        .iter_mut()
        .find(|t| t.index == index)
}

/// A whole number of seconds as Go prints a duration: `45s`, `5m0s`, `1h0m0s`, the words of
/// FrameworkController's diagnostics.
fn go_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}
