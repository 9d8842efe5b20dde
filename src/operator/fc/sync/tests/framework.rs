//! The Framework's state machine, one row per transition of FrameworkController's state table
//! (the ConfigMap its ground truth): each row a Framework, its status and what the caches
//! show, and what one decision (or one recorded result) changes. Where mlkube knowingly
//! differs from FrameworkController, the row says what mlkube does and a comment how
//! FrameworkController differs.

use std::time::Duration;

use crate::operator::fc::api::{ExecutionType, FrameworkState as FS, TaskState as TS};
use crate::operator::fc::completion as cc;
use crate::operator::fc::fixtures::{
    CM_UID, Scenario, UID, WORKER, check, delete_config_map, framework, next, pod, recorded, row,
};
use crate::operator::fc::sync::{Action, Done};

/// How long a decision at 10 s waits for a ConfigMap created at 0 s to show in the cache.
const CACHE_WAIT: Duration = Duration::from_millis(290_100);

#[test]
fn an_attempt_is_created_unless_asked_not_to() {
    check(vec![
        row(
            "(null) -> AttemptCreationPending: a new Framework is written before anything is created",
            framework(2),
            (next().state(FS::AttemptCreationPending))
                .task(0, TS::AttemptCreationPending)
                .task(1, TS::AttemptCreationPending),
        ),
        row(
            "AttemptCreationPending, Start: the ConfigMap is created",
            framework(1).state(FS::AttemptCreationPending),
            next().act(Action::CreateConfigMap),
        ),
        recorded(
            "AttemptCreationPending -> AttemptCreationRequested: the ConfigMap's create answered",
            framework(1).state(FS::AttemptCreationPending),
            Done::ConfigMapCreated { uid: CM_UID.into() },
            (next().state(FS::AttemptCreationRequested)).config_map_uid(CM_UID),
        ),
        row(
            "AttemptCreationPending, Create: the Framework waits to be started",
            (framework(1).execution(ExecutionType::Create)).state(FS::AttemptCreationPending),
            next(),
        ),
        row(
            "AttemptCreationPending, the Framework being deleted: no attempt starts",
            (framework(1).state(FS::AttemptCreationPending)).framework_deleting(),
            next(),
        ),
        row(
            "AttemptCreationPending -> AttemptCompleted: Stop (-210), every Task Completed (-220)",
            (framework(2).execution(ExecutionType::Stop)).state(FS::AttemptCreationPending),
            (next().state(FS::AttemptCompleted))
                .code(cc::STOP_FRAMEWORK_REQUESTED)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
        row(
            "AttemptCreationPending: a ConfigMap of ours not recorded (a create whose answer was lost) is deleted, never adopted",
            (framework(1).state(FS::AttemptCreationPending)).other_config_map("lost", UID),
            next().act(delete_config_map("lost")),
        ),
        row(
            "AttemptCreationPending: that ConfigMap being deleted, the create waits for it to go",
            (framework(1).state(FS::AttemptCreationPending))
                .other_config_map("lost", UID)
                .being_deleted(),
            next(),
        ),
        row(
            "AttemptCreationPending: someone else's ConfigMap of its name blocks it, looked at again in 10 s",
            (framework(1).state(FS::AttemptCreationPending)).other_config_map("theirs", "other"),
            next().blocked().wake(Duration::from_secs(10)),
        ),
    ]);
}

#[test]
fn a_created_configmap_is_awaited_in_the_cache() {
    let requested = || framework(1).state(FS::AttemptCreationRequested);
    check(vec![
        row(
            "AttemptCreationRequested -> AttemptPreparing: the ConfigMap shows in the cache",
            requested().config_map(),
            (next().state(FS::AttemptPreparing)).act(Action::CreatePod {
                role: WORKER.into(),
                index: 0,
            }),
        ),
        row(
            "AttemptCreationRequested: not in the cache yet, waits until the timeout",
            requested(),
            next().wake(CACHE_WAIT),
        ),
        row(
            "AttemptCreationRequested -> AttemptCompleted: not in the cache within 5 min (-110), deleted",
            requested().at(300),
            (next().state(FS::AttemptCompleted))
                .code(cc::CONFIG_MAP_LOCAL_CACHE_CREATION_TIMEOUT)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .act(delete_config_map(CM_UID)),
        ),
        row(
            "AttemptCreationRequested -> AttemptDeleting: the ConfigMap shows, being deleted by others (-100)",
            requested().config_map().being_deleted(),
            (next().state(FS::AttemptDeleting)).code(cc::CONFIG_MAP_EXTERNAL_DELETED),
        ),
        row(
            "AttemptCreationRequested -> AttemptCompleted: Stop, the ConfigMap not in the cache yet (-210), deleted",
            requested().execution(ExecutionType::Stop),
            (next().state(FS::AttemptCompleted))
                .code(cc::STOP_FRAMEWORK_REQUESTED)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION)
                .act(delete_config_map(CM_UID)),
        ),
    ]);
}

#[test]
fn a_live_attempt_runs_and_ends_by_its_policy_or_its_configmap() {
    let live = |state| framework(1).state(state).config_map();
    check(vec![
        row(
            "AttemptPreparing -> AttemptRunning: a Task's pod runs",
            (live(FS::AttemptPreparing).task(0, TS::AttemptPreparing)).pod(pod(0).running()),
            (next().state(FS::AttemptRunning)).task(0, TS::AttemptRunning),
        ),
        row(
            "AttemptPreparing: no Task runs yet",
            (live(FS::AttemptPreparing).task(0, TS::AttemptCreationRequested)).pod(pod(0)),
            next().task(0, TS::AttemptPreparing),
        ),
        row(
            "AttemptPreparing -> AttemptDeletionPending: the completion policy is met",
            live(FS::AttemptPreparing).completed(WORKER, 0, cc::CONTAINER_PERMANENT_FAILED, 5),
            (next().state(FS::AttemptDeletionPending))
                .code(cc::CONTAINER_PERMANENT_FAILED)
                .trigger(WORKER, 0),
        ),
        row(
            "AttemptRunning -> AttemptDeletionPending: the completion policy is met",
            live(FS::AttemptRunning).completed(WORKER, 0, cc::SUCCEEDED, 5),
            (next().state(FS::AttemptDeletionPending))
                .code(cc::SUCCEEDED)
                .trigger(WORKER, 0),
        ),
        row(
            "AttemptPreparing -> AttemptDeleting: the ConfigMap is being deleted by others (-100)",
            (live(FS::AttemptPreparing).being_deleted())
                .task(0, TS::AttemptPreparing)
                .pod(pod(0)),
            (next().state(FS::AttemptDeleting)).code(cc::CONFIG_MAP_EXTERNAL_DELETED),
        ),
        row(
            "AttemptRunning -> AttemptDeleting: the ConfigMap is being deleted by others (-100)",
            (live(FS::AttemptRunning).being_deleted()).running_task(0),
            (next().state(FS::AttemptDeleting)).code(cc::CONFIG_MAP_EXTERNAL_DELETED),
        ),
        row(
            "AttemptPreparing -> AttemptCompleted: the ConfigMap was deleted by others (-100)",
            framework(1)
                .state(FS::AttemptPreparing)
                .task(0, TS::AttemptPreparing),
            (next().state(FS::AttemptCompleted))
                .code(cc::CONFIG_MAP_EXTERNAL_DELETED)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
        row(
            "AttemptRunning -> AttemptCompleted: the ConfigMap was deleted by others (-100)",
            framework(1)
                .state(FS::AttemptRunning)
                .task(0, TS::AttemptRunning),
            (next().state(FS::AttemptCompleted))
                .code(cc::CONFIG_MAP_EXTERNAL_DELETED)
                .every_task(TS::Completed, cc::FRAMEWORK_ATTEMPT_COMPLETION),
        ),
    ]);
}

/// An attempt completing (Stop asked for it), its Task waiting for the ConfigMap to go.
fn completing(state: FS) -> Scenario {
    (framework(1)
        .state(state)
        .completing(cc::STOP_FRAMEWORK_REQUESTED))
    .task(0, TS::AttemptRunning)
    .task_completion(0, cc::FRAMEWORK_ATTEMPT_COMPLETION)
    .pod(pod(0).running())
}

#[test]
fn a_completing_attempt_deletes_its_configmap_and_ends_when_it_is_gone() {
    let gone = || (next().state(FS::AttemptCompleted)).task(0, TS::Completed);
    check(vec![
        row(
            "AttemptDeletionPending: the ConfigMap is deleted (in the foreground: its pods first)",
            completing(FS::AttemptDeletionPending).config_map(),
            next().act(delete_config_map(CM_UID)),
        ),
        recorded(
            "AttemptDeletionPending -> AttemptDeletionRequested: the ConfigMap's delete answered",
            completing(FS::AttemptDeletionPending).config_map(),
            Done::ConfigMapDeleteSent,
            next().state(FS::AttemptDeletionRequested),
        ),
        recorded(
            "AttemptDeleting: a delete answered later changes nothing",
            completing(FS::AttemptDeleting),
            Done::ConfigMapDeleteSent,
            next(),
        ),
        row(
            "AttemptDeletionPending -> AttemptDeleting: the ConfigMap is being deleted",
            completing(FS::AttemptDeletionPending)
                .config_map()
                .being_deleted(),
            next().state(FS::AttemptDeleting),
        ),
        row(
            "AttemptDeletionPending -> AttemptCompleted: the ConfigMap is gone",
            completing(FS::AttemptDeletionPending),
            gone(),
        ),
        row(
            "AttemptDeletionRequested: waits for the ConfigMap to go",
            completing(FS::AttemptDeletionRequested).config_map(),
            next(),
        ),
        row(
            "AttemptDeletionRequested -> AttemptDeleting: the ConfigMap is being deleted",
            completing(FS::AttemptDeletionRequested)
                .config_map()
                .being_deleted(),
            next().state(FS::AttemptDeleting),
        ),
        row(
            "AttemptDeletionRequested -> AttemptCompleted: the ConfigMap is gone",
            completing(FS::AttemptDeletionRequested),
            gone(),
        ),
        row(
            "AttemptDeleting: waits for the ConfigMap to go",
            completing(FS::AttemptDeleting).config_map().being_deleted(),
            next(),
        ),
        row(
            "AttemptDeleting -> AttemptCompleted: the ConfigMap is gone",
            completing(FS::AttemptDeleting),
            gone(),
        ),
    ]);
}
