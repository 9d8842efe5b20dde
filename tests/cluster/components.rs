//! The platform components and the training-job prototypes against the real control plane.
//!
//! Every component of a fresh `mlkube init` app, in every shipped environment, passes a
//! server-side dry-run apply with strict field validation (so a misspelt field is a rejection,
//! not a silently dropped value), after the CRDs it ships are applied for real. Istio's
//! VirtualService and DestinationRule, which the test cluster does not run, are checked against
//! a minimal typed CRD of each that the test installs. Then `local` is applied for real and its
//! Deployments and StatefulSets must reach their desired replicas on the kwok nodes. The
//! training-job prototypes, which `init` does not add, are dry-run the same way as components
//! added with the CLI.
//!
//! These tests use kube's dynamic API directly, not mlkube's own apply, so they check the
//! components and nothing else.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, TypeMeta};
use kube::core::DynamicObject;
use kube::discovery::{Discovery, Scope};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use mlkube::app::App;
use mlkube::render::manifest::{Manifest, Object};
use serde_json::{Value, json};

use crate::support::{TestNamespace, eventually, lock_shared_cluster_objects};

const ENVIRONMENTS: [&str; 3] = ["local", "dev", "prod"];
/// The component instances `mlkube init` creates, one per prototype.
const COMPONENTS: [&str; 5] = [
    "training-operator",
    "notebook-hub",
    "object-store",
    "mnist",
    "volume-controller",
];
/// Those that come up on kwok's nodes by themselves: the object store's pod waits for its
/// claim, which no provisioner binds there (the real-node tests run it), and mnist's
/// InferenceService runs once the operator serves it (deploy.rs runs it with the controller).
const ON_KWOK: [&str; 3] = ["training-operator", "notebook-hub", "volume-controller"];
/// A component of the serving prototype, which `init` does not add, with the Istio canary in
/// prod: (param, value) in prod.
const SERVING: (&str, [(&str, &str); 7]) = (
    "resnet",
    [
        ("replicas", "2"),
        ("minAvailable", "1"),
        ("numGpus", "1"),
        ("istio", "true"),
        ("trafficRule", "v1:90,v2:10"),
        ("cpuLimit", "4"),
        ("memoryLimit", "4Gi"),
    ],
);
/// mlkube's own field manager, so that the shared CRDs these tests apply stay appliable by
/// `mlkube apply` in the other tests without `--force-conflicts`.
const MANAGER: &str = "mlkube";
const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn every_component_in_every_environment_passes_a_server_side_dry_run() {
    let _shared = lock_shared_cluster_objects().await;
    let local = TestNamespace::new("components-dry").await;
    let client = local.client.clone();
    // `init --namespace NS` gives dev and prod the namespaces NS-dev and NS-prod.
    let _dev = named_namespace(&client, &format!("{}-dev", local.name)).await;
    let _prod = named_namespace(&client, &format!("{}-prod", local.name)).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app_dir = dir.path().join("app");
    init_app(&app_dir, &local.name);
    let (serving, prod_params) = SERVING;
    mlkube_in(&app_dir, &["component", "add", "serving", serving]);
    for (param, value) in prod_params {
        mlkube_in(
            &app_dir,
            &["param", "set", serving, param, value, "--env", "prod"],
        );
    }
    let app = App::load(&app_dir).expect("the app loads");

    let mut rendered = Vec::new();
    for env in ENVIRONMENTS {
        for component in COMPONENTS.into_iter().chain([serving]) {
            rendered.push((env, component, render(&app, env, component)));
        }
    }
    let crds: Vec<&Object> = rendered
        .iter()
        .flat_map(|(_, _, manifest)| &manifest.objects)
        .filter(|object| object.kind() == "CustomResourceDefinition")
        .collect();
    let crd_names: BTreeSet<&str> = crds.iter().map(|crd| crd.name()).collect();
    assert_eq!(
        crd_names,
        BTreeSet::from([
            "jaxjobs.kubeflow.org",
            "mpijobs.kubeflow.org",
            "mxjobs.kubeflow.org",
            "paddlejobs.kubeflow.org",
            "pytorchjobs.kubeflow.org",
            "tfjobs.kubeflow.org",
            "xgboostjobs.kubeflow.org",
            "volumemanagers.kvc.kubeflow.org",
            "frameworks.frameworkcontroller.microsoft.com",
            "inferenceservices.serving.kserve.io",
            "servingruntimes.serving.kserve.io",
            "clusterservingruntimes.serving.kserve.io"
        ]),
        "the components should ship exactly these CRDs"
    );
    for crd in crds {
        install_crd(&client, &crd.value).await;
    }
    for crd in istio_crds() {
        install_crd(&client, &crd).await;
    }

    let kinds: Vec<TypeMeta> = rendered
        .iter()
        .flat_map(|(_, _, manifest)| &manifest.objects)
        .map(type_meta)
        .collect();
    let discovery = discover(&client, &kinds).await;
    let dry_run = PatchParams::apply(MANAGER)
        .force()
        .dry_run()
        .validation_strict();

    let mut checked = 0;
    let mut rejections = Vec::new();
    let mut istio_kinds = BTreeSet::new();
    for (env, component, manifest) in &rendered {
        assert!(
            !manifest.objects.is_empty(),
            "{component} rendered nothing for {env}"
        );
        for object in manifest
            .objects
            .iter()
            .filter(|o| o.kind() != "CustomResourceDefinition")
        {
            if object.api_version().starts_with("networking.istio.io/") {
                istio_kinds.insert(format!("{} in {env}", object.kind()));
            }
            checked += 1;
            if let Err(message) = apply(&client, &discovery, object, &dry_run).await {
                rejections.push(format!(
                    "{env}/{component}: {} {}: {message}",
                    object.kind(),
                    object.name()
                ));
            }
        }
    }
    // Other tests see a cluster without Istio, as the local cluster is.
    for crd in istio_crds() {
        remove_crd(&client, &crd).await;
    }
    assert!(
        rejections.is_empty(),
        "{} of {checked} objects were rejected:\n{}",
        rejections.len(),
        rejections.join("\n")
    );
    // prod turns the serving component's Istio canary on, the others leave it off.
    assert_eq!(
        istio_kinds,
        BTreeSet::from([
            "DestinationRule in prod".to_owned(),
            "VirtualService in prod".to_owned()
        ]),
    );
    eprintln!(
        "{checked} objects of {} components x {} environments passed",
        COMPONENTS.len() + 1,
        ENVIRONMENTS.len()
    );
}

#[tokio::test]
async fn local_environment_comes_up_on_the_kwok_nodes() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("components-local").await;
    let client = ns.client.clone();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(&dir.path().join("app"), &ns.name);
    let manifests: Vec<Manifest> = ON_KWOK.iter().map(|c| render(&app, "local", c)).collect();
    let objects: Vec<&Object> = manifests.iter().flat_map(|m| &m.objects).collect();
    let _cluster_scoped = ClusterScopedCleanup::of(&objects);

    for crd in objects
        .iter()
        .filter(|o| o.kind() == "CustomResourceDefinition")
    {
        install_crd(&client, &crd.value).await;
    }
    let kinds: Vec<TypeMeta> = objects.iter().map(|o| type_meta(o)).collect();
    let discovery = discover(&client, &kinds).await;
    let apply_for_real = PatchParams::apply(MANAGER).force().validation_strict();
    for object in objects
        .iter()
        .filter(|o| o.kind() != "CustomResourceDefinition")
    {
        if let Err(message) = apply(&client, &discovery, object, &apply_for_real).await {
            panic!(
                "applying {} {} of {}: {message}",
                object.kind(),
                object.name(),
                object.component
            );
        }
    }

    let workloads: Vec<(&str, &str, &str)> = objects
        .iter()
        .filter(|o| matches!(o.kind(), "Deployment" | "StatefulSet"))
        .map(|o| (o.component.as_str(), o.kind(), o.name()))
        .collect();
    let components: BTreeSet<&str> = workloads
        .iter()
        .map(|(component, _, _)| *component)
        .collect();
    assert_eq!(
        components,
        BTreeSet::from(ON_KWOK),
        "every component should run a Deployment or StatefulSet: {workloads:?}"
    );
    for (component, kind, name) in workloads {
        let what = format!(
            "{component}'s {kind} {name} in {} to reach its desired replicas",
            ns.name
        );
        let (ready, desired) =
            eventually(&what, TIMEOUT, || rollout(&client, &ns.name, kind, name)).await;
        assert_eq!(ready, desired);
        assert!(desired >= 1, "{kind} {name} wants no replicas");
    }
    // The operator runs cluster-wide: another test's apply of one refuses while it exists, so
    // it goes before the lock does (the namespace is deleted in the background).
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns.name);
    deployments
        .delete("training-operator", &DeleteParams::foreground())
        .await
        .expect("the operator's Deployment is deleted");
    eventually("the operator's Deployment to be gone", TIMEOUT, || async {
        (deployments
            .get_opt("training-operator")
            .await
            .ok()?
            .is_none())
        .then_some(())
    })
    .await;
}

/// The training-job prototypes, which `init` does not add: a tf-job and a tf-job-sweep component
/// made with the CLI, small in `local` and distributed (a sweep of 6) in `prod`, pass a
/// server-side dry run with strict field validation against the real TFJob CRD. That CRD keeps
/// pod templates as they are, so each replica's template is dry-run as the Pod the operator
/// would create from it, too.
#[tokio::test]
async fn training_job_components_pass_a_server_side_dry_run_against_the_tfjob_crd() {
    let _shared = lock_shared_cluster_objects().await;
    let local = TestNamespace::new("components-train").await;
    let client = local.client.clone();
    let _prod = named_namespace(&client, &format!("{}-prod", local.name)).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app_dir = dir.path().join("app");
    init_app(&app_dir, &local.name);
    let prod_params: [(&str, &str); 10] = [
        ("chiefReplicas", "1"),
        ("psReplicas", "2"),
        ("workerReplicas", "4"),
        ("evaluatorReplicas", "1"),
        ("gpus", "1"),
        ("restartPolicy", "ExitCode"),
        ("backoffLimit", "3"),
        ("ttlSecondsAfterFinished", "600"),
        ("env", r#"{"TF_CPP_MIN_LOG_LEVEL": 2}"#),
        ("command", r#"["python", "/opt/train.py"]"#),
    ];
    mlkube_in(
        &app_dir,
        &[
            "component",
            "add",
            "tf-job",
            "train",
            "--param",
            "args=[\"--epochs=1\"]",
        ],
    );
    for (key, value) in prod_params {
        mlkube_in(
            &app_dir,
            &["param", "set", "train", key, value, "--env", "prod"],
        );
    }
    mlkube_in(&app_dir, &["component", "add", "tf-job-sweep", "sweep"]);
    mlkube_in(
        &app_dir,
        &[
            "param",
            "set",
            "sweep",
            "grid",
            r#"{"learningRate": [0.01]}"#,
            "--env",
            "local",
        ],
    );
    mlkube_in(
        &app_dir,
        &["param", "set", "sweep", "suspend", "true", "--env", "prod"],
    );
    let app = App::load(&app_dir).unwrap_or_else(|e| panic!("loading the app: {}", chain(&e)));

    let crd_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/tfjobs.kubeflow.org.yaml");
    let crd: Value =
        serde_yaml::from_str(&std::fs::read_to_string(&crd_file).expect("the CRD file"))
            .expect("the CRD file is YAML");
    install_crd(&client, &crd).await;
    for namespace in [local.name.clone(), format!("{}-prod", local.name)] {
        // Pods are admitted only once the namespace's default ServiceAccount exists.
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &namespace);
        eventually(
            &format!("the default ServiceAccount of {namespace}"),
            TIMEOUT,
            || async { accounts.get_opt("default").await.ok().flatten() },
        )
        .await;
    }

    let mut objects = Vec::new();
    for env in ["local", "prod"] {
        for component in ["train", "sweep"] {
            let jobs = render(&app, env, component).objects;
            let counted = (env, component, jobs.len());
            assert!(
                [
                    ("local", "train", 1),
                    ("local", "sweep", 1),
                    ("prod", "train", 1),
                    ("prod", "sweep", 6)
                ]
                .contains(&counted),
                "{counted:?}"
            );
            for job in jobs {
                assert_eq!(job.kind(), "TFJob");
                objects.extend(pods_of(&job));
                objects.push(job);
            }
        }
    }
    let kinds: Vec<TypeMeta> = objects.iter().map(type_meta).collect();
    let discovery = discover(&client, &kinds).await;
    let dry_run = PatchParams::apply(MANAGER)
        .force()
        .dry_run()
        .validation_strict();
    let mut rejections = Vec::new();
    for object in &objects {
        if let Err(message) = apply(&client, &discovery, object, &dry_run).await {
            rejections.push(format!(
                "{} {}/{}: {message}",
                object.kind(),
                object.namespace().unwrap_or_default(),
                object.name()
            ));
        }
    }
    let pods = objects.iter().filter(|o| o.kind() == "Pod").count();
    assert!(
        rejections.is_empty(),
        "{} of {} objects were rejected:\n{}",
        rejections.len(),
        objects.len(),
        rejections.join("\n")
    );
    // local: 1 worker per job; prod: train has 4 types, the sweep's 6 jobs 1 worker each.
    assert_eq!(pods, 2 + 4 + 6, "one Pod per replica type of each job");
    eprintln!(
        "{} TFJobs and {pods} pod templates passed",
        objects.len() - pods
    );
}

/// Each replica type's first pod as the operator creates it from the TFJob: the template with
/// the replica's restart policy (ExitCode runs as Never), named `<job>-<type>-0`.
fn pods_of(job: &Object) -> Vec<Object> {
    let specs = job.value["spec"]["tfReplicaSpecs"]
        .as_object()
        .expect("tfReplicaSpecs");
    specs
        .iter()
        .map(|(replica_type, spec)| {
            let template = &spec["template"];
            let restart = match spec["restartPolicy"].as_str() {
                Some("ExitCode") | None => "Never",
                Some(policy) => policy,
            };
            let mut pod_spec = template["spec"].clone();
            pod_spec["restartPolicy"] = json!(restart);
            Object {
                component: job.component.clone(),
                value: json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": format!("{}-{}-0", job.name(), replica_type.to_lowercase()),
                        "namespace": job.namespace(),
                        "labels": template["metadata"]["labels"],
                        "annotations": template["metadata"].get("annotations").cloned().unwrap_or(json!({})),
                    },
                    "spec": pod_spec,
                }),
            }
        })
        .collect()
}

/// Run `mlkube` in the app's directory, as a user types it; it must succeed.
fn mlkube_in(dir: &Path, args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the mlkube binary runs");
    assert!(
        output.status.success(),
        "mlkube {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `(ready, desired)` replicas once a Deployment or StatefulSet has rolled out its current spec.
async fn rollout(client: &Client, namespace: &str, kind: &str, name: &str) -> Option<(i32, i32)> {
    let (generation, desired, observed, ready, updated) = match kind {
        "Deployment" => {
            let d = Api::<Deployment>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .ok()?;
            let status = d.status.unwrap_or_default();
            let desired = d.spec.and_then(|s| s.replicas).unwrap_or(1);
            (
                d.metadata.generation,
                desired,
                status.observed_generation,
                status.ready_replicas,
                status.updated_replicas,
            )
        }
        _ => {
            let s = Api::<StatefulSet>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .ok()?;
            let status = s.status.unwrap_or_default();
            let desired = s.spec.and_then(|s| s.replicas).unwrap_or(1);
            (
                s.metadata.generation,
                desired,
                status.observed_generation,
                status.ready_replicas,
                status.updated_replicas,
            )
        }
    };
    let done =
        observed >= generation && ready.unwrap_or(0) == desired && updated.unwrap_or(0) == desired;
    done.then_some((ready.unwrap_or(0), desired))
}

/// Create the app the way a user does, with the binary, and load it through the library.
fn init_app(dir: &Path, namespace: &str) -> App {
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .arg("init")
        .arg(dir)
        .args(["--namespace", namespace])
        .output()
        .expect("the mlkube binary runs");
    assert!(
        output.status.success(),
        "mlkube init {} --namespace {namespace} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    App::load(dir).unwrap_or_else(|e| panic!("loading the app mlkube init made: {}", chain(&e)))
}

fn render(app: &App, env: &str, component: &str) -> Manifest {
    app.render(env, &[component.to_owned()])
        .unwrap_or_else(|e| panic!("rendering {component} for {env}: {}", chain(&e)))
}

fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn type_meta(object: &Object) -> TypeMeta {
    TypeMeta {
        api_version: object.api_version().to_owned(),
        kind: object.kind().to_owned(),
    }
}

/// Discovery that knows every kind rendered; CRDs just established can take a moment to show.
async fn discover(client: &Client, kinds: &[TypeMeta]) -> Discovery {
    eventually(
        "API discovery to list every rendered kind",
        TIMEOUT,
        || async {
            let discovery = Discovery::new(client.clone()).run().await.ok()?;
            kinds
                .iter()
                .all(|kind| discovery.resolve_typemeta(kind).is_some())
                .then_some(discovery)
        },
    )
    .await
}

/// Server-side apply one object (as dry run or for real); the API server's message on failure.
async fn apply(
    client: &Client,
    discovery: &Discovery,
    object: &Object,
    params: &PatchParams,
) -> Result<DynamicObject, String> {
    let (resource, capabilities) = discovery
        .resolve_typemeta(&type_meta(object))
        .ok_or_else(|| format!("the cluster does not serve {}", object.api_version()))?;
    let api: Api<DynamicObject> = match (capabilities.scope, object.namespace()) {
        (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
        (Scope::Namespaced, Some(namespace)) => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        (Scope::Cluster, Some(namespace)) => {
            return Err(format!(
                "cluster-scoped, but rendered with namespace {namespace}"
            ));
        }
        (Scope::Namespaced, None) => {
            return Err("namespaced, but rendered without a namespace".to_owned());
        }
    };
    api.patch(object.name(), params, &Patch::Apply(&object.value))
        .await
        .map_err(|error| match error {
            kube::Error::Api(status) => status.message,
            other => other.to_string(),
        })
}

/// Apply a CRD for real and wait until it is Established, so objects of its kinds validate.
async fn install_crd(client: &Client, crd: &Value) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let name = crd["metadata"]["name"]
        .as_str()
        .expect("a CRD has a name")
        .to_owned();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("installing CRD {name}: {e}"));
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("CRD {name} was not Established within {TIMEOUT:?}"))
    .unwrap_or_else(|e| panic!("watching CRD {name}: {e}"));
}

/// Delete a CRD this test installed and wait until it is gone.
async fn remove_crd(client: &Client, crd: &Value) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let name = crd["metadata"]["name"].as_str().expect("a CRD has a name");
    let uid = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading CRD {name}: {e}"))
        .metadata
        .uid;
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting CRD {name}: {e}"));
    let uid = uid.unwrap_or_default();
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, name, conditions::is_deleted(&uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("CRD {name} was not gone within {TIMEOUT:?}"))
    .unwrap_or_else(|e| panic!("watching CRD {name}: {e}"));
}

/// A namespace with a given name, deleted on drop like the harness's own.
async fn named_namespace(client: &Client, name: &str) -> TestNamespace {
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "mlkube.io/test": "true" } }
    }))
    .expect("a valid Namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("cannot create test namespace {name}: {e}"));
    TestNamespace {
        client: client.clone(),
        name: name.to_owned(),
    }
}

/// Deletes the ClusterRoles and ClusterRoleBindings a real apply made (their names carry the
/// test namespace, so they are this test's alone), and the ClusterServingRuntimes, which an
/// `mlkube apply` shares (this test applies them as no app's, so no app could claim them after).
/// CRDs and the StorageClass are shared by every app on the cluster and stay, as they would
/// after `mlkube delete` of one environment.
struct ClusterScopedCleanup {
    roles: Vec<String>,
    bindings: Vec<String>,
    runtimes: Vec<String>,
}

impl ClusterScopedCleanup {
    fn of(objects: &[&Object]) -> Self {
        let named = |kind: &str| -> Vec<String> {
            objects
                .iter()
                .filter(|o| o.kind() == kind)
                .map(|o| o.name().to_owned())
                .collect()
        };
        ClusterScopedCleanup {
            roles: named("ClusterRole"),
            bindings: named("ClusterRoleBinding"),
            runtimes: named("ClusterServingRuntime"),
        }
    }
}

impl Drop for ClusterScopedCleanup {
    fn drop(&mut self) {
        let roles = std::mem::take(&mut self.roles);
        let bindings = std::mem::take(&mut self.bindings);
        let runtimes = std::mem::take(&mut self.runtimes);
        // Drop cannot await: delete from a thread with a runtime of its own, and with a client of
        // its own, since the test's client has its connections on the test's (blocked) runtime.
        let deleted = std::thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let client = crate::support::client().await;
                let params = DeleteParams::background();
                for name in &bindings {
                    let api = Api::<ClusterRoleBinding>::all(client.clone());
                    api.delete(name, &params)
                        .await
                        .map_err(|e| format!("ClusterRoleBinding {name}: {e}"))?;
                }
                for name in &roles {
                    let api = Api::<ClusterRole>::all(client.clone());
                    api.delete(name, &params)
                        .await
                        .map_err(|e| format!("ClusterRole {name}: {e}"))?;
                }
                let runtime = kube::api::ApiResource::from_gvk_with_plural(
                    &kube::api::GroupVersionKind::gvk(
                        "serving.kserve.io",
                        "v1alpha1",
                        "ClusterServingRuntime",
                    ),
                    "clusterservingruntimes",
                );
                for name in &runtimes {
                    Api::<DynamicObject>::all_with(client.clone(), &runtime)
                        .delete(name, &params)
                        .await
                        .map_err(|e| format!("ClusterServingRuntime {name}: {e}"))?;
                }
                Ok(())
            })
        })
        .join();
        if let Ok(Err(e)) = deleted {
            eprintln!("warning: could not delete {e}");
        }
    }
}

/// Minimal CRDs for the Istio kinds the serving prototype renders: `networking.istio.io/v1` VirtualService
/// and DestinationRule, typed for the fields the component uses. With strict field validation a
/// field Istio does not have (or has elsewhere) is a rejection.
fn istio_crds() -> [Value; 2] {
    let string = json!({ "type": "string" });
    let strings = json!({ "type": "array", "items": { "type": "string" } });
    let destination = json!({
        "type": "object",
        "required": ["host"],
        "properties": {
            "host": string,
            "subset": string,
            "port": { "type": "object", "properties": { "number": { "type": "integer", "minimum": 0, "maximum": 65535 } } },
        },
    });
    let string_match = json!({
        "type": "object",
        "properties": { "exact": string, "prefix": string, "regex": string },
    });
    let virtual_service = json!({
        "type": "object",
        "properties": {
            "hosts": strings,
            "gateways": strings,
            "http": { "type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": string,
                    "match": { "type": "array", "items": {
                        "type": "object",
                        "properties": { "uri": string_match, "port": { "type": "integer" } },
                    } },
                    "rewrite": { "type": "object", "properties": { "uri": string, "authority": string } },
                    "route": { "type": "array", "items": {
                        "type": "object",
                        "required": ["destination"],
                        "properties": {
                            "destination": destination,
                            "weight": { "type": "integer", "minimum": 0, "maximum": 100 },
                        },
                    } },
                    "timeout": string,
                },
            } },
        },
    });
    let destination_rule = json!({
        "type": "object",
        "required": ["host"],
        "properties": {
            "host": string,
            "subsets": { "type": "array", "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": string,
                    "labels": { "type": "object", "additionalProperties": string },
                },
            } },
        },
    });
    let crd = |kind: &str, plural: &str, spec: Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("{plural}.networking.istio.io") },
            "spec": {
                "group": "networking.istio.io",
                "scope": "Namespaced",
                "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List") },
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": {
                        "type": "object",
                        "properties": { "spec": spec },
                    } },
                }],
            },
        })
    };
    [
        crd("VirtualService", "virtualservices", virtual_service),
        crd("DestinationRule", "destinationrules", destination_rule),
    ]
}
