//! The harness every cluster test stands on: a client for the local control plane that
//! `cluster/local-cluster.sh up` starts, and a namespace of its own per test.
//!
//! When the cluster is not reachable, tests fail (never skip) with a message that says how to
//! start it.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use mlkube::operator::training::framework::TrainingJob;

const HOW_TO_START: &str = "start the local control plane with `cluster/local-cluster.sh up` and \
     `eval \"$(cluster/local-cluster.sh env)\"`, or run the README's test command";

/// The kubeconfig the cluster tests use: `$KUBECONFIG`, which must be set.
pub fn kubeconfig_path() -> PathBuf {
    match std::env::var_os("KUBECONFIG") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => {
            panic!("KUBECONFIG is not set, so there is no cluster to test against: {HOW_TO_START}")
        }
    }
}

/// Run mlkube in `dir` against the test cluster: the binary built with the tests, or the one
/// `MLKUBE_TEST_BIN` names (to check that a test fails with a build from before a fix).
pub fn mlkube(dir: &Path, args: &[&str]) -> Output {
    mlkube_command(dir, args)
        .output()
        .expect("the mlkube binary runs")
}

/// The command [`mlkube`] runs, its input empty, for a test that starts it itself (its output
/// piped, to read while it runs or once it ends).
pub fn mlkube_command(dir: &Path, args: &[&str]) -> Command {
    let binary =
        std::env::var_os("MLKUBE_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_mlkube").into());
    let mut command = Command::new(binary);
    command
        .args(args)
        .current_dir(dir)
        .env("KUBECONFIG", kubeconfig_path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// [`mlkube`], insisting that it succeeds.
pub fn mlkube_ok(dir: &Path, args: &[&str]) -> Output {
    let output = mlkube(dir, args);
    assert!(
        output.status.success(),
        "mlkube {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A new app without components, in a directory of its own, whose `local` environment is the
/// namespace `ns`; the directory goes when the first value is dropped.
pub fn empty_app(ns: &TestNamespace) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("app");
    let path = app.to_str().expect("a UTF-8 path");
    mlkube_ok(
        dir.path(),
        &["init", path, "--empty", "--namespace", &ns.name],
    );
    (dir, app)
}

/// What a command wrote to its standard output, as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A client for the test cluster; panics with instructions when it is not reachable.
pub async fn client() -> Client {
    client_from(&kubeconfig_path()).await
}

/// A client from the kubeconfig at `path`; panics with instructions when the cluster it names
/// is not reachable.
pub async fn client_from(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).unwrap_or_else(|e| {
        panic!(
            "cannot read kubeconfig {}: {e}; {HOW_TO_START}",
            path.display()
        )
    });
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "kubeconfig {} is not usable: {e}; {HOW_TO_START}",
                path.display()
            )
        });
    let client = Client::try_from(config).expect("a client from a valid kubeconfig");
    if let Err(e) = client.apiserver_version().await {
        panic!(
            "the cluster in {} is not reachable: {e}; {HOW_TO_START}",
            path.display()
        );
    }
    client
}

/// A namespace that belongs to one test, deleted when it is dropped (also when the test panics).
pub struct TestNamespace {
    pub client: Client,
    pub name: String,
}

impl TestNamespace {
    /// Create a fresh namespace named `<prefix>-<pid>-<n>`.
    pub async fn new(prefix: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let client = client().await;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "mlkube.io/test": "true" } }
        }))
        .expect("a valid Namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("cannot create test namespace {name}: {e}"));
        TestNamespace { client, name }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        delete_namespace(&format!("test namespace {}", self.name), &self.name);
    }
}

/// Delete the namespace `name` from a `Drop` (see [`clean_up`]).
fn delete_namespace(what: &str, name: &str) {
    let name = name.to_owned();
    clean_up(what, |client| async move {
        Api::<Namespace>::all(client)
            .delete(&name, &DeleteParams::background())
            .await
            .map(|_| ())
    });
}

/// Deletes, when dropped, a namespace the test did not make itself (a profile's, which
/// `mlkube delete` keeps).
pub struct NamespaceCleanup(pub String);

impl Drop for NamespaceCleanup {
    fn drop(&mut self) {
        delete_namespace(&format!("namespace {}", self.0), &self.0);
    }
}

/// Deletes each app's `local` environment when dropped, also when the test fails.
pub struct AppsCleanup(pub Vec<PathBuf>);

impl Drop for AppsCleanup {
    fn drop(&mut self) {
        for app in &self.0 {
            let output = mlkube(app, &["delete", "local", "--yes"]);
            if !output.status.success() {
                eprintln!("warning: {}", String::from_utf8_lossy(&output.stderr));
            }
        }
    }
}

/// Run `delete` with an admin client from a `Drop`, also when the test panics; a failure is a
/// warning naming `what`.
///
/// Drop cannot await: `delete` runs on a thread with a runtime of its own. It needs a client
/// of its own too, because the test's client sends its requests through a task on the test's
/// runtime, which is blocked here until the thread is done.
pub fn clean_up<F, Fut>(what: &str, delete: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), kube::Error>>,
{
    let deleted = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async { delete(client().await).await })?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    })
    .join();
    if let Ok(Err(e)) = deleted {
        eprintln!("warning: could not delete {what}: {e}");
    }
}

/// Hold this while applying the platform's cluster-scoped objects (its CRDs, the `kvc`
/// StorageClass): every test that renders the default app shares them, and two such tests at
/// once would change each other's labels between an apply and the diff that checks it.
pub async fn lock_shared_cluster_objects() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Poll `check` until it returns `Some`, or panic after `timeout` saying what was awaited.
///
/// For conditions a watch cannot express directly (several objects, derived state); a single
/// object's condition is better awaited with `kube::runtime::wait::await_condition`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    within(timeout, check)
        .await
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Poll `check` until it returns `Some`, or `None` after `timeout`: for a caller that says
/// more than [`eventually`] when the wait is in vain.
pub async fn within<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Create `job` in the test's namespace; the API of its kind there.
pub async fn submit<J: TrainingJob>(ns: &TestNamespace, job: &J) -> Api<J> {
    let jobs = Api::<J>::namespaced(ns.client.clone(), &ns.name);
    jobs.create(&PostParams::default(), job)
        .await
        .unwrap_or_else(|e| panic!("the {} is accepted: {e}", J::FRAMEWORK.kind));
    jobs
}

/// The pods of `selector` that are Ready and not going, as (name, node): a pod told to stop (by
/// an eviction, say) stays Ready until it ends, but it is on its way out.
pub async fn ready_pods(pods: &Api<Pod>, selector: &str) -> Vec<(String, String)> {
    let listed = pods
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .unwrap_or_else(|e| panic!("list the pods of {selector}: {e}"));
    listed
        .items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(pod_is_ready)
        .filter_map(|pod| Some((pod.metadata.name?, pod.spec?.node_name?)))
        .collect()
}

/// Whether `pod`'s Ready condition is True.
pub fn pod_is_ready(pod: &Pod) -> bool {
    (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The environment of a pod's container, as (name, value) in order; a variable taken from a
/// field reads `<field path>`.
pub fn env(pod: &Pod, container: &str) -> Vec<(String, String)> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter(|c| c.name == container)
        .flat_map(|c| c.env.iter().flatten())
        .map(|e| {
            let from = e.value_from.as_ref().and_then(|f| f.field_ref.as_ref());
            let value = match (&e.value, from) {
                (Some(value), _) => value.clone(),
                (None, Some(field)) => format!("<{}>", field.field_path),
                (None, None) => String::new(),
            };
            (e.name.clone(), value)
        })
        .collect()
}

/// Deletes a test's CRD when dropped: CRDs are cluster-scoped, and mlkube never deletes one.
pub struct CrdCleanup(pub String);

impl Drop for CrdCleanup {
    fn drop(&mut self) {
        let name = self.0.clone();
        clean_up(&format!("CRD {name}"), |client| async move {
            Api::<CustomResourceDefinition>::all(client)
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
        });
    }
}
