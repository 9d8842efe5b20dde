//! The job's conditions and how they replace each other, as upstream's `pkg/util/status.go`.
//!
//! Once `Failed=True` exists nothing else is written. Running and Restarting replace each other.
//! Appending Succeeded or Failed flips Running to False. Setting a condition with the status and
//! reason it already has is a no-op; when only the reason changes `lastTransitionTime` is kept.
//! The changed condition is appended last, since the printer column shows the last one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::operator::training::api::{JobCondition, JobStatus};

pub const CREATED: &str = "Created";
pub const RUNNING: &str = "Running";
pub const RESTARTING: &str = "Restarting";
pub const SUCCEEDED: &str = "Succeeded";
pub const SUSPENDED: &str = "Suspended";
pub const FAILED: &str = "Failed";

pub const TRUE: &str = "True";
pub const FALSE: &str = "False";

/// Whether the job has a condition of this type with status True.
pub fn is_true(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == TRUE)
}

/// Whether the job has finished: Succeeded or Failed.
pub fn is_finished(status: &JobStatus) -> bool {
    is_true(status, SUCCEEDED) || is_true(status, FAILED)
}

/// Set a condition by upstream's rules; returns whether anything changed.
pub fn set(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    if is_true(status, FAILED) {
        return false;
    }
    let existing = status.conditions.iter().find(|c| c.type_ == type_);
    if let Some(c) = existing
        && c.status == value
        && c.reason.as_deref() == Some(reason)
    {
        return false;
    }
    let last_transition_time = match existing {
        Some(c) if c.status == value => c.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    let condition = JobCondition {
        type_: type_.to_owned(),
        status: value.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_update_time: Some(now.clone()),
        last_transition_time,
    };
    status.conditions.retain(|c| {
        let replaced = c.type_ == type_
            || (type_ == RUNNING && c.type_ == RESTARTING)
            || (type_ == RESTARTING && c.type_ == RUNNING);
        !replaced
    });
    if (type_ == SUCCEEDED || type_ == FAILED) && value == TRUE {
        for c in status
            .conditions
            .iter_mut()
            .filter(|c| c.type_ == RUNNING && c.status == TRUE)
        {
            c.status = FALSE.to_owned();
            c.last_transition_time = Some(now.clone());
            c.last_update_time = Some(now.clone());
        }
    }
    status.conditions.push(condition);
    true
}

/// Flip an existing True condition to False with a new reason; absent conditions stay absent.
pub fn set_false_if_present(
    status: &mut JobStatus,
    type_: &str,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    if status
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == TRUE)
    {
        set(status, type_, FALSE, reason, message, now)
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::at;

    fn types(status: &JobStatus) -> Vec<(String, String)> {
        status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    }

    #[test]
    fn running_and_restarting_replace_each_other() {
        let mut status = JobStatus::default();
        set(&mut status, CREATED, TRUE, "TFJobCreated", "", &at(0));
        set(&mut status, RUNNING, TRUE, "TFJobRunning", "", &at(1));
        set(&mut status, RESTARTING, TRUE, "TFJobRestarting", "", &at(2));
        assert_eq!(
            types(&status),
            [
                ("Created".into(), "True".into()),
                ("Restarting".into(), "True".into())
            ]
        );
        set(&mut status, RUNNING, TRUE, "TFJobRunning", "", &at(3));
        assert_eq!(
            types(&status),
            [
                ("Created".into(), "True".into()),
                ("Running".into(), "True".into())
            ]
        );
    }

    #[test]
    fn succeeded_flips_running_to_false_and_goes_last() {
        let mut status = JobStatus::default();
        set(&mut status, RUNNING, TRUE, "TFJobRunning", "", &at(1));
        set(&mut status, SUCCEEDED, TRUE, "TFJobSucceeded", "", &at(2));
        assert_eq!(
            types(&status),
            [
                ("Running".into(), "False".into()),
                ("Succeeded".into(), "True".into())
            ]
        );
    }

    #[test]
    fn nothing_is_written_after_failed() {
        let mut status = JobStatus::default();
        set(&mut status, FAILED, TRUE, "TFJobFailed", "", &at(1));
        assert!(!set(
            &mut status,
            SUCCEEDED,
            TRUE,
            "TFJobSucceeded",
            "",
            &at(2)
        ));
        assert_eq!(types(&status), [("Failed".into(), "True".into())]);
    }

    #[test]
    fn same_status_and_reason_is_a_no_op_and_a_new_reason_keeps_the_transition_time() {
        let mut status = JobStatus::default();
        set(&mut status, RUNNING, TRUE, "TFJobRunning", "a", &at(1));
        assert!(!set(
            &mut status,
            RUNNING,
            TRUE,
            "TFJobRunning",
            "b",
            &at(2)
        ));
        assert!(set(&mut status, RUNNING, TRUE, "Other", "c", &at(3)));
        let c = &status.conditions[0];
        assert_eq!(c.last_transition_time, Some(at(1)));
        assert_eq!(c.last_update_time, Some(at(3)));
    }
}
