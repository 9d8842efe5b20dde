//! `mlkube status` against the real control plane: an app with a hyperparameter sweep applied,
//! its jobs driven to the end by the operator binary and the kwok stages (no hand patching),
//! and the status reporting them, a failed job, drift and its repair.
//!
//! Each test has its own namespace, app and operator, so they run in parallel.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::operator_identity::{Access, NamespaceOperator, Scope};
use crate::support::{
    TestNamespace, empty_app, eventually, lock_shared_cluster_objects, mlkube, mlkube_ok,
};

/// An upper bound only: the kwok stages end a training pod after 5 s; a loaded 2-core machine
/// needs room for the operator and six jobs.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The TFJob CRD from `crds/`, as the repository ships it, applied and Established.
async fn install_tfjob_crd(client: &Client) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/tfjobs.kubeflow.org.yaml");
    let text = std::fs::read_to_string(&path).expect("crds/ holds the TFJob CRD");
    let crd: Value = serde_yaml::from_str(&text).expect("the CRD is YAML");
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.patch(
        "tfjobs.kubeflow.org",
        &PatchParams::apply("mlkube-status-tests").force(),
        &Patch::Apply(crd),
    )
    .await
    .expect("the TFJob CRD applies");
    let established = await_condition(
        crds,
        "tfjobs.kubeflow.org",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(TIMEOUT, established)
        .await
        .expect("the TFJob CRD became Established in time")
        .expect("watching the CRD");
}

/// A namespace with the TFJob CRD and an operator, and a new app with no components whose
/// `local` environment is that namespace.
struct Scenario {
    // Fields drop in order: the operator stops before the namespace goes.
    _operator: NamespaceOperator,
    ns: TestNamespace,
    app: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Scenario {
    async fn new(prefix: &str) -> Scenario {
        let ns = TestNamespace::new(prefix).await;
        install_tfjob_crd(&ns.client).await;
        let operator = NamespaceOperator::start(&ns, Access::scoped(Scope::Namespace)).await;
        let (dir, app) = empty_app(&ns);
        Scenario {
            _operator: operator,
            ns,
            app,
            _dir: dir,
        }
    }
}

/// `mlkube status local -o json`, with its exit code.
fn status(app: &Path) -> (Option<i32>, Value) {
    let output = mlkube(app, &["status", "local", "-o", "json"]);
    let data = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "status -o json printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), data)
}

fn tfjobs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubeflow.org", "v1", "TFJob");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// The last true condition of each TFJob in the namespace, once every one has one in `ends`.
async fn await_jobs_end(client: &Client, namespace: &str, count: usize, ends: &[&str]) {
    let jobs = tfjobs(client, namespace);
    eventually(
        &format!("{count} TFJobs in {namespace} to end in one of {ends:?}"),
        TIMEOUT,
        || async {
            let list = jobs.list(&Default::default()).await.ok()?;
            let ended = list
                .items
                .iter()
                .filter(|job| {
                    job.data["status"]["conditions"]
                        .as_array()
                        .and_then(|c| c.iter().rev().find(|c| c["status"] == "True"))
                        .is_some_and(|c| ends.iter().any(|end| c["type"] == *end))
                })
                .count();
            (list.items.len() == count && ended == count).then_some(())
        },
    )
    .await;
}

/// A tf-job component whose pods exit with code 1, through the kwok stage's annotation: the
/// prototype sets no pod annotations, so the component's file adds it, as a user would.
const FAILING_JOB: &str = r#"local component = import 'mlkube/component.libsonnet';
local exitOne = { metadata+: { annotations+: { 'mlkube.io/simulate-exit-code': '1' } } };
[
  job { spec+: { tfReplicaSpecs: {
    [type]: job.spec.tfReplicaSpecs[type] { template+: exitOne }
    for type in std.objectFields(job.spec.tfReplicaSpecs)
  } } }
  for job in (import 'mlkube/tf-job.libsonnet').render(component.params, component.env)
]
"#;

#[tokio::test]
async fn a_sweep_of_six_jobs_succeeds_and_status_reports_each_then_a_failed_job() {
    let test = Scenario::new("status-sweep").await;
    let (ns, app) = (&test.ns, test.app.as_path());

    let never = mlkube(app, &["status", "local"]);
    let stderr = String::from_utf8_lossy(&never.stderr);
    assert_eq!(never.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("never applied"), "{stderr}");
    assert!(never.stdout.is_empty());

    // The prototype's default grid: 2 learning rates x 3 depths.
    mlkube_ok(app, &["component", "add", "tf-job-sweep", "sweep"]);
    mlkube_ok(app, &["apply", "local", "--timeout", "60s"]);
    await_jobs_end(&ns.client, &ns.name, 6, &["Succeeded", "Failed"]).await;

    let (code, data) = status(app);
    assert_eq!(code, Some(0), "{data:#}");
    let members = data["members"].as_array().expect("members");
    assert_eq!(members.len(), 6, "{data:#}");
    for member in members {
        assert_eq!(member["kind"], "TFJob", "{member:#}");
        assert_eq!(member["component"], "sweep", "{member:#}");
        assert_eq!(member["state"], "healthy", "{member:#}");
        assert_eq!(member["condition"], "Succeeded", "{member:#}");
        assert_eq!(member["drifted"], false, "{member:#}");
    }
    assert_eq!(data["summary"]["healthy"], 6);
    let last = &data["last_apply"];
    assert!(
        last["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{last:#}"
    );
    assert_eq!(
        last["tooling"],
        format!("mlkube/v{}", env!("CARGO_PKG_VERSION"))
    );
    // A temporary directory is no git repository.
    assert_eq!(last["commit"], Value::Null);
    let text = mlkube_ok(app, &["status", "local"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert_eq!(
        text.lines().filter(|l| l.contains(" healthy ")).count(),
        6,
        "{text}"
    );
    assert!(
        text.contains("6 members: 6 healthy, 0 progressing, 0 failed, 0 missing; 0 drifted"),
        "{text}"
    );

    mlkube_ok(app, &["component", "add", "tf-job", "broken"]);
    std::fs::write(app.join("components/broken.jsonnet"), FAILING_JOB).expect("writing");
    mlkube_ok(app, &["apply", "local", "--timeout", "60s"]);
    await_jobs_end(&ns.client, &ns.name, 7, &["Succeeded", "Failed"]).await;

    let (code, data) = status(app);
    assert_eq!(code, Some(3), "{data:#}");
    let broken: Vec<&Value> = data["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|m| m["state"] != "healthy")
        .collect();
    assert_eq!(broken.len(), 1, "{data:#}");
    assert_eq!(broken[0]["name"], "broken", "{data:#}");
    assert_eq!(broken[0]["state"], "failed");
    assert_eq!(broken[0]["condition"], "Failed");
    let reason = broken[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("exit"),
        "the reason names the exit: {reason}"
    );
    assert_eq!(data["summary"]["failed"], 1);
    assert_eq!(data["summary"]["healthy"], 6);
}

#[tokio::test]
async fn a_change_by_another_field_manager_is_drift_until_the_next_apply() {
    let test = Scenario::new("status-drift").await;
    let (ns, app) = (&test.ns, test.app.as_path());
    mlkube_ok(app, &["component", "add", "tf-job", "train"]);
    mlkube_ok(app, &["apply", "local", "--timeout", "60s"]);
    await_jobs_end(&ns.client, &ns.name, 1, &["Succeeded"]).await;
    let (code, data) = status(app);
    assert_eq!(code, Some(0), "{data:#}");

    // As `kubectl label --overwrite` or `kubectl edit` would: another manager, a field mlkube set.
    let jobs = tfjobs(&ns.client, &ns.name);
    let edit = json!({"metadata": {"labels": {"app.kubernetes.io/name": "edited"}}});
    jobs.patch(
        "train",
        &PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..Default::default()
        },
        &Patch::Merge(&edit),
    )
    .await
    .expect("patching the TFJob");
    let (code, data) = status(app);
    assert_eq!(code, Some(1), "{data:#}");
    let member = &data["members"][0];
    assert_eq!(member["name"], "train");
    assert_eq!(member["drift"], "changed", "{member:#}");
    assert_eq!(member["drifted"], true);
    assert_eq!(member["state"], "healthy", "{member:#}");

    // Another manager owns the field now: taking it back is a conscious --force-conflicts.
    mlkube_ok(
        app,
        &["apply", "local", "--force-conflicts", "--timeout", "60s"],
    );
    let (code, data) = status(app);
    assert_eq!(code, Some(0), "{data:#}");
    assert_eq!(data["members"][0]["drift"], "none", "{data:#}");

    // A member deleted behind mlkube's back is drift too, and not healthy.
    jobs.delete("train", &DeleteParams::default())
        .await
        .expect("deleting the TFJob");
    eventually("the TFJob to be gone", TIMEOUT, || async {
        jobs.get_opt("train")
            .await
            .ok()
            .and_then(|job| job.is_none().then_some(()))
    })
    .await;
    let (code, data) = status(app);
    assert_eq!(code, Some(3), "{data:#}");
    assert_eq!(data["members"][0]["state"], "missing", "{data:#}");
    assert_eq!(data["members"][0]["drift"], "missing", "{data:#}");
}

#[tokio::test]
async fn status_after_delete_with_its_namespace_says_the_namespace_is_gone_not_never_applied() {
    let ns = TestNamespace::new("status-ns-gone").await;
    let (_dir, app) = empty_app(&ns);
    std::fs::write(
        app.join("components/settings.jsonnet"),
        "[{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings' }, data: { k: 'v' } }]\n",
    )
    .expect("the component is written");
    mlkube_ok(&app, &["apply", "local"]);
    mlkube_ok(&app, &["delete", "local", "--delete-namespace", "--yes"]);
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(ns.client.clone());
    eventually("the namespace to be gone", TIMEOUT, || async {
        let gone = namespaces.get_opt(&ns.name).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;

    let output = mlkube(&app, &["status", "local"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "environment `local` is not applied to this cluster: its namespace `{}` does not \
             exist (it may have been deleted with it, by `mlkube delete local --delete-namespace`)",
            ns.name
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("never applied"), "{stderr}");
}

/// A ServingRuntime, a kind KServe's group serves at v1alpha1 while the group's preferred
/// version (its InferenceService's) is v1beta1.
const RUNTIME: &str = r#"
local component = import 'mlkube/component.libsonnet';
{
  apiVersion: 'serving.kserve.io/v1alpha1',
  kind: 'ServingRuntime',
  metadata: { name: 'runtime', namespace: component.env.namespace },
  spec: {
    supportedModelFormats: [{ name: 'xgboost', autoSelect: true }],
    containers: [{ name: 'kserve-container', image: 'example/server:1' }],
  },
}
"#;

/// The members of a kind off its group's preferred version are found like any other: the
/// status holds the runtime healthy (it said "missing", exit 3), and a prune deletes it once
/// the app no longer renders it (it was left behind).
#[tokio::test]
async fn a_kind_off_its_groups_preferred_version_is_a_member_status_sees_and_prune_deletes() {
    let ns = TestNamespace::new("status-versions").await;
    {
        let _shared = lock_shared_cluster_objects().await;
        crate::inference_service::install_crds(&ns).await;
    }
    let (_dir, app) = empty_app(&ns);
    let component = app.join("components/runtime.jsonnet");
    std::fs::write(&component, RUNTIME).expect("write the component");
    mlkube_ok(&app, &["apply", "local"]);
    let (code, data) = status(&app);
    assert_eq!(code, Some(0), "{data:#}");
    let members = data["members"].as_array().expect("members");
    assert_eq!(members.len(), 1, "{data:#}");
    assert_eq!(members[0]["kind"], "ServingRuntime", "{data:#}");
    assert_eq!(members[0]["state"], "healthy", "{data:#}");

    std::fs::remove_file(&component).expect("remove the component");
    let prune = ["apply", "local", "--prune", "--yes", "--allow-empty"];
    mlkube_ok(&app, &prune);
    let gvk = GroupVersionKind::gvk("serving.kserve.io", "v1alpha1", "ServingRuntime");
    let runtimes: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk(&gvk));
    eventually("the runtime to be pruned", TIMEOUT, || async {
        runtimes
            .get_opt("runtime")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}
