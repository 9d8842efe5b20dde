//! Tenancy (issue 46): the `profile` component gives a user a namespace of their own, and its
//! admission rule (a ValidatingAdmissionPolicy, checked by the API server itself) lets
//! workloads there run only as the ServiceAccounts the profile allows. Tried as an attacker
//! would: the profile's own token (from the TokenRequest API, as its notebooks hold it) asks
//! for a job, a Framework and a workload that run as a more powerful ServiceAccount of the
//! namespace, and is refused with a message naming the account and the allowed ones; even
//! cluster-admin cannot start a pod as one. What the profile's token may do is a table here.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use mlkube::operator::fc::api::Framework;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use serde_json::{Value, json};

use crate::identity::{JOBS, Uses, assert_exactly, expected, uses};
use crate::operator::install_crd;
use crate::operator_identity::{Permission, permissions, token_kubeconfig};
use crate::support::{
    AppsCleanup, NamespaceCleanup, TestNamespace, client_from, empty_app, eventually,
    lock_shared_cluster_objects, mlkube_ok,
};

/// A ServiceAccount of the profile's namespace that the profile does not allow (one an
/// administrator made for something else, with more rights).
const INTRUDER: &str = "intruder";
const TIMEOUT: Duration = Duration::from_secs(60);

/// Create `object` as `client` in `namespace`; the API server's refusal, if it refused.
async fn refusal(client: &Client, namespace: &str, object: Value) -> Option<kube::core::Status> {
    refused(client, namespace, object, &PostParams::default()).await
}

/// [`refusal`], with `params`.
async fn refused(
    client: &Client,
    namespace: &str,
    object: Value,
    params: &PostParams,
) -> Option<kube::core::Status> {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    let types = object.types.clone().expect("apiVersion and kind");
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", &types.api_version));
    let resource = ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: types.api_version.clone(),
        kind: types.kind.clone(),
        plural: format!("{}s", types.kind.to_lowercase()),
    };
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
    match api.create(params, &object).await {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(*status),
        Err(e) => panic!("creating a {}: {e}", types.kind),
    }
}

/// Create the ServiceAccount `name` in `namespace`, as an administrator would.
async fn create_service_account(admin: &Client, namespace: &str, name: &str) {
    let account: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": name } }))
        .expect("a valid ServiceAccount");
    Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("creating the ServiceAccount {namespace}/{name}: {e}"));
}

fn tfjob(name: &str, account: &str) -> Value {
    json!({ "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": { "name": name },
        "spec": { "tfReplicaSpecs": { "Worker": { "replicas": 1, "template": { "spec": {
            "serviceAccountName": account,
            "containers": [{ "name": "tensorflow", "image": "mlkube/mlkube:test" }] } } } } } })
}

fn framework(account: &str) -> Value {
    json!({ "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
        "metadata": { "name": "fc" },
        "spec": { "executionType": "Start", "taskRoles": [{ "name": "worker", "taskNumber": 1,
            "task": { "pod": { "spec": { "serviceAccountName": account, "restartPolicy": "Never",
                "containers": [{ "name": "w", "image": "mlkube/mlkube:test" }] } } } }] } })
}

/// A Deployment and a Pod that name the account with the older `serviceAccount` field.
fn workloads(account: &str) -> [Value; 2] {
    let spec = json!({ "serviceAccount": account,
        "containers": [{ "name": "c", "image": "mlkube/mlkube:test" }] });
    [
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d" },
            "spec": { "selector": { "matchLabels": { "app": "d" } },
                "template": { "metadata": { "labels": { "app": "d" } }, "spec": spec } } }),
        json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p" }, "spec": spec }),
    ]
}

#[tokio::test]
async fn a_profiles_workloads_run_only_as_the_service_accounts_it_allows() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("tenancy").await;
    install_crd(&ns.client).await;
    let profile = format!("{}-alice", ns.name);
    let (_dir, app) = empty_app(&ns);
    let namespace_param = format!("namespace={profile}");
    mlkube_ok(
        &app,
        &[
            "component",
            "add",
            "profile",
            "alice",
            "--param",
            "owner=alice",
            "--param",
            &namespace_param,
        ],
    );
    mlkube_ok(&app, &["apply", "local"]);
    // Dropped in order: the app's environment, then the profile's namespace, which it keeps.
    let _gone = (
        AppsCleanup(vec![app.clone()]),
        NamespaceCleanup(profile.clone()),
    );

    create_service_account(&ns.client, &profile, INTRUDER).await;
    let editor = client_from(&token_kubeconfig(&ns.client, &profile, "default-editor").await).await;

    // A policy just created is enforced a moment later, once the API server has compiled it.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually("the admission policy to be enforced", TIMEOUT, || async {
        refused(&editor, &profile, tfjob("t", INTRUDER), &dry_run).await
    })
    .await;
    let says = format!(
        "serviceAccountName {INTRUDER} is not one that workloads in namespace {profile} may run as; use one of default, default-editor, *-launcher"
    );
    let [deployment, pod] = workloads(INTRUDER);
    for (what, client, object) in [
        ("a TFJob", &editor, tfjob("t", INTRUDER)),
        ("a Framework", &editor, framework(INTRUDER)),
        ("a Deployment, as cluster-admin", &ns.client, deployment),
        ("a Pod, as cluster-admin", &ns.client, pod),
    ] {
        let status = refusal(client, &profile, object)
            .await
            .unwrap_or_else(|| panic!("{what} running as {INTRUDER} was admitted"));
        assert_eq!(status.code, 403, "{what}: {status:?}");
        assert!(status.message.contains(&says), "{what}: {}", status.message);
    }
    assert_eq!(
        refusal(&editor, &profile, tfjob("mine", "default-editor")).await,
        None,
        "a TFJob as the profile's own ServiceAccount is admitted"
    );
    let tfjobs = Api::<TFJob>::namespaced(editor.clone(), &profile);
    assert!(tfjobs.get("mine").await.is_ok());
    assert!(
        Api::<Framework>::namespaced(editor.clone(), &profile)
            .get("fc")
            .await
            .is_err()
    );
    // Refused by RBAC before admission: the profile's token reads no Secret, starts no pod.
    let secrets = Api::<Secret>::namespaced(editor.clone(), &profile);
    assert!(
        matches!(secrets.list(&Default::default()).await, Err(kube::Error::Api(s)) if s.code == 403)
    );
    let pod = serde_json::from_value::<Pod>(workloads("default-editor")[1].clone()).unwrap();
    let pods = Api::<Pod>::namespaced(editor.clone(), &profile);
    assert!(
        matches!(pods.create(&PostParams::default(), &pod).await, Err(kube::Error::Api(s)) if s.code == 403)
    );

    assert_may_do_exactly(&editor, &ns.client, &profile).await;
}

/// What the profile's owner and its ServiceAccount may do in its namespace: the jobs of every
/// framework, Frameworks, VolumeManagers and claims; pods read and deleted; never Secrets, pod
/// creation or exec, ServiceAccounts or RBAC.
const EDITS_IN_A_PROFILE: &[Uses] = &[
    uses("kubeflow.org", JOBS, EDIT),
    uses("frameworkcontroller.microsoft.com", "frameworks", EDIT),
    uses("kvc.kubeflow.org", "volumemanagers", EDIT),
    uses("", "pods", &["delete", "get", "list", "watch"]),
    uses("", "pods/log", READ),
    uses("", "services", READ),
    uses("", "events", READ),
    uses("", "persistentvolumeclaims", EDIT),
];
const EDIT: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
const READ: &[&str] = &["get", "list", "watch"];

/// The profile's token may do exactly [`EDITS_IN_A_PROFILE`] in its namespace, beyond what
/// every authenticated identity may.
async fn assert_may_do_exactly(editor: &Client, admin: &Client, profile: &str) {
    let nobody = client_from(&token_kubeconfig(admin, profile, "default").await).await;
    let everyone = permissions(&nobody, profile).await;
    let granted: BTreeSet<Permission> = permissions(editor, profile)
        .await
        .difference(&everyone)
        .cloned()
        .collect();
    let context = format!("the profile's token, in namespace {profile}");
    assert_exactly(&granted, &expected(&[EDITS_IN_A_PROFILE]), &context);
}

/// The platform's ServiceAccounts a notebook of the hub's namespace must never run a job as:
/// stand-ins named as the default app's gateway and operator.
const PLATFORM_ACCOUNTS: [&str; 2] = ["gateway", "training-operator"];

/// Without `userNamespaces`, the hub's notebooks run in the platform's namespace; the hub's
/// admission rule keeps a notebook's token from starting a TFJob as any of its ServiceAccounts,
/// and the hub's token from starting a pod as one, while a job as `default`, a notebook as the
/// notebooks' ServiceAccount and the administrator's own workloads are admitted.
#[tokio::test]
async fn a_notebook_starts_no_job_as_a_platform_service_account() {
    let ns = TestNamespace::new("notebook-rule").await;
    install_crd(&ns.client).await;
    let (_dir, app) = empty_app(&ns);
    mlkube_ok(&app, &["component", "add", "notebook-hub", "notebook-hub"]);
    mlkube_ok(&app, &["apply", "local", "--no-wait"]);
    let _gone = AppsCleanup(vec![app.clone()]);
    for name in PLATFORM_ACCOUNTS {
        create_service_account(&ns.client, &ns.name, name).await;
    }
    let notebook =
        client_from(&token_kubeconfig(&ns.client, &ns.name, "notebook-hub-notebook").await).await;
    let hub = client_from(&token_kubeconfig(&ns.client, &ns.name, "notebook-hub").await).await;
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(
        "the hub's admission rule to be enforced",
        TIMEOUT,
        || async { refused(&notebook, &ns.name, tfjob("t", "gateway"), &dry_run).await },
    )
    .await;

    let says = |user: &str, account: &str, allowed: &str| {
        format!(
            "serviceAccountName {account} is not one that system:serviceaccount:{}:{user} may start pods as in namespace {}; use {allowed}",
            ns.name, ns.name
        )
    };
    for account in PLATFORM_ACCOUNTS
        .into_iter()
        .chain(["notebook-hub-notebook"])
    {
        let status = refusal(&notebook, &ns.name, tfjob("t", account))
            .await
            .unwrap_or_else(|| panic!("a notebook's TFJob running as {account} was admitted"));
        assert_eq!(status.code, 403, "{status:?}");
        let wanted = says("notebook-hub-notebook", account, "default");
        assert!(status.message.contains(&wanted), "{}", status.message);
    }
    let [_, pod] = workloads("gateway");
    let status = refused(&hub, &ns.name, pod, &dry_run)
        .await
        .expect("the hub's pod running as gateway was admitted");
    let wanted = says("notebook-hub", "gateway", "notebook-hub-notebook");
    assert!(status.message.contains(&wanted), "{}", status.message);

    let [_, notebook_pod] = workloads("notebook-hub-notebook");
    for (what, client, object) in [
        (
            "a notebook's TFJob as default",
            &notebook,
            tfjob("mine", "default"),
        ),
        ("the hub's notebook pod", &hub, notebook_pod),
        (
            "the administrator's TFJob as gateway",
            &ns.client,
            tfjob("admin", "gateway"),
        ),
    ] {
        assert_eq!(
            refused(client, &ns.name, object, &dry_run).await,
            None,
            "{what}"
        );
    }
}
