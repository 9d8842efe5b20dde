//! The states a Framework and its Tasks show while they run, as a client watching them sees
//! them (every version of the status, from a watch): FrameworkController's state machines in
//! their order, every state it persists before it acts, and none of the intermediate writes it
//! never makes. The operator's `fc` room runs in this process as the operator component's
//! ServiceAccount; kwok ends the pods (`cluster/kwok-stages.yaml`).

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use mlkube::operator::fc::api::{
    Framework, FrameworkState as FS, FrameworkStatus, TaskState as TS,
};

use crate::framework_controller::{
    await_status, completed, framework, role, running, start_operator, submit,
};
use crate::support::TestNamespace;

/// FrameworkController's Framework states in the order a normal run passes them.
const FRAMEWORK_ORDER: [FS; 9] = [
    FS::AttemptCreationPending,
    FS::AttemptCreationRequested,
    FS::AttemptPreparing,
    FS::AttemptRunning,
    FS::AttemptDeletionPending,
    FS::AttemptDeletionRequested,
    FS::AttemptDeleting,
    FS::AttemptCompleted,
    FS::Completed,
];

/// The same for a Task, its pod the ground truth.
const TASK_ORDER: [TS; 9] = [
    TS::AttemptCreationPending,
    TS::AttemptCreationRequested,
    TS::AttemptPreparing,
    TS::AttemptRunning,
    TS::AttemptDeletionPending,
    TS::AttemptDeletionRequested,
    TS::AttemptDeleting,
    TS::AttemptCompleted,
    TS::Completed,
];

/// Every status of the namespace's Frameworks a watch delivered, in order.
type Seen = Arc<Mutex<Vec<FrameworkStatus>>>;

/// Record every version of the Frameworks' statuses in `ns` until the handle is aborted;
/// returns once the watch has listed the namespace, so no later version is missed.
async fn record_statuses(ns: &TestNamespace) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let api = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    let into = seen.clone();
    let (listed, ready) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    listed.take().map(|l| l.send(()));
                }
                Ok(watcher::Event::Apply(f) | watcher::Event::InitApply(f)) => {
                    into.lock().unwrap().extend(f.status);
                }
                _ => {}
            }
        }
    });
    ready.await.expect("the watch lists the namespace");
    (seen, task)
}

/// `states` with repeats in a row removed.
fn distinct<T: PartialEq + Copy>(states: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for s in states {
        if out.last() != Some(&s) {
            out.push(s);
        }
    }
    out
}

/// Whether `seen` passes the states of `order` in that order, skipping any.
fn in_order<T: PartialEq>(seen: &[T], order: &[T]) -> bool {
    let mut rest = order.iter();
    seen.iter().all(|s| rest.any(|o| o == s))
}

fn task_states(statuses: &[FrameworkStatus], index: usize) -> Vec<TS> {
    distinct(statuses.iter().filter_map(|s| {
        let tasks = &s.attempt_status.task_role_statuses.first()?.task_statuses;
        tasks.get(index).map(|t| t.state)
    }))
}

fn tasks_of(status: &FrameworkStatus) -> impl Iterator<Item = TS> + '_ {
    (status.attempt_status.task_role_statuses.iter())
        .flat_map(|r| &r.task_statuses)
        .map(|t| t.state)
}

#[tokio::test]
async fn a_run_shows_frameworkcontrollers_states_in_its_order_and_no_write_it_never_makes() {
    let ns = TestNamespace::new("fc-states").await;
    let _operator = start_operator(&ns).await;
    let (seen, watch) = record_statuses(&ns).await;
    let two = framework(
        "states",
        (false, 0),
        vec![role("worker", 2, (1, -1), (false, 0), Some("exit 0"))],
    );
    let api = submit(&ns, &two).await;
    await_status(&api, "states", "completes", completed).await;
    watch.abort();
    let statuses = seen.lock().unwrap().clone();
    let states = distinct(statuses.iter().map(|s| s.state));
    assert!(in_order(&states, &FRAMEWORK_ORDER), "{states:?}");
    // Every state FrameworkController writes before it acts on it, and the two a run of
    // running pods must pass; AttemptDeleting shows when a sync sees the ConfigMap while
    // its pods go, as with FrameworkController.
    for state in FRAMEWORK_ORDER
        .iter()
        .filter(|s| **s != FS::AttemptDeleting)
    {
        assert!(states.contains(state), "{state:?} never shown: {states:?}");
    }
    for index in 0..2 {
        let tasks = task_states(&statuses, index);
        assert!(in_order(&tasks, &TASK_ORDER), "Task {index}: {tasks:?}");
        for state in [
            TS::AttemptCreationPending,
            TS::AttemptCreationRequested,
            TS::AttemptRunning,
            TS::AttemptDeletionPending,
            TS::AttemptDeletionRequested,
            TS::AttemptCompleted,
            TS::Completed,
        ] {
            assert!(
                tasks.contains(&state),
                "Task {index}: {state:?} never shown: {tasks:?}"
            );
        }
    }
    // FrameworkController moves the Framework to AttemptPreparing with its Tasks' pod
    // creations in one write, and completes the attempt in the write that completes the Task
    // which triggers it.
    for status in &statuses {
        let tasks: Vec<TS> = tasks_of(status).collect();
        let preparing_alone =
            status.state == FS::AttemptPreparing && tasks.contains(&TS::AttemptCreationPending);
        let running_done =
            status.state == FS::AttemptRunning && tasks.iter().all(|t| *t == TS::Completed);
        assert!(
            !preparing_alone && !running_done,
            "a write FrameworkController never makes: {:?} with Tasks {tasks:?}",
            status.state
        );
    }
}

/// The diagnostics and code of Task `index`'s attempt, as `status` has them.
fn task_completion(status: &FrameworkStatus, index: usize) -> Option<(i32, String)> {
    let task = status
        .attempt_status
        .task_role_statuses
        .first()?
        .task_statuses
        .get(index)?;
    let completion = task.completion()?;
    Some((completion.code, completion.diagnostics.clone()))
}

fn task_state(status: &FrameworkStatus, index: usize) -> Option<TS> {
    tasks_of(status).nth(index)
}

/// A finalizer of the test's, which keeps the attempt's ConfigMap, being deleted, until it is
/// taken off.
const HOLD: &str = "mlkube.io/test-hold";

async fn hold<K>(api: &Api<K>, name: &str, finalizers: Vec<&str>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({ "metadata": { "finalizers": finalizers } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("setting the finalizers of {name}: {e}"));
}

/// End pod `name`, being deleted: a delete with grace period 0, as a kubelet's when its
/// containers have stopped.
async fn end(pods: &Api<Pod>, name: &str) {
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete(name, &now)
        .await
        .unwrap_or_else(|e| panic!("ending pod {name}: {e}"));
}

/// A pod deleted by someone else, and the attempt it ends, step by step, each step held (a
/// pod by kwok's deletion delay, the ConfigMap by a finalizer) until the status shows it: the
/// Task sees its pod being deleted by others (-101), its failure completes the attempt, the
/// ConfigMap's deletion takes the other Task's pod (AttemptDeleting), that pod gone while the
/// ConfigMap stays (AttemptCompleted with -220), then the ConfigMap gone (the Framework
/// AttemptCompleted, then Completed).
#[tokio::test]
async fn a_pod_deleted_by_others_ends_the_attempt_through_every_state_in_order() {
    let ns = TestNamespace::new("fc-states-deleted").await;
    let _operator = start_operator(&ns).await;
    let (seen, watch) = record_statuses(&ns).await;
    let mut server = role("server", 2, (1, -1), (false, 0), None);
    // Deleted, its pods stay until the test ends them (cluster/kwok-stages.yaml).
    server["task"]["pod"]["metadata"] =
        serde_json::json!({ "annotations": { "mlkube.io/simulate-deletion": "1h" } });
    let servers = framework("servers", (false, 0), vec![server]);
    let api = submit(&ns, &servers).await;
    let both_run = |s: &FrameworkStatus| running(s) && tasks_of(s).all(|t| t == TS::AttemptRunning);
    await_status(&api, "servers", "runs both Tasks", both_run).await;
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    hold(&config_maps, "servers-attempt", vec![HOLD]).await;
    pods.delete("servers-server-0", &Default::default())
        .await
        .expect("deleting the pod of Task 0");
    let seen_deleting = |s: &FrameworkStatus| task_state(s, 0) == Some(TS::AttemptDeleting);
    let status = await_status(&api, "servers", "sees pod 0 deleting", seen_deleting).await;
    let by_others = (-101, "Pod is being deleted by others".to_owned());
    assert_eq!(task_completion(&status, 0), Some(by_others));
    end(&pods, "servers-server-0").await;
    let deleting = |s: &FrameworkStatus| {
        s.state == FS::AttemptDeleting && task_state(s, 1) == Some(TS::AttemptDeleting)
    };
    await_status(&api, "servers", "deletes its attempt", deleting).await;
    end(&pods, "servers-server-1").await;
    let stopped = |s: &FrameworkStatus| task_state(s, 1) == Some(TS::Completed);
    await_status(&api, "servers", "completes Task 1", stopped).await;
    hold(&config_maps, "servers-attempt", vec![]).await;
    let last = await_status(&api, "servers", "completes", completed).await;
    watch.abort();
    let statuses = seen.lock().unwrap().clone();
    let code = (last.attempt_status.completion_status.as_ref()).map(|c| c.status.code);
    assert_eq!(code, Some(-101), "the attempt fails by Task 0's completion");
    assert_eq!(task_completion(&last, 1).map(|c| c.0), Some(-220));
    let states = distinct(statuses.iter().map(|s| s.state));
    assert_eq!(states[3..], FRAMEWORK_ORDER[3..], "{states:?}");
    let task_1 = task_states(&statuses, 1);
    let stops = [
        TS::AttemptRunning,
        TS::AttemptDeleting,
        TS::AttemptCompleted,
        TS::Completed,
    ];
    assert_eq!(task_1[task_1.len() - 4..], stops, "{task_1:?}");
}
