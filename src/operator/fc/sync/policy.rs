//! The FrameworkAttemptCompletionPolicy: whether the attempt's completed Tasks complete it,
//! and with which Task's completion.

use k8s_openapi::jiff::Timestamp;

use crate::operator::fc::api::{
    CompletionPolicyTrigger, FrameworkAttemptCompletionStatus, FrameworkAttemptStatus,
    FrameworkSpec, TaskRoleSpec, TaskStatus,
};
use crate::operator::fc::completion as cc;

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
pub(super) fn completion_policy(
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

/// FrameworkController's check when the Task at `(role, task)` (indexes into the attempt's
/// statuses) has just completed: its TaskRole's counts as they stand at this moment, with that
/// Task as the trigger (a success count wins over a failure count, as there); else the success
/// of every Task completed. A Task marked by ScaleDown, or of a TaskRole gone from the spec,
/// triggers nothing.
pub(super) fn task_completion_policy(
    spec: &FrameworkSpec,
    attempt: &FrameworkAttemptStatus,
    (role, task): (usize, usize),
) -> Option<FrameworkAttemptCompletionStatus> {
    let role_status = attempt.task_role_statuses.get(role)?;
    let task = role_status.task_statuses.get(task)?;
    let role_spec = (spec.task_roles.iter()).find(|r| r.name == role_status.name)?;
    if task.deletion_pending {
        return None;
    }
    let trigger = Completed {
        role: &role_status.name,
        task,
    };
    let policy = role_spec.framework_attempt_completion_policy;
    let counted = counted_tasks(role_spec, attempt);
    let mut reached = None;
    for (min, failed, what) in [
        (policy.min_failed_task_count, true, "Failed"),
        (policy.min_succeeded_task_count, false, "Succeeded"),
    ] {
        let count = (counted.iter())
            .filter(|t| t.completed() && t.completion().is_some_and(|s| s.failed() == failed))
            .count();
        let is_one = task.completion().is_some_and(|s| s.failed() == failed);
        if is_one && min >= 1 && count >= usize::try_from(min).unwrap_or(usize::MAX) {
            reached = Some(format!(
                "{what}TaskCount {count} has reached Min{what}TaskCount {min} in the TaskRole"
            ));
        }
    }
    if let Some(message) = reached {
        return Some(triggered(&trigger, message, None));
    }
    let total: i32 = spec.task_roles.iter().map(|r| r.task_number.max(0)).sum();
    let completed: usize = (spec.task_roles.iter())
        .map(|r| {
            counted_tasks(r, attempt)
                .iter()
                .filter(|t| t.completed())
                .count()
        })
        .sum();
    if total < 1 || completed < usize::try_from(total).unwrap_or(usize::MAX) {
        return None;
    }
    let message = format!(
        "CompletedTaskCount {completed} has reached TotalTaskCount {total} and no user specified conditions in FrameworkAttemptCompletionPolicy have ever been triggered"
    );
    Some(triggered(&trigger, message, Some(cc::SUCCEEDED)))
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
