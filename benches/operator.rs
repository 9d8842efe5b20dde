//! The operator at scale: 1,000 TFJobs of 1 PS + 3 workers (4,000 pods, 4,000 services) on the
//! local control plane, or with `FRAMEWORK=pytorch` 1,000 PyTorchJobs of 1 Master + 3 workers,
//! or with `FRAMEWORK=frameworkcontroller` 1,000 of FrameworkController's Frameworks of two
//! TaskRoles, `ps` of 1 Task and `worker` of 3 (4,000 pods, 1,000 ConfigMaps, no services).
//! A benchmark, not a timed test.
//!
//!     cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
//!     cargo bench --bench operator          # JOBS=1000 CONCURRENCY=32 by default
//!     JOBS=10000 cargo bench --bench operator
//!     FRAMEWORK=pytorch cargo bench --bench operator
//!     FRAMEWORK=frameworkcontroller cargo bench --bench operator
//!     OPERATOR=/path/to/other/mlkube cargo bench --bench operator   # another build, same bench
//!     OPERATOR_CONCURRENCY=4 cargo bench --bench operator   # else the operator's default
//!     RAW_WITH_JOBS=1 cargo bench --bench operator   # a second raw limit: the jobs created too
//!     PEER=$(benches/frameworkcontroller.sh /path/to/checkout) \
//!       FRAMEWORK=frameworkcontroller cargo bench --bench operator   # against upstream's
//!
//! First the raw limit: a bare client creates the children the jobs' operator would (a job's
//! pods and services; a Framework's attempt ConfigMap and pods), at the same concurrency, in a
//! namespace of its own, and the time until all exist is taken
//! (with RAW_WITH_JOBS=1, again in another namespace with each job created before its
//! children: what the user's submissions cost the API server is then in the limit too).
//! Then it starts the release `mlkube operator` as a child process scoped to a fresh namespace,
//! submits the jobs, and measures: the time until every child exists (and that time as a
//! fraction of the raw client's rate), until every job is Running (a Framework: its attempt and
//! every Task AttemptRunning), then (after playing the kubelet and completing every worker, and
//! the Master) until every job is Succeeded (a Framework: Completed with exit code 0, its
//! `worker` TaskRole's completion policy met by its 3 Tasks); the operator's peak
//! RSS and CPU seconds from /proc; and what both runs asked of the API server, per job, by verb
//! and resource, from its own `apiserver_request_total` counters (every client's requests:
//! the scheduler's bindings, kwok's status patches and the controller-manager's endpoint
//! slices are in both runs, the operator's own only in its run). Prints Markdown tables on
//! stdout, progress on stderr (the operator's fraction of the raw client's as soon as it is
//! known: at 10,000 jobs the run goes on for most of an hour after).
//!
//! Each phase starts on a cluster without the objects of the one before, and quiet: a phase's
//! namespace is deleted, and gone, and the controllers that follow a deletion (the endpoints
//! of deleted services) have stopped writing, before the next one's is created. Before the
//! first measured phase an unmeasured one warms the cluster up (WARMUP_JOBS jobs' pods and
//! services from a bare client, by default as many as the run's jobs up to 1,000), so that no
//! measured phase is the cluster's first: without these two, the first phase at 1,000 jobs was
//! 9 to 13 s slower than the one after it. The measuring must not load the machine it
//! measures: pods and services are followed as metadata only, and a run starts only once an
//! earlier run's namespaces are gone.
//!
//! With PEER (and `FRAMEWORK=frameworkcontroller`), Microsoft's FrameworkController runs the
//! same Frameworks after mlkube's phase, in a namespace of its own, measured the same way
//! ([`upstream`]), and a last table sets the two side by side as ratios (mlkube / upstream) and
//! each against the raw limit. Upstream goes second so that mlkube's phase stays where it is on
//! every other run of the bench, comparable with them, and so that the CRD upstream PUTs over
//! mlkube's at start is put back once, at the end. PEER_QPS raises upstream's client rate limit
//! (its `kubeClientQps`, default 80 requests a second; mlkube's client has none).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use mlkube::operator::fc::api::{Framework, FrameworkState, TaskState};
use mlkube::operator::fc::{controller::FLAG_NAME, crd, objects, sync};
use mlkube::operator::training::engine::{build, defaults};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::pytorch::PyTorchJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::registry::{self, Registered};
use serde_json::json;

#[path = "operator/upstream.rs"]
mod upstream;

type Error = Box<dyn std::error::Error + Send + Sync>;

const NAMESPACE_PREFIX: &str = "bench-operator-";

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn say(message: &str) {
    eprintln!("operator bench: {message}");
}

/// A store that follows the objects of a kind in the namespace that `config` selects.
fn follow<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    store
}

/// What an operator creates for its jobs in a namespace, followed as metadata only: the pods,
/// the services, and FrameworkController's ConfigMaps (not the namespace's own CA bundle).
struct Children {
    pods: Store<PartialObjectMeta<Pod>>,
    services: Store<PartialObjectMeta<Service>>,
    config_maps: Store<PartialObjectMeta<ConfigMap>>,
}

impl Children {
    fn follow(client: &Client, ns: &str) -> Children {
        let all = watcher::Config::default;
        let framework_controllers = all().labels(objects::FRAMEWORK_NAME);
        Children {
            pods: follow(Api::namespaced(client.clone(), ns), all()),
            services: follow(Api::namespaced(client.clone(), ns), all()),
            config_maps: follow(Api::namespaced(client.clone(), ns), framework_controllers),
        }
    }

    /// Whether the children of `jobs` jobs of `subject` all exist.
    fn all_exist(&self, subject: Subject, jobs: usize) -> bool {
        let [pods, services, config_maps] = subject.children().map(|n| n * jobs);
        self.pods.len() >= pods
            && self.services.len() >= services
            && self.config_maps.len() >= config_maps
    }
}

/// Wait until no namespace of an earlier run is left.
async fn until_no_bench_namespace(
    namespaces: &Api<Namespace>,
    limit: Duration,
) -> Result<(), Error> {
    let since = Instant::now();
    let mut said = false;
    loop {
        let left: Vec<String> = namespaces
            .list_metadata(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .filter(|n| n.starts_with(NAMESPACE_PREFIX))
            .collect();
        if left.is_empty() {
            if said {
                say(&format!(
                    "earlier namespaces gone after {:.0}s",
                    since.elapsed().as_secs_f64()
                ));
            }
            return Ok(());
        }
        if !said {
            say(&format!("waiting for {} to be deleted", left.join(", ")));
            said = true;
        }
        if since.elapsed() > limit {
            return Err(format!("{} still exist after {limit:?}", left.join(", ")).into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Poll a store-derived condition every 50 ms until it holds; the elapsed time since `since`.
async fn until(
    what: &str,
    since: Instant,
    limit: Duration,
    mut check: impl FnMut() -> bool,
) -> Result<Duration, Error> {
    loop {
        if check() {
            let took = since.elapsed();
            say(&format!("{what}: {:.1}s", took.as_secs_f64()));
            return Ok(took);
        }
        if since.elapsed() > limit {
            return Err(format!("gave up after {limit:?} waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// (peak RSS in MB, CPU seconds) of a process, from /proc.
fn usage(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, cpu, _) = process_cpu(&stat)?;
    Some((peak_kb / 1024.0, cpu))
}

/// The operator's `--concurrency`: OPERATOR_CONCURRENCY, else the operator's default.
fn operator_concurrency() -> Option<usize> {
    std::env::var("OPERATOR_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
}

/// Requests the API server has served since it started, by verb and resource
/// (`POST pods`, `PUT tfjobs.kubeflow.org/status`, `POST pods (409)` for refusals): its own
/// `apiserver_request_total`. Read with the bench's (admin) credentials.
async fn api_requests(client: &Client) -> Result<BTreeMap<String, f64>, Error> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut requests = BTreeMap::new();
    for line in text.lines() {
        let Some(sample) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = sample.rsplit_once("} ") else {
            continue;
        };
        let labels: BTreeMap<&str, &str> = labels
            .split("\",")
            .filter_map(|pair| pair.split_once("=\""))
            .map(|(k, v)| (k, v.trim_end_matches('"')))
            .collect();
        let label = |name: &str| labels.get(name).copied().unwrap_or_default();
        if label("resource").is_empty() {
            continue;
        }
        let mut key = format!("{} {}", label("verb"), label("resource"));
        if !label("group").is_empty() {
            key = format!("{key}.{}", label("group"));
        }
        if !label("subresource").is_empty() {
            key = format!("{key}/{}", label("subresource"));
        }
        // Refusals (a 409 conflict, a 404) apart: they are work that did nothing.
        if !label("code").starts_with('2') {
            key = format!("{key} ({})", label("code"));
        }
        *requests.entry(key).or_insert(0.0) += value.trim().parse::<f64>()?;
    }
    Ok(requests)
}

/// The kubeconfig file the bench's client reads: KUBECONFIG when it names one file, else
/// ~/.kube/config, as an absolute path.
fn kubeconfig() -> Result<PathBuf, Error> {
    let named: Vec<PathBuf> = std::env::var_os("KUBECONFIG")
        .map(|list| std::env::split_paths(&list).collect())
        .unwrap_or_default();
    let path = match named.as_slice() {
        [] => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".kube/config"),
        [one] => one.clone(),
        _ => {
            return Err(
                "KUBECONFIG names several files, and FrameworkController reads one\n\
                hint: merge them: kubectl config view --flatten > one.kubeconfig"
                    .into(),
            );
        }
    };
    std::fs::canonicalize(&path)
        .map_err(|e| format!("the kubeconfig {}: {e}", path.display()).into())
}

/// The local cluster's directory, with a trailing `/`: the kubeconfig's, which
/// `cluster/local-cluster.sh env` points into it, and which every process of that cluster names
/// on its command line. Other clusters on the machine (CI's, another developer's) run processes
/// of the same names, and name their own directories.
static CLUSTER_DIR: LazyLock<Option<String>> = LazyLock::new(|| {
    let kubeconfig = kubeconfig().ok()?;
    Some(format!("{}/", kubeconfig.parent()?.display()))
});

/// Whether process `pid` is one of the measured cluster's: its command line names the cluster's
/// directory.
fn of_this_cluster(pid: u32) -> bool {
    let Some(dir) = CLUSTER_DIR.as_deref() else {
        return false;
    };
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(dir))
}

/// The machine's load average over 1, 5 and 15 minutes, as /proc/loadavg gives it.
fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// CPU seconds each part of the local cluster has used since it started, from /proc: the
/// control plane's processes and kwok (found by name, among the processes of this cluster), the
/// operator (a child of the bench) and the bench itself. Empty when the cluster runs elsewhere.
fn cpu_seconds() -> BTreeMap<String, f64> {
    let me = std::process::id();
    let parts = [
        ("etcd", "etcd"),
        ("kube-apiserver", "kube-apiserver"),
        // /proc truncates a command's name to 15 characters.
        ("kube-controller", "kube-controller-manager"),
        ("kube-scheduler", "kube-scheduler"),
        ("kwok", "kwok"),
    ];
    let mut cpu = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return cpu;
    };
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((name, seconds, parent)) = process_cpu(&stat) else {
            continue;
        };
        let part = if pid == me {
            Some("the bench")
        } else if parent == me {
            Some("operator")
        } else {
            parts
                .iter()
                .find(|(comm, _)| *comm == name)
                .map(|(_, part)| *part)
                .filter(|_| of_this_cluster(pid))
        };
        if let Some(part) = part {
            *cpu.entry(part.to_owned()).or_insert(0.0) += seconds;
        }
    }
    cpu
}

/// A process's name, CPU seconds (user and system) and parent, from its /proc stat line.
fn process_cpu(stat: &str) -> Option<(&str, f64, u32)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    // Fields after the name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let parent = fields.get(1)?.parse().ok()?;
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((name, ticks / 100.0, parent))
}

/// The API server's requests by verb and resource, and the CPU seconds of the cluster's parts:
/// as read at one moment, or spent between two readings (the requests then per job).
struct Spent {
    requests: BTreeMap<String, f64>,
    cpu: BTreeMap<String, f64>,
}

impl Spent {
    async fn read(client: &Client) -> Result<Spent, Error> {
        Ok(Spent {
            requests: api_requests(client).await?,
            cpu: cpu_seconds(),
        })
    }

    fn between(before: &Spent, after: &Spent, jobs: usize) -> Spent {
        Spent {
            requests: per_job(&before.requests, &after.requests, jobs),
            cpu: per_job(&before.cpu, &after.cpu, 1),
        }
    }
}

/// The requests served between two readings, per job.
fn per_job(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    jobs: usize,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(key, n)| {
            let served = n - before.get(key).copied().unwrap_or_default();
            (key.clone(), served / jobs as f64)
        })
        .filter(|(_, n)| *n > 0.0)
        .collect()
}

/// What the bench runs: a kubeflow.org/v1 training job's kind, or FrameworkController's
/// Framework. Each job is 4 pods, 3 of them workers.
#[derive(Clone, Copy)]
enum Subject {
    Training(&'static Registered),
    Frameworks,
}

/// Call the generic async function `$f` with the Rust type of `$subject`'s jobs.
macro_rules! for_kind {
    ($subject:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $subject {
            Subject::Frameworks => $f::<Framework>($($arg),*).await,
            Subject::Training(r) if r.framework.kind == "PyTorchJob" => {
                $f::<PyTorchJob>($($arg),*).await
            }
            Subject::Training(_) => $f::<TFJob>($($arg),*).await,
        }
    };
}

impl Subject {
    /// FRAMEWORK: a name of the operator's `--frameworks`.
    fn by_name(name: &str) -> Option<Subject> {
        if name == FLAG_NAME {
            return Some(Subject::Frameworks);
        }
        registry::by_name(name).map(Subject::Training)
    }

    /// The operator's flags that run its controller alone: the `fc` controller for Frameworks
    /// (`--frameworks frameworkcontroller` is its deprecated spelling), else the training
    /// controller with this framework only.
    fn operator_args(self) -> Vec<&'static str> {
        match self {
            Subject::Training(r) => {
                vec![
                    "--controllers",
                    "training",
                    "--frameworks",
                    r.framework.name,
                ]
            }
            Subject::Frameworks => vec!["--controllers", "fc"],
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Subject::Training(r) => r.framework.kind,
            Subject::Frameworks => "Framework",
        }
    }

    fn shape(self) -> &'static str {
        match self {
            Subject::Training(r) if r.framework.kind == "PyTorchJob" => "1 Master + 3 workers",
            Subject::Training(_) => "1 PS + 3 workers",
            Subject::Frameworks => "TaskRoles ps of 1 Task + worker of 3",
        }
    }

    fn crd(self) -> CustomResourceDefinition {
        match self {
            Subject::Training(r) => (r.crd)(),
            Subject::Frameworks => crd::definition(),
        }
    }

    /// The pods, services and ConfigMaps its operator creates for each job.
    fn children(self) -> [usize; 3] {
        match self {
            Subject::Training(_) => [4, 4, 0],
            Subject::Frameworks => [4, 0, 1],
        }
    }

    /// The step at which every child exists, as the tables name it.
    fn every_child_exists(self) -> &'static str {
        match self {
            Subject::Training(_) => "2. every pod and service exists",
            Subject::Frameworks => "2. every pod and ConfigMap exists",
        }
    }

    /// The name of job `i`: a Framework's joins its pods' names with `-`, so has none.
    fn job_name(self, i: usize) -> String {
        match self {
            Subject::Training(_) => format!("bench-{i}"),
            Subject::Frameworks => format!("bench{i}"),
        }
    }

    /// The container whose exit the bench reports, as the kubelet would.
    fn container(self) -> &'static str {
        match self {
            Subject::Training(r) => r.framework.container,
            Subject::Frameworks => FRAMEWORK_CONTAINER,
        }
    }

    /// The pods whose completion completes job `job`: its workers, and its Master if it has one.
    fn finishers(self, job: usize) -> Vec<String> {
        let name = self.job_name(job);
        let mut pods: Vec<String> = (0..3).map(|w| format!("{name}-worker-{w}")).collect();
        if self.kind() == "PyTorchJob" {
            pods.push(format!("{name}-master-0"));
        }
        pods
    }

    /// The finishers of the first `jobs` jobs.
    fn every_finisher(self, jobs: usize) -> Vec<String> {
        (0..jobs).flat_map(|i| self.finishers(i)).collect()
    }

    /// What the operator must ask for a job at the least: a training job's 4 pods and 4
    /// services and a status write per transition (Created, Running, Succeeded); a Framework's
    /// ConfigMap and 4 pods, and the ConfigMap's deletion once it completes. A Framework's
    /// status writes have no such floor here: FrameworkController writes each state of its
    /// attempt's and its Tasks' machines.
    fn minimum(self) -> BTreeMap<String, f64> {
        let [pods, services, config_maps] = self.children().map(|n| n as f64);
        let mut minimum = BTreeMap::from([("POST pods".to_owned(), pods)]);
        match self {
            Subject::Training(r) => {
                minimum.insert("POST services".to_owned(), services);
                let status = format!("PUT {}.kubeflow.org/status", r.framework.plural);
                minimum.insert(status, 3.0);
            }
            Subject::Frameworks => {
                minimum.insert("POST configmaps".to_owned(), config_maps);
                minimum.insert("DELETE configmaps".to_owned(), config_maps);
            }
        }
        minimum
    }
}

/// What a bare client creates for a job: the children its operator would, and with
/// RAW_WITH_JOBS the job itself too, as its user would submit it.
enum Child<J> {
    Job(Box<J>),
    Pod(Box<Pod>),
    Service(Box<Service>),
    ConfigMap(Box<ConfigMap>),
}

/// A kind of job as the bench submits, builds the children of and waits for.
trait BenchJob:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + serde::Serialize
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Job `name`, of 4 pods, 3 of them workers, which the bench completes as the kubelet would.
    fn submitted(name: &str) -> Result<Self, Error>;
    /// The children of job `name`, as its operator builds them, without owner references (no
    /// operator runs there: the garbage collector must not delete them).
    fn children(ns: &str, name: &str) -> Result<Vec<Child<Self>>, Error>;
    /// Running, and every pod of it running.
    fn running(&self) -> bool;
    fn succeeded(&self) -> bool;
}

/// The bench plays the kubelet: kwok is asked to leave these pods Running.
fn pod_template(container: &str) -> serde_json::Value {
    json!({
        "metadata": { "annotations": { "mlkube.io/simulate": "manual" } },
        "spec": { "containers": [{ "name": container, "image": "kubeflow/tf-dist-mnist-test:1.0" }] }
    })
}

fn last_condition<J: TrainingJob>(job: &J) -> Option<&str> {
    job.status()?.conditions.last().map(|c| c.type_.as_str())
}

/// TFJob 1 PS + 3 workers, PyTorchJob 1 Master + 3 workers.
fn training_job<J: TrainingJob>(name: &str) -> Result<J, Error> {
    let framework = J::FRAMEWORK;
    let template = pod_template(framework.container);
    let first = if framework.kind == "PyTorchJob" {
        "Master"
    } else {
        "PS"
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": framework.kind, "metadata": { "name": name },
        "spec": { (framework.replica_specs_field): {
            first: { "replicas": 1, "template": template },
            "Worker": { "replicas": 3, "template": template }
        } }
    }))?)
}

/// A training job's pods and services.
fn training_children<J: TrainingJob>(ns: &str, name: &str) -> Result<Vec<Child<J>>, Error> {
    let mut job = training_job::<J>(name)?;
    job.meta_mut().namespace = Some(ns.to_owned());
    defaults::apply(&mut job);
    let mut children = Vec::new();
    for &rtype in J::FRAMEWORK.replica_types {
        let Some(spec) = job.replica_spec(rtype) else {
            continue;
        };
        for index in 0..spec.replicas.unwrap_or(1) {
            let mut pod = build::pod(&job, rtype, index, &build::Options::default());
            pod.metadata.owner_references = None;
            let mut service = build::service(&job, rtype, index);
            service.metadata.owner_references = None;
            children.push(Child::Pod(Box::new(pod)));
            children.push(Child::Service(Box::new(service)));
        }
    }
    Ok(children)
}

macro_rules! training_bench_job {
    ($($kind:ty),*) => {$(
        impl BenchJob for $kind {
            fn submitted(name: &str) -> Result<Self, Error> {
                training_job(name)
            }
            fn children(ns: &str, name: &str) -> Result<Vec<Child<Self>>, Error> {
                training_children(ns, name)
            }
            fn running(&self) -> bool {
                last_condition(self) == Some("Running")
                    && self.status().is_some_and(|s| {
                        s.replica_statuses.get("Worker").is_some_and(|w| w.active == 3)
                    })
            }
            fn succeeded(&self) -> bool {
                last_condition(self) == Some("Succeeded")
            }
        }
    )*};
}

training_bench_job!(TFJob, PyTorchJob);

/// The container of a Framework's pods.
const FRAMEWORK_CONTAINER: &str = "main";

/// A TaskRole of `tasks` Tasks, never retried, that completes its Framework's attempt once
/// `min_succeeded` of them succeeded (-1: never).
fn task_role(name: &str, tasks: i32, min_succeeded: i32) -> serde_json::Value {
    json!({
        "name": name,
        "taskNumber": tasks,
        "frameworkAttemptCompletionPolicy": {
            "minFailedTaskCount": 1, "minSucceededTaskCount": min_succeeded
        },
        "task": {
            "retryPolicy": { "fancyRetryPolicy": false, "maxRetryCount": 0 },
            "pod": pod_template(FRAMEWORK_CONTAINER)
        }
    })
}

impl BenchJob for Framework {
    /// A Framework of 1 `ps` and 3 `worker` Tasks that succeeds once its 3 workers have, as a
    /// TFJob does; FrameworkController then deletes the `ps` pod with the attempt.
    fn submitted(name: &str) -> Result<Self, Error> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
            "metadata": { "name": name },
            "spec": {
                "executionType": "Start",
                "retryPolicy": { "fancyRetryPolicy": false, "maxRetryCount": 0 },
                "taskRoles": [task_role("ps", 1, -1), task_role("worker", 3, 3)]
            }
        }))?)
    }

    /// The first attempt's ConfigMap and pods.
    fn children(ns: &str, name: &str) -> Result<Vec<Child<Self>>, Error> {
        let mut framework = Framework::submitted(name)?;
        framework.metadata.namespace = Some(ns.to_owned());
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let uid = || name.to_owned();
        let status = sync::new_status(&framework.spec, &framework.name_any(), now, &uid);
        let mut config_map = objects::config_map(&framework, &status);
        config_map.metadata.owner_references = None;
        let mut children = Vec::new();
        for (role, tasks) in [("ps", 1), ("worker", 3)] {
            for index in 0..tasks {
                let mut pod = objects::pod(&framework, &status, &config_map, role, index)?;
                pod.metadata.owner_references = None;
                children.push(Child::Pod(Box::new(pod)));
            }
        }
        children.insert(0, Child::ConfigMap(Box::new(config_map)));
        Ok(children)
    }

    fn running(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.state == FrameworkState::AttemptRunning
                && (s.attempt_status.task_role_statuses.iter())
                    .flat_map(|r| &r.task_statuses)
                    .all(|t| t.state == TaskState::AttemptRunning)
        })
    }

    fn succeeded(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.state == FrameworkState::Completed
                && (s.attempt_status.completion_status.as_ref()).is_some_and(|c| c.status.code == 0)
        })
    }
}

async fn create_namespace(namespaces: &Api<Namespace>, name: &str) -> Result<(), Error> {
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": name } }))?,
        )
        .await?;
    Ok(())
}

/// What a bare client creates for job `name`: its children, after the job itself if
/// `with_job`.
fn submissions<J: BenchJob>(ns: &str, name: &str, with_job: bool) -> Result<Vec<Child<J>>, Error> {
    let mut all = Vec::new();
    if with_job {
        all.push(Child::Job(Box::new(J::submitted(name)?)));
    }
    all.extend(J::children(ns, name)?);
    Ok(all)
}

/// The raw limit: a bare client creates what the operator would for `jobs_wanted` jobs of
/// `subject`, at `concurrency` creates at once, in namespace `ns`. The time until every child
/// exists, and the API server's requests per job and the cluster's CPU until then.
async fn raw_limit<J: BenchJob>(
    client: &Client,
    subject: Subject,
    ns: &str,
    [jobs_wanted, concurrency]: [usize; 2],
    limit: Duration,
    with_jobs: bool,
) -> Result<(Duration, Spent), Error> {
    let jobs_api = Api::<J>::namespaced(client.clone(), ns);
    let pods_api = Api::<Pod>::namespaced(client.clone(), ns);
    let services_api = Api::<Service>::namespaced(client.clone(), ns);
    let config_maps_api = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let children = Children::follow(client, ns);
    let before = Spent::read(client).await?;
    let start = Instant::now();
    let pp = PostParams::default();
    stream::iter(0..jobs_wanted)
        .map(|i| submissions::<J>(ns, &subject.job_name(i), with_jobs))
        .map_ok(|children| stream::iter(children.into_iter().map(Ok::<_, Error>)))
        .try_flatten()
        .map_ok(|child| {
            let (jobs_api, pods_api, services_api, config_maps_api, pp) =
                (&jobs_api, &pods_api, &services_api, &config_maps_api, &pp);
            async move {
                match child {
                    Child::Job(job) => jobs_api.create(pp, &job).await.map(drop)?,
                    Child::Pod(pod) => pods_api.create(pp, &pod).await.map(drop)?,
                    Child::Service(service) => services_api.create(pp, &service).await.map(drop)?,
                    Child::ConfigMap(cm) => config_maps_api.create(pp, &cm).await.map(drop)?,
                }
                Ok::<_, Error>(())
            }
        })
        .try_buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let took = until("raw client: every child exists", start, limit, || {
        children.all_exist(subject, jobs_wanted)
    })
    .await?;
    let window = Spent::read(client).await?;
    Ok((took, Spent::between(&before, &window, jobs_wanted)))
}

/// Delete a namespace of the bench and wait until it is gone. Its pods go first, each at once
/// (grace period 0): a pod bound to a kwok node would otherwise wait for kwok to delete it, half
/// an hour's work at 40,000 pods, which the next phase would share the machine with.
async fn delete_namespace(client: &Client, ns: &str, limit: Duration) -> Result<(), Error> {
    let since = Instant::now();
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let at_once = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::background()
    };
    loop {
        let page = pods
            .list_metadata(&ListParams::default().limit(500))
            .await?;
        if page.items.is_empty() {
            break;
        }
        stream::iter(page.items.into_iter().filter_map(|p| p.metadata.name))
            .map(|name| {
                let (pods, at_once) = (&pods, &at_once);
                async move {
                    match pods.delete(&name, at_once).await {
                        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                        done => done.map(drop),
                    }
                }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>()
            .await?;
        if since.elapsed() > limit {
            return Err(format!("pods of {ns} still there after {limit:?}").into());
        }
    }
    let namespaces = Api::<Namespace>::all(client.clone());
    match namespaces.delete(ns, &DeleteParams::background()).await {
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        done => drop(done?),
    }
    while namespaces.get_opt(ns).await?.is_some() {
        if since.elapsed() > limit {
            return Err(format!("{ns} still exists after {limit:?}").into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    say(&format!(
        "{ns} deleted in {:.0}s",
        since.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Writes a second that a cluster at rest still serves: the node leases and statuses that kwok
/// renews, the controllers' leader leases, the Events of the phase before. Anything above it is
/// a controller still at work.
const QUIET_WRITES_PER_SECOND: f64 = 2.0;

/// Wait until the API server serves no more writes than a cluster at rest, over 5 seconds, not
/// counting leases, nodes and events. A namespace is gone before the controllers that follow its
/// deletion are done: at 40,000 services the controller-manager deletes their endpoints for
/// minutes after, and the next phase would pay for it.
async fn until_quiet(client: &Client, limit: Duration) -> Result<(), Error> {
    let since = Instant::now();
    let window = Duration::from_secs(5);
    let at_rest = |key: &str| {
        ["leases", "nodes", "events"]
            .iter()
            .any(|resource| key.contains(&format!(" {resource}")))
    };
    loop {
        let before = api_requests(client).await?;
        tokio::time::sleep(window).await;
        let after = api_requests(client).await?;
        let writes: f64 = per_job(&before, &after, 1)
            .iter()
            .filter(|(key, _)| is_write(key) && !at_rest(key))
            .map(|(_, n)| n)
            .sum();
        if writes <= QUIET_WRITES_PER_SECOND * window.as_secs_f64() {
            say(&format!(
                "the cluster is quiet after {:.0}s",
                since.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        if since.elapsed() > limit {
            return Err(format!("still {writes} writes in {window:?} after {limit:?}").into());
        }
    }
}

/// A request that changes something: not a GET, LIST or WATCH.
fn is_write(key: &str) -> bool {
    !["GET ", "LIST ", "WATCH "]
        .iter()
        .any(|verb| key.starts_with(verb))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // `cargo bench` passes `--bench`; nothing else is understood.
    let jobs_wanted = setting("JOBS", 1000);
    let concurrency = setting("CONCURRENCY", 32);
    let name = std::env::var("FRAMEWORK").unwrap_or_else(|_| "tensorflow".to_owned());
    let subject = Subject::by_name(&name).ok_or_else(|| format!("no framework {name}"))?;
    let peer = upstream::Peer::from_env(subject)?;
    let client = Client::try_default()
        .await
        .map_err(|e| format!("no cluster: {e}; run `eval \"$(cluster/local-cluster.sh env)\"`"))?;
    // 15 minutes a step at 1,000 jobs, longer at more.
    let limit = Duration::from_secs(900).max(Duration::from_millis(900 * jobs_wanted as u64));
    install_crd(&client, subject).await?;

    let namespaces = Api::<Namespace>::all(client.clone());
    until_no_bench_namespace(&namespaces, limit).await?;
    until_quiet(&client, limit).await?;
    let id = std::process::id();
    let [warmup_ns, raw_ns, raw_jobs_ns, ns, peer_ns] =
        ["warmup-", "raw-", "raw-jobs-", "", "upstream-"]
            .map(|phase| format!("{NAMESPACE_PREFIX}{phase}{id}"));
    // RAW_WITH_JOBS=1: a second bare client creates the jobs too, in a namespace of its own.
    let raw_jobs_ns = (setting("RAW_WITH_JOBS", 0) == 1).then_some(raw_jobs_ns);
    let peer_ns = peer.is_some().then_some(peer_ns);
    let warmup_jobs = setting("WARMUP_JOBS", jobs_wanted.min(1000));
    say(&format!(
        "namespaces {raw_ns} and {ns}, {jobs_wanted} jobs, concurrency {concurrency}, \
         a warm-up of {warmup_jobs} jobs"
    ));
    let result = run(
        &client,
        subject,
        [
            &warmup_ns,
            &raw_ns,
            raw_jobs_ns.as_deref().unwrap_or_default(),
            &ns,
            peer_ns.as_deref().unwrap_or_default(),
        ],
        [warmup_jobs, jobs_wanted, concurrency],
        limit,
        peer.as_ref(),
    )
    .await;
    if let Ok(measured) = &result {
        print(measured, subject, jobs_wanted, concurrency);
        if let (Some(peer), Some(theirs)) = (&peer, &measured.peer) {
            comparison(measured, theirs, &peer.name(), subject, jobs_wanted);
        }
    }
    // The last phase's namespace, and what a failed run left behind.
    let phases = [
        Some(warmup_ns),
        Some(raw_ns),
        raw_jobs_ns,
        Some(ns),
        peer_ns,
    ];
    for namespace in phases.into_iter().flatten() {
        delete_namespace(&client, &namespace, limit).await?;
    }
    // Upstream's FrameworkController replaced mlkube's CRD with its own at start.
    if peer.is_some() {
        install_crd(&client, subject).await?;
    }
    result.map(drop)
}

/// Put `subject`'s CRD in place as the operator expects it, and wait until it is established:
/// its spec PUT whole over a live one, then a server-side apply as the operator's deployment
/// does. The PUT undoes FrameworkController's, which puts its own spec over mlkube's at start
/// and which an apply alone would merge with (the live metadata, an app's labels, is kept).
async fn install_crd(client: &Client, subject: Subject) -> Result<(), Error> {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = subject.crd();
    let name = crd.name_any();
    if let Some(mut live) = crds.get_opt(&name).await? {
        live.spec = crd.spec.clone();
        crds.replace(&name, &PostParams::default(), &live).await?;
    }
    let apply = PatchParams::apply("mlkube-operator-bench").force();
    crds.patch(&name, &apply, &Patch::Apply(crd)).await?;
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await??;
    Ok(())
}

/// What one bench run measured.
struct Measured {
    raw: Duration,
    /// The bare client's time when it creates the jobs too (RAW_WITH_JOBS).
    raw_with_jobs: Option<Duration>,
    /// The raw client's run until every child existed.
    raw_spent: Spent,
    /// mlkube's operator.
    operator: Phase,
    /// Upstream's FrameworkController on the same jobs (PEER).
    peer: Option<Phase>,
}

/// What one controller's phase measured.
struct Phase {
    times: BTreeMap<&'static str, Duration>,
    /// Until every child existed.
    children: Duration,
    /// The run until every child existed, and in all.
    window: Spent,
    whole: Spent,
    /// The controller's peak RSS in MB and CPU seconds.
    rss: f64,
    cpu: f64,
}

/// A controller the bench runs as its child: killed when dropped, so that a failed (or
/// panicking) phase never leaves it running into the next phase or past the bench.
struct Controller {
    child: std::process::Child,
    /// Its working directory, when it needs one of its own: removed once it is killed.
    workdir: Option<tempfile::TempDir>,
}

impl Controller {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The phases in turn, each in its own namespace, deleted before the next begins, and the
/// cluster quiet again: the warm-up, the raw limits, the operator, upstream's controller (with
/// PEER). The last phase's namespace is left for the caller to delete once the results are out.
async fn run(
    client: &Client,
    subject: Subject,
    [warmup_ns, raw_ns, raw_jobs_ns, ns, peer_ns]: [&str; 5],
    [warmup_jobs, jobs_wanted, concurrency]: [usize; 3],
    limit: Duration,
    peer: Option<&upstream::Peer>,
) -> Result<Measured, Error> {
    let namespaces = Api::<Namespace>::all(client.clone());
    let raw = |ns, jobs, with_jobs| {
        let namespaces = &namespaces;
        async move {
            create_namespace(namespaces, ns).await?;
            let counts = [jobs, concurrency];
            let measured = for_kind!(
                subject,
                raw_limit(client, subject, ns, counts, limit, with_jobs)
            );
            delete_namespace(client, ns, limit).await?;
            until_quiet(client, limit).await?;
            measured
        }
    };
    if warmup_jobs > 0 {
        say(&format!(
            "warm-up, not measured: {warmup_jobs} jobs' children"
        ));
        raw(warmup_ns, warmup_jobs, false).await?;
    }
    let (raw_took, raw_spent) = raw(raw_ns, jobs_wanted, false).await?;
    let raw_with_jobs = match raw_jobs_ns {
        "" => None,
        ns => Some(raw(ns, jobs_wanted, true).await?.0),
    };

    let counts = [jobs_wanted, concurrency];
    create_namespace(&namespaces, ns).await?;
    let mlkube = spawn_operator(subject, ns)?;
    let operator = controller_phase(client, subject, ns, counts, limit, raw_took, &mlkube).await;
    drop(mlkube);
    let operator = operator?;
    let peer = match peer {
        None => None,
        Some(peer) => {
            let namespaces = [ns, peer_ns];
            Some(peer_phase(client, subject, namespaces, counts, limit, raw_took, peer).await?)
        }
    };
    Ok(Measured {
        raw: raw_took,
        raw_with_jobs,
        raw_spent,
        operator,
        peer,
    })
}

/// Submit the jobs to `controller`, already running for namespace `ns`, and measure it. Its peak
/// RSS and CPU are read here, before the caller stops it.
async fn controller_phase(
    client: &Client,
    subject: Subject,
    ns: &str,
    counts: [usize; 2],
    limit: Duration,
    raw: Duration,
    controller: &Controller,
) -> Result<Phase, Error> {
    let jobs_wanted = counts[0];
    // The machine is shared: its load says how far two phases' times compare.
    say(&format!("load average at the start: {}", load_average()));
    let before = Spent::read(client).await?;
    let measured = for_kind!(subject, measure(client, subject, ns, counts, limit, raw));
    let after = Spent::read(client).await;
    say(&format!("load average at the end: {}", load_average()));
    let (rss, cpu) = usage(controller.pid()).unwrap_or((f64::NAN, f64::NAN));
    let (times, window) = measured?;
    Ok(Phase {
        children: times[subject.every_child_exists()],
        times,
        window: Spent::between(&before, &window, jobs_wanted),
        whole: Spent::between(&before, &after?, jobs_wanted),
        rss,
        cpu,
    })
}

/// Upstream's FrameworkController on the same jobs in namespace `peer_ns`, once mlkube's
/// namespace `ns` is gone (upstream watches every namespace and would take its Frameworks over)
/// and the cluster is quiet; stopped when its phase ends, also when it fails.
async fn peer_phase(
    client: &Client,
    subject: Subject,
    [ns, peer_ns]: [&str; 2],
    counts: [usize; 2],
    limit: Duration,
    raw: Duration,
    peer: &upstream::Peer,
) -> Result<Phase, Error> {
    delete_namespace(client, ns, limit).await?;
    until_quiet(client, limit).await?;
    create_namespace(&Api::all(client.clone()), peer_ns).await?;
    say(&format!("{} on the same jobs, in {peer_ns}", peer.name()));
    let controller = peer.start(client, limit).await?;
    let phase = controller_phase(client, subject, peer_ns, counts, limit, raw, &controller).await;
    phase.map_err(|e| format!("{e}{}", upstream::log_tail(&controller)).into())
}

/// The operator for namespace `ns`, only `subject`'s controller running: the release build, or
/// another one to measure two side by side (OPERATOR=path/to/mlkube).
fn spawn_operator(subject: Subject, ns: &str) -> Result<Controller, Error> {
    let binary = std::env::var("OPERATOR").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mlkube").into());
    let child = std::process::Command::new(binary)
        .args(["operator", "--namespace", ns])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .args(
            operator_concurrency()
                .map(|n| ["--concurrency".to_owned(), n.to_string()])
                .into_iter()
                .flatten(),
        )
        .args(subject.operator_args())
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()?;
    Ok(Controller {
        child,
        workdir: None,
    })
}

fn print(measured: &Measured, subject: Subject, jobs_wanted: usize, concurrency: usize) {
    let (kind, shape) = (subject.kind(), subject.shape());
    // "every pod and service exists", without the step's number.
    let exist = subject.every_child_exists().trim_start_matches("2. ");
    let operators = operator_concurrency().map_or("default".to_owned(), |n| n.to_string());
    let ours = &measured.operator;
    println!(
        "| {jobs_wanted} {kind}s ({shape}), concurrency {concurrency}, operator's {operators} | |"
    );
    println!("|---|---|");
    println!(
        "| 0. raw client: {exist} | {:.1} s |",
        measured.raw.as_secs_f64()
    );
    for (what, took) in &ours.times {
        println!("| {what} | {:.1} s |", took.as_secs_f64());
    }
    if let Some(raw) = measured.raw_with_jobs {
        println!(
            "| 0b. raw client, the jobs created too: {exist} | {:.1} s |",
            raw.as_secs_f64()
        );
    }
    let operator = ours.children.as_secs_f64();
    println!(
        "| operator's rate as a fraction of the raw client's | {:.2} |",
        measured.raw.as_secs_f64() / operator
    );
    if let Some(raw) = measured.raw_with_jobs {
        println!(
            "| operator's rate as a fraction of the raw client's, jobs included | {:.2} |",
            raw.as_secs_f64() / operator
        );
    }
    println!("| operator peak RSS | {:.0} MB |", ours.rss);
    println!("| operator CPU time | {:.1} s |", ours.cpu);

    println!(
        "| API writes per second, raw client, until {exist} | {:.0} |",
        writes_per_second(&measured.raw_spent.requests, jobs_wanted, measured.raw)
    );
    println!(
        "| API writes per second, operator run, until {exist} | {:.0} |",
        writes_per_second(&ours.window.requests, jobs_wanted, ours.children)
    );
    let (window, whole, raw) = (&ours.window, &ours.whole, &measured.raw_spent);
    let columns = [
        ("operator run, until all exist", window, Some(ours.children)),
        ("operator run", whole, None),
        ("raw client, until all exist", raw, Some(measured.raw)),
    ];
    requests_table(&columns, &subject.minimum());
    cpu_table(&columns);
}

/// mlkube's controller beside upstream's on the same jobs: each step and figure, and their
/// ratio (mlkube / upstream: below 1, mlkube's is the smaller), each against the raw limit; then
/// their requests and the cluster's CPU side by side.
fn comparison(measured: &Measured, theirs: &Phase, name: &str, subject: Subject, jobs: usize) {
    let ours = &measured.operator;
    let (kind, shape, raw) = (subject.kind(), subject.shape(), measured.raw.as_secs_f64());
    println!();
    println!(
        "| {jobs} {kind}s ({shape}), raw client {raw:.1} s | mlkube | {name} | mlkube / upstream |"
    );
    println!("|---|---:|---:|---:|");
    let row = |what: &str, a: f64, b: f64, unit: &str, digits: usize| {
        println!(
            "| {what} | {a:.digits$}{unit} | {b:.digits$}{unit} | {:.2} |",
            a / b
        );
    };
    // Both phases ran the same steps.
    for (what, took) in &ours.times {
        row(
            what,
            took.as_secs_f64(),
            theirs.times[what].as_secs_f64(),
            " s",
            1,
        );
    }
    let [mine, upstream] = [ours, theirs].map(|phase| figures(phase, measured.raw, jobs));
    for (((what, unit, digits), a), b) in FIGURES.iter().zip(mine).zip(upstream) {
        row(what, a, b, unit, *digits);
    }
    let until = |phase: &Phase| Some(phase.children);
    let columns = [
        ("mlkube, until all exist", &ours.window, until(ours)),
        ("upstream, until all exist", &theirs.window, until(theirs)),
        ("mlkube, whole run", &ours.whole, None),
        ("upstream, whole run", &theirs.whole, None),
    ];
    requests_table(&columns, &subject.minimum());
    cpu_table(&columns);
}

/// The comparison's rows after the steps: what, its unit and its digits.
const FIGURES: [(&str, &str, usize); 7] = [
    ("rate as a fraction of the raw client's", "", 2),
    ("peak RSS", " MB", 0),
    ("CPU", " s", 1),
    ("API requests a job, until every child exists", "", 2),
    ("API requests a job, whole run", "", 2),
    ("API writes a second, until every child exists", "", 0),
    ("API server CPU, until every child exists", " s", 1),
];

/// A controller's phase as the values of [`FIGURES`], in order.
fn figures(phase: &Phase, raw: Duration, jobs: usize) -> [f64; 7] {
    let all = |spent: &Spent| spent.requests.values().sum::<f64>();
    let server = phase.window.cpu.get("kube-apiserver").copied();
    [
        raw.as_secs_f64() / phase.children.as_secs_f64(),
        phase.rss,
        phase.cpu,
        all(&phase.window),
        all(&phase.whole),
        writes_per_second(&phase.window.requests, jobs, phase.children),
        server.unwrap_or(f64::NAN),
    ]
}

/// The API server's mutating requests per second over a window, from requests per job.
fn writes_per_second(per_job: &BTreeMap<String, f64>, jobs: usize, took: Duration) -> f64 {
    let writes: f64 = per_job
        .iter()
        .filter(|(key, _)| is_write(key))
        .map(|(_, n)| n)
        .sum();
    writes * jobs as f64 / took.as_secs_f64()
}

/// A window's column in the requests and CPU tables: its heading, what was spent in it, and its
/// length when it ends as every child exists (for the cores it kept busy).
type Column<'a> = (&'a str, &'a Spent, Option<Duration>);

/// Requests per job by verb and resource, one column per window, next to the operator's minimum.
fn requests_table(columns: &[Column], minimum: &BTreeMap<String, f64>) {
    let headings: Vec<&str> = columns.iter().map(|(heading, ..)| *heading).collect();
    println!();
    println!(
        "| API requests per job | {} | operator's minimum |",
        headings.join(" | ")
    );
    println!("|---|{}---|", "---|".repeat(columns.len()));
    let mut keys: Vec<&String> = columns
        .iter()
        .flat_map(|(_, s, _)| s.requests.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let cell = |n: Option<&f64>| n.map_or(String::new(), |n| format!("{n:.2}"));
    let mut totals = vec![0.0; columns.len()];
    for key in keys {
        let row: Vec<Option<&f64>> = columns
            .iter()
            .map(|(_, s, _)| s.requests.get(key))
            .collect();
        for (total, n) in totals.iter_mut().zip(&row) {
            *total += n.copied().unwrap_or_default();
        }
        // Leases, health checks and the like: below one request in a hundred jobs.
        if row.iter().flatten().any(|n| **n >= 0.01) {
            let cells: Vec<String> = row.into_iter().map(cell).collect();
            println!(
                "| {key} | {} | {} |",
                cells.join(" | "),
                cell(minimum.get(key))
            );
        }
    }
    let totals: Vec<String> = totals.iter().map(|n| format!("{n:.2}")).collect();
    println!("| all | {} | |", totals.join(" | "));
}

/// CPU seconds by part of the cluster, one column per window, and how many of the machine's
/// cores the windows that end as every child exists kept busy on average.
fn cpu_table(columns: &[Column]) {
    if columns.iter().all(|(_, s, _)| s.cpu.is_empty()) {
        return;
    }
    let headings: Vec<&str> = columns.iter().map(|(heading, ..)| *heading).collect();
    println!();
    println!("| CPU seconds | {} |", headings.join(" | "));
    println!("|---|{}", "---|".repeat(columns.len()));
    let mut parts: Vec<&String> = columns.iter().flat_map(|(_, s, _)| s.cpu.keys()).collect();
    parts.sort();
    parts.dedup();
    let cell = |n: Option<&f64>| n.map_or(String::new(), |n| format!("{n:.1}"));
    for part in parts {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, s, _)| cell(s.cpu.get(part)))
            .collect();
        println!("| {part} | {} |", cells.join(" | "));
    }
    let all: Vec<f64> = columns
        .iter()
        .map(|(_, s, _)| s.cpu.values().sum())
        .collect();
    let cells: Vec<String> = all.iter().map(|n| format!("{n:.1}")).collect();
    println!("| all | {} |", cells.join(" | "));
    let busy = |((_, _, took), all): (&Column, &f64)| {
        took.map_or(String::new(), |t| format!("{:.2}", all / t.as_secs_f64()))
    };
    let busy: Vec<String> = columns.iter().zip(&all).map(busy).collect();
    println!("| cores busy, on average | {} |", busy.join(" | "));
}

/// Submit the jobs to the running operator and time its steps; the requests and CPU until
/// every child existed.
async fn measure<J: BenchJob>(
    client: &Client,
    subject: Subject,
    ns: &str,
    [jobs_wanted, concurrency]: [usize; 2],
    limit: Duration,
    raw: Duration,
) -> Result<(BTreeMap<&'static str, Duration>, Spent), Error> {
    let jobs_api = Api::<J>::namespaced(client.clone(), ns);
    let jobs = follow(jobs_api.clone(), watcher::Config::default());
    let children = Children::follow(client, ns);
    let mut times = BTreeMap::new();

    let start = Instant::now();
    let jobs_api = Arc::new(jobs_api);
    stream::iter(0..jobs_wanted)
        .map(|i| {
            let api = jobs_api.clone();
            async move {
                let job = J::submitted(&subject.job_name(i))?;
                api.create(&PostParams::default(), &job)
                    .await
                    .map_err(Error::from)
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    times.insert("1. all jobs submitted", start.elapsed());
    say(&format!(
        "submitted in {:.1}s",
        start.elapsed().as_secs_f64()
    ));

    let exist = subject.every_child_exists();
    let children_took = until(exist, start, limit, || {
        children.all_exist(subject, jobs_wanted)
    })
    .await?;
    times.insert(exist, children_took);
    say(&format!(
        "the operator's rate as a fraction of the raw client's: {:.2}",
        raw.as_secs_f64() / children_took.as_secs_f64()
    ));
    let window = Spent::read(client).await?;
    times.insert(
        "3. every job is Running",
        until("every job is Running", start, limit, || {
            let state = jobs.state();
            state.len() == jobs_wanted && state.iter().all(|j| j.running())
        })
        .await?,
    );

    let finish = Instant::now();
    // Play the kubelet: every worker's (and Master's) container exits 0.
    let workers = subject.every_finisher(jobs_wanted);
    complete(client, subject, ns, workers, concurrency).await?;
    times.insert(
        "4. every worker completed (status patched)",
        finish.elapsed(),
    );
    let counts = [jobs_wanted, concurrency];
    times.insert(
        "5. every job is Succeeded, after the workers completed",
        until_succeeded(client, subject, ns, &jobs, finish, limit, counts).await?,
    );
    Ok((times, window))
}

/// How long no job may succeed before the bench looks for workers kwok set Running again.
const STALLED: Duration = Duration::from_secs(10);

/// Wait until every job is Succeeded; the elapsed time since `since`. Under load, kwok can write
/// a started pod's Running status once more after the bench completed the pod, which leaves that
/// worker Running for good (19 of 3,000 workers in one run of 1,000 Frameworks; the pods' managed
/// fields showed kwok's write last): so when no job has succeeded for [`STALLED`], the workers
/// found Running are completed again. A run without such a worker pays nothing for the check.
async fn until_succeeded<J: BenchJob>(
    client: &Client,
    subject: Subject,
    ns: &str,
    jobs: &Store<J>,
    since: Instant,
    limit: Duration,
    [jobs_wanted, concurrency]: [usize; 2],
) -> Result<Duration, Error> {
    let succeeded = || jobs.state().iter().filter(|j| j.succeeded()).count();
    let (mut done, mut progress) = (succeeded(), Instant::now());
    while done < jobs_wanted {
        if since.elapsed() > limit {
            return Err(format!("gave up after {limit:?} waiting for every job to succeed").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = succeeded();
        if now > done {
            (done, progress) = (now, Instant::now());
        } else if progress.elapsed() > STALLED {
            complete_again(client, subject, ns, [jobs_wanted, concurrency]).await?;
            progress = Instant::now();
        }
    }
    let took = since.elapsed();
    say(&format!(
        "every job is Succeeded: {:.1}s",
        took.as_secs_f64()
    ));
    Ok(took)
}

/// Complete again the workers (and Masters) that are Running after the bench completed them.
async fn complete_again(
    client: &Client,
    subject: Subject,
    ns: &str,
    [jobs_wanted, concurrency]: [usize; 2],
) -> Result<(), Error> {
    let finishers: HashSet<String> = subject.every_finisher(jobs_wanted).into_iter().collect();
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let running = ListParams::default().fields("status.phase=Running");
    let again: Vec<String> = (pods.list_metadata(&running).await?.items.into_iter())
        .filter_map(|pod| pod.metadata.name)
        .filter(|name| finishers.contains(name))
        .collect();
    if !again.is_empty() {
        say(&format!(
            "{} completed workers are Running again (kwok wrote them Running after the bench): \
             completing them again",
            again.len()
        ));
        complete(client, subject, ns, again, concurrency).await?;
    }
    Ok(())
}

/// Report the pods `workers` as the kubelet would once their container exited 0.
async fn complete(
    client: &Client,
    subject: Subject,
    ns: &str,
    workers: Vec<String>,
    concurrency: usize,
) -> Result<(), Error> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let container = subject.container();
    let pods_api = Arc::new(Api::<Pod>::namespaced(client.clone(), ns));
    stream::iter(workers)
        .map(|name| {
            let api = pods_api.clone();
            let status = json!({ "status": { "phase": "Succeeded", "containerStatuses": [{
                "name": container, "ready": false, "restartCount": 0, "image": "kubeflow/tf-dist-mnist-test:1.0", "imageID": "",
                "state": { "terminated": { "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now } }
            }] } });
            async move { api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.map_err(Error::from) }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}
