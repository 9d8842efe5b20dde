//! A spec the controller will not run (`check`): admitted without the CRD's rules, or with a
//! pod template of the wrong shape. It fails the Framework as Stop does, with the refusal's
//! completion, no Task added and no retry, and the decision that acts on it reports it once.

use crate::operator::fc::api::MAX_TASKS;
use crate::operator::fc::api::{ExecutionType, FrameworkState as FS, TaskState as TS};
use crate::operator::fc::completion as cc;
use crate::operator::fc::fixtures::{
    CM_UID, WORKER, check, delete_config_map, framework, next, row, running,
};

const DUPLICATE: &str = "DuplicateTaskRoleName";

fn wrong_shape() -> serde_json::Value {
    serde_json::json!({ "spec": { "containers": [{ "name": "main", "ports": "80" }] } })
}

#[test]
fn a_refused_spec_fails_the_framework_before_anything_is_created() {
    check(vec![
        row(
            "(null) -> AttemptCreationPending: two TaskRoles of one name; no Task is listed",
            framework(1).role(WORKER, 2, 1, -1),
            next().state(FS::AttemptCreationPending).no_tasks(),
        ),
        row(
            "(null) -> AttemptCreationPending: too many Tasks in all; none is listed",
            framework(MAX_TASKS).role("ps", 1, 1, -1),
            next().state(FS::AttemptCreationPending).no_tasks(),
        ),
        row(
            "AttemptCreationPending -> AttemptCompleted: two TaskRoles of one name (-240), reported",
            framework(1)
                .role(WORKER, 2, 1, -1)
                .state(FS::AttemptCreationPending),
            (next().state(FS::AttemptCompleted))
                .code(cc::FRAMEWORK_SPEC_INVALID)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .refused(DUPLICATE),
        ),
        row(
            "AttemptCreationPending -> AttemptCompleted: refused even if Create",
            (framework(1).role(WORKER, 2, 1, -1))
                .execution(ExecutionType::Create)
                .state(FS::AttemptCreationPending),
            (next().state(FS::AttemptCompleted))
                .code(cc::FRAMEWORK_SPEC_INVALID)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .refused(DUPLICATE),
        ),
        row(
            "AttemptCreationPending -> AttemptCompleted: a pod template of the wrong shape (-200)",
            (framework(2).pod_template(wrong_shape())).state(FS::AttemptCreationPending),
            (next().state(FS::AttemptCompleted))
                .code(cc::POD_CREATION_PERMANENT_ERROR)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .refused("InvalidPodTemplate"),
        ),
        row(
            "AttemptCreationPending, the Framework being deleted: nothing happens",
            (framework(1).role(WORKER, 2, 1, -1))
                .state(FS::AttemptCreationPending)
                .framework_deleting(),
            next(),
        ),
    ]);
}

#[test]
fn a_spec_refused_while_it_runs_stops_the_attempt_and_is_never_retried() {
    check(vec![
        row(
            "AttemptRunning -> AttemptDeletionPending: rescaled past the bound; no Task added",
            running(2).rescaled(MAX_TASKS + 1),
            (next().state(FS::AttemptDeletionPending))
                .code(cc::FRAMEWORK_SPEC_INVALID)
                .task_code(0, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .task_code(1, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .refused("TooManyTasks"),
        ),
        row(
            "AttemptDeletionPending: already completing, the attempt goes on ending, no report",
            (running(1).rescaled(MAX_TASKS + 1))
                .state(FS::AttemptDeletionPending)
                .completing(cc::FRAMEWORK_SPEC_INVALID),
            next().act(delete_config_map(CM_UID)),
        ),
        row(
            "AttemptCompleted -> Completed: -240 is never retried, even with maxRetryCount -2",
            (framework(1).role(WORKER, 2, 1, -1))
                .retry(false, -2)
                .state(FS::AttemptCompleted)
                .completing(cc::FRAMEWORK_SPEC_INVALID),
            next().state(FS::Completed),
        ),
        row(
            "AttemptCompleted -> Completed: a retry the RetryPolicy would make is not, and reported",
            (framework(1).pod_template(wrong_shape()))
                .retry(false, -2)
                .state(FS::AttemptCompleted)
                .completing(cc::POD_EXTERNAL_DELETED),
            next().state(FS::Completed).refused("InvalidPodTemplate"),
        ),
        row(
            "AttemptCompleted with a retry delay due: no new attempt, Completed",
            (framework(1).rescaled(MAX_TASKS + 1))
                .retry(true, 0)
                .state(FS::AttemptCompleted)
                .completing(cc::CONTAINER_TRANSIENT_CONFLICT_FAILED)
                .retry_delay(60)
                .at(100),
            (next().state(FS::Completed))
                .retried(0, 0, None)
                .refused("TooManyTasks"),
        ),
        row(
            "Completed: a Framework that ended is not looked at again",
            (framework(1).role(WORKER, 2, 1, -1))
                .state(FS::Completed)
                .completing(cc::SUCCEEDED),
            next(),
        ),
    ]);
}
