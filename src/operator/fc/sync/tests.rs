//! The decision core's tests: the tables of the Framework's and the Tasks' state machines and
//! of the policies that move them, each in a file of its own, and the flows below.

mod framework;
mod policies;
mod refused;
mod task;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::json;

use super::*;
use crate::operator::fc::config::BUILTIN;

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
        config: &BUILTIN,
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

#[test]
fn a_refused_framework_ends_in_three_writes_without_an_object_and_says_so_once() {
    let mut f = framework(1, "Start");
    let second = f.spec.task_roles[0].clone();
    f.spec.task_roles.push(second);
    // Too many to list, or to hold in memory: never built.
    f.spec.task_roles[0].task_number = i32::MAX;
    f.spec.retry_policy.max_retry_count = -2;
    f.status = None;
    let mut states = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..4 {
        let plan = decide_with(&f, None, &[]);
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
        refused.extend(plan.refused.clone());
        states.push(plan.status.state);
        f.status = Some(plan.status);
    }
    assert_eq!(
        states,
        [
            FS::AttemptCreationPending,
            FS::AttemptCompleted,
            FS::Completed,
            FS::Completed
        ]
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    let status = f.status.unwrap();
    assert!(status.attempt_status.task_role_statuses.is_empty());
    let completion = status.attempt_status.completion_status.unwrap().status;
    assert_eq!(completion.code, cc::FRAMEWORK_SPEC_INVALID.code);
    assert_eq!(completion.diagnostics, refused[0].message());
}

#[test]
fn a_timeout_is_written_as_go_writes_a_duration() {
    for (secs, text) in [(45, "45s"), (300, "5m0s"), (90, "1m30s"), (3600, "1h0m0s")] {
        assert_eq!(go_duration(std::time::Duration::from_secs(secs)), text);
    }
}
