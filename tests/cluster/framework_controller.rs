//! FrameworkController's Framework on the local cluster: the operator's `fc` room runs in this
//! process (or as the binary, where a kill is the point) as the operator component's
//! namespace-scoped ServiceAccount, and kwok ends the pods as `cluster/kwok-stages.yaml` says:
//! a pod whose command has `exit N` exits with N after a few seconds, a pod without a command
//! (a server) runs until deleted.
//!
//! The Frameworks are built here in the shape of FrameworkController's own examples
//! (`example/framework/basic/`): same names, policies, counts and exit codes.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, ResourceExt};
use mlkube::operator::fc::api::{Framework, FrameworkState, FrameworkStatus, TaskState};
use mlkube::operator::fc::config::BUILTIN;
use mlkube::operator::fc::{controller, crd};
use mlkube::operator::runtime::http::Health;
use mlkube::operator::runtime::manager::Shared;
use mlkube::operator::runtime::metrics::Metrics;
use serde_json::{Value, json};

use crate::events::{counts, job_events};
use crate::operator_identity::{
    Access, OperatorIdentity, OperatorProcess, Scope, spawn_operator_binary,
};
use crate::support::{TestNamespace, eventually, within};

/// An upper bound only: each pod runs about 5 s; a loaded 2-core machine needs room.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(180);

/// Held while the Framework CRD is changed, or must not be: a test that loosens it for a
/// moment, and the test of what it refuses.
static SCHEMA: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Install the Framework CRD (idempotent) and wait until it is served.
async fn install_crd(client: &Client) {
    let _schema = SCHEMA.lock().await;
    apply_crd(client).await;
}

/// Install the Framework CRD, with the caller holding [`SCHEMA`].
async fn apply_crd(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = crd::definition();
    let name = crd.name_any();
    crds.patch(
        &name,
        &PatchParams::apply("mlkube-operator-tests").force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("the {name} CRD applies: {e}"));
    tokio::time::timeout(
        TIMEOUT,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("the Framework CRD became Established in time")
    .expect("watching the CRD");
}

/// The Framework controller for one namespace, in this process, as the component's
/// ServiceAccount; stopped when dropped.
pub(crate) struct Operator {
    task: tokio::task::JoinHandle<()>,
    _identity: OperatorIdentity,
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) async fn start_operator(ns: &TestNamespace) -> Operator {
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(ns, Access::scoped(Scope::Namespace)).await;
    let settings = controller::Settings {
        namespace: Some(ns.name.clone()),
        concurrency: 4,
        config: Arc::new(BUILTIN.clone()),
    };
    let shared = Shared::new(
        "fc",
        identity.client.clone(),
        Arc::new(Metrics::default()),
        &Arc::new(Health::default()),
        std::future::pending().boxed().shared(),
    );
    let task = tokio::spawn(controller::run(shared, settings));
    Operator {
        task,
        _identity: identity,
    }
}

/// The operator binary with only the Framework controller, for `ns`, as the component's
/// ServiceAccount.
async fn operator_binary(ns: &TestNamespace, identity: &OperatorIdentity) -> OperatorProcess {
    install_crd(&ns.client).await;
    spawn_operator_binary(&ns.name, identity, &["--controllers", "fc"])
}

/// A TaskRole: `tasks` Tasks of one container running `command` (`None`: a server without
/// one), with the completion policy (min failed, min succeeded) and the Task RetryPolicy
/// (fancy, maxRetryCount).
pub(crate) fn role(
    name: &str,
    tasks: i32,
    policy: (i32, i32),
    retry: (bool, i32),
    command: Option<&str>,
) -> Value {
    let mut container = json!({ "name": "main", "image": "ubuntu:trusty" });
    if let Some(command) = command {
        container["command"] = json!(["sh", "-c", command]);
    }
    json!({
        "name": name,
        "taskNumber": tasks,
        "frameworkAttemptCompletionPolicy": {
            "minFailedTaskCount": policy.0, "minSucceededTaskCount": policy.1
        },
        "task": {
            "retryPolicy": { "fancyRetryPolicy": retry.0, "maxRetryCount": retry.1 },
            "podGracefulDeletionTimeoutSec": 600,
            "pod": { "spec": {
                "restartPolicy": if command.is_some() { "Never" } else { "Always" },
                "containers": [container]
            } }
        }
    })
}

/// A Framework named `name` with the Framework RetryPolicy (fancy, maxRetryCount).
pub(crate) fn framework(name: &str, retry: (bool, i32), roles: Vec<Value>) -> Framework {
    serde_json::from_value(json!({
        "apiVersion": "frameworkcontroller.microsoft.com/v1",
        "kind": "Framework",
        "metadata": { "name": name },
        "spec": {
            "executionType": "Start",
            "retryPolicy": { "fancyRetryPolicy": retry.0, "maxRetryCount": retry.1 },
            "taskRoles": roles
        }
    }))
    .expect("a Framework")
}

pub(crate) async fn submit(ns: &TestNamespace, framework: &Framework) -> Api<Framework> {
    let api = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    api.create(&PostParams::default(), framework)
        .await
        .unwrap_or_else(|e| panic!("creating Framework {}: {e}", framework.name_any()));
    api
}

/// The status of Framework `name` once `done` holds for it.
pub(crate) async fn await_status(
    api: &Api<Framework>,
    name: &str,
    what: &str,
    done: impl Fn(&FrameworkStatus) -> bool,
) -> FrameworkStatus {
    eventually(&format!("Framework {name} {what}"), TIMEOUT, || async {
        let status = api.get(name).await.ok()?.status?;
        done(&status).then_some(status)
    })
    .await
}

pub(crate) fn code(status: &FrameworkStatus) -> Option<i32> {
    (status.attempt_status.completion_status.as_ref()).map(|c| c.status.code)
}

pub(crate) fn completed(status: &FrameworkStatus) -> bool {
    status.state == FrameworkState::Completed
}

async fn pods(ns: &TestNamespace, framework: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().labels(&format!("FC_FRAMEWORK_NAME={framework}")))
        .await
        .expect("listing pods")
        .items
}

/// FrameworkController's basic examples, each to the outcome its name says.
#[tokio::test]
async fn framework_controllers_basic_examples_end_as_their_names_say() {
    let ns = TestNamespace::new("fc-basic").await;
    let _operator = start_operator(&ns).await;
    let batch = |name: &str, task_retry, command: &str| {
        framework(
            name,
            (true, 1),
            vec![role("worker", 1, (1, -1), task_retry, Some(command))],
        )
    };
    let examples = [
        batch("batchsucceeded", (true, 1), "printenv && sleep 10"),
        batch("batchfailedpermanent", (true, 1), "sleep 10 && exit 210"),
        batch("batchfailedtransient", (true, 1), "sleep 10 && exit 200"),
        batch(
            "batchfailedtransientconflict",
            (false, 0),
            "sleep 10 && exit 201",
        ),
        batch("batchfailedunknown", (true, 1), "sleep 10 && exit 1"),
        framework(
            "batchstatefulfailed",
            (true, 1),
            vec![role(
                "worker",
                3,
                (1, -1),
                (true, 1),
                Some("printenv && sleep 60 && exit 1"),
            )],
        ),
        framework(
            "batchwithservicesucceeded",
            (true, 1),
            vec![
                role("server", 2, (1, -1), (false, 0), None),
                role(
                    "worker",
                    3,
                    (1, 3),
                    (false, 0),
                    Some("printenv && sleep 10"),
                ),
            ],
        ),
        framework(
            "service",
            (false, -2),
            vec![role("server", 3, (1, -1), (false, -2), None)],
        ),
    ];
    let mut api = None;
    for example in &examples {
        api = Some(submit(&ns, example).await);
    }
    let api = api.expect("examples");

    let s = await_status(&api, "batchsucceeded", "succeeds", completed).await;
    assert_eq!(code(&s), Some(0));
    let s = await_status(&api, "batchfailedpermanent", "fails at once", completed).await;
    assert_eq!(
        (code(&s), s.retry_policy_status.total_retried_count),
        (Some(210), 0)
    );
    let s = await_status(
        &api,
        "batchfailedunknown",
        "fails after one counted retry",
        completed,
    )
    .await;
    assert_eq!(code(&s), Some(1));
    assert_eq!(s.retry_policy_status.accountable_retried_count, 1);
    let s = await_status(
        &api,
        "batchwithservicesucceeded",
        "succeeds by its workers",
        completed,
    )
    .await;
    let completion = s
        .attempt_status
        .completion_status
        .clone()
        .expect("a completion");
    assert_eq!(completion.status.code, 0);
    let trigger = completion.trigger.expect("a trigger");
    assert_eq!(trigger.task_role_name, "worker");
    assert_eq!(
        trigger.message,
        "SucceededTaskCount 3 has reached MinSucceededTaskCount 3 in the TaskRole"
    );
    let server = &s.attempt_status.task_role_statuses[0].task_statuses[0];
    assert_eq!(
        server.completion().map(|c| c.code),
        Some(-220),
        "servers stop with the attempt"
    );
    assert!(
        pods(&ns, "batchwithservicesucceeded").await.is_empty(),
        "completed pods are deleted"
    );

    let s = await_status(
        &api,
        "batchfailedtransientconflict",
        "waits to retry",
        |s| {
            s.state == FrameworkState::AttemptCompleted
                && s.retry_policy_status.retry_delay_sec.is_some()
        },
    )
    .await;
    assert_eq!(code(&s), Some(201));
    let delay = s.retry_policy_status.retry_delay_sec.unwrap_or_default();
    assert!((60..=900).contains(&delay), "backs off {delay}s");
    let s = await_status(
        &api,
        "batchfailedtransient",
        "retries its Task, uncounted",
        |s| {
            let task = &s.attempt_status.task_role_statuses[0].task_statuses[0];
            task.retry_policy_status.total_retried_count >= 2
        },
    )
    .await;
    let task = &s.attempt_status.task_role_statuses[0].task_statuses[0];
    assert_eq!(task.retry_policy_status.accountable_retried_count, 0);
    assert_ne!(s.state, FrameworkState::Completed);
    let s = await_status(
        &api,
        "batchstatefulfailed",
        "fails after one retry",
        completed,
    )
    .await;
    assert_eq!(
        (code(&s), s.retry_policy_status.total_retried_count),
        (Some(1), 1)
    );

    let s = await_status(&api, "service", "runs", |s| {
        s.state == FrameworkState::AttemptRunning
    })
    .await;
    assert_eq!(s.attempt_status.id, 0);
    assert_service_pods_are_framework_controllers(&ns, &s).await;
}

/// A pod as FrameworkController makes it: name, labels, annotations, environment, owner.
async fn assert_service_pods_are_framework_controllers(
    ns: &TestNamespace,
    status: &FrameworkStatus,
) {
    let pods = eventually("the service's 3 pods", TIMEOUT, || async {
        let pods = pods(ns, "service").await;
        (pods.len() == 3).then_some(pods)
    })
    .await;
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("service-attempt")
        .await
        .expect("the attempt's ConfigMap");
    assert_eq!(cm.finalizers(), ["foregroundDeletion"]);
    assert_eq!(cm.uid(), status.attempt_status.config_map_uid);
    let pod = pods
        .iter()
        .find(|p| p.name_any() == "service-server-1")
        .expect("service-server-1");
    assert_eq!(pod.labels()["FC_TASKROLE_NAME"], "server");
    assert_eq!(pod.labels()["FC_TASK_INDEX"], "1");
    assert_eq!(
        pod.annotations()["FC_CONFIGMAP_UID"],
        cm.uid().unwrap_or_default()
    );
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("ConfigMap", Some(true))
    );
    let env: Vec<String> = pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(env.len(), 15, "{env:?}");
    assert_eq!(env[0], "FC_FRAMEWORK_NAMESPACE");
    assert_eq!(env[14], "FC_TASK_ATTEMPT_INSTANCE_UID");
}

#[tokio::test]
async fn placeholders_are_replaced_in_any_string_of_the_pod_template() {
    let ns = TestNamespace::new("fc-placeholders").await;
    let _operator = start_operator(&ns).await;
    let mut server = role("serverstateful", 3, (1, -1), (false, -2), None);
    server["task"]["podGracefulDeletionTimeoutSec"] = Value::Null;
    server["task"]["pod"]["spec"]["hostname"] = json!("{{FC_TASKROLE_NAME}}-{{FC_TASK_INDEX}}");
    server["task"]["pod"]["spec"]["subdomain"] = json!("{{FC_FRAMEWORK_NAME}}");
    let api = submit(
        &ns,
        &framework("servicestateful", (false, -2), vec![server]),
    )
    .await;
    await_status(&api, "servicestateful", "runs", |s| {
        s.state == FrameworkState::AttemptRunning
    })
    .await;
    let pod = Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .get("servicestateful-serverstateful-2")
        .await
        .expect("the third pod");
    let spec = pod.spec.expect("a spec");
    assert_eq!(spec.hostname.as_deref(), Some("serverstateful-2"));
    assert_eq!(spec.subdomain.as_deref(), Some("servicestateful"));
}

/// Patch Framework `name` with a JSON merge patch, as a user does to Start, Stop or rescale.
pub(crate) async fn patch(api: &Api<Framework>, name: &str, patch: Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("patching Framework {name}: {e}"));
}

pub(crate) fn running(status: &FrameworkStatus) -> bool {
    status.state == FrameworkState::AttemptRunning
}

#[tokio::test]
async fn stop_completes_a_running_framework_at_once_and_its_pods_go() {
    let ns = TestNamespace::new("fc-stop").await;
    let _operator = start_operator(&ns).await;
    let service = framework(
        "service",
        (false, -2),
        vec![role("server", 3, (1, -1), (false, -2), None)],
    );
    let api = submit(&ns, &service).await;
    await_status(&api, "service", "runs", running).await;
    patch(
        &api,
        "service",
        json!({ "spec": { "executionType": "Stop" } }),
    )
    .await;
    let s = await_status(&api, "service", "completes", completed).await;
    assert_eq!(code(&s), Some(-210), "StopFrameworkRequested");
    assert_eq!(
        s.retry_policy_status.total_retried_count, 0,
        "a Stop is never retried, even with -2"
    );
    assert!(pods(&ns, "service").await.is_empty());
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        cm.get_opt("service-attempt")
            .await
            .expect("reading")
            .is_none()
    );
}

#[tokio::test]
async fn a_created_framework_waits_without_objects_until_started() {
    let ns = TestNamespace::new("fc-create").await;
    let _operator = start_operator(&ns).await;
    let mut batch = framework(
        "prestart",
        (false, 0),
        vec![role("worker", 2, (1, -1), (false, 0), Some("exit 0"))],
    );
    batch.spec.execution_type = mlkube::operator::fc::api::ExecutionType::Create;
    let api = submit(&ns, &batch).await;
    let s = await_status(&api, "prestart", "has a status", |_| true).await;
    assert_eq!(s.state, FrameworkState::AttemptCreationPending);
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        cm.get_opt("prestart-attempt")
            .await
            .expect("reading")
            .is_none()
    );
    assert!(pods(&ns, "prestart").await.is_empty());
    patch(
        &api,
        "prestart",
        json!({ "spec": { "executionType": "Start" } }),
    )
    .await;
    let s = await_status(&api, "prestart", "succeeds once started", completed).await;
    assert_eq!(code(&s), Some(0));
}

#[tokio::test]
async fn scale_up_adds_tasks_and_scale_down_deletes_the_last_ones_in_the_same_attempt() {
    let ns = TestNamespace::new("fc-scale").await;
    let _operator = start_operator(&ns).await;
    let service = framework(
        "elastic",
        (false, -2),
        vec![role("server", 2, (1, -1), (false, -2), None)],
    );
    let api = submit(&ns, &service).await;
    await_status(&api, "elastic", "runs", running).await;
    let first = eventually("2 pods", TIMEOUT, || async {
        let pods = pods(&ns, "elastic").await;
        (pods.len() == 2).then_some(pods)
    })
    .await;
    let task_running = |s: &FrameworkStatus, n: usize| {
        let tasks = &s.attempt_status.task_role_statuses[0].task_statuses;
        tasks.len() == n && tasks.iter().all(|t| t.state == TaskState::AttemptRunning)
    };
    patch(
        &api,
        "elastic",
        json!({ "spec": { "taskRoles": [
        role("server", 4, (1, -1), (false, -2), None)
    ] } }),
    )
    .await;
    let s = await_status(&api, "elastic", "runs 4 Tasks", |s| task_running(s, 4)).await;
    assert_eq!(s.attempt_status.id, 0, "a rescale keeps the attempt");
    patch(
        &api,
        "elastic",
        json!({ "spec": { "taskRoles": [
        role("server", 1, (1, -1), (false, -2), None)
    ] } }),
    )
    .await;
    let s = await_status(&api, "elastic", "runs 1 Task", |s| task_running(s, 1)).await;
    assert_eq!(
        (s.attempt_status.id, s.state),
        (0, FrameworkState::AttemptRunning)
    );
    let left = eventually("1 pod", TIMEOUT, || async {
        let pods = pods(&ns, "elastic").await;
        (pods.len() == 1).then_some(pods)
    })
    .await;
    let kept = first
        .iter()
        .find(|p| p.name_any() == "elastic-server-0")
        .expect("pod 0");
    assert_eq!(
        left[0].uid(),
        kept.uid(),
        "Task 0 kept its pod through both rescales"
    );
}

#[tokio::test]
async fn retries_count_to_max_retry_count_and_a_permanent_failure_is_never_retried() {
    let ns = TestNamespace::new("fc-retry").await;
    let _operator = start_operator(&ns).await;
    // Without fancyRetryPolicy even a transient failure counts, up to maxRetryCount.
    let counted = framework(
        "counted",
        (false, 0),
        vec![role("worker", 1, (1, -1), (false, 2), Some("exit 200"))],
    );
    let permanent = framework(
        "permanent",
        (true, 5),
        vec![role("worker", 1, (1, -1), (true, 5), Some("exit 210"))],
    );
    let api = submit(&ns, &counted).await;
    submit(&ns, &permanent).await;
    let s = await_status(&api, "counted", "fails after 2 retries", completed).await;
    let task = &s.attempt_status.task_role_statuses[0].task_statuses[0];
    assert_eq!(
        (
            task.retry_policy_status.total_retried_count,
            task.retry_policy_status.accountable_retried_count
        ),
        (2, 2)
    );
    assert_eq!(code(&s), Some(200));
    let s = await_status(&api, "permanent", "fails at once", completed).await;
    let task = &s.attempt_status.task_role_statuses[0].task_statuses[0];
    assert_eq!(task.retry_policy_status.total_retried_count, 0);
    assert_eq!(
        (code(&s), s.retry_policy_status.total_retried_count),
        (Some(210), 0)
    );
}

/// FrameworkController's own configuration file, given with `--fc-config`: a code of its
/// podFailureSpec for exit code 3, Permanent, in place of the defaults.
const FC_CONFIG: &str = "\
podFailureSpec:
- code: 300
  phrase: DataMissing
  type: {attributes: [Permanent]}
  podPatterns:
  - containers: [{nameRegex: '(?ms).*', codeRange: {min: 3, max: 3}}]
frameworkMinRetryDelaySecForTransientConflictFailed: 1
frameworkMaxRetryDelaySecForTransientConflictFailed: 2
";

/// The operator binary reads FrameworkController's configuration file: a Task whose container
/// exits 3 completes with the file's code and phrase, its diagnostics showing what the pattern
/// matched, and is never retried (Permanent, fancyRetryPolicy), where by the defaults it would
/// be ContainerUnrecognizedFailed and retried.
#[tokio::test]
async fn the_configuration_files_pod_failure_spec_classifies_a_failed_pod() {
    let ns = TestNamespace::new("fc-config").await;
    let identity = OperatorIdentity::new(&ns, Access::scoped(Scope::Namespace)).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("frameworkcontroller.yaml");
    std::fs::write(&file, FC_CONFIG).expect("write the configuration");
    let path = file.to_str().expect("a UTF-8 path");
    install_crd(&ns.client).await;
    let _operator = spawn_operator_binary(
        &ns.name,
        &identity,
        &["--controllers", "fc", "--fc-config", path],
    );
    let missing = framework(
        "missing",
        (true, 3),
        vec![role("worker", 1, (1, -1), (true, 3), Some("exit 3"))],
    );
    let api = submit(&ns, &missing).await;
    let s = await_status(&api, "missing", "fails at once", completed).await;
    let task = &s.attempt_status.task_role_statuses[0].task_statuses[0];
    let completion = task
        .attempt_status
        .completion_status
        .as_ref()
        .expect("a completion");
    assert_eq!(
        (completion.status.code, completion.status.phrase.as_str()),
        (300, "DataMissing")
    );
    assert_eq!(
        completion.status.diagnostics,
        r#"Pod failed: PodPattern matched: {"containers":[{"name":"main","code":3}]}"#
    );
    assert_eq!(task.retry_policy_status.total_retried_count, 0);
    assert_eq!(
        (code(&s), s.retry_policy_status.total_retried_count),
        (Some(300), 0)
    );
}

#[tokio::test]
async fn each_completion_policy_completes_the_attempt_as_its_counts_say() {
    let ns = TestNamespace::new("fc-policy").await;
    let _operator = start_operator(&ns).await;
    // Task i exits with code i: Task 0 succeeds, Tasks 1 and 2 fail.
    let by_index = |name: &str, policy| {
        framework(
            name,
            (false, 0),
            vec![role(
                "worker",
                3,
                policy,
                (false, 0),
                Some("exit {{FC_TASK_INDEX}}"),
            )],
        )
    };
    let api = submit(&ns, &by_index("twofailed", (2, -1))).await;
    submit(&ns, &by_index("anysucceeded", (-1, 1))).await;
    submit(&ns, &by_index("alldone", (-1, -1))).await;

    let s = await_status(&api, "twofailed", "fails at its 2nd failed Task", completed).await;
    let c = s.attempt_status.completion_status.expect("a completion");
    let trigger = c.trigger.expect("a trigger");
    assert_eq!(
        trigger.message,
        "FailedTaskCount 2 has reached MinFailedTaskCount 2 in the TaskRole"
    );
    assert_eq!(
        c.status.code, trigger.task_index,
        "the triggering Task's own code"
    );

    let s = await_status(&api, "anysucceeded", "succeeds by Task 0", completed).await;
    let c = s.attempt_status.completion_status.expect("a completion");
    assert_eq!(
        (c.status.code, c.trigger.map(|t| t.task_index)),
        (0, Some(0))
    );

    let s = await_status(&api, "alldone", "succeeds once all completed", completed).await;
    let c = s.attempt_status.completion_status.expect("a completion");
    assert_eq!(c.status.code, 0);
    assert!(
        c.status
            .diagnostics
            .starts_with("CompletedTaskCount 3 has reached TotalTaskCount 3"),
        "{}",
        c.status.diagnostics
    );
}

#[tokio::test]
async fn the_schema_refuses_bad_frameworks_and_nothing_is_created() {
    let ns = TestNamespace::new("fc-refused").await;
    let _schema = SCHEMA.lock().await;
    apply_crd(&ns.client).await;
    let api = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    let ok = || {
        framework(
            "good",
            (false, 0),
            vec![role("worker", 1, (1, -1), (false, 0), Some("exit 0"))],
        )
    };
    let mut dashed = ok();
    dashed.metadata.name = Some("bad-name".into());
    let mut dashed_role = ok();
    dashed_role.spec.task_roles[0].name = "my-worker".into();
    let mut too_many = ok();
    too_many.spec.task_roles[0].task_number = 801;
    let mut twice = ok();
    twice.spec.task_roles.push(twice.spec.task_roles[0].clone());
    let mut too_many_in_all = ok();
    too_many_in_all.spec.task_roles[0].task_number = 400;
    too_many_in_all
        .spec
        .task_roles
        .push(too_many_in_all.spec.task_roles[0].clone());
    too_many_in_all.spec.task_roles[1].name = "ps".into();
    too_many_in_all.spec.task_roles[1].task_number = 401;
    let mut unknown = serde_json::to_value(ok()).unwrap();
    unknown["spec"]["executionType"] = json!("Run");
    for (what, value, says) in [
        (
            "a name with -",
            serde_json::to_value(&dashed).unwrap(),
            "lower-case letters and digits only",
        ),
        (
            "a TaskRole name with -",
            serde_json::to_value(&dashed_role).unwrap(),
            "spec.taskRoles[0].name",
        ),
        (
            "taskNumber 801",
            serde_json::to_value(&too_many).unwrap(),
            "spec.taskRoles[0].taskNumber",
        ),
        (
            "two TaskRoles named worker",
            serde_json::to_value(&twice).unwrap(),
            "spec.taskRoles: Invalid value: TaskRole names must be unique: pods are named <framework>-<taskrole>-<index>",
        ),
        (
            "401 and 400 Tasks",
            serde_json::to_value(&too_many_in_all).unwrap(),
            "the taskNumbers of all TaskRoles add up to more than 800, the most Tasks a Framework may have",
        ),
        ("executionType Run", unknown, "spec.executionType"),
    ] {
        let framework: Framework = serde_json::from_value(value.clone()).unwrap_or_else(|_| ok());
        let result = if what == "executionType Run" {
            let dynamic: kube::api::DynamicObject = serde_json::from_value(value).unwrap();
            let resource = kube::api::ApiResource::erase::<Framework>(&());
            Api::<kube::api::DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource)
                .create(&PostParams::default(), &dynamic)
                .await
                .map(drop)
        } else {
            api.create(&PostParams::default(), &framework)
                .await
                .map(drop)
        };
        match result {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{what}: {status:?}");
                assert!(status.message.contains(says), "{what}: {}", status.message);
            }
            other => panic!("{what} was not refused: {other:?}"),
        }
    }
    assert!(
        api.list(&ListParams::default())
            .await
            .expect("listing")
            .items
            .is_empty()
    );
}

/// The Framework CRD as it was before it refused duplicate TaskRole names and too many Tasks
/// (FrameworkController's own: up to 10000 Tasks a TaskRole, no rule across TaskRoles).
fn crd_without_the_rules() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(crd::definition()).expect("a CRD");
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let roles = &mut spec["properties"]["taskRoles"];
    let map = roles.as_object_mut().expect("the taskRoles schema");
    map.remove("x-kubernetes-validations");
    map.remove("maxItems");
    roles["items"]["properties"]["taskNumber"]["maximum"] = json!(10000.0);
    serde_json::from_value(crd).expect("a CRD")
}

/// Create `frameworks`, which the CRD refuses, through the CRD without its rules, then put the
/// rules back; what each create answered.
async fn create_past_the_rules(
    ns: &TestNamespace,
    frameworks: &[&Framework],
) -> Vec<Result<Framework, kube::Error>> {
    let _schema = SCHEMA.lock().await;
    let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
    let api = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut loose = crd_without_the_rules();
    let name = loose.name_any();
    let mut created = Vec::new();
    // The API server serves a changed schema a moment after the change: each create waits for
    // its dry run to pass. Nothing in between panics, so the rules always come back.
    let mut served = false;
    for _ in 0..3 {
        if let Ok(current) = crds.get(&name).await {
            loose.metadata.resource_version = current.metadata.resource_version;
            let _ = crds.replace(&name, &PostParams::default(), &loose).await;
        }
        served = within(Duration::from_secs(30), || async {
            let all =
                futures::future::join_all((frameworks.iter()).map(|f| api.create(&dry_run, f)))
                    .await;
            all.iter().all(Result::is_ok).then_some(())
        })
        .await
        .is_some();
        if served {
            break;
        }
    }
    if served {
        for framework in frameworks {
            created.push(api.create(&PostParams::default(), framework).await);
        }
    }
    apply_crd(&ns.client).await;
    let refused_again = within(TIMEOUT, || async {
        api.create(&dry_run, frameworks[0])
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert!(refused_again.is_some(), "the CRD's rules are served again");
    assert!(served, "the CRD without its rules admitted the Frameworks");
    created
}

/// Frameworks the controller will not run (admitted before the CRD had its rules, or with a
/// pod template of the wrong shape, which the CRD keeps as it is) each fail at once with a
/// completion and one Warning event that say what to fix, create nothing, and stall nothing: a
/// good Framework beside them completes, and the operator never exits.
#[tokio::test]
async fn frameworks_the_controller_will_not_run_fail_alone_with_one_event_each() {
    let ns = TestNamespace::new("fc-unrunnable").await;
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(&ns, Access::scoped(Scope::Namespace)).await;
    let server = |name: &str, tasks| role(name, tasks, (1, -1), (false, -2), None);
    // Services, retried forever by their RetryPolicy: only the refusal ends them.
    let twice = framework(
        "twice",
        (false, -2),
        vec![server("worker", 1), server("worker", 2)],
    );
    let many = framework("many", (false, -2), vec![server("worker", 3000)]);
    let mut shape = framework("shape", (false, -2), vec![server("worker", 1)]);
    shape.spec.task_roles[0].task.pod["spec"]["containers"][0]["ports"] = json!("80");
    let good = framework(
        "good",
        (false, 0),
        vec![role(
            "worker",
            2,
            (1, -1),
            (false, 0),
            Some("sleep 5 && exit 0"),
        )],
    );
    let created = create_past_the_rules(&ns, &[&twice, &many]).await;
    for result in created {
        result.expect("created through the CRD without its rules");
    }
    let api = submit(&ns, &shape).await;
    submit(&ns, &good).await;
    let mut operator = operator_binary(&ns, &identity).await;

    for (name, code, reason, says) in [
        (
            "twice",
            -240,
            "DuplicateTaskRoleName",
            "spec.taskRoles[0] and spec.taskRoles[1] are both named \"worker\"",
        ),
        (
            "many",
            -240,
            "TooManyTasks",
            "the TaskRoles' taskNumbers add up to 3000 Tasks, more than the 800 a Framework may have",
        ),
        (
            "shape",
            -200,
            "InvalidPodTemplate",
            "spec.taskRoles[0].task.pod.spec.containers[0].ports: invalid type: string \"80\"",
        ),
    ] {
        let s = await_status(&api, name, "fails for its spec", completed).await;
        let completion = s
            .attempt_status
            .completion_status
            .clone()
            .expect("a completion");
        assert_eq!(completion.status.code, code, "{name}: {completion:?}");
        assert!(
            completion.status.diagnostics.contains(says)
                && completion.status.diagnostics.contains("hint: "),
            "{name}: {}",
            completion.status.diagnostics
        );
        assert!(
            s.attempt_status.task_role_statuses.is_empty(),
            "{name}: no Task listed"
        );
        assert_eq!(
            s.attempt_status.config_map_uid, None,
            "{name}: no ConfigMap"
        );
        assert!(pods(&ns, name).await.is_empty(), "{name}: no pod");
        let events = eventually(
            &format!("the {reason} event of {name}"),
            TIMEOUT,
            || async {
                let events = job_events(&ns, name, reason).await;
                (!events.is_empty()).then_some(events)
            },
        )
        .await;
        assert_eq!(
            events[0].note.as_deref(),
            Some(completion.status.diagnostics.as_str()),
            "{name}"
        );
        assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    }
    let s = await_status(&api, "good", "succeeds beside them", completed).await;
    assert_eq!(code(&s), Some(0), "{s:?}");
    // Nothing is tried again: still one event each, said once.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (name, reason) in [
        ("twice", "DuplicateTaskRoleName"),
        ("many", "TooManyTasks"),
        ("shape", "InvalidPodTemplate"),
    ] {
        assert_eq!(counts(&job_events(&ns, name, reason).await), [1], "{name}");
    }
    assert!(
        matches!(operator.0.try_wait(), Ok(None)),
        "the operator never exited"
    );
    operator.kill();
}

/// Every UID each pod name (and the attempt's ConfigMap) ever had, as a watch sees them.
#[derive(Default)]
struct Seen(
    std::sync::Mutex<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>>,
);

impl Seen {
    fn add(&self, name: String, uid: String) {
        self.0.lock().unwrap().entry(name).or_default().insert(uid);
    }

    fn snapshot(&self) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        self.0.lock().unwrap().clone()
    }
}

/// The key under which [`watch_uids`] records the UIDs of every pod's owners.
const POD_OWNERS: &str = "(owners of pods)";

/// Record the UIDs of pods and ConfigMaps labelled for Frameworks in `ns`, and of the pods'
/// owners, until aborted.
fn watch_uids(ns: &TestNamespace, seen: Arc<Seen>) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let config = watcher::Config::default().labels("FC_FRAMEWORK_NAME");
    let pod_seen = seen.clone();
    let pods = watcher(pods, config.clone())
        .applied_objects()
        .for_each(move |p| {
            if let Ok(p) = p {
                pod_seen.add(p.name_any(), p.uid().unwrap_or_default());
                for owner in p.owner_references() {
                    pod_seen.add(POD_OWNERS.into(), owner.uid.clone());
                }
            }
            futures::future::ready(())
        });
    let cms = watcher(cms, config).applied_objects().for_each(move |c| {
        if let Ok(c) = c {
            seen.add(c.name_any(), c.uid().unwrap_or_default());
        }
        futures::future::ready(())
    });
    tokio::spawn(async move {
        futures::future::join(pods, cms).await;
    })
}

/// At most one pod per Task and one attempt per Framework across operator kills: the operator
/// binary is killed while it creates the attempt and its pods, three times, and started again.
#[tokio::test]
async fn kills_of_the_operator_never_start_a_second_attempt_nor_retry_a_task() {
    let ns = TestNamespace::new("fc-kill").await;
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(&ns, Access::scoped(Scope::Namespace)).await;
    let seen = Arc::new(Seen::default());
    let watch = watch_uids(&ns, seen.clone());
    let service = framework(
        "killed",
        (false, -2),
        vec![role("server", 6, (1, -1), (false, -2), None)],
    );
    let api = submit(&ns, &service).await;
    for progress in [1, 3, 5] {
        let mut operator = operator_binary(&ns, &identity).await;
        eventually(
            &format!("{progress} objects of the attempt"),
            TIMEOUT,
            || async { (seen.snapshot().len() >= progress).then_some(()) },
        )
        .await;
        operator.kill();
    }
    let _operator = operator_binary(&ns, &identity).await;
    let s = await_status(&api, "killed", "runs all 6 Tasks", |s| {
        running(s)
            && s.attempt_status.task_role_statuses[0]
                .task_statuses
                .iter()
                .all(|t| t.state == TaskState::AttemptRunning)
    })
    .await;
    watch.abort();
    let seen = seen.snapshot();
    assert_eq!(
        seen.len(),
        8,
        "the ConfigMap, 6 pods and their owners: {seen:?}"
    );
    // A ConfigMap or pod created just before a kill, whose UID the status never recorded, is
    // deleted and created again (never adopted), still under attempt 0. Only the recorded
    // ConfigMap ever owned a pod, so no pod ran under another.
    let recorded = s.attempt_status.config_map_uid.clone().unwrap_or_default();
    assert_eq!(
        seen[POD_OWNERS],
        std::collections::BTreeSet::from([recorded.clone()]),
        "every pod belongs to the recorded FrameworkAttempt: {seen:?}"
    );
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let live_cm = cms.get("killed-attempt").await.unwrap();
    assert_eq!(
        live_cm.uid(),
        Some(recorded),
        "the live ConfigMap is the recorded one"
    );
    let live = pods(&ns, "killed").await;
    assert_eq!(live.len(), 6);
    assert_eq!(s.attempt_status.id, 0);
    assert_eq!(s.retry_policy_status.total_retried_count, 0);
    for task in &s.attempt_status.task_role_statuses[0].task_statuses {
        assert_eq!(
            task.attempt_status.id, 0,
            "Task {} was never retried",
            task.index
        );
        let pod = live
            .iter()
            .find(|p| p.name_any() == task.attempt_status.pod_name);
        assert_eq!(
            pod.and_then(|p| p.uid()),
            task.attempt_status.pod_uid,
            "the live pod is the recorded one"
        );
    }
}

/// Leader failover: a standby replica takes over mid-run from a leader that was killed, and the
/// Framework keeps its one attempt and one pod per Task.
#[tokio::test]
async fn a_standby_takes_over_from_a_killed_leader_with_one_attempt_and_one_pod_per_task() {
    let ns = TestNamespace::new("fc-failover").await;
    install_crd(&ns.client).await;
    let access = Access::scoped(Scope::Namespace).with_leader_election();
    let identity = OperatorIdentity::new(&ns, access).await;
    let flags = ["--controllers", "fc", "--leader-elect"];
    let seen = Arc::new(Seen::default());
    let watch = watch_uids(&ns, seen.clone());
    let mut leader = spawn_operator_binary(&ns.name, &identity, &flags);
    let service = framework(
        "failover",
        (false, -2),
        vec![role("server", 6, (1, -1), (false, -2), None)],
    );
    let api = submit(&ns, &service).await;
    eventually("the leader to start the attempt", TIMEOUT, || async {
        (seen.snapshot().len() >= 3).then_some(())
    })
    .await;
    let _standby = spawn_operator_binary(&ns.name, &identity, &flags);
    leader.kill();
    let s = await_status(&api, "failover", "runs all 6 Tasks", |s| {
        running(s)
            && (s.attempt_status.task_role_statuses[0].task_statuses.iter())
                .all(|t| t.state == TaskState::AttemptRunning)
    })
    .await;
    watch.abort();
    let seen = seen.snapshot();
    assert_eq!(
        seen["failover-attempt"].len(),
        1,
        "one FrameworkAttempt: {seen:?}"
    );
    assert_eq!(
        (
            s.attempt_status.id,
            s.retry_policy_status.total_retried_count
        ),
        (0, 0)
    );
    let live = pods(&ns, "failover").await;
    assert_eq!(live.len(), 6);
    for task in &s.attempt_status.task_role_statuses[0].task_statuses {
        assert_eq!(
            task.attempt_status.id, 0,
            "Task {} was never retried",
            task.index
        );
        let pod = live
            .iter()
            .find(|p| p.name_any() == task.attempt_status.pod_name);
        assert_eq!(pod.and_then(|p| p.uid()), task.attempt_status.pod_uid);
    }
}

/// Issue 34: Frameworks an app renders with the `framework-sweep` and `framework` prototypes,
/// applied with `mlkube apply`, run by the operator to the end their commands give (kwok: `exit
/// N`), ranked by `mlkube status -c` from the metrics they report (as annotations: kwok's nodes
/// serve no logs, and a completed attempt's pods are gone), and a failed one's note is its
/// completion status. `mlkube logs` of a completed Framework says its pods went with its
/// attempt.
#[tokio::test]
async fn framework_prototypes_apply_run_and_a_sweep_of_them_is_ranked() {
    use crate::support::{empty_app, mlkube, mlkube_ok, stdout};

    let ns = TestNamespace::new("fc-sweep").await;
    let _operator = start_operator(&ns).await;
    let (_dir, app) = empty_app(&ns);
    let app = app.as_path();
    let roles = r#"taskRoles=[{"name": "worker", "taskNumber": 2}]"#;
    let add_sweep = [
        "component",
        "add",
        "framework-sweep",
        "sweep",
        "--param",
        roles,
        "--param",
        r#"grid={"lr": [0.1, 0.01]}"#,
    ];
    stdout(&mlkube_ok(app, &add_sweep));
    let add_broken = [
        "component",
        "add",
        "framework",
        "broken",
        "--param",
        r#"command=["sh", "-c", "exit 1"]"#,
    ];
    stdout(&mlkube_ok(app, &add_broken));
    stdout(&mlkube_ok(app, &["apply", "local", "--no-wait"]));

    let api: Api<Framework> = Api::namespaced(ns.client.clone(), &ns.name);
    let names: Vec<String> = eventually("the sweep's two Frameworks", TIMEOUT, || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        let names: Vec<String> = (list.items.iter())
            .map(ResourceExt::name_any)
            .filter(|n| n.starts_with("sweep"))
            .collect();
        (names.len() == 2).then_some(names)
    })
    .await;
    for name in &names {
        assert!(
            !name.contains('-') && name.len() == "sweep".len() + 10,
            "{name}"
        );
        let status = await_status(&api, name, "to complete", completed).await;
        assert_eq!(code(&status), Some(0), "{name}: {status:?}");
    }
    let status = await_status(&api, "broken", "to complete", completed).await;
    assert_eq!(code(&status), Some(1), "{status:?}");

    for (name, accuracy) in names.iter().zip(["0.7", "0.9"]) {
        let patch = json!({"metadata": {"annotations": {"metric.mlkube.io/accuracy": accuracy}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("annotating the Framework");
    }
    let output = mlkube(app, &["status", "local", "-c", "sweep", "-o", "json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let ranked: Vec<(&str, &str, f64)> = (report["jobs"].as_array().expect("jobs").iter())
        .map(|j| {
            let name = j["name"].as_str().expect("a name");
            let kind = j["kind"].as_str().expect("a kind");
            (
                name,
                kind,
                j["metrics"]["accuracy"].as_f64().expect("a metric"),
            )
        })
        .collect();
    assert_eq!(
        ranked,
        [
            (names[1].as_str(), "Framework", 0.9),
            (names[0].as_str(), "Framework", 0.7)
        ],
        "{report:#}"
    );
    assert_eq!(report["summary"]["states"]["Succeeded"], 2, "{report:#}");

    let output = mlkube(app, &["status", "local", "-c", "broken", "-o", "json"]);
    assert_eq!(output.status.code(), Some(3), "failed: exit 3");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["jobs"][0]["state"], "Failed", "{report:#}");
    let note = report["jobs"][0]["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("failed: code 1 (ContainerUnrecognizedFailed)"),
        "{report:#}"
    );

    let output = mlkube(app, &["logs", "local", "-c", "broken"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "framework {}/broken has no pods left: it Failed and its attempt's pods were deleted",
            ns.name
        )),
        "{stderr}"
    );
}
