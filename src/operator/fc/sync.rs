//! The pure decision core: from a Framework (spec and status), the ConfigMap and pods in the
//! caches and the time, the next status and the creations and deletions to make.
//!
//! # Expected flow
//! Each call moves the Framework one step along FrameworkController's state machines
//! (Framework: AttemptCreationPending → CreationRequested → Preparing → Running →
//! DeletionPending → DeletionRequested → Deleting → AttemptCompleted → a new attempt or
//! Completed; each Task the same with its pod). The controller writes the status first and
//! only then carries out the actions, and records their results (a created object's UID, a
//! delete sent) with [`record`]; its own status write triggers the next call.
//!
//! # Guarantees
//! - Persist before act: every action follows from a status that is written before it is
//!   carried out, so a lost write or a restart can never act twice on one decision.
//! - A new attempt starts (or the Framework completes) only once its ConfigMap is gone from
//!   the cache; the ConfigMap is deleted in the foreground and owns every pod of the attempt,
//!   so then no pod of it runs: at most one running attempt.
//! - A Task's pod is created only when no pod of its name is cached; one owned by the current
//!   ConfigMap but not recorded (a create whose answer was lost) is deleted, never adopted.
//! - A completion status, once set on an attempt, is never replaced.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::api::{
    CompletionPolicyTrigger, ExecutionType, Framework, FrameworkAttemptCompletionStatus,
    FrameworkAttemptStatus, FrameworkSpec, FrameworkState as FS, FrameworkStatus,
    RetryPolicyStatus, TaskAttemptCompletionStatus, TaskAttemptStatus, TaskRoleSpec,
    TaskRoleStatus, TaskState as TS, TaskStatus,
};
use super::completion::{self as cc};
use super::objects::{config_map_name, pod_name};
use super::retry;

/// How long a created ConfigMap or pod may take to appear in the cache before it is
/// considered lost (FrameworkController's `objectLocalCacheCreationTimeoutSec`).
pub const CACHE_CREATION_TIMEOUT: Duration = Duration::from_secs(300);

/// What the caches show of one Framework's objects.
pub struct Observed<'a> {
    pub now: Timestamp,
    /// The Framework is being deleted: no new attempt starts.
    pub framework_deleting: bool,
    /// The cached ConfigMap named as the Framework's attempts are, whoever owns it.
    pub config_map: Option<&'a ConfigMap>,
    /// The cached pod of this name, whoever owns it.
    pub pod: &'a dyn Fn(&str) -> Option<&'a Pod>,
    /// The delay before retrying a transient conflict, drawn by the caller in
    /// [`retry::CONFLICT_DELAY_SEC`].
    pub conflict_delay_sec: i64,
    /// A fresh random UUID for each new TaskRole and Task instance.
    pub new_uid: &'a dyn Fn() -> String,
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
}

impl Step<'_, '_> {
    fn wake(&mut self, after: Duration) {
        self.wake_after = Some(self.wake_after.map_or(after, |w| w.min(after)));
    }

    /// Wake when `since + timeout` has come; true once it has.
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
    let Some(status) = framework.status.clone() else {
        return Plan {
            status: new_status(&framework.spec, &name, now, observed.new_uid),
            actions: Vec::new(),
            wake_after: None,
            blocked: None,
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
    };
    // A rescale is written before it acts.
    if !scale(&mut step, &mut status) {
        sync_framework(&mut step, &mut status);
    }
    Plan {
        status,
        actions: step.actions,
        wake_after: step.wake_after,
        blocked: step.blocked,
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

/// Move the Framework's own state machine, and its Tasks' while an attempt lives.
fn sync_framework(step: &mut Step, status: &mut FrameworkStatus) {
    match status.state {
        FS::Completed => {}
        FS::AttemptCompleted => retry_framework(step, status),
        FS::AttemptCreationPending => create_attempt(step, status),
        FS::AttemptCreationRequested => await_config_map(step, status),
        FS::AttemptPreparing
        | FS::AttemptRunning
        | FS::AttemptDeletionPending
        | FS::AttemptDeletionRequested
        | FS::AttemptDeleting => sync_attempt(step, status),
    }
}

/// Complete the current attempt with `completion` (unless it has one): with `force`, its
/// ConfigMap is known gone, so it and every Task completes now; otherwise it waits for its
/// ConfigMap to be deleted.
fn complete_attempt(
    step: &Step,
    status: &mut FrameworkStatus,
    force: bool,
    completion: Option<FrameworkAttemptCompletionStatus>,
) {
    let attempt = &mut status.attempt_status;
    if attempt.completion_status.is_none() {
        attempt.completion_status = completion;
    }
    for task in tasks_mut(attempt) {
        if task.attempt_status.completion_status.is_none() {
            task.attempt_status.completion_status = Some(
                cc::FRAMEWORK_ATTEMPT_COMPLETION.task("Stop to complete current FrameworkAttempt"),
            );
        }
        if force && task.state != TS::Completed {
            transition_task(task, TS::AttemptCompleted, &step.now);
            task.retry_policy_status.retry_delay_sec = None;
            transition_task(task, TS::Completed, &step.now);
        }
    }
    let state = if force {
        FS::AttemptCompleted
    } else {
        FS::AttemptDeletionPending
    };
    transition(status, state, &step.now);
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

/// AttemptCreationPending: create the ConfigMap, unless asked not to start (Create), to stop
/// (Stop), or the Framework is being deleted.
fn create_attempt(step: &mut Step, status: &mut FrameworkStatus) {
    if step.observed.framework_deleting || step.spec.execution_type == ExecutionType::Create {
        return;
    }
    // A ConfigMap of ours whose UID was never recorded (a create whose answer was lost) is
    // deleted, never adopted; someone else's blocks.
    if let Some(cm) = step.observed.config_map {
        if controller_uid(&cm.metadata) == step.uid.as_deref() {
            if cm.metadata.deletion_timestamp.is_none() {
                step.actions.push(Action::DeleteConfigMap {
                    uid: cm.uid().unwrap_or_default(),
                });
            }
        } else {
            step.blocked = Some(format!(
                "ConfigMap {} exists and is not controlled by this Framework",
                cm.name_any()
            ));
            step.wake(Duration::from_secs(10));
        }
        return;
    }
    if step.spec.execution_type == ExecutionType::Stop {
        let completion = framework_completion(
            cc::STOP_FRAMEWORK_REQUESTED,
            "User has requested to stop the Framework",
        );
        complete_attempt(step, status, true, Some(completion));
        return;
    }
    step.actions.push(Action::CreateConfigMap);
}

/// AttemptCreationRequested: wait for the created ConfigMap to be cached.
fn await_config_map(step: &mut Step, status: &mut FrameworkStatus) {
    let recorded = status.attempt_status.config_map_uid.clone();
    let cached = step.observed.config_map.filter(|cm| cm.uid() == recorded);
    if cached.is_some() {
        transition(status, FS::AttemptPreparing, &step.now);
        return;
    }
    if !step.timed_out(&status.transition_time.clone(), CACHE_CREATION_TIMEOUT) {
        return;
    }
    if let Some(uid) = recorded {
        step.actions.push(Action::DeleteConfigMap { uid });
    }
    let completion = framework_completion(
        cc::CONFIG_MAP_LOCAL_CACHE_CREATION_TIMEOUT,
        "ConfigMap does not appear in the local cache within timeout 5m0s, so consider it was deleted and explicitly delete it",
    );
    complete_attempt(step, status, true, Some(completion));
}

/// An attempt whose ConfigMap was cached: follow the ConfigMap, stop or complete the attempt
/// when asked or when its policy says, and sync its Tasks.
fn sync_attempt(step: &mut Step, status: &mut FrameworkStatus) {
    let recorded = status.attempt_status.config_map_uid.clone();
    let Some(cm) = step.observed.config_map.filter(|cm| cm.uid() == recorded) else {
        config_map_gone(step, status);
        return;
    };
    follow_config_map(step, status, cm);
    if complete_when_asked(step, status) {
        return;
    }
    sync_tasks(step, status, cm);
    let running = (status.attempt_status.task_role_statuses.iter())
        .flat_map(|r| &r.task_statuses)
        .any(|t| !t.deletion_pending && t.state == TS::AttemptRunning);
    if status.state == FS::AttemptPreparing && running {
        transition(status, FS::AttemptRunning, &step.now);
    }
}

/// The attempt's ConfigMap is gone: no pod of the attempt runs any more, so the attempt
/// and every Task completes now (deleted by others, unless the attempt was completing).
fn config_map_gone(step: &Step, status: &mut FrameworkStatus) {
    let completion = (!status.completing()).then(|| {
        framework_completion(
            cc::CONFIG_MAP_EXTERNAL_DELETED,
            "ConfigMap was deleted by others",
        )
    });
    complete_attempt(step, status, true, completion);
}

/// The cached ConfigMap: one being deleted (by others, unless the attempt was completing)
/// makes the attempt AttemptDeleting; in AttemptDeletionPending, the operator deletes it.
fn follow_config_map(step: &mut Step, status: &mut FrameworkStatus, cm: &ConfigMap) {
    if cm.metadata.deletion_timestamp.is_some() {
        if !status.completing() {
            status.attempt_status.completion_status = Some(framework_completion(
                cc::CONFIG_MAP_EXTERNAL_DELETED,
                "ConfigMap is being deleted by others",
            ));
        }
        transition(status, FS::AttemptDeleting, &step.now);
    } else if status.state == FS::AttemptDeletionPending {
        step.actions.push(Action::DeleteConfigMap {
            uid: cm.uid().unwrap_or_default(),
        });
    }
}

/// Complete the attempt when Stop asks for it or its completion policy calls for it; true
/// when it did, and the Tasks wait for the next call.
fn complete_when_asked(step: &Step, status: &mut FrameworkStatus) -> bool {
    if !status.completing() && step.spec.execution_type == ExecutionType::Stop {
        let completion = framework_completion(
            cc::STOP_FRAMEWORK_REQUESTED,
            "User has requested to stop the Framework",
        );
        complete_attempt(step, status, false, Some(completion));
        return true;
    }
    if !status.completing()
        && let Some(completion) = completion_policy(step.spec, &status.attempt_status)
    {
        complete_attempt(step, status, false, Some(completion));
        return true;
    }
    false
}

/// Sync every Task of the attempt whose ConfigMap is `cm`.
fn sync_tasks(step: &mut Step, status: &mut FrameworkStatus, cm: &ConfigMap) {
    let completing = status.completing();
    for role in &mut status.attempt_status.task_role_statuses {
        let spec = step.spec.task_roles.iter().find(|r| r.name == role.name);
        let timeout = role.pod_graceful_deletion_timeout_sec;
        for task in &mut role.task_statuses {
            sync_task(step, spec, timeout, completing, &cm_uid(cm), task);
        }
    }
}

fn cm_uid(cm: &ConfigMap) -> String {
    cm.uid().unwrap_or_default()
}

/// A Task that completed, with when.
#[derive(Clone, Copy)]
struct Completed<'a> {
    role: &'a str,
    task: &'a TaskStatus,
}

impl Completed<'_> {
    fn time(&self) -> Option<Timestamp> {
        self.task.completion_time.as_ref().map(|t| t.0)
    }
}

/// The FrameworkAttemptCompletionPolicy: the completion the attempt's completed Tasks call
/// for, if any. Among the conditions met, the one whose triggering Task completed first wins.
fn completion_policy(
    spec: &FrameworkSpec,
    attempt: &FrameworkAttemptStatus,
) -> Option<FrameworkAttemptCompletionStatus> {
    let mut best: Option<(Completed, String)> = None;
    let mut all_completed = true;
    let mut total = 0;
    let mut last: Option<Completed> = None;
    for role in &spec.task_roles {
        let policy = role.framework_attempt_completion_policy;
        let tasks = counted_tasks(role, attempt);
        total += role.task_number.max(0);
        all_completed &= tasks.len() == usize::try_from(role.task_number).unwrap_or(0)
            && tasks.iter().all(|t| t.completed());
        let completed = completed_in_order(&role.name, tasks);
        last = last_completed(last, &completed);
        for (min, failed, what) in [
            (policy.min_failed_task_count, true, "Failed"),
            (policy.min_succeeded_task_count, false, "Succeeded"),
        ] {
            if let Some((trigger, message)) = min_count_reached(&completed, min, failed, what)
                && best.as_ref().is_none_or(|(b, _)| trigger.time() < b.time())
            {
                best = Some((trigger, message));
            }
        }
    }
    if let Some((trigger, message)) = best {
        return Some(triggered(&trigger, message, None));
    }
    if !all_completed || total == 0 {
        return None;
    }
    let message = format!(
        "CompletedTaskCount {total} has reached TotalTaskCount {total} and no user specified conditions in FrameworkAttemptCompletionPolicy have ever been triggered"
    );
    last.map(|l| triggered(&l, message, Some(cc::SUCCEEDED)))
}

/// The Tasks of `role` the policy counts: those in its spec, not marked by ScaleDown.
fn counted_tasks<'a>(
    role: &TaskRoleSpec,
    attempt: &'a FrameworkAttemptStatus,
) -> Vec<&'a TaskStatus> {
    (attempt.task_role_statuses.iter())
        .filter(|r| r.name == role.name)
        .flat_map(|r| &r.task_statuses)
        .filter(|t| !t.deletion_pending && t.index < role.task_number)
        .collect()
}

/// The completed ones of `tasks`, in the order they completed.
fn completed_in_order<'a>(role: &'a str, tasks: Vec<&'a TaskStatus>) -> Vec<Completed<'a>> {
    let mut completed: Vec<Completed> = (tasks.into_iter())
        .filter(|t| t.completed())
        .map(|task| Completed { role, task })
        .collect();
    completed.sort_by_key(Completed::time);
    completed
}

/// The Task that completed last, of `last` and `completed` (the later one on a tie): the
/// trigger of a success by all Tasks completed.
fn last_completed<'a>(
    mut last: Option<Completed<'a>>,
    completed: &[Completed<'a>],
) -> Option<Completed<'a>> {
    for c in completed {
        if last.as_ref().is_none_or(|l| l.time() <= c.time()) {
            last = Some(*c);
        }
    }
    last
}

/// Whether `min` (at least 1) of `completed` have failed (or succeeded, if not `failed`):
/// the Task that reached the count, and the trigger's message.
fn min_count_reached<'a>(
    completed: &[Completed<'a>],
    min: i32,
    failed: bool,
    what: &str,
) -> Option<(Completed<'a>, String)> {
    let Ok(min @ 1..) = usize::try_from(min) else {
        return None;
    };
    let matching: Vec<&Completed> = (completed.iter())
        .filter(|c| c.task.completion().is_some_and(|s| s.failed() == failed))
        .collect();
    let trigger = matching.get(min - 1)?;
    let message = format!(
        "{what}TaskCount {} has reached Min{what}TaskCount {min} in the TaskRole",
        matching.len()
    );
    Some((**trigger, message))
}

/// The attempt's completion triggered by a Task: that Task's own completion (or `code`).
fn triggered(
    trigger: &Completed,
    message: String,
    code: Option<cc::Code>,
) -> FrameworkAttemptCompletionStatus {
    let status = match (code, trigger.task.completion()) {
        (None, Some(status)) => status.clone(),
        (code, _) => code.unwrap_or(cc::SUCCEEDED).status(message.clone()),
    };
    FrameworkAttemptCompletionStatus {
        status,
        trigger: Some(CompletionPolicyTrigger {
            message,
            task_role_name: trigger.role.to_owned(),
            task_index: trigger.task.index,
        }),
    }
}

/// AttemptCompleted: the Framework's RetryPolicy decides between a new attempt and the end.
fn retry_framework(step: &mut Step, status: &mut FrameworkStatus) {
    let Some(completion) = status.attempt_status.completion_status.clone() else {
        return;
    };
    let decision = retry::decide(
        &step.spec.retry_policy,
        status.retry_policy_status.accountable_retried_count,
        &completion.status,
        Some(step.observed.conflict_delay_sec),
    );
    if status.retry_policy_status.retry_delay_sec.is_none() {
        if !decision.retry {
            transition(status, FS::Completed, &step.now);
            return;
        }
        status.retry_policy_status.retry_delay_sec = Some(decision.delay_sec);
    }
    let delay = status
        .retry_policy_status
        .retry_delay_sec
        .unwrap_or_default();
    let delay = Duration::from_secs(u64::try_from(delay).unwrap_or(0));
    if step.spec.execution_type != ExecutionType::Stop
        && !step.timed_out(&status.transition_time.clone(), delay)
    {
        return;
    }
    let retried = &mut status.retry_policy_status;
    retried.total_retried_count += 1;
    if decision.accountable {
        retried.accountable_retried_count += 1;
    }
    retried.retry_delay_sec = None;
    let id = retried.total_retried_count;
    status.attempt_status = new_attempt(
        step.spec,
        step.framework,
        id,
        step.now.clone(),
        step.observed.new_uid,
    );
    transition(status, FS::AttemptCreationPending, &step.now);
}

/// Complete a Task's attempt with `completion` (unless it has one): with `force` its pod is
/// known gone; otherwise the pod is deleted first.
fn complete_task(
    task: &mut TaskStatus,
    force: bool,
    completion: Option<TaskAttemptCompletionStatus>,
    now: &Time,
) {
    if task.attempt_status.completion_status.is_none() {
        task.attempt_status.completion_status = completion;
    }
    let state = if force {
        TS::AttemptCompleted
    } else {
        TS::AttemptDeletionPending
    };
    transition_task(task, state, now);
}

const SCALED_DOWN: &str = "User has requested to delete the Task by Framework ScaleDown";

/// One Task: follow its pod, create or delete it, and retry or complete the Task.
fn sync_task(
    step: &mut Step,
    spec: Option<&TaskRoleSpec>,
    deletion_timeout: Option<i64>,
    completing: bool,
    cm_uid: &str,
    task: &mut TaskStatus,
) {
    match task.state {
        TS::Completed => {}
        TS::AttemptCompleted => retry_task(step, spec, task),
        TS::AttemptCreationPending => create_pod(step, spec, completing, cm_uid, task),
        _ => follow_pod(step, deletion_timeout, task),
    }
}

/// AttemptCreationPending: create the Task's pod, once no other pod holds its name.
fn create_pod(
    step: &mut Step,
    spec: Option<&TaskRoleSpec>,
    completing: bool,
    cm_uid: &str,
    task: &mut TaskStatus,
) {
    if completing {
        // The attempt's ConfigMap goes, and the Task completes with it.
        return;
    }
    let name = &task.attempt_status.pod_name;
    if let Some(pod) = (step.observed.pod)(name) {
        if pod.metadata.deletion_timestamp.is_none()
            && controller_uid(&pod.metadata) == Some(cm_uid)
        {
            // Created by this attempt but never recorded: deleted, never adopted.
            step.actions.push(Action::DeletePod {
                name: name.clone(),
                uid: pod.uid().unwrap_or_default(),
                force: false,
            });
        } else if controller_uid(&pod.metadata) != Some(cm_uid)
            && pod.metadata.deletion_timestamp.is_none()
        {
            step.blocked = Some(format!(
                "pod {name} exists and is not controlled by this FrameworkAttempt's ConfigMap"
            ));
            step.wake(Duration::from_secs(10));
        }
        return;
    }
    if task.deletion_pending || spec.is_none() {
        complete_task(
            task,
            true,
            Some(cc::DELETE_TASK_REQUESTED.task(SCALED_DOWN)),
            &step.now,
        );
        return;
    }
    step.actions.push(Action::CreatePod {
        role: spec.map(|s| s.name.clone()).unwrap_or_default(),
        index: task.index,
    });
}

/// From AttemptCreationRequested on: the pod with the recorded UID is the ground truth.
fn follow_pod(step: &mut Step, deletion_timeout: Option<i64>, task: &mut TaskStatus) {
    let now = step.now.clone();
    let recorded = task.attempt_status.pod_uid.clone();
    let name = task.attempt_status.pod_name.clone();
    let pod = (step.observed.pod)(&name).filter(|p| p.uid() == recorded);
    let Some(pod) = pod else {
        no_pod(step, task, recorded, name);
        return;
    };
    if pod.metadata.deletion_timestamp.is_some() {
        pod_deleting(step, deletion_timeout, pod, task);
        return;
    }
    match task.state {
        TS::AttemptDeletionPending => {
            step.actions.push(Action::DeletePod {
                name,
                uid: pod.uid().unwrap_or_default(),
                force: false,
            });
            return;
        }
        TS::AttemptDeletionRequested => return,
        _ => {}
    }
    follow_phase(task, pod, &now);
    if matches!(task.state, TS::AttemptPreparing | TS::AttemptRunning) && task.deletion_pending {
        complete_task(
            task,
            false,
            Some(cc::DELETE_TASK_REQUESTED.task(SCALED_DOWN)),
            &now,
        );
    }
}

/// No pod with the recorded UID is cached. Just created, it may still be on its way to the
/// cache: the Task waits for it (unless scaled down), until the timeout deletes it. Once seen,
/// it is gone: deleted by others, unless the Task's attempt had completed already.
fn no_pod(step: &mut Step, task: &mut TaskStatus, recorded: Option<String>, name: String) {
    let now = step.now.clone();
    if task.state == TS::AttemptCreationRequested {
        let code = if task.deletion_pending {
            cc::DELETE_TASK_REQUESTED.task(SCALED_DOWN)
        } else if step.timed_out(&task.transition_time.clone(), CACHE_CREATION_TIMEOUT) {
            cc::POD_LOCAL_CACHE_CREATION_TIMEOUT.task(
                "Pod does not appear in the local cache within timeout 5m0s, so consider it was deleted and explicitly delete it",
            )
        } else {
            return;
        };
        if let Some(uid) = recorded {
            step.actions.push(Action::DeletePod {
                name,
                uid,
                force: false,
            });
        }
        complete_task(task, true, Some(code), &now);
        return;
    }
    let completion = (task.attempt_status.completion_status.is_none())
        .then(|| cc::POD_EXTERNAL_DELETED.task("Pod was deleted by others"));
    complete_task(task, true, completion, &now);
}

/// The pod is being deleted (by others, unless the Task's attempt had completed already): the
/// Task is AttemptDeleting until the pod is gone, or it is force-deleted after its timeout.
fn pod_deleting(step: &mut Step, deletion_timeout: Option<i64>, pod: &Pod, task: &mut TaskStatus) {
    if task.attempt_status.completion_status.is_none() {
        task.attempt_status.completion_status =
            Some(cc::POD_EXTERNAL_DELETED.task("Pod is being deleted by others"));
    }
    transition_task(task, TS::AttemptDeleting, &step.now);
    force_delete_after_timeout(step, deletion_timeout, pod, task);
}

/// A live pod's phase moves its Task: Pending → Preparing, Running → Running, Succeeded or
/// Failed → the attempt completes, and the pod is deleted next.
fn follow_phase(task: &mut TaskStatus, pod: &Pod, now: &Time) {
    let status = pod.status.as_ref();
    let attempt = &mut task.attempt_status;
    attempt.pod_node_name = Some(
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
    );
    attempt.pod_ip = Some(status.and_then(|s| s.pod_ip.clone()).unwrap_or_default());
    attempt.pod_host_ip = Some(status.and_then(|s| s.host_ip.clone()).unwrap_or_default());
    match status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending") {
        "Pending" => transition_task(task, TS::AttemptPreparing, now),
        "Running" => transition_task(task, TS::AttemptRunning, now),
        "Succeeded" => complete_task(task, false, Some(cc::succeeded(pod)), now),
        "Failed" => complete_task(task, false, Some(cc::classify_failed(pod)), now),
        // Unknown: wait until the pod is deleted or its phase changes.
        _ => {
            if task.state == TS::AttemptCreationRequested {
                transition_task(task, TS::AttemptPreparing, now);
            }
        }
    }
}

/// With `podGracefulDeletionTimeoutSec`, a pod deleting longer than that is deleted again
/// with grace period 0, and its Task's attempt completes.
fn force_delete_after_timeout(
    step: &mut Step,
    timeout: Option<i64>,
    pod: &Pod,
    task: &mut TaskStatus,
) {
    let (Some(timeout), Some(deletion)) = (timeout, pod.metadata.deletion_timestamp.as_ref())
    else {
        return;
    };
    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
    let started = deletion.0 - k8s_openapi::jiff::SignedDuration::from_secs(grace);
    let timeout = Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
    if step.timed_out(&Time(started), timeout) {
        step.actions.push(Action::DeletePod {
            name: task.attempt_status.pod_name.clone(),
            uid: pod.uid().unwrap_or_default(),
            force: true,
        });
        complete_task(task, true, None, &step.now.clone());
    }
}

/// AttemptCompleted: the Task's RetryPolicy decides between a new attempt (at once) and the
/// end of the Task.
fn retry_task(step: &mut Step, spec: Option<&TaskRoleSpec>, task: &mut TaskStatus) {
    let decision = match (spec, task.completion()) {
        (Some(spec), Some(completion)) => retry::decide(
            &spec.task.retry_policy,
            task.retry_policy_status.accountable_retried_count,
            completion,
            None,
        ),
        _ => retry::Decision {
            retry: false,
            accountable: true,
            delay_sec: 0,
        },
    };
    if !decision.retry {
        task.retry_policy_status.retry_delay_sec = None;
        transition_task(task, TS::Completed, &step.now);
        return;
    }
    let retried = &mut task.retry_policy_status;
    retried.total_retried_count += 1;
    if decision.accountable {
        retried.accountable_retried_count += 1;
    }
    retried.retry_delay_sec = None;
    let role = spec.map(|s| s.name.as_str()).unwrap_or_default();
    task.attempt_status = new_task_attempt(
        step.framework,
        role,
        task.index,
        retried.total_retried_count,
        step.now.clone(),
    );
    transition_task(task, TS::AttemptCreationPending, &step.now);
}

/// ScaleUp and ScaleDown: bring the TaskRole and Task statuses to the spec's `taskNumber`s
/// (new Tasks at the end; Tasks beyond the count marked DeletionPending, and removed from the
/// end once completed). True when the status changed: it is written before anything acts.
fn scale(step: &mut Step, status: &mut FrameworkStatus) -> bool {
    if status.completing() || matches!(status.state, FS::AttemptCompleted | FS::Completed) {
        return false;
    }
    let before = status.attempt_status.task_role_statuses.clone();
    let roles = &mut status.attempt_status.task_role_statuses;
    for spec in &step.spec.task_roles {
        let Some(role) = roles.iter_mut().find(|r| r.name == spec.name) else {
            roles.push(new_role(
                spec,
                step.framework,
                step.now.clone(),
                step.observed.new_uid,
            ));
            continue;
        };
        role.pod_graceful_deletion_timeout_sec = spec.task.pod_graceful_deletion_timeout_sec;
        scale_role(step, role, spec.task_number.max(0));
    }
    for role in roles.iter_mut() {
        if !step.spec.task_roles.iter().any(|s| s.name == role.name) {
            scale_role(step, role, 0);
        }
    }
    roles.retain(|r| {
        !r.task_statuses.is_empty() || step.spec.task_roles.iter().any(|s| s.name == r.name)
    });
    *roles != before
}

fn scale_role(step: &Step, role: &mut TaskRoleStatus, number: i32) {
    for task in &mut role.task_statuses {
        if task.index >= number && !task.deletion_pending {
            task.deletion_pending = true;
            if task.attempt_status.completion_status.is_none() {
                task.attempt_status.completion_status =
                    Some(cc::DELETE_TASK_REQUESTED.task(SCALED_DOWN));
            }
        }
    }
    // Compaction: completed DeletionPending Tasks leave from the end only.
    while role
        .task_statuses
        .last()
        .is_some_and(|t| t.deletion_pending && t.completed() && t.index >= number)
    {
        role.task_statuses.pop();
    }
    for index in 0..number {
        let uid = || (step.observed.new_uid)();
        let len = role.task_statuses.len();
        match role.task_statuses.iter().position(|t| t.index == index) {
            None if usize::try_from(index).ok() == Some(len) => role.task_statuses.push(new_task(
                step.framework,
                &role.name,
                index,
                step.now.clone(),
                uid(),
            )),
            // A Task scaled down and completed comes back as a new instance.
            Some(at)
                if role.task_statuses[at].deletion_pending
                    && role.task_statuses[at].completed() =>
            {
                role.task_statuses[at] =
                    new_task(step.framework, &role.name, index, step.now.clone(), uid());
            }
            _ => {}
        }
    }
}

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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::json;

    use super::*;

    fn framework(tasks: i32, execution: &str) -> Framework {
        let mut f: Framework = serde_json::from_value(json!({
            "apiVersion": "frameworkcontroller.microsoft.com/v1",
            "kind": "Framework",
            "metadata": { "name": "fw", "namespace": "ns", "uid": "fw-uid" },
            "spec": {
                "executionType": execution,
                "taskRoles": [{
                    "name": "worker", "taskNumber": tasks,
                    "frameworkAttemptCompletionPolicy": { "minFailedTaskCount": 1, "minSucceededTaskCount": -1 },
                    "task": { "pod": { "spec": { "containers": [] } } }
                }]
            }
        }))
        .unwrap();
        f.status = Some(new_status(
            &f.spec,
            "fw",
            Time(Timestamp::UNIX_EPOCH),
            &|| "u".into(),
        ));
        f
    }

    fn config_map(uid: &str, owner: &str) -> ConfigMap {
        serde_json::from_value(json!({ "metadata": {
            "name": "fw-attempt", "uid": uid,
            "ownerReferences": [{ "apiVersion": "v1", "kind": "Framework", "name": "fw", "uid": owner, "controller": true }]
        } }))
        .unwrap()
    }

    fn pod(name: &str, uid: &str, owner: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": name, "uid": uid, "ownerReferences": [
                { "apiVersion": "v1", "kind": "ConfigMap", "name": "fw-attempt", "uid": owner, "controller": true }
            ] },
            "status": { "phase": phase }
        }))
        .unwrap()
    }

    fn decide_with(f: &Framework, cm: Option<&ConfigMap>, pods: &[Pod]) -> Plan {
        let pod = |name: &str| {
            pods.iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
        };
        let observed = Observed {
            now: Timestamp::UNIX_EPOCH,
            framework_deleting: false,
            config_map: cm,
            pod: &pod,
            conflict_delay_sec: 60,
            new_uid: &|| "new".into(),
        };
        decide(f, &observed)
    }

    /// A Framework whose attempt's ConfigMap `cm-uid` was created and cached.
    fn preparing(tasks: i32) -> Framework {
        let mut f = framework(tasks, "Start");
        let status = f.status.as_mut().unwrap();
        record(
            status,
            Done::ConfigMapCreated {
                uid: "cm-uid".into(),
            },
            Timestamp::UNIX_EPOCH,
        );
        status.state = FS::AttemptPreparing;
        f
    }

    #[test]
    fn a_new_framework_is_written_before_anything_is_created() {
        let mut f = framework(2, "Start");
        f.status = None;
        let plan = decide_with(&f, None, &[]);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.status.state, FS::AttemptCreationPending);
        assert_eq!(
            plan.status.attempt_status.task_role_statuses[0]
                .task_statuses
                .len(),
            2
        );
    }

    #[test]
    fn the_attempt_starts_by_its_configmap_unless_created_or_stopped() {
        let plan = decide_with(&framework(1, "Start"), None, &[]);
        assert_eq!(plan.actions, [Action::CreateConfigMap]);
        let plan = decide_with(&framework(1, "Create"), None, &[]);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.status.state, FS::AttemptCreationPending);
        let plan = decide_with(&framework(1, "Stop"), None, &[]);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.status.state, FS::AttemptCompleted);
        let code = plan
            .status
            .attempt_status
            .completion_status
            .map(|c| c.status.code);
        assert_eq!(code, Some(-210));
    }

    #[test]
    fn a_configmap_of_ours_not_recorded_is_deleted_and_someone_elses_blocks() {
        let plan = decide_with(
            &framework(1, "Start"),
            Some(&config_map("lost", "fw-uid")),
            &[],
        );
        assert_eq!(
            plan.actions,
            [Action::DeleteConfigMap { uid: "lost".into() }]
        );
        let plan = decide_with(
            &framework(1, "Start"),
            Some(&config_map("theirs", "other")),
            &[],
        );
        assert!(plan.actions.is_empty());
        assert!(plan.blocked.is_some());
    }

    #[test]
    fn a_pod_is_created_only_when_its_name_is_free() {
        let f = preparing(1);
        let cm = config_map("cm-uid", "fw-uid");
        let plan = decide_with(&f, Some(&cm), &[]);
        assert_eq!(
            plan.actions,
            [Action::CreatePod {
                role: "worker".into(),
                index: 0
            }]
        );
        let unrecorded = pod("fw-worker-0", "lost", "cm-uid", "Running");
        let plan = decide_with(&f, Some(&cm), &[unrecorded]);
        let deleted = Action::DeletePod {
            name: "fw-worker-0".into(),
            uid: "lost".into(),
            force: false,
        };
        assert_eq!(plan.actions, [deleted]);
        let foreign = pod("fw-worker-0", "theirs", "other", "Running");
        let plan = decide_with(&f, Some(&cm), &[foreign]);
        assert!(plan.actions.is_empty() && plan.blocked.is_some());
    }

    #[test]
    fn a_failed_task_completes_the_attempt_and_a_gone_configmap_ends_it() {
        let mut f = preparing(1);
        let cm = config_map("cm-uid", "fw-uid");
        let status = f.status.as_mut().unwrap();
        let created = Done::PodCreated {
            role: "worker".into(),
            index: 0,
            uid: "p".into(),
        };
        record(status, created, Timestamp::UNIX_EPOCH);
        let plan = decide_with(
            &f,
            Some(&cm),
            &[pod("fw-worker-0", "p", "cm-uid", "Failed")],
        );
        let task = &plan.status.attempt_status.task_role_statuses[0].task_statuses[0];
        assert_eq!(task.state, TS::AttemptDeletionPending);
        assert_eq!(task.completion().map(|c| c.code), Some(-300));
        // The ConfigMap vanished without the operator: every Task completes with the attempt.
        f.status = Some(plan.status);
        let plan = decide_with(&f, None, &[]);
        assert_eq!(plan.status.state, FS::AttemptCompleted);
        let task = &plan.status.attempt_status.task_role_statuses[0].task_statuses[0];
        assert_eq!(task.state, TS::Completed);
        assert_eq!(
            task.completion().map(|c| c.code),
            Some(-300),
            "never replaced"
        );
    }

    #[test]
    fn scale_down_marks_the_last_tasks_and_compacts_them_once_completed() {
        let mut f = preparing(3);
        f.spec.task_roles[0].task_number = 1;
        let cm = config_map("cm-uid", "fw-uid");
        let plan = decide_with(&f, Some(&cm), &[]);
        assert!(plan.actions.is_empty(), "the marks are written first");
        let tasks = &plan.status.attempt_status.task_role_statuses[0].task_statuses;
        let marked: Vec<bool> = tasks.iter().map(|t| t.deletion_pending).collect();
        assert_eq!(marked, [false, true, true]);
        assert_eq!(tasks[2].completion().map(|c| c.code), Some(-230));
        // Completed without a pod (none was created), not retried, then compacted: one write
        // each.
        f.status = Some(plan.status);
        for _ in 0..3 {
            f.status = Some(decide_with(&f, Some(&cm), &[]).status);
        }
        let status = f.status.as_ref().unwrap();
        let tasks = &status.attempt_status.task_role_statuses[0].task_statuses;
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(status.attempt_status.id, 0);
    }

    #[test]
    fn a_retry_starts_a_new_attempt_with_new_tasks() {
        let mut f = framework(1, "Start");
        f.spec.retry_policy.max_retry_count = -2;
        let status = f.status.as_mut().unwrap();
        status.state = FS::AttemptCompleted;
        status.attempt_status.completion_status = Some(framework_completion(cc::SUCCEEDED, "done"));
        let plan = decide_with(&f, None, &[]);
        assert_eq!(plan.status.state, FS::AttemptCreationPending);
        assert_eq!(plan.status.attempt_status.id, 1);
        assert_eq!(plan.status.retry_policy_status.accountable_retried_count, 1);
        let task = &plan.status.attempt_status.task_role_statuses[0].task_statuses[0];
        assert_eq!(
            (task.instance_uid.as_str(), task.attempt_status.id),
            ("new", 0)
        );
    }
}
