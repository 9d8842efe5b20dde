//! Each Task's state machine, one row per transition of FrameworkController's state table
//! (the pod its ground truth), in an attempt that runs (its ConfigMap cached): each row the
//! Task's status and what the pod cache shows, and what one decision (or one recorded result)
//! changes. Where mlkube knowingly differs from FrameworkController, the row says what mlkube
//! does and a comment how FrameworkController differs.

use std::time::Duration;

use crate::operator::fc::api::{FrameworkState as FS, TaskState as TS};
use crate::operator::fc::completion as cc;
use crate::operator::fc::fixtures::{
    Scenario, WORKER, check, create_pod, delete_pod, force_delete_pod, framework, next, pod,
    pod_uid, recorded, row, running,
};
use crate::operator::fc::sync::Done;

/// Worker 0 in `state`, in a running attempt of one worker.
fn task(state: TS) -> Scenario {
    running(1).task(0, state)
}

/// The recorded UID of worker 0's pod.
fn uid() -> String {
    pod_uid(WORKER, 0)
}

#[test]
fn a_tasks_pod_is_created_once_its_name_is_free() {
    let pending = || task(TS::AttemptCreationPending);
    check(vec![
        row(
            "AttemptCreationPending: the pod is created",
            pending(),
            next().act(create_pod(0)),
        ),
        recorded(
            "AttemptCreationPending -> AttemptCreationRequested: the pod's create answered",
            pending(),
            Done::PodCreated {
                role: WORKER.into(),
                index: 0,
                uid: uid(),
            },
            (next().task(0, TS::AttemptCreationRequested)).pod_uid(0, &uid()),
        ),
        row(
            "AttemptCreationPending: a pod of ours not recorded (a create whose answer was lost) is deleted, never adopted",
            pending().pod(pod(0).uid("lost")),
            next().act(delete_pod(0, "lost")),
        ),
        // FrameworkController force-deletes it once podGracefulDeletionTimeoutSec is over;
        // mlkube waits for it to go.
        row(
            "AttemptCreationPending: that pod being deleted, the create waits for it to go",
            pending().pod(pod(0).uid("lost").deleting()),
            next(),
        ),
        row(
            "AttemptCreationPending: someone else's pod of its name blocks it, looked at again in 10 s",
            pending().pod(pod(0).uid("theirs").owner("other")),
            next().blocked().wake(Duration::from_secs(10)),
        ),
        row(
            "AttemptCreationPending: the attempt completing, no pod is created",
            (framework(1).state(FS::AttemptDeletionRequested))
                .completing(cc::STOP_FRAMEWORK_REQUESTED)
                .config_map(),
            next(),
        ),
        row(
            "AttemptCreationPending -> AttemptCompleted: marked by ScaleDown (-230), no pod made",
            (running(2).rescaled(1).running_task(0)).deletion_pending(1),
            next().task(1, TS::AttemptCompleted),
        ),
    ]);
}

#[test]
fn a_refused_pod_completes_the_tasks_attempt() {
    let refused = |code| Done::PodRefused {
        role: WORKER.into(),
        index: 0,
        code,
        message: "Pod creation failed: refused".into(),
    };
    check(vec![
        recorded(
            "AttemptCreationPending -> AttemptCompleted: the pod refused as invalid (-200)",
            task(TS::AttemptCreationPending),
            refused(cc::POD_CREATION_PERMANENT_ERROR),
            (next().task(0, TS::AttemptCompleted)).task_code(0, cc::POD_CREATION_PERMANENT_ERROR),
        ),
        recorded(
            "AttemptCreationPending -> AttemptCompleted: the pod refused as forbidden (-310)",
            task(TS::AttemptCreationPending),
            refused(cc::POD_CREATION_UNKNOWN_ERROR),
            (next().task(0, TS::AttemptCompleted)).task_code(0, cc::POD_CREATION_UNKNOWN_ERROR),
        ),
    ]);
}

#[test]
fn a_created_pod_is_awaited_in_the_cache() {
    let requested = || task(TS::AttemptCreationRequested);
    check(vec![
        row(
            "AttemptCreationRequested -> AttemptPreparing: the pod shows, Pending",
            requested().pod(pod(0)),
            next().task(0, TS::AttemptPreparing),
        ),
        row(
            "AttemptCreationRequested -> AttemptPreparing: the pod shows, its phase Unknown",
            requested().pod(pod(0).unknown()),
            next().task(0, TS::AttemptPreparing),
        ),
        row(
            "AttemptCreationRequested -> AttemptRunning: the pod shows, Running (one write)",
            requested().pod(pod(0).running()),
            next().task(0, TS::AttemptRunning),
        ),
        row(
            "AttemptCreationRequested -> AttemptDeletionPending: the pod shows, Succeeded (0)",
            requested().pod(pod(0).succeeded()),
            (next().task(0, TS::AttemptDeletionPending)).task_code(0, cc::SUCCEEDED),
        ),
        row(
            "AttemptCreationRequested -> AttemptDeleting: the pod shows, being deleted by others (-101)",
            requested().pod(pod(0).deleting()),
            (next().task(0, TS::AttemptDeleting)).task_code(0, cc::POD_EXTERNAL_DELETED),
        ),
        row(
            "AttemptCreationRequested: not in the cache yet, waits until the timeout",
            requested(),
            next().wake(Duration::from_millis(290_100)),
        ),
        row(
            "AttemptCreationRequested -> AttemptCompleted: not in the cache within 5 min (-111), deleted",
            requested().at(300),
            (next().task(0, TS::AttemptCompleted))
                .task_code(0, cc::POD_LOCAL_CACHE_CREATION_TIMEOUT)
                .act(delete_pod(0, &uid())),
        ),
        row(
            "AttemptCreationRequested -> AttemptCompleted: not in the cache, marked by ScaleDown (-230), deleted",
            (running(2).rescaled(1).running_task(0))
                .task(1, TS::AttemptCreationRequested)
                .deletion_pending(1),
            (next().task(1, TS::AttemptCompleted)).act(delete_pod(1, &pod_uid(WORKER, 1))),
        ),
    ]);
}

#[test]
fn a_live_pods_phase_moves_its_task() {
    check(vec![
        row(
            "AttemptPreparing -> AttemptRunning: the pod runs",
            task(TS::AttemptPreparing).pod(pod(0).running()),
            next().task(0, TS::AttemptRunning),
        ),
        row(
            "AttemptPreparing: the pod is Pending",
            task(TS::AttemptPreparing).pod(pod(0)),
            next(),
        ),
        row(
            "AttemptRunning: the pod's phase Unknown, waits",
            task(TS::AttemptRunning).pod(pod(0).unknown()),
            next(),
        ),
        row(
            "AttemptRunning -> AttemptDeletionPending: the pod succeeded (0)",
            task(TS::AttemptRunning).pod(pod(0).succeeded()),
            (next().task(0, TS::AttemptDeletionPending)).task_code(0, cc::SUCCEEDED),
        ),
        row(
            "AttemptRunning -> AttemptDeletionPending: the pod failed, exit code 1 (1)",
            task(TS::AttemptRunning).pod(pod(0).failed(1)),
            (next().task(0, TS::AttemptDeletionPending)).task_code(0, 1),
        ),
        row(
            "AttemptPreparing -> AttemptDeletionPending: the pod failed, exit code 210 (210)",
            task(TS::AttemptPreparing).pod(pod(0).failed(210)),
            (next().task(0, TS::AttemptDeletionPending))
                .task_code(0, cc::CONTAINER_PERMANENT_FAILED),
        ),
        row(
            "AttemptRunning -> AttemptDeletionPending: marked by ScaleDown (-230)",
            (running(2).rescaled(1).running_task(0))
                .running_task(1)
                .deletion_pending(1),
            next().task(1, TS::AttemptDeletionPending),
        ),
    ]);
}

#[test]
fn a_pod_deleted_by_others_completes_its_tasks_attempt() {
    check(vec![
        row(
            "AttemptRunning -> AttemptDeleting: the pod is being deleted by others (-101)",
            task(TS::AttemptRunning).pod(pod(0).running().deleting()),
            (next().task(0, TS::AttemptDeleting)).task_code(0, cc::POD_EXTERNAL_DELETED),
        ),
        row(
            "AttemptPreparing -> AttemptDeleting: the pod is being deleted by others (-101)",
            task(TS::AttemptPreparing).pod(pod(0).deleting()),
            (next().task(0, TS::AttemptDeleting)).task_code(0, cc::POD_EXTERNAL_DELETED),
        ),
        row(
            "AttemptRunning -> AttemptCompleted: the pod was deleted by others (-101)",
            task(TS::AttemptRunning),
            (next().task(0, TS::AttemptCompleted)).task_code(0, cc::POD_EXTERNAL_DELETED),
        ),
        row(
            "AttemptPreparing -> AttemptCompleted: the pod was deleted by others (-101)",
            task(TS::AttemptPreparing),
            (next().task(0, TS::AttemptCompleted)).task_code(0, cc::POD_EXTERNAL_DELETED),
        ),
        // FrameworkController also deletes that pod (ours, not recorded) in the same sync;
        // mlkube leaves it to the next attempt, whose create deletes it first.
        row(
            "AttemptRunning -> AttemptCompleted: a pod of its name but another UID is not its pod (-101)",
            task(TS::AttemptRunning).pod(pod(0).running().uid("other")),
            (next().task(0, TS::AttemptCompleted)).task_code(0, cc::POD_EXTERNAL_DELETED),
        ),
    ]);
}

/// Worker 0 in `state`, its attempt completed with 0 (its pod succeeded).
fn ended(state: TS) -> Scenario {
    task(state).task_completion(0, cc::SUCCEEDED)
}

#[test]
fn an_ended_tasks_pod_is_deleted_and_the_attempt_completes_when_it_is_gone() {
    let deleting = || pod(0).succeeded().deleting();
    check(vec![
        row(
            "AttemptDeletionPending: the pod is deleted",
            ended(TS::AttemptDeletionPending).pod(pod(0).succeeded()),
            next().act(delete_pod(0, &uid())),
        ),
        recorded(
            "AttemptDeletionPending -> AttemptDeletionRequested: the pod's delete answered",
            ended(TS::AttemptDeletionPending).pod(pod(0).succeeded()),
            Done::PodDeleteSent {
                name: "fw-worker-0".into(),
                force: false,
            },
            next().task(0, TS::AttemptDeletionRequested),
        ),
        row(
            "AttemptDeletionPending -> AttemptDeleting: the pod is being deleted",
            ended(TS::AttemptDeletionPending).pod(deleting()),
            next().task(0, TS::AttemptDeleting),
        ),
        row(
            "AttemptDeletionPending -> AttemptCompleted: the pod is gone",
            ended(TS::AttemptDeletionPending),
            next().task(0, TS::AttemptCompleted),
        ),
        row(
            "AttemptDeletionRequested: waits for the pod to go",
            ended(TS::AttemptDeletionRequested).pod(pod(0).succeeded()),
            next(),
        ),
        row(
            "AttemptDeletionRequested -> AttemptDeleting: the pod is being deleted",
            ended(TS::AttemptDeletionRequested).pod(deleting()),
            next().task(0, TS::AttemptDeleting),
        ),
        row(
            "AttemptDeletionRequested -> AttemptCompleted: the pod is gone",
            ended(TS::AttemptDeletionRequested),
            next().task(0, TS::AttemptCompleted),
        ),
        row(
            "AttemptDeleting: waits for the pod to go",
            ended(TS::AttemptDeleting).pod(deleting()),
            next(),
        ),
        row(
            "AttemptDeleting -> AttemptCompleted: the pod is gone",
            ended(TS::AttemptDeleting),
            next().task(0, TS::AttemptCompleted),
        ),
    ]);
}

#[test]
fn a_pod_deleting_past_its_graceful_deletion_timeout_is_forced() {
    // Deleting since 0 s; podGracefulDeletionTimeoutSec 60.
    let deleting = || {
        (framework(1).graceful_deletion_timeout(60))
            .state(FS::AttemptRunning)
            .config_map()
            .task(0, TS::AttemptDeleting)
            .task_completion(0, cc::POD_EXTERNAL_DELETED)
            .pod(pod(0).running().deleting())
    };
    check(vec![
        row(
            "AttemptDeleting: the timeout not over, waits",
            deleting(),
            next().wake(Duration::from_millis(50_100)),
        ),
        // FrameworkController sends the forced delete, confirms the pod is gone and leaves the
        // Task AttemptDeleting until the cache no longer shows the pod; mlkube completes the
        // attempt in the decision that forces the delete.
        row(
            "AttemptDeleting -> AttemptCompleted: the timeout over, deleted again with grace period 0",
            deleting().at(60),
            (next().task(0, TS::AttemptCompleted)).act(force_delete_pod(0)),
        ),
        row(
            "AttemptDeleting -> AttemptCompleted: a grace period past any date never panics; forced",
            {
                let mut endless = pod(0).running().deleting();
                endless.pod.metadata.deletion_grace_period_seconds = Some(i64::MAX);
                (framework(1).graceful_deletion_timeout(60))
                    .state(FS::AttemptRunning)
                    .config_map()
                    .task(0, TS::AttemptDeleting)
                    .task_completion(0, cc::POD_EXTERNAL_DELETED)
                    .pod(endless)
            },
            (next().task(0, TS::AttemptCompleted)).act(force_delete_pod(0)),
        ),
        recorded(
            "AttemptCompleted: the forced delete answered changes nothing",
            deleting().task(0, TS::AttemptCompleted),
            Done::PodDeleteSent {
                name: "fw-worker-0".into(),
                force: true,
            },
            next(),
        ),
        row(
            "AttemptDeleting, no podGracefulDeletionTimeoutSec: waits as long as it takes",
            task(TS::AttemptDeleting)
                .task_completion(0, cc::POD_EXTERNAL_DELETED)
                .pod(pod(0).running().deleting())
                .at(3600),
            next(),
        ),
    ]);
}

/// Worker 0's attempt completed with `code`.
fn completed(code: cc::Code) -> Scenario {
    task(TS::AttemptCompleted).task_completion(0, code)
}

#[test]
fn a_completed_tasks_attempt_is_retried_at_once_by_its_retry_policy() {
    let retried = |total, accountable| {
        (next().task(0, TS::AttemptCreationPending)).task_retried(0, total, total, accountable)
    };
    let unknown = cc::POD_FAILED_WITHOUT_FAILED_CONTAINER;
    check(vec![
        row(
            "AttemptCompleted -> AttemptCreationPending: maxRetryCount -1 retries a failure, counted",
            completed(unknown).task_retry(false, -1),
            retried(1, 1),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: maxRetryCount -2 retries a success too",
            completed(cc::SUCCEEDED).task_retry(false, -2),
            retried(1, 1),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: maxRetryCount 2, retried once",
            (completed(unknown).task_retry(false, 2)).task_retried(0, 1, 1, 1),
            retried(2, 2),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: fancy, a transient failure (-101) not counted",
            completed(cc::POD_EXTERNAL_DELETED).task_retry(true, 0),
            retried(1, 0),
        ),
        row(
            "AttemptCompleted -> AttemptCreationPending: fancy, a transient conflict (201) at once",
            completed(cc::CONTAINER_TRANSIENT_CONFLICT_FAILED).task_retry(true, 0),
            retried(1, 0),
        ),
    ]);
}

#[test]
fn otherwise_the_task_completes() {
    let unknown = cc::POD_FAILED_WITHOUT_FAILED_CONTAINER;
    // The only Task completing, the default completion policy (minFailedTaskCount 1, or every
    // Task completed) completes the attempt in the same decision, as FrameworkController does.
    let ends = |code| {
        (next().task(0, TS::Completed))
            .state(FS::AttemptDeletionPending)
            .code(code)
            .trigger(WORKER, 0)
    };
    check(vec![
        row(
            "AttemptCompleted -> Completed: the default RetryPolicy never retries",
            completed(unknown),
            ends(unknown),
        ),
        row(
            "AttemptCompleted -> Completed: maxRetryCount 2, retried twice",
            (completed(unknown).task_retry(false, 2)).task_retried(0, 2, 2, 2),
            ends(unknown),
        ),
        row(
            "AttemptCompleted -> Completed: fancy, a permanent failure (210)",
            completed(cc::CONTAINER_PERMANENT_FAILED).task_retry(true, 3),
            ends(cc::CONTAINER_PERMANENT_FAILED),
        ),
        row(
            "AttemptCompleted -> Completed: FrameworkAttemptCompletion (-220) never retried",
            completed(cc::FRAMEWORK_ATTEMPT_COMPLETION).task_retry(false, -2),
            ends(cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
        row(
            "AttemptCompleted -> Completed: DeleteTaskRequested (-230) never retried",
            completed(cc::DELETE_TASK_REQUESTED).task_retry(false, -2),
            ends(cc::DELETE_TASK_REQUESTED),
        ),
        row(
            "Completed: final",
            (running(2).task_retry(false, -2))
                .completed(WORKER, 0, cc::SUCCEEDED, 5)
                .running_task(1),
            next(),
        ),
    ]);
}
