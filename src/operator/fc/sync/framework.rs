//! The Framework's own state machine, one FrameworkAttempt at a time: its ConfigMap created,
//! followed until it is gone, the attempt completed when Stop or its completion policy asks,
//! and the Framework's RetryPolicy deciding between a new attempt and the end.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::policy::{completion_policy, task_completion_policy};
use super::task::sync_task;
use super::{
    Action, Step, controller_uid, framework_completion, new_attempt, tasks_mut, transition,
    transition_task,
};
use crate::operator::fc::api::{
    ExecutionType, FrameworkAttemptCompletionStatus, FrameworkState as FS, FrameworkStatus,
    TaskState as TS,
};
use crate::operator::fc::completion as cc;
use crate::operator::fc::retry;

/// Move the Framework's own state machine, and its Tasks' while an attempt lives.
pub(super) fn sync_framework(step: &mut Step, status: &mut FrameworkStatus) {
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

/// AttemptCreationPending: create the ConfigMap, unless asked not to start (Create), to stop
/// (Stop, or a spec refused, even if Create), or the Framework is being deleted.
fn create_attempt(step: &mut Step, status: &mut FrameworkStatus) {
    let create = step.spec.execution_type == ExecutionType::Create;
    if step.observed.framework_deleting || (create && step.refusal.is_none()) {
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
    if let Some(completion) = stop_completion(step) {
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
        // As FrameworkController, the same decision goes on to the Tasks: the Framework's
        // AttemptPreparing is written with their pods' creations.
        transition(status, FS::AttemptPreparing, &step.now);
        sync_attempt(step, status);
        return;
    }
    // Stop (or a spec refused) ends the attempt at once, as the timeout does: the ConfigMap,
    // created or not, is deleted by its UID.
    let completion = match stop_completion(step) {
        Some(completion) => completion,
        None if step.cache_timed_out(&status.transition_time.clone()) => framework_completion(
            cc::CONFIG_MAP_LOCAL_CACHE_CREATION_TIMEOUT,
            &step.not_cached("ConfigMap"),
        ),
        None => return,
    };
    if let Some(uid) = recorded {
        step.actions.push(Action::DeleteConfigMap { uid });
    }
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
    complete_when_asked(step, status);
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

/// The completion of an attempt stopped because Stop asks for it or the spec is refused (the
/// refusal first, and then reported); `None` to go on.
fn stop_completion(step: &mut Step) -> Option<FrameworkAttemptCompletionStatus> {
    if let Some(refusal) = step.refusal {
        step.refused = true;
        return Some(framework_completion(refusal.code(), &refusal.message()));
    }
    (step.spec.execution_type == ExecutionType::Stop).then(|| {
        framework_completion(
            cc::STOP_FRAMEWORK_REQUESTED,
            "User has requested to stop the Framework",
        )
    })
}

/// Complete the attempt when Stop asks for it, the spec is refused, or its completion policy
/// calls for it over the Tasks completed before this decision (a policy changed since). The
/// Tasks are synced next all the same, as FrameworkController syncs them.
fn complete_when_asked(step: &mut Step, status: &mut FrameworkStatus) {
    if !status.completing()
        && let Some(completion) = stop_completion(step)
    {
        complete_attempt(step, status, false, Some(completion));
    }
    if !status.completing()
        && let Some(completion) = completion_policy(step.spec, &status.attempt_status)
    {
        complete_attempt(step, status, false, Some(completion));
    }
}

/// Sync every Task of the attempt whose ConfigMap is `cm`, in order. A Task that completes
/// here is counted by its TaskRole's completion policy at once, before the next Task is
/// synced, so the first Task that reaches a count completes the attempt, with the count as
/// it stands then, and the Tasks after it see the attempt completing.
fn sync_tasks(step: &mut Step, status: &mut FrameworkStatus, cm: &ConfigMap) {
    for r in 0..status.attempt_status.task_role_statuses.len() {
        for t in 0..status.attempt_status.task_role_statuses[r]
            .task_statuses
            .len()
        {
            let completing = status.completing();
            let role = &mut status.attempt_status.task_role_statuses[r];
            let spec = step.spec.task_roles.iter().find(|s| s.name == role.name);
            let timeout = role.pod_graceful_deletion_timeout_sec;
            let task = &mut role.task_statuses[t];
            let was_completed = task.state == TS::Completed;
            sync_task(step, spec, timeout, completing, &cm_uid(cm), task);
            if completing || was_completed || task.state != TS::Completed {
                continue;
            }
            let completion = task_completion_policy(step.spec, &status.attempt_status, (r, t));
            if let Some(completion) = completion {
                complete_attempt(step, status, false, Some(completion));
            }
        }
    }
}

fn cm_uid(cm: &ConfigMap) -> String {
    cm.uid().unwrap_or_default()
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
    if decision.retry
        && let Some(refusal) = step.refusal
    {
        // The spec cannot run: the Framework ends here, with the last attempt's completion,
        // reported unless that is the refusal's own.
        step.refused = completion.status.diagnostics != refusal.message();
        status.retry_policy_status.retry_delay_sec = None;
        transition(status, FS::Completed, &step.now);
        return;
    }
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
    retried.total_retried_count = retried.total_retried_count.saturating_add(1);
    if decision.accountable {
        retried.accountable_retried_count = retried.accountable_retried_count.saturating_add(1);
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
