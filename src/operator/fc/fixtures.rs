//! Test builders that read like the scenario: "a Framework of two workers, its attempt
//! running, the ConfigMap cached, worker 0's pod failed with exit code 1". A [`Scenario`] is
//! the Framework's spec, its current status and what the caches show; [`Next`] names what one
//! decision changes of it, everything it does not name staying as it was. Used by the table
//! tests of `sync`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::api::{
    CompletionPolicySpec, ExecutionType, Framework, FrameworkAttemptCompletionStatus,
    FrameworkSpec, FrameworkState as FS, FrameworkStatus, RetryPolicySpec, TaskRoleSpec,
    TaskState as TS, TaskStatus,
};
use super::completion::Code;
use super::config::BUILTIN;
use super::objects::{config_map_name, pod_name};
use super::sync::{self, Action, Done, Observed, Plan};

pub const FRAMEWORK: &str = "fw";
pub const NAMESPACE: &str = "ns";
pub const UID: &str = "fw-uid";
/// The UID of the current attempt's ConfigMap, as recorded once it was created.
pub const CM_UID: &str = "cm-uid";
/// The TaskRole a [`framework`] has.
pub const WORKER: &str = "worker";
/// What the decision's `conflict_delay_sec` draws.
pub const CONFLICT_DELAY_SEC: i64 = 60;

/// `seconds` after the Framework was first seen.
pub fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).expect("a valid timestamp")
}

/// The UID recorded for the pod of Task `index` of `role`.
pub fn pod_uid(role: &str, index: i32) -> String {
    format!("{role}-{index}-uid")
}

/// A change of the status, applied in order once it is built from the spec.
type Edit = Box<dyn Fn(&mut FrameworkStatus)>;

/// A Framework, its status and what the caches show of it, at a time.
pub struct Scenario {
    spec: FrameworkSpec,
    /// `None`: the status is null (the Framework is new).
    status: Option<Vec<Edit>>,
    /// The spec's `taskNumber` of a TaskRole, changed after the status was written.
    rescaled: Vec<(String, i32)>,
    config_map: Option<ConfigMap>,
    pods: Vec<Pod>,
    now: i64,
    framework_deleting: bool,
}

/// A Framework of `tasks` workers with FrameworkController's default completion policy (fail
/// on the first failed Task, succeed once all completed) and RetryPolicy (never retry),
/// started, not yet seen by the controller (status null); nothing cached, 10 s in.
pub fn framework(tasks: i32) -> Scenario {
    let spec = FrameworkSpec {
        execution_type: ExecutionType::Start,
        task_roles: vec![role(WORKER, tasks, 1, -1)],
        ..FrameworkSpec::default()
    };
    Scenario {
        spec,
        status: None,
        rescaled: Vec::new(),
        config_map: None,
        pods: Vec::new(),
        now: 10,
        framework_deleting: false,
    }
}

fn role(name: &str, tasks: i32, min_failed: i32, min_succeeded: i32) -> TaskRoleSpec {
    let mut role = TaskRoleSpec {
        name: name.into(),
        task_number: tasks,
        framework_attempt_completion_policy: CompletionPolicySpec {
            min_failed_task_count: min_failed,
            min_succeeded_task_count: min_succeeded,
        },
        ..TaskRoleSpec::default()
    };
    role.task.pod = serde_json::json!({ "spec": { "containers": [] } });
    role
}

/// An attempt of `tasks` workers that runs (the Framework AttemptRunning, its Tasks still
/// waiting for their pods), its ConfigMap cached.
pub fn running(tasks: i32) -> Scenario {
    framework(tasks).state(FS::AttemptRunning).config_map()
}

/// The spec.
impl Scenario {
    /// Another TaskRole with its completion policy.
    pub fn role(mut self, name: &str, tasks: i32, min_failed: i32, min_succeeded: i32) -> Self {
        (self.spec.task_roles).push(role(name, tasks, min_failed, min_succeeded));
        self
    }

    /// The workers' completion policy.
    pub fn policy(mut self, min_failed: i32, min_succeeded: i32) -> Self {
        let policy = &mut self.spec.task_roles[0].framework_attempt_completion_policy;
        policy.min_failed_task_count = min_failed;
        policy.min_succeeded_task_count = min_succeeded;
        self
    }

    /// The Framework's RetryPolicy.
    pub fn retry(mut self, fancy: bool, max_retry_count: i32) -> Self {
        self.spec.retry_policy = RetryPolicySpec {
            fancy_retry_policy: fancy,
            max_retry_count,
        };
        self
    }

    /// Every Task's RetryPolicy.
    pub fn task_retry(mut self, fancy: bool, max_retry_count: i32) -> Self {
        for role in &mut self.spec.task_roles {
            role.task.retry_policy = RetryPolicySpec {
                fancy_retry_policy: fancy,
                max_retry_count,
            };
        }
        self
    }

    pub fn execution(mut self, execution: ExecutionType) -> Self {
        self.spec.execution_type = execution;
        self
    }

    /// Every TaskRole's `podGracefulDeletionTimeoutSec`.
    pub fn graceful_deletion_timeout(mut self, seconds: i64) -> Self {
        for role in &mut self.spec.task_roles {
            role.task.pod_graceful_deletion_timeout_sec = Some(seconds);
        }
        self
    }

    /// Every TaskRole's pod template.
    pub fn pod_template(mut self, pod: serde_json::Value) -> Self {
        for role in &mut self.spec.task_roles {
            role.task.pod = pod.clone();
        }
        self
    }

    /// The workers' `taskNumber` changed to `tasks` after the status was written.
    pub fn rescaled(mut self, tasks: i32) -> Self {
        self.rescaled.push((WORKER.into(), tasks));
        self
    }
}

/// The status: each edit applies to the status the controller first wrote (its first attempt
/// in AttemptCreationPending, at 0 s), in order.
impl Scenario {
    fn edit(mut self, edit: impl Fn(&mut FrameworkStatus) + 'static) -> Self {
        self.status
            .get_or_insert_with(Vec::new)
            .push(Box::new(edit));
        self
    }

    /// The Framework in `state`; from AttemptCreationRequested on, its ConfigMap's UID
    /// recorded.
    pub fn state(self, state: FS) -> Self {
        self.edit(move |s| {
            s.state = state;
            if state != FS::AttemptCreationPending {
                let attempt = &mut s.attempt_status;
                attempt.config_map_uid = Some(CM_UID.into());
                attempt.instance_uid = Some(format!("{}_{CM_UID}", attempt.id));
            }
        })
    }

    /// The attempt completing with `code` (AttemptDeletionPending and after).
    pub fn completing(self, code: Code) -> Self {
        self.edit(move |s| {
            s.attempt_status.completion_status = Some(FrameworkAttemptCompletionStatus {
                status: code.status("completing"),
                trigger: None,
            });
        })
    }

    /// The attempt is `id`, after `total` retries of which `accountable` counted.
    pub fn retried(self, id: i32, total: i32, accountable: i32) -> Self {
        self.edit(move |s| {
            s.attempt_status.id = id;
            s.retry_policy_status.total_retried_count = total;
            s.retry_policy_status.accountable_retried_count = accountable;
        })
    }

    /// A retry decided, waiting `seconds` before it starts.
    pub fn retry_delay(self, seconds: i64) -> Self {
        self.edit(move |s| s.retry_policy_status.retry_delay_sec = Some(seconds))
    }

    fn edit_task(self, role: &str, index: i32, edit: impl Fn(&mut TaskStatus) + 'static) -> Self {
        let role = role.to_owned();
        self.edit(move |s| {
            let task = (s.attempt_status.task_role_statuses.iter_mut())
                .find(|r| r.name == role)
                .and_then(|r| r.task_statuses.iter_mut().find(|t| t.index == index))
                .expect("the scenario's Task");
            edit(task);
        })
    }

    /// Worker `index` in `state`; from AttemptCreationRequested on, its pod's UID recorded.
    pub fn task(self, index: i32, state: TS) -> Self {
        self.role_task(WORKER, index, state)
    }

    /// Task `index` of `role` in `state`.
    pub fn role_task(self, role: &str, index: i32, state: TS) -> Self {
        let uid = pod_uid(role, index);
        self.edit_task(role, index, move |t| {
            t.state = state;
            if state != TS::AttemptCreationPending {
                let attempt = &mut t.attempt_status;
                attempt.pod_uid = Some(uid.clone());
                attempt.instance_uid = Some(format!("{}_{uid}", attempt.id));
            }
        })
    }

    /// Worker `index` AttemptRunning, its pod running.
    pub fn running_task(self, index: i32) -> Self {
        self.task(index, TS::AttemptRunning)
            .pod(pod(index).running())
    }

    /// Worker `index`'s attempt completed with `code`.
    pub fn task_completion(self, index: i32, code: Code) -> Self {
        self.edit_task(WORKER, index, move |t| {
            t.attempt_status.completion_status = Some(code.task("completed"));
        })
    }

    /// Worker `index`'s attempt is `id`, after `total` retries of which `accountable` counted.
    pub fn task_retried(self, index: i32, id: i32, total: i32, accountable: i32) -> Self {
        self.edit_task(WORKER, index, move |t| {
            t.attempt_status.id = id;
            t.retry_policy_status.total_retried_count = total;
            t.retry_policy_status.accountable_retried_count = accountable;
        })
    }

    /// Task `index` of `role` Completed with `code`, `seconds` in.
    pub fn completed(self, role: &str, index: i32, code: Code, seconds: i64) -> Self {
        self.role_task(role, index, TS::Completed)
            .edit_task(role, index, move |t| {
                t.attempt_status.completion_status = Some(code.task("completed"));
                t.attempt_status.completion_time = Some(Time(at(seconds)));
                t.completion_time = Some(Time(at(seconds)));
            })
    }

    /// Worker `index` marked by ScaleDown, as the scale write leaves it.
    pub fn deletion_pending(self, index: i32) -> Self {
        self.edit_task(WORKER, index, move |t| {
            t.deletion_pending = true;
            if t.attempt_status.completion_status.is_none() {
                t.attempt_status.completion_status =
                    Some(super::completion::DELETE_TASK_REQUESTED.task("scaled down"));
            }
        })
    }
}

/// What the caches show, and when.
impl Scenario {
    /// The attempt's ConfigMap, as recorded.
    pub fn config_map(mut self) -> Self {
        self.config_map = Some(config_map(CM_UID, UID));
        self
    }

    /// The cached ConfigMap is being deleted.
    pub fn being_deleted(mut self) -> Self {
        let cm = self.config_map.as_mut().expect("a cached ConfigMap");
        cm.metadata.deletion_timestamp = Some(Time(at(5)));
        self
    }

    /// A ConfigMap of the attempts' name with the UID `uid`, controlled by `owner`.
    pub fn other_config_map(mut self, uid: &str, owner: &str) -> Self {
        self.config_map = Some(config_map(uid, owner));
        self
    }

    pub fn pod(mut self, pod: PodBuilder) -> Self {
        self.pods.push(pod.pod);
        self
    }

    /// The decision is made `seconds` in.
    pub fn at(mut self, seconds: i64) -> Self {
        self.now = seconds;
        self
    }

    /// The Framework has a deletionTimestamp.
    pub fn framework_deleting(mut self) -> Self {
        self.framework_deleting = true;
        self
    }
}

fn config_map(uid: &str, owner: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(FRAMEWORK)),
            namespace: Some(NAMESPACE.into()),
            uid: Some(uid.into()),
            owner_references: Some(vec![controller("Framework", FRAMEWORK, owner)]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn controller(kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Building the scenario, and deciding on it.
impl Scenario {
    /// The Framework as the controller reads it.
    pub fn build(&self) -> Framework {
        let mut framework = Framework::new(FRAMEWORK, self.spec.clone());
        framework.metadata.namespace = Some(NAMESPACE.into());
        framework.metadata.uid = Some(UID.into());
        framework.status = self.status.as_ref().map(|edits| {
            let mut status = sync::new_status(&self.spec, FRAMEWORK, Time(at(0)), &new_uid);
            for edit in edits {
                edit(&mut status);
            }
            status
        });
        for (name, tasks) in &self.rescaled {
            let role = (framework.spec.task_roles.iter_mut()).find(|r| &r.name == name);
            role.expect("the rescaled TaskRole").task_number = *tasks;
        }
        framework
    }

    /// The status the decision starts from: a null one as the decision first writes it.
    pub fn status(&self) -> FrameworkStatus {
        let framework = self.build();
        let first = || sync::new_status(&framework.spec, FRAMEWORK, Time(at(self.now)), &new_uid);
        framework.status.clone().unwrap_or_else(first)
    }

    pub fn decide(&self) -> Plan {
        let pod =
            |name: &str| (self.pods.iter()).find(|p| p.metadata.name.as_deref() == Some(name));
        let observed = Observed {
            now: at(self.now),
            framework_deleting: self.framework_deleting,
            config_map: self.config_map.as_ref(),
            pod: &pod,
            conflict_delay_sec: CONFLICT_DELAY_SEC,
            new_uid: &new_uid,
            config: &BUILTIN,
        };
        sync::decide(&self.build(), &observed)
    }

    /// The status after the controller recorded `done`, `now`.
    pub fn record(&self, done: Done) -> FrameworkStatus {
        let mut status = self.status();
        sync::record(&mut status, done, at(self.now));
        status
    }
}

/// Every new TaskRole and Task instance gets this UID.
fn new_uid() -> String {
    "new".into()
}

/// A pod of the current attempt, in the phase the builder methods set.
pub struct PodBuilder {
    pub pod: Pod,
}

/// Worker `index`'s pod: recorded, owned by the attempt's ConfigMap, Pending.
pub fn pod(index: i32) -> PodBuilder {
    let name = pod_name(FRAMEWORK, WORKER, index);
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(NAMESPACE.into()),
            uid: Some(pod_uid(WORKER, index)),
            owner_references: Some(vec![controller(
                "ConfigMap",
                &config_map_name(FRAMEWORK),
                CM_UID,
            )]),
            ..ObjectMeta::default()
        },
        spec: None,
        status: None,
    };
    PodBuilder { pod }.phase("Pending")
}

impl PodBuilder {
    fn phase(mut self, phase: &str) -> Self {
        (self.pod.status.get_or_insert_with(PodStatus::default)).phase = Some(phase.into());
        self
    }

    pub fn running(self) -> Self {
        self.phase("Running")
    }

    pub fn unknown(self) -> Self {
        self.phase("Unknown")
    }

    pub fn succeeded(self) -> Self {
        self.phase("Succeeded")
    }

    /// Failed, its container having exited with `code`.
    pub fn failed(mut self, code: i32) -> Self {
        let status = self.pod.status.get_or_insert_with(PodStatus::default);
        status.container_statuses = Some(vec![ContainerStatus {
            name: "main".into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some("Error".into()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
        self.phase("Failed")
    }

    /// Being deleted since 0 s, with a grace period of 30 s.
    pub fn deleting(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(Time(at(30)));
        self.pod.metadata.deletion_grace_period_seconds = Some(30);
        self
    }

    /// Another UID than the recorded one: created by a create whose answer was lost.
    pub fn uid(mut self, uid: &str) -> Self {
        self.pod.metadata.uid = Some(uid.into());
        self
    }

    /// Controlled by the ConfigMap `uid`.
    pub fn owner(mut self, uid: &str) -> Self {
        (self.pod.metadata.owner_references.as_mut()).expect("an owner")[0].uid = uid.into();
        self
    }
}

/// The actions a row expects.
pub fn create_pod(index: i32) -> Action {
    Action::CreatePod {
        role: WORKER.into(),
        index,
    }
}

/// Delete worker `index`'s pod of UID `uid`, gracefully.
pub fn delete_pod(index: i32, uid: &str) -> Action {
    Action::DeletePod {
        name: pod_name(FRAMEWORK, WORKER, index),
        uid: uid.into(),
        force: false,
    }
}

/// Delete worker `index`'s recorded pod again, with grace period 0.
pub fn force_delete_pod(index: i32) -> Action {
    Action::DeletePod {
        name: pod_name(FRAMEWORK, WORKER, index),
        uid: pod_uid(WORKER, index),
        force: true,
    }
}

pub fn delete_config_map(uid: &str) -> Action {
    Action::DeleteConfigMap { uid: uid.into() }
}

/// What a decision (or a record) comes to, as the tables compare it.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub state: FS,
    pub attempt: i32,
    pub config_map_uid: Option<String>,
    /// The attempt's completion code.
    pub code: Option<i32>,
    /// The Task that made the completion policy complete the attempt: role and index.
    pub trigger: Option<(String, i32)>,
    /// The Framework's RetryPolicy: total and accountable retries, the delay decided.
    pub retried: (i32, i32, Option<i64>),
    pub tasks: Vec<TaskOutcome>,
    pub actions: Vec<Action>,
    pub wake_after: Option<Duration>,
    pub blocked: bool,
    /// The reason of the refusal the decision reports.
    pub refused: Option<&'static str>,
}

/// What a decision comes to for one Task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskOutcome {
    pub role: String,
    pub index: i32,
    pub state: TS,
    pub attempt: i32,
    pub pod_uid: Option<String>,
    pub code: Option<i32>,
    /// Its RetryPolicy: total and accountable retries.
    pub retried: (i32, i32),
    pub deletion_pending: bool,
}

impl Outcome {
    /// `status` with no action, no wake and nothing blocked.
    pub fn of(status: &FrameworkStatus) -> Outcome {
        let attempt = &status.attempt_status;
        let completion = attempt.completion_status.as_ref();
        let trigger = completion.and_then(|c| c.trigger.as_ref());
        let retried = &status.retry_policy_status;
        Outcome {
            state: status.state,
            attempt: attempt.id,
            config_map_uid: attempt.config_map_uid.clone(),
            code: completion.map(|c| c.status.code),
            trigger: trigger.map(|t| (t.task_role_name.clone(), t.task_index)),
            retried: (
                retried.total_retried_count,
                retried.accountable_retried_count,
                retried.retry_delay_sec,
            ),
            tasks: (attempt.task_role_statuses.iter())
                .flat_map(|r| r.task_statuses.iter().map(|t| task_outcome(&r.name, t)))
                .collect(),
            actions: Vec::new(),
            wake_after: None,
            blocked: false,
            refused: None,
        }
    }

    pub fn of_plan(plan: &Plan) -> Outcome {
        Outcome {
            actions: plan.actions.clone(),
            wake_after: plan.wake_after,
            blocked: plan.blocked.is_some(),
            refused: plan.refused.as_ref().map(|r| r.reason()),
            ..Outcome::of(&plan.status)
        }
    }

    fn task(&mut self, role: &str, index: i32) -> &mut TaskOutcome {
        (self.tasks.iter_mut())
            .find(|t| t.role == role && t.index == index)
            .expect("the row's Task")
    }
}

fn task_outcome(role: &str, task: &TaskStatus) -> TaskOutcome {
    TaskOutcome {
        role: role.into(),
        index: task.index,
        state: task.state,
        attempt: task.attempt_status.id,
        pod_uid: task.attempt_status.pod_uid.clone(),
        code: task.completion().map(|c| c.code),
        retried: (
            task.retry_policy_status.total_retried_count,
            task.retry_policy_status.accountable_retried_count,
        ),
        deletion_pending: task.deletion_pending,
    }
}

/// A completion code a row names: a predefined one, or an exit code.
pub trait CodeNumber {
    fn number(&self) -> i32;
}

impl CodeNumber for Code {
    fn number(&self) -> i32 {
        self.code
    }
}

impl CodeNumber for i32 {
    fn number(&self) -> i32 {
        *self
    }
}

/// What a row expects one decision to change of its scenario's status; all it does not name
/// stays as it was, and there is no action, no wake and nothing blocked unless it names them.
#[derive(Default)]
pub struct Next(Vec<Change>);

/// One change a row expects.
type Change = Box<dyn Fn(&mut Outcome)>;

pub fn next() -> Next {
    Next::default()
}

/// The Framework.
impl Next {
    fn then(mut self, change: impl Fn(&mut Outcome) + 'static) -> Self {
        self.0.push(Box::new(change));
        self
    }

    pub fn state(self, state: FS) -> Self {
        self.then(move |o| o.state = state)
    }

    /// A new attempt, `id`: no ConfigMap, no completion yet.
    pub fn attempt(self, id: i32) -> Self {
        self.then(move |o| {
            (o.attempt, o.config_map_uid) = (id, None);
            (o.code, o.trigger) = (None, None);
        })
    }

    /// The attempt's ConfigMap `uid` recorded.
    pub fn config_map_uid(self, uid: &str) -> Self {
        let uid = uid.to_owned();
        self.then(move |o| o.config_map_uid = Some(uid.clone()))
    }

    /// The attempt completes with `code`.
    pub fn code(self, code: impl CodeNumber) -> Self {
        let code = code.number();
        self.then(move |o| o.code = Some(code))
    }

    /// Triggered by Task `index` of `role`.
    pub fn trigger(self, role: &str, index: i32) -> Self {
        let role = role.to_owned();
        self.then(move |o| o.trigger = Some((role.clone(), index)))
    }

    /// The Framework's retries: `total`, `accountable`, and the delay of one decided.
    pub fn retried(self, total: i32, accountable: i32, delay: Option<i64>) -> Self {
        self.then(move |o| o.retried = (total, accountable, delay))
    }

    pub fn act(self, action: Action) -> Self {
        self.then(move |o| o.actions.push(action.clone()))
    }

    pub fn wake(self, after: Duration) -> Self {
        self.then(move |o| o.wake_after = Some(after))
    }

    pub fn blocked(self) -> Self {
        self.then(|o| o.blocked = true)
    }

    /// The decision reports the spec refused, for `reason`.
    pub fn refused(self, reason: &'static str) -> Self {
        self.then(move |o| o.refused = Some(reason))
    }
}

/// The Tasks.
impl Next {
    /// Worker `index` goes to `state`.
    pub fn task(self, index: i32, state: TS) -> Self {
        self.role_task(WORKER, index, state)
    }

    pub fn role_task(self, role: &str, index: i32, state: TS) -> Self {
        let role = role.to_owned();
        self.then(move |o| o.task(&role, index).state = state)
    }

    /// Worker `index`'s attempt completes with `code`.
    pub fn task_code(self, index: i32, code: impl CodeNumber) -> Self {
        let code = code.number();
        self.then(move |o| o.task(WORKER, index).code = Some(code))
    }

    /// Every Task goes to `state`; those without a completion get `code`.
    pub fn every_task(self, state: TS, code: impl CodeNumber) -> Self {
        let code = code.number();
        self.then(move |o| {
            for task in &mut o.tasks {
                task.state = state;
                task.code.get_or_insert(code);
            }
        })
    }

    /// Worker `index`'s pod `uid` recorded.
    pub fn pod_uid(self, index: i32, uid: &str) -> Self {
        let uid = uid.to_owned();
        self.then(move |o| o.task(WORKER, index).pod_uid = Some(uid.clone()))
    }

    /// Worker `index`'s new attempt, `id`, after `total` retries of which `accountable`
    /// counted: no pod, no completion yet.
    pub fn task_retried(self, index: i32, id: i32, total: i32, accountable: i32) -> Self {
        self.then(move |o| {
            let task = o.task(WORKER, index);
            (task.attempt, task.retried) = (id, (total, accountable));
            (task.pod_uid, task.code) = (None, None);
        })
    }

    /// Worker `index` is marked by ScaleDown.
    pub fn deletion_pending(self, index: i32) -> Self {
        self.then(move |o| o.task(WORKER, index).deletion_pending = true)
    }

    /// Worker `index` is removed from the status.
    pub fn removed(self, index: i32) -> Self {
        self.then(move |o| o.tasks.retain(|t| !(t.role == WORKER && t.index == index)))
    }

    /// Worker `index` is added to the status, a new instance waiting for its pod.
    pub fn added(self, index: i32) -> Self {
        self.then(move |o| o.tasks.push(new_task(WORKER, index)))
    }

    /// The status lists no Task.
    pub fn no_tasks(self) -> Self {
        self.then(|o| o.tasks.clear())
    }

    /// Every Task is a new instance of a new attempt, waiting for its pod.
    pub fn new_tasks(self) -> Self {
        self.then(|o| {
            for task in &mut o.tasks {
                *task = new_task(&task.role, task.index);
            }
        })
    }
}

fn new_task(role: &str, index: i32) -> TaskOutcome {
    TaskOutcome {
        role: role.into(),
        index,
        state: TS::AttemptCreationPending,
        attempt: 0,
        pod_uid: None,
        code: None,
        retried: (0, 0),
        deletion_pending: false,
    }
}

/// One row of a table: a scenario, and what one decision on it (or one result the controller
/// records) changes.
pub struct Row {
    pub name: &'static str,
    pub given: Scenario,
    pub done: Option<Done>,
    pub next: Next,
}

/// `given` decided on.
pub fn row(name: &'static str, given: Scenario, next: Next) -> Row {
    Row {
        name,
        given,
        done: None,
        next,
    }
}

/// `done` recorded in `given`'s status.
pub fn recorded(name: &'static str, given: Scenario, done: Done, next: Next) -> Row {
    Row {
        name,
        given,
        done: Some(done),
        next,
    }
}

/// Run every row; all that differ from what they expect fail at once.
pub fn check(rows: Vec<Row>) {
    let mut failed = String::new();
    for row in &rows {
        let seen = match &row.done {
            None => Outcome::of_plan(&row.given.decide()),
            Some(done) => Outcome::of(&row.given.record(done.clone())),
        };
        let mut expected = Outcome::of(&row.given.status());
        for change in &row.next.0 {
            change(&mut expected);
        }
        if seen != expected {
            failed += &format!(
                "{}:\n  expected {expected:?}\n  seen     {seen:?}\n",
                row.name
            );
        }
    }
    assert!(failed.is_empty(), "rows that differ:\n{failed}");
}
