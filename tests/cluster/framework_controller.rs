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
use mlkube::operator::fc::api::{Framework, FrameworkState, FrameworkStatus};
use mlkube::operator::fc::{controller, crd};
use mlkube::operator::runtime::http::Health;
use mlkube::operator::runtime::metrics::Metrics;
use serde_json::{Value, json};

use crate::operator_identity::{Access, OperatorIdentity, Scope};
use crate::support::{TestNamespace, eventually};

/// An upper bound only: each pod runs about 5 s; a loaded 2-core machine needs room.
const TIMEOUT: Duration = Duration::from_secs(180);

/// Install the Framework CRD (idempotent) and wait until it is served.
async fn install_crd(client: &Client) {
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
struct Operator {
    task: tokio::task::JoinHandle<()>,
    _identity: OperatorIdentity,
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start_operator(ns: &TestNamespace) -> Operator {
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(ns, Access::scoped(Scope::Namespace)).await;
    let settings = controller::Settings {
        namespace: Some(ns.name.clone()),
        concurrency: 4,
    };
    let task = tokio::spawn(controller::run(
        identity.client.clone(),
        settings,
        Arc::new(Metrics::default()),
        Arc::new(Health::default()),
        std::future::pending().boxed().shared(),
        true,
    ));
    Operator {
        task,
        _identity: identity,
    }
}

/// A TaskRole: `tasks` Tasks of one container running `command` (`None`: a server without
/// one), with the completion policy (min failed, min succeeded) and the Task RetryPolicy
/// (fancy, maxRetryCount).
fn role(
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
fn framework(name: &str, retry: (bool, i32), roles: Vec<Value>) -> Framework {
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

async fn submit(ns: &TestNamespace, framework: &Framework) -> Api<Framework> {
    let api = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    api.create(&PostParams::default(), framework)
        .await
        .unwrap_or_else(|e| panic!("creating Framework {}: {e}", framework.name_any()));
    api
}

/// The status of Framework `name` once `done` holds for it.
async fn await_status(
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

fn code(status: &FrameworkStatus) -> Option<i32> {
    (status.attempt_status.completion_status.as_ref()).map(|c| c.status.code)
}

fn completed(status: &FrameworkStatus) -> bool {
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
