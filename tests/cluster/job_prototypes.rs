//! The training-job prototypes against the real control plane: an app with the operator component
//! and a job of every framework, applied by `mlkube apply`, and each job driven to Succeeded by
//! the operator binary (running as that component's ServiceAccount) and the kwok stages, which
//! end every training pod after 5 s with exit code 0.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

use crate::operator_identity::{Access, NamespaceOperator, Scope};
use crate::support::{self, TestNamespace, empty_app, eventually, mlkube_ok};

/// An upper bound only: a job's pods end after 5 s; a loaded 2-core machine needs room for the
/// operator and seven jobs of up to three pods.
const TIMEOUT: Duration = Duration::from_secs(180);

/// Each job prototype, the component made from it, the kind of job it renders and its CRD.
const JOBS: [(&str, &str, &str, &str); 7] = [
    ("tf-job", "tf", "TFJob", "tfjobs.kubeflow.org"),
    (
        "pytorch-job",
        "pytorch",
        "PyTorchJob",
        "pytorchjobs.kubeflow.org",
    ),
    ("jax-job", "jax", "JAXJob", "jaxjobs.kubeflow.org"),
    (
        "xgboost-job",
        "xgboost",
        "XGBoostJob",
        "xgboostjobs.kubeflow.org",
    ),
    (
        "paddle-job",
        "paddle",
        "PaddleJob",
        "paddlejobs.kubeflow.org",
    ),
    ("mxnet-job", "mxnet", "MXJob", "mxjobs.kubeflow.org"),
    ("mpi-job", "mpi", "MPIJob", "mpijobs.kubeflow.org"),
];

/// The CRDs of the jobs from `crds/`, as the repository ships them, applied and Established.
/// Installed here rather than by the app, whose claim on them would outlive the test's
/// namespace.
async fn install_crds(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for (_, _, _, name) in JOBS {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("crds/{name}.yaml"));
        let text = std::fs::read_to_string(&path).expect("crds/ holds the CRD");
        let crd: Value = serde_yaml::from_str(&text).expect("the CRD is YAML");
        crds.patch(
            name,
            &PatchParams::apply("mlkube-job-prototype-tests").force(),
            &Patch::Apply(crd),
        )
        .await
        .unwrap_or_else(|e| panic!("the CRD {name} applies: {e}"));
        let established = await_condition(crds.clone(), name, conditions::is_crd_established());
        tokio::time::timeout(TIMEOUT, established)
            .await
            .unwrap_or_else(|_| panic!("the CRD {name} became Established in time"))
            .expect("watching the CRD");
    }
}

/// The last condition that is true of job `name` of `kind`, once it is one of `ends`.
async fn await_end(client: &Client, namespace: &str, kind: &str, name: &str) -> String {
    let gvk = GroupVersionKind::gvk("kubeflow.org", "v1", kind);
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk));
    eventually(
        &format!("{kind} {namespace}/{name} to succeed or fail"),
        TIMEOUT,
        || async {
            let job = jobs.get_opt(name).await.ok()??;
            let last = job.data["status"]["conditions"]
                .as_array()?
                .iter()
                .rev()
                .find(|c| c["status"] == "True")?;
            let condition = last["type"].as_str()?;
            matches!(condition, "Succeeded" | "Failed").then(|| {
                format!(
                    "{condition}: {}",
                    last["message"].as_str().unwrap_or_default()
                )
            })
        },
    )
    .await
}

#[tokio::test]
async fn every_job_prototype_applied_by_mlkube_runs_to_succeeded() {
    let ns = TestNamespace::new("job-prototypes").await;
    let (_dir, app) = empty_app(&ns);
    // The operator component, scoped to the test's namespace as the operator below runs; the
    // CRDs, which every test shares, are installed apart.
    mlkube_ok(
        &app,
        &["component", "add", "training-operator", "training-operator"],
    );
    for (key, value) in [("deploymentScope", "namespace"), ("installCrd", "false")] {
        mlkube_ok(&app, &["param", "set", "training-operator", key, value]);
    }
    for (prototype, component, _, _) in JOBS {
        mlkube_ok(&app, &["component", "add", prototype, component]);
    }
    {
        let _shared = support::lock_shared_cluster_objects().await;
        install_crds(&ns.client).await;
    }
    mlkube_ok(&app, &["apply", "local", "--timeout", "90s"]);
    // The component's Deployment cannot run on kwok: its operator runs here, as its
    // ServiceAccount, for the namespace.
    let _operator = NamespaceOperator::start(&ns, Access::scoped(Scope::Namespace)).await;

    for (prototype, component, kind, _) in JOBS {
        let end = await_end(&ns.client, &ns.name, kind, component).await;
        assert!(
            end.starts_with("Succeeded"),
            "the {prototype} component's {kind} ended {end}"
        );
    }
}
