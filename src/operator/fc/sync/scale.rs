//! ScaleUp and ScaleDown: the status's TaskRoles and Tasks brought to the spec's, written
//! before anything acts on them.

use super::{SCALED_DOWN, Step, new_role, new_task};
use crate::operator::fc::api::{FrameworkState as FS, FrameworkStatus, TaskRoleStatus};
use crate::operator::fc::completion as cc;

/// ScaleUp and ScaleDown: bring the TaskRole and Task statuses to the spec's `taskNumber`s
/// (new Tasks at the end; Tasks beyond the count marked DeletionPending, and removed from the
/// end once completed). True when the status changed: it is written before anything acts.
pub(super) fn scale(step: &mut Step, status: &mut FrameworkStatus) -> bool {
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
