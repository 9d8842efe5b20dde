//! FrameworkController's Framework on the real node: `examples/framework-tf-ps.yaml`, a Chief, a
//! PS and two Workers of TensorFlow's parameter-server training, run unmodified by the
//! platform's operator (in the cluster, as its ServiceAccount). The tasks find each other by the
//! hostnames the `{{FC_...}}` placeholders give them and build TF_CONFIG from the `FC_*`
//! variables; the Chief's success completes the Framework, whose pods are then deleted, and its
//! metric stays in the Chief's completion status. And FrameworkBarrier, as `mlkube
//! framework-barrier` from the operator's image: every Task starts knowing every Task's IP.

use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{ListParams, PostParams};
use mlkube::operator::fc::api::{CompletionTypeName, Framework, FrameworkState, FrameworkStatus};
use serde::Deserialize;
use serde_json::json;

use crate::jobs::TRAINING_TIMEOUT;
use crate::platform;
use crate::support::{TestNamespace, eventually};

const NAME: &str = "tfps";

/// The Service and the Framework of the example, as written.
fn example() -> (Service, Framework) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/framework-tf-ps.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let mut documents = serde_yaml::Deserializer::from_str(&text);
    let service = Service::deserialize(documents.next().expect("a Service first"))
        .unwrap_or_else(|e| panic!("{path}: the first document is not a Service: {e}"));
    let framework = Framework::deserialize(documents.next().expect("then a Framework"))
        .unwrap_or_else(|e| panic!("{path}: the second document is not a Framework: {e}"));
    (service, framework)
}

#[tokio::test]
async fn a_framework_of_a_chief_ps_and_workers_trains_and_completes_on_the_chiefs_success() {
    platform::app();
    let ns = TestNamespace::new("real-framework").await;
    let (service, framework) = example();
    Api::<Service>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &service)
        .await
        .expect("the example's Service is created");
    let frameworks = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    frameworks
        .create(&PostParams::default(), &framework)
        .await
        .expect("the example's Framework is accepted");

    let status = completed(&frameworks).await;
    let completion = status.attempt_status.completion_status.clone();
    let completion = completion.expect("a completed attempt has a completion status");
    assert_eq!(
        (completion.status.code, completion.status.type_.name),
        (0, CompletionTypeName::Succeeded),
        "{completion:?}"
    );
    let trigger = completion
        .trigger
        .expect("the completion names its trigger");
    assert_eq!(
        (trigger.task_role_name.as_str(), trigger.task_index),
        ("chief", 0)
    );
    assert_eq!(status.attempt_status.id, 0, "no retry was needed");

    let accuracy = chief_accuracy(&status);
    assert!(accuracy >= 0.9, "the Chief's test accuracy {accuracy}");
    let left = Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().labels(&format!("FC_FRAMEWORK_NAME={NAME}")))
        .await
        .expect("list the Framework's pods");
    let deleting = left
        .items
        .iter()
        .all(|p| p.metadata.deletion_timestamp.is_some());
    assert!(
        deleting,
        "a completed Framework's pods are deleted: {:?}",
        left.items
    );
}

/// The example's status once it is Completed.
async fn completed(frameworks: &Api<Framework>) -> FrameworkStatus {
    completed_named(frameworks, NAME).await
}

/// The status of Framework `name` once it is Completed.
async fn completed_named(frameworks: &Api<Framework>, name: &str) -> FrameworkStatus {
    let what = format!("Framework {name} to complete");
    eventually(&what, TRAINING_TIMEOUT, || async {
        let status = frameworks.get(name).await.ok()?.status?;
        (status.state == FrameworkState::Completed).then_some(status)
    })
    .await
}

/// The accuracy in the Chief's termination message (`metric accuracy=0.97...`).
fn chief_accuracy(status: &FrameworkStatus) -> f64 {
    let roles = &status.attempt_status.task_role_statuses;
    let chief = roles
        .iter()
        .find(|r| r.name == "chief")
        .expect("a chief TaskRole");
    let task = chief.task_statuses.first().expect("the chief's task");
    let completion = task.attempt_status.completion_status.as_ref();
    let pod = completion.and_then(|c| c.pod.clone());
    let message = (pod.iter().flat_map(|p| &p.containers))
        .find_map(|c| c.message.clone())
        .unwrap_or_else(|| panic!("the Chief's container left no message: {task:?}"));
    let value = message.trim().strip_prefix("metric accuracy=");
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the Chief's message is not its metric: {message:?}"))
}

/// The operator's image, which runs `mlkube framework-barrier`.
const OPERATOR_IMAGE: &str = concat!("mlkube/mlkube:", env!("CARGO_PKG_VERSION"));

/// A Framework of a `server` and two `client` Tasks, each of which waits at the barrier (as
/// FrameworkController's `frameworkbarrier.yaml` example does, from the operator's image) and
/// then leaves what the injector exported as its termination message.
fn barrier_framework(busybox: &str) -> Framework {
    let role = |name: &str, tasks: i32| {
        json!({"name": name, "taskNumber": tasks, "task": {"pod": {"spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "frameworkbarrier",
            "initContainers": [{
                "name": "frameworkbarrier", "image": OPERATOR_IMAGE,
                "command": ["/usr/local/bin/mlkube", "framework-barrier"],
                "workingDir": "/mnt/frameworkbarrier",
                "env": [{"name": "BARRIER_CHECK_INTERVAL_SEC", "value": "5"}],
                "volumeMounts": [{"name": "barrier", "mountPath": "/mnt/frameworkbarrier"}]}],
            "containers": [{
                "name": "app", "image": busybox,
                "env": [{"name": "FB_SERVER_PORT", "value": "7000"}],
                "command": ["sh", "-c", ". /mnt/frameworkbarrier/injector.sh && \
                    printf '%s %s' \"$FB_SERVER_ADDRESSES\" \"$FB_CLIENT_IPS\" >/dev/termination-log"],
                "volumeMounts": [{"name": "barrier", "mountPath": "/mnt/frameworkbarrier"}]}],
            "volumes": [{"name": "barrier", "emptyDir": {}}]}}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
        "metadata": {"name": "barrier"},
        "spec": {"executionType": "Start", "taskRoles": [role("server", 1), role("client", 2)]}
    }))
    .expect("a Framework")
}

/// The ServiceAccount the barrier reads its Framework as: `get` on frameworks, nothing else.
async fn barrier_account(ns: &TestNamespace) {
    let name = json!({"name": "frameworkbarrier"});
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": name})).unwrap();
    let role: Role = serde_json::from_value(json!({"metadata": name, "rules": [{
        "apiGroups": ["frameworkcontroller.microsoft.com"], "resources": ["frameworks"],
        "verbs": ["get"]}]}))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": name,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "frameworkbarrier"},
        "subjects": [{"kind": "ServiceAccount", "name": "frameworkbarrier"}]}))
    .unwrap();
    let (client, post) = (ns.client.clone(), PostParams::default());
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns.name);
    accounts
        .create(&post, &account)
        .await
        .expect("the ServiceAccount");
    let roles = Api::<Role>::namespaced(client.clone(), &ns.name);
    roles.create(&post, &role).await.expect("the Role");
    let bindings = Api::<RoleBinding>::namespaced(client, &ns.name);
    bindings
        .create(&post, &binding)
        .await
        .expect("the RoleBinding");
}

#[tokio::test]
async fn framework_barrier_from_the_operators_image_lets_tasks_start_knowing_every_tasks_address() {
    platform::app();
    let ns = TestNamespace::new("real-barrier").await;
    barrier_account(&ns).await;
    let busybox = crate::storage::busybox_image(&ns.client).await;
    let frameworks = Api::<Framework>::namespaced(ns.client.clone(), &ns.name);
    frameworks
        .create(&PostParams::default(), &barrier_framework(&busybox))
        .await
        .expect("the Framework is accepted");
    let status = completed_named(&frameworks, "barrier").await;
    let code = status
        .attempt_status
        .completion_status
        .as_ref()
        .map(|c| c.status.code);
    assert_eq!(
        code,
        Some(0),
        "every Task passed the barrier and succeeded: {status:?}"
    );

    let ip = |role: &str, index: usize| {
        let roles = &status.attempt_status.task_role_statuses;
        let role = roles
            .iter()
            .find(|r| r.name == role)
            .expect("the role's status");
        role.task_statuses[index]
            .attempt_status
            .pod_ip
            .clone()
            .expect("a pod IP")
    };
    let expected = format!(
        "{}:7000 {},{}",
        ip("server", 0),
        ip("client", 0),
        ip("client", 1)
    );
    for role in &status.attempt_status.task_role_statuses {
        for task in &role.task_statuses {
            let completion = task.attempt_status.completion_status.as_ref();
            let message = (completion
                .and_then(|c| c.pod.as_ref())
                .iter()
                .flat_map(|p| &p.containers))
            .find_map(|c| c.message.clone());
            assert_eq!(
                message.as_deref(),
                Some(expected.as_str()),
                "{}-{}",
                role.name,
                task.index
            );
        }
    }
}
