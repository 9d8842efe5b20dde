//! Each Task's state machine, its pod the ground truth: the pod created once its name is free,
//! followed by its phase until it ends or is deleted, and the Task's RetryPolicy deciding
//! between a new attempt (at once) and the end.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::{Action, SCALED_DOWN, Step, controller_uid, new_task_attempt, transition_task};
use crate::operator::fc::api::{
    TaskAttemptCompletionStatus, TaskRoleSpec, TaskState as TS, TaskStatus,
};
use crate::operator::fc::completion as cc;
use crate::operator::fc::pod_failure::CodeInfo;
use crate::operator::fc::retry;

/// Complete a Task's attempt with `completion` (unless it has one): with `force` its pod is
/// known gone; otherwise the pod is deleted first.
pub(super) fn complete_task(
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

/// One Task: follow its pod, create or delete it, and retry or complete the Task.
pub(super) fn sync_task(
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
    follow_phase(task, pod, &now, &step.observed.config.pod_failure);
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
        } else if step.cache_timed_out(&task.transition_time.clone()) {
            cc::POD_LOCAL_CACHE_CREATION_TIMEOUT.task(step.not_cached("Pod"))
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
fn follow_phase(task: &mut TaskStatus, pod: &Pod, now: &Time, spec: &[CodeInfo]) {
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
        "Failed" => complete_task(task, false, Some(cc::classify_failed(pod, spec)), now),
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
    // A grace period past jiff's range (the pod's to choose) started at its earliest.
    let started = (deletion.0)
        .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(grace))
        .unwrap_or(k8s_openapi::jiff::Timestamp::MIN);
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
    retried.total_retried_count = retried.total_retried_count.saturating_add(1);
    if decision.accountable {
        retried.accountable_retried_count = retried.accountable_retried_count.saturating_add(1);
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
