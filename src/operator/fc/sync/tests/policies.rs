//! The policies that move the Framework's state machine, one row per case
//! FrameworkController documents: the FrameworkAttemptCompletionPolicy, Stop, the Framework's
//! RetryPolicy, and ScaleUp and ScaleDown. Where mlkube knowingly differs from
//! FrameworkController, the row says what mlkube does and a comment how FrameworkController
//! differs.

use std::time::Duration;

use crate::operator::fc::api::{ExecutionType, FrameworkState as FS, TaskState as TS};
use crate::operator::fc::completion as cc;
use crate::operator::fc::fixtures::{
    CONFLICT_DELAY_SEC, Next, Scenario, WORKER, check, create_pod, framework, next, row, running,
};

const FAILED: cc::Code = cc::CONTAINER_PERMANENT_FAILED;

/// The attempt completes with `code`, triggered by worker `index`.
fn completes(code: cc::Code, index: i32) -> Next {
    (next().state(FS::AttemptDeletionPending))
        .code(code)
        .trigger(WORKER, index)
}

#[test]
fn a_min_count_reached_completes_the_attempt_with_the_triggering_tasks_completion() {
    check(vec![
        row(
            "minFailedTaskCount 1: the first failed Task fails the attempt; the others get -220",
            (running(2).completed(WORKER, 0, FAILED, 5)).running_task(1),
            completes(FAILED, 0).task_code(1, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
        row(
            "minFailedTaskCount 2, one Task failed: the attempt goes on",
            (running(2).policy(2, -1).completed(WORKER, 0, FAILED, 5)).running_task(1),
            next(),
        ),
        row(
            "minFailedTaskCount 2: the second Task to fail (worker 0, at 7 s) triggers",
            (running(3).policy(2, -1))
                .completed(WORKER, 0, FAILED, 7)
                .completed(WORKER, 1, FAILED, 5)
                .running_task(2),
            completes(FAILED, 0).task_code(2, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
        row(
            "minSucceededTaskCount 1: the first succeeded Task succeeds the attempt",
            (running(2).policy(-1, 1))
                .completed(WORKER, 1, cc::SUCCEEDED, 5)
                .running_task(0),
            completes(cc::SUCCEEDED, 1).task_code(0, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
        row(
            "several TaskRoles: the condition whose Task completed first wins",
            (running(1).role("ps", 1, -1, 1))
                .completed(WORKER, 0, FAILED, 7)
                .completed("ps", 0, cc::SUCCEEDED, 5),
            (next().state(FS::AttemptDeletionPending))
                .code(cc::SUCCEEDED)
                .trigger("ps", 0),
        ),
    ]);
}

#[test]
fn otherwise_the_attempt_succeeds_once_every_task_it_counts_completed() {
    check(vec![
        row(
            "no condition: every Task completed succeeds the attempt (0), by the last one, failures or not",
            (running(2).policy(-1, -1))
                .completed(WORKER, 0, cc::SUCCEEDED, 7)
                .completed(WORKER, 1, FAILED, 5),
            completes(cc::SUCCEEDED, 0),
        ),
        row(
            "a Task marked by ScaleDown does not count, failed or not (and one running is stopped)",
            (running(3).rescaled(1).running_task(0))
                .completed(WORKER, 1, FAILED, 5)
                .deletion_pending(1)
                .running_task(2)
                .deletion_pending(2),
            next().task(2, TS::AttemptDeletionPending),
        ),
        row(
            "no Task: the attempt never completes by itself",
            running(0),
            next(),
        ),
        // As FrameworkController: the Task Completed and the Framework AttemptDeletionPending
        // in one write, never the Framework running with its trigger already Completed.
        row(
            "a Task completing now triggers the policy in the same decision",
            running(1)
                .task(0, TS::AttemptCompleted)
                .task_completion(0, FAILED),
            completes(FAILED, 0).task(0, TS::Completed),
        ),
        row(
            "three Tasks completing in one decision: the first to reach the count triggers",
            three_failed(),
            completes(FAILED, 0)
                .task(0, TS::Completed)
                .task(1, TS::Completed)
                .task(2, TS::Completed),
        ),
    ]);
}

/// Three workers whose attempts completed failed, all seen in one decision.
fn three_failed() -> Scenario {
    (running(3).policy(1, -1))
        .task(0, TS::AttemptCompleted)
        .task_completion(0, FAILED)
        .task(1, TS::AttemptCompleted)
        .task_completion(1, FAILED)
        .task(2, TS::AttemptCompleted)
        .task_completion(2, FAILED)
}

/// FrameworkController's stateful example, three workers failing at once: the attempt fails
/// on the first failed Task's count as it stands when that Task completes (1), not on all
/// three, and the two after it keep their own completions.
#[test]
fn the_first_failure_that_reaches_the_policy_decides_with_its_count() {
    let plan = three_failed().decide();
    let completion = plan.status.attempt_status.completion_status.unwrap();
    let trigger = completion.trigger.unwrap();
    assert_eq!(
        trigger.message,
        "FailedTaskCount 1 has reached MinFailedTaskCount 1 in the TaskRole"
    );
    let tasks = &plan.status.attempt_status.task_role_statuses[0].task_statuses;
    let codes: Vec<_> = tasks
        .iter()
        .map(|t| t.completion().map(|c| c.code))
        .collect();
    assert_eq!(codes, [Some(FAILED.code); 3]);
}

#[test]
fn stop_completes_the_attempt_whatever_runs() {
    let stopped = |state| {
        (framework(2).execution(ExecutionType::Stop).state(state))
            .config_map()
            .running_task(0)
            .completed(WORKER, 1, cc::SUCCEEDED, 5)
    };
    let stops = || {
        (next().state(FS::AttemptDeletionPending))
            .code(cc::STOP_FRAMEWORK_REQUESTED)
            .task_code(0, cc::FRAMEWORK_ATTEMPT_COMPLETION)
    };
    // The Tasks are synced in the same decision, as FrameworkController syncs them: Task 0's
    // pod still runs, so it stays AttemptRunning until the ConfigMap's deletion takes it.
    check(vec![
        row(
            "AttemptPreparing -> AttemptDeletionPending: Stop (-210); Tasks without a completion get -220",
            stopped(FS::AttemptPreparing),
            stops(),
        ),
        row(
            "AttemptRunning -> AttemptDeletionPending: Stop (-210); Tasks without a completion get -220",
            stopped(FS::AttemptRunning),
            stops(),
        ),
        row(
            "AttemptDeletionRequested: Stop after the attempt completed keeps its completion",
            stopped(FS::AttemptDeletionRequested).completing(cc::SUCCEEDED),
            next(),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: Stop starts a waiting retry at once",
            (framework(1).execution(ExecutionType::Stop).retry(true, 0))
                .state(FS::AttemptCompleted)
                .completing(cc::CONTAINER_TRANSIENT_CONFLICT_FAILED)
                .retry_delay(CONFLICT_DELAY_SEC),
            (next().state(FS::AttemptCreationPending))
                .attempt(1)
                .retried(1, 0, None)
                .new_tasks(),
        ),
        row(
            "AttemptCreationPending -> AttemptCompleted: and Stop completes that attempt at once",
            (framework(1).execution(ExecutionType::Stop).retry(true, 0))
                .state(FS::AttemptCreationPending)
                .retried(1, 1, 0),
            (next().state(FS::AttemptCompleted))
                .code(cc::STOP_FRAMEWORK_REQUESTED)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
    ]);
}

/// A Framework whose attempt completed with `code`, with the RetryPolicy (`fancy`, `max`).
fn ended(fancy: bool, max: i32, code: cc::Code) -> Scenario {
    (framework(1).retry(fancy, max))
        .state(FS::AttemptCompleted)
        .completing(code)
        .task(0, TS::Completed)
        .task_completion(0, cc::FRAMEWORK_ATTEMPT_COMPLETION)
}

#[test]
fn the_retry_policy_starts_a_new_attempt_or_completes_the_framework() {
    let retried = |id, accountable| {
        (next().state(FS::AttemptCreationPending))
            .attempt(id)
            .retried(id, accountable, None)
            .new_tasks()
    };
    let transient = cc::CONFIG_MAP_EXTERNAL_DELETED;
    let unknown = cc::POD_FAILED_WITHOUT_FAILED_CONTAINER;
    check(vec![
        row(
            "AttemptCompleted -> Completed: the default RetryPolicy never retries",
            ended(false, 0, unknown),
            next().state(FS::Completed),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: maxRetryCount -1 retries a failure, counted",
            ended(false, -1, unknown),
            retried(1, 1),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: maxRetryCount -2 retries a success too",
            ended(false, -2, cc::SUCCEEDED),
            retried(1, 1),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: maxRetryCount 3, retried twice",
            ended(false, 3, unknown).retried(2, 2, 2),
            retried(3, 3),
        ),
        row(
            "AttemptCompleted -> Completed: maxRetryCount 3, retried three times",
            ended(false, 3, unknown).retried(3, 3, 3),
            next().state(FS::Completed),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: fancy, a transient failure (-100), not counted",
            ended(true, 0, transient),
            retried(1, 0),
        ),
        row(
            "AttemptCompleted -> Completed: fancy, a permanent failure (210)",
            ended(true, 3, FAILED),
            next().state(FS::Completed),
        ),
        row(
            "AttemptCompleted -> Completed: StopFrameworkRequested (-210) never retried",
            ended(false, -2, cc::STOP_FRAMEWORK_REQUESTED),
            next().state(FS::Completed),
        ),
        row(
            "Completed: final",
            ended(false, -2, cc::SUCCEEDED).state(FS::Completed),
            next(),
        ),
    ]);
}

#[test]
fn a_transient_conflict_retries_the_framework_after_a_random_delay() {
    let conflict = || ended(true, 0, cc::CONTAINER_TRANSIENT_CONFLICT_FAILED);
    check(vec![
        row(
            "AttemptCompleted: fancy, a transient conflict (201): the retry waits a delay drawn in [60, 900] s",
            conflict(),
            (next().retried(0, 0, Some(CONFLICT_DELAY_SEC))).wake(Duration::from_millis(50_100)),
        ),
        row(
            "AttemptCompleted: the delay not over, waits",
            conflict().retry_delay(CONFLICT_DELAY_SEC).at(30),
            next().wake(Duration::from_millis(30_100)),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: the delay over, not counted",
            conflict().retry_delay(CONFLICT_DELAY_SEC).at(60),
            (next().state(FS::AttemptCreationPending))
                .attempt(1)
                .retried(1, 0, None)
                .new_tasks(),
        ),
    ]);
}

#[test]
fn a_rescale_is_written_before_it_acts() {
    check(vec![
        row(
            "ScaleDown: the Tasks beyond taskNumber are marked, with -230, and nothing else moves",
            running(3).rescaled(1).running_task(1),
            (next().deletion_pending(1).deletion_pending(2))
                .task_code(1, cc::DELETE_TASK_REQUESTED)
                .task_code(2, cc::DELETE_TASK_REQUESTED),
        ),
        row(
            "ScaleUp: a Task is added at the end, and its pod made on the next decision",
            running(1).rescaled(2).running_task(0),
            next().added(1),
        ),
        row(
            "a marked Task once Completed leaves the status from the end",
            (running(2).rescaled(1).running_task(0))
                .task(1, TS::Completed)
                .deletion_pending(1),
            next().removed(1),
        ),
        row(
            "ScaleUp after ScaleDown: a marked Task once Completed comes back as a new instance",
            (running(2).running_task(0))
                .task(1, TS::Completed)
                .deletion_pending(1),
            next().removed(1).added(1),
        ),
        row(
            "the next decision creates the added Task's pod",
            running(2).running_task(0),
            next().act(create_pod(1)),
        ),
    ]);
}
