//! The platform the real-node tests share: the default app (`mlkube init`) with its `local`
//! environment's operator applied once by `mlkube apply`, from the image the node imported, and
//! Ready. The app lives in a directory of the test run's own; its namespace is [`NAMESPACE`].

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support;

/// The app's name: its directory's.
pub const APP_NAME: &str = "mlkube-real-node-app";
/// The `local` environment's namespace, where the operator runs.
pub const NAMESPACE: &str = "mlkube-real";
/// The operator's components a default app may have: `training-operator` as `mlkube init` names
/// it, or `tf-job-operator` in an app kept from a run of an older mlkube (the directory outlives
/// the cluster; a component's name is its objects', so it stays).
const OPERATORS: [&str; 2] = ["training-operator", "tf-job-operator"];
/// The image of PyTorch workers' `init-pytorch` container (image/dnsutils/), as the quickstart
/// sets it.
pub const PYTORCH_INIT_IMAGE: &str = concat!("mlkube/dnsutils:", env!("CARGO_PKG_VERSION"));
/// The gateway component: Traefik, its Service a NodePort on GATEWAY_NODE_PORT.
pub const GATEWAY: &str = "gateway";
pub const GATEWAY_NODE_PORT: &str = "30080";
/// The label of the operator's pods: the training-operator prototype's first name, whatever the
/// component's.
const OPERATOR_LABEL: &str = "app.kubernetes.io/name=tf-job-operator";

/// The app, created and its operator applied on first use; every later call waits for that.
pub fn app() -> &'static Path {
    static APP: OnceLock<PathBuf> = OnceLock::new();
    APP.get_or_init(|| {
        // One app for every run against this cluster: a second app of the same name would
        // (rightly) be refused the first one's objects.
        let dir = std::env::temp_dir().join(APP_NAME);
        if !dir.join("app.yaml").exists() {
            let init = mlkube(
                &std::env::temp_dir(),
                &[
                    "init",
                    dir.to_str().expect("a UTF-8 path"),
                    "--namespace",
                    NAMESPACE,
                ],
            );
            assert_success("mlkube init", &init);
        }
        add_missing_components(&dir);
        let operator = operator_of(&dir);
        // PyTorch workers' init container: the image the node holds, not upstream's alpine.
        set_param(&dir, operator, "pytorchInitImage", PYTORCH_INIT_IMAGE, None);
        // The InferenceService controller too, its routes on the gateway, applied first.
        set_param(&dir, operator, "servingGateway", GATEWAY, None);
        apply_gateway(&dir);
        let apply = mlkube(&dir, &["apply", "local", "-c", operator, "--timeout", "5m"]);
        assert_success(&format!("mlkube apply local -c {operator}"), &apply);
        dir
    })
}

/// The gateway component (`gateway`) of the app in `dir`, added unless it is there, set for the tests and
/// applied.
fn apply_gateway(dir: &Path) {
    let listed = mlkube(dir, &["component", "list", "-o", "name"]);
    assert_success("mlkube component list", &listed);
    if !String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.trim() == GATEWAY)
    {
        let add = mlkube(dir, &["component", "add", "gateway", GATEWAY]);
        assert_success("mlkube component add gateway", &add);
    }
    // Routes of every namespace, as docs/local-cluster.md's second app sets it
    // (second_app.rs): set here, before any test sends traffic, since it changes Traefik's
    // arguments and so rolls its pods, which would break a request in flight.
    for (param, value) in [
        ("serviceType", "NodePort"),
        ("nodePort", GATEWAY_NODE_PORT),
        ("replicas", "2"),
        ("routeNamespaces", "All"),
    ] {
        set_param(dir, GATEWAY, param, value, Some("local"));
    }
    let apply = mlkube(dir, &["apply", "local", "-c", GATEWAY, "--timeout", "5m"]);
    assert_success("mlkube apply local -c gateway", &apply);
}

/// The operator component of the app, whose name its Deployment and ServiceAccount have.
pub fn operator() -> &'static str {
    operator_of(app())
}

fn operator_of(dir: &Path) -> &'static str {
    let listed = mlkube(dir, &["component", "list", "-o", "name"]);
    assert_success("mlkube component list", &listed);
    let have = String::from_utf8_lossy(&listed.stdout).into_owned();
    OPERATORS
        .into_iter()
        .find(|operator| have.lines().any(|line| line.trim() == *operator))
        .unwrap_or_else(|| panic!("no operator component ({OPERATORS:?}) in:\n{have}"))
}

/// The components of the default app that an app kept from a run of an older mlkube lacks
/// (the directory outlives the cluster), added as `mlkube init` adds them now.
fn add_missing_components(dir: &Path) {
    let listed = mlkube(dir, &["component", "list", "-o", "name"]);
    assert_success("mlkube component list", &listed);
    let have = String::from_utf8_lossy(&listed.stdout).into_owned();
    for (component, prototype) in [("object-store", "object-store")] {
        if !have.lines().any(|line| line.trim() == component) {
            let add = mlkube(dir, &["component", "add", prototype, component]);
            assert_success("mlkube component add", &add);
        }
    }
}

/// Held while the shared app's files are edited: two edits of its params file at once would
/// lose one.
static EDITS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `edit` (which changes the shared app's files by other means than [`mlkube`]) run while no
/// other test edits them.
pub fn editing<T>(edit: impl FnOnce() -> T) -> T {
    let _edit = EDITS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    edit()
}

/// Run the built binary in `dir` against the test cluster. The verbs that edit the app's files
/// (`component`, `param`) run one at a time: the tests share one app.
pub fn mlkube(dir: &Path, args: &[&str]) -> Output {
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(args)
            .current_dir(dir)
            .env("KUBECONFIG", support::kubeconfig_path())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("the mlkube binary runs")
    };
    if matches!(args.first(), Some(&("component" | "param"))) {
        editing(run)
    } else {
        run()
    }
}

/// `mlkube param set COMPONENT PARAM VALUE` in the app in `dir`: in environment `env`, or in
/// every environment (the component's own params) when `None`.
pub fn set_param(dir: &Path, component: &str, param: &str, value: &str, env: Option<&str>) {
    let mut args = vec!["param", "set", component, param, value];
    if let Some(env) = env {
        args.extend(["--env", env]);
    }
    let set = mlkube(dir, &args);
    assert_success(&format!("mlkube param set {component} {param}"), &set);
}

pub fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The operator's pods in the platform's namespace.
pub async fn operator_pods() -> Vec<Pod> {
    let pods = Api::<Pod>::namespaced(support::client().await, NAMESPACE);
    pods.list(&ListParams::default().labels(OPERATOR_LABEL))
        .await
        .expect("list the operator's pods")
        .items
}

#[tokio::test]
async fn the_operator_runs_in_cluster_from_its_image_as_its_service_account_and_is_ready() {
    app();
    let pods = operator_pods().await;
    assert_eq!(pods.len(), 1, "one operator pod in the local environment");
    let pod = &pods[0];
    let spec = pod.spec.as_ref().expect("a pod has a spec");
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("mlkube/mlkube:0.1.0")
    );
    assert_eq!(spec.service_account_name.as_deref(), Some(operator()));
    let status = pod.status.as_ref().expect("a running pod has a status");
    let container = &status
        .container_statuses
        .as_ref()
        .expect("container statuses")[0];
    assert!(container.ready, "the operator's probes pass: {container:?}");
    assert_eq!(
        container.restart_count, 0,
        "the operator never restarted: {container:?}"
    );
    assert!(
        container.image_id.contains("sha256:"),
        "the container runs an image the node holds: {container:?}"
    );
}

/// Create the Secret `name` in `namespace` with `string_data` (its values in plain text), as an
/// administrator would with `kubectl create secret generic`.
pub async fn create_secret(client: &Client, namespace: &str, name: &str, string_data: Value) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": name },
        "stringData": string_data,
    }))
    .expect("a valid Secret");
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create the Secret {namespace}/{name}: {e}"));
}
