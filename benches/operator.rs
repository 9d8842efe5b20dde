//! The operator at scale: 1,000 TFJobs of 1 PS + 3 workers (4,000 pods, 4,000 services) on the
//! local control plane, or with `FRAMEWORK=pytorch` 1,000 PyTorchJobs of 1 Master + 3 workers.
//! A benchmark, not a timed test.
//!
//!     cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
//!     cargo bench --bench operator          # JOBS=1000 CONCURRENCY=32 by default
//!     JOBS=10000 cargo bench --bench operator
//!     FRAMEWORK=pytorch cargo bench --bench operator
//!     OPERATOR=/path/to/other/mlkube cargo bench --bench operator   # another build, same bench
//!     OPERATOR_CONCURRENCY=4 cargo bench --bench operator   # else the operator's default
//!     RAW_WITH_JOBS=1 cargo bench --bench operator   # a second raw limit: the jobs created too
//!
//! First the raw limit: a bare client creates the pods and services the jobs' operator would,
//! at the same concurrency, in a namespace of its own, and the time until all exist is taken
//! (with RAW_WITH_JOBS=1, again in another namespace with each job created before its
//! children: what the user's submissions cost the API server is then in the limit too).
//! Then it starts the release `mlkube operator` as a child process scoped to a fresh namespace,
//! submits the jobs, and measures: the time until every pod exists (and that time as a fraction
//! of the raw client's rate), until every job is Running, then (after playing the kubelet and
//! completing every worker, and the Master) until every job is Succeeded; the operator's peak
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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use mlkube::operator::training::engine::{build, defaults};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::pytorch::PyTorchJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::registry::{self, Registered};
use serde_json::json;

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

/// A store that follows every object of a kind in the namespace.
fn follow<K>(api: Api<K>) -> Store<K>
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
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    store
}

/// Stores of the namespace's pods and services, metadata only.
fn follow_children(
    client: &Client,
    ns: &str,
) -> (
    Store<PartialObjectMeta<Pod>>,
    Store<PartialObjectMeta<Service>>,
) {
    let pods = follow(Api::namespaced(client.clone(), ns));
    let services = follow(Api::namespaced(client.clone(), ns));
    (pods, services)
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

fn last_condition<J: TrainingJob>(job: &J) -> Option<&str> {
    job.status()?.conditions.last().map(|c| c.type_.as_str())
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

/// A job of 4 pods, 3 of them workers: TFJob 1 PS + 3 workers, PyTorchJob 1 Master + 3 workers.
fn job<J: TrainingJob>(name: &str) -> Result<J, Error> {
    let framework = J::FRAMEWORK;
    let container = framework.container;
    // The bench plays the kubelet: kwok is asked to leave these pods Running.
    let template = json!({
        "metadata": { "annotations": { "mlkube.io/simulate": "manual" } },
        "spec": { "containers": [{ "name": container, "image": "kubeflow/tf-dist-mnist-test:1.0" }] }
    });
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

/// The pods whose completion completes a job: its workers, and its Master if it has one.
fn finishers(framework: &Registered, job: usize) -> Vec<String> {
    let mut pods: Vec<String> = (0..3).map(|w| format!("bench-{job}-worker-{w}")).collect();
    if framework.framework.kind == "PyTorchJob" {
        pods.push(format!("bench-{job}-master-0"));
    }
    pods
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

/// CPU seconds each part of the local cluster has used since it started, from /proc: the
/// control plane's processes and kwok (found by name), the operator (a child of the bench) and
/// the bench itself. Empty when the cluster runs elsewhere.
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

/// What the operator must ask for a job at the least: its 4 pods and 4 services, and a status
/// write per transition (Created, Running, Succeeded).
fn minimum(framework: &Registered) -> BTreeMap<String, f64> {
    BTreeMap::from([
        ("POST pods".to_owned(), 4.0),
        ("POST services".to_owned(), 4.0),
        (
            format!("PUT {}.kubeflow.org/status", framework.framework.plural),
            3.0,
        ),
    ])
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

/// What a bare client creates for a job: the pods and services the operator would, and with
/// RAW_WITH_JOBS the job itself too, as its user would submit it.
enum Child<J> {
    Job(Box<J>),
    Pod(Box<Pod>),
    Service(Box<Service>),
}

/// The pods and services of job `bench-{i}`, as the operator builds them, without the owner
/// reference (no operator runs there: the garbage collector must not delete them), after the
/// job itself if `with_job`.
fn children<J: TrainingJob>(ns: &str, i: usize, with_job: bool) -> Result<Vec<Child<J>>, Error> {
    let submitted = job::<J>(&format!("bench-{i}"))?;
    let mut job = submitted.clone();
    job.meta_mut().namespace = Some(ns.to_owned());
    defaults::apply(&mut job);
    let mut children = Vec::new();
    if with_job {
        children.push(Child::Job(Box::new(submitted)));
    }
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

/// The raw limit: a bare client creates what the operator would for `jobs_wanted` jobs, at
/// `concurrency` creates at once, in namespace `ns`. The time until every pod and service
/// exists, and the API server's requests per job and the cluster's CPU until then.
async fn raw_limit<J: TrainingJob>(
    client: &Client,
    ns: &str,
    jobs_wanted: usize,
    concurrency: usize,
    limit: Duration,
    with_jobs: bool,
) -> Result<(Duration, Spent), Error> {
    let jobs_api = Api::<J>::namespaced(client.clone(), ns);
    let pods_api = Api::<Pod>::namespaced(client.clone(), ns);
    let services_api = Api::<Service>::namespaced(client.clone(), ns);
    let (pods, services) = follow_children(client, ns);
    let before = Spent::read(client).await?;
    let start = Instant::now();
    let pp = PostParams::default();
    stream::iter(0..jobs_wanted)
        .map(|i| children::<J>(ns, i, with_jobs))
        .map_ok(|children| stream::iter(children.into_iter().map(Ok::<_, Error>)))
        .try_flatten()
        .map_ok(|child| {
            let (jobs_api, pods_api, services_api, pp) = (&jobs_api, &pods_api, &services_api, &pp);
            async move {
                match child {
                    Child::Job(job) => jobs_api.create(pp, &job).await.map(drop)?,
                    Child::Pod(pod) => pods_api.create(pp, &pod).await.map(drop)?,
                    Child::Service(service) => services_api.create(pp, &service).await.map(drop)?,
                }
                Ok::<_, Error>(())
            }
        })
        .try_buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let want = jobs_wanted * 4;
    let took = until(
        "raw client: every pod and service exists",
        start,
        limit,
        || pods.len() >= want && services.len() >= want,
    )
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
    let framework = registry::by_name(&name).ok_or_else(|| format!("no framework {name}"))?;
    let crd = (framework.crd)();
    let crd_name = crd.metadata.name.clone().unwrap_or_default();
    let client = Client::try_default()
        .await
        .map_err(|e| format!("no cluster: {e}; run `eval \"$(cluster/local-cluster.sh env)\"`"))?;
    // 15 minutes a step at 1,000 jobs, longer at more.
    let limit = Duration::from_secs(900).max(Duration::from_millis(900 * jobs_wanted as u64));

    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.patch(
        &crd_name,
        &PatchParams::apply("mlkube-operator-bench").force(),
        &Patch::Apply(crd),
    )
    .await?;
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(crds, &crd_name, conditions::is_crd_established()),
    )
    .await??;

    let namespaces = Api::<Namespace>::all(client.clone());
    until_no_bench_namespace(&namespaces, limit).await?;
    until_quiet(&client, limit).await?;
    let id = std::process::id();
    let [warmup_ns, raw_ns, raw_jobs_ns, ns] =
        ["warmup-", "raw-", "raw-jobs-", ""].map(|phase| format!("{NAMESPACE_PREFIX}{phase}{id}"));
    // RAW_WITH_JOBS=1: a second bare client creates the jobs too, in a namespace of its own.
    let raw_jobs_ns = (setting("RAW_WITH_JOBS", 0) == 1).then_some(raw_jobs_ns);
    let warmup_jobs = setting("WARMUP_JOBS", jobs_wanted.min(1000));
    say(&format!(
        "namespaces {raw_ns} and {ns}, {jobs_wanted} jobs, concurrency {concurrency}, \
         a warm-up of {warmup_jobs} jobs"
    ));
    let result = run(
        &client,
        framework,
        [
            &warmup_ns,
            &raw_ns,
            raw_jobs_ns.as_deref().unwrap_or_default(),
            &ns,
        ],
        [warmup_jobs, jobs_wanted],
        concurrency,
        limit,
    )
    .await;
    if let Ok(measured) = &result {
        print(measured, framework, jobs_wanted, concurrency);
    }
    // The operator's namespace, and what a failed run left behind.
    for namespace in [
        Some(&warmup_ns),
        Some(&raw_ns),
        raw_jobs_ns.as_ref(),
        Some(&ns),
    ]
    .into_iter()
    .flatten()
    {
        delete_namespace(&client, namespace, limit).await?;
    }
    result.map(drop)
}

/// What one bench run measured.
struct Measured {
    times: BTreeMap<&'static str, Duration>,
    raw: Duration,
    /// The bare client's time when it creates the jobs too (RAW_WITH_JOBS).
    raw_with_jobs: Option<Duration>,
    /// The raw client's run until every pod and service existed.
    raw_spent: Spent,
    /// The operator run until every pod and service existed, and in all.
    window: Spent,
    whole: Spent,
    /// The operator's peak RSS in MB and CPU seconds.
    rss: f64,
    cpu: f64,
}

/// The phases in turn, each in its own namespace, deleted before the next begins, and the
/// cluster quiet again: the warm-up, the raw limits, the operator. The operator's namespace is
/// left for the caller to delete once the results are out.
async fn run(
    client: &Client,
    framework: &'static Registered,
    [warmup_ns, raw_ns, raw_jobs_ns, ns]: [&str; 4],
    [warmup_jobs, jobs_wanted]: [usize; 2],
    concurrency: usize,
    limit: Duration,
) -> Result<Measured, Error> {
    let namespaces = Api::<Namespace>::all(client.clone());
    let raw = |ns, jobs, with_jobs| {
        let namespaces = &namespaces;
        async move {
            create_namespace(namespaces, ns).await?;
            let measured = match framework.framework.kind {
                "PyTorchJob" => {
                    raw_limit::<PyTorchJob>(client, ns, jobs, concurrency, limit, with_jobs).await
                }
                _ => raw_limit::<TFJob>(client, ns, jobs, concurrency, limit, with_jobs).await,
            };
            delete_namespace(client, ns, limit).await?;
            until_quiet(client, limit).await?;
            measured
        }
    };
    if warmup_jobs > 0 {
        say(&format!(
            "warm-up, not measured: {warmup_jobs} jobs' pods and services"
        ));
        raw(warmup_ns, warmup_jobs, false).await?;
    }
    let (raw_took, raw_spent) = raw(raw_ns, jobs_wanted, false).await?;
    let raw_with_jobs = match raw_jobs_ns {
        "" => None,
        ns => Some(raw(ns, jobs_wanted, true).await?.0),
    };

    create_namespace(&namespaces, ns).await?;
    // Another build of the operator, to measure two side by side: OPERATOR=path/to/mlkube.
    let binary = std::env::var("OPERATOR").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mlkube").into());
    let mut operator = std::process::Command::new(binary)
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
        .args(["--frameworks", framework.framework.name])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let before = Spent::read(client).await?;
    let measured = match framework.framework.kind {
        "PyTorchJob" => {
            measure::<PyTorchJob>(
                client,
                ns,
                jobs_wanted,
                concurrency,
                framework,
                limit,
                raw_took,
            )
            .await
        }
        _ => {
            measure::<TFJob>(
                client,
                ns,
                jobs_wanted,
                concurrency,
                framework,
                limit,
                raw_took,
            )
            .await
        }
    };
    let after = Spent::read(client).await;
    let (rss, cpu) = usage(operator.id()).unwrap_or((f64::NAN, f64::NAN));
    let _ = operator.kill();
    let _ = operator.wait();
    let (times, window) = measured?;
    Ok(Measured {
        times,
        raw: raw_took,
        raw_with_jobs,
        raw_spent,
        window: Spent::between(&before, &window, jobs_wanted),
        whole: Spent::between(&before, &after?, jobs_wanted),
        rss,
        cpu,
    })
}

fn print(measured: &Measured, framework: &Registered, jobs_wanted: usize, concurrency: usize) {
    let kind = framework.framework.kind;
    let shape = if kind == "PyTorchJob" {
        "1 Master + 3 workers"
    } else {
        "1 PS + 3 workers"
    };
    let operators = operator_concurrency().map_or("default".to_owned(), |n| n.to_string());
    println!(
        "| {jobs_wanted} {kind}s ({shape}), concurrency {concurrency}, operator's {operators} | |"
    );
    println!("|---|---|");
    println!(
        "| 0. raw client: every pod and service exists | {:.1} s |",
        measured.raw.as_secs_f64()
    );
    for (what, took) in &measured.times {
        println!("| {what} | {:.1} s |", took.as_secs_f64());
    }
    if let Some(raw) = measured.raw_with_jobs {
        println!(
            "| 0b. raw client, the jobs created too: every job, pod and service exists | {:.1} s |",
            raw.as_secs_f64()
        );
    }
    if let Some(operator) = measured.times.get(EVERY_CHILD_EXISTS) {
        println!(
            "| operator's rate as a fraction of the raw client's | {:.2} |",
            measured.raw.as_secs_f64() / operator.as_secs_f64()
        );
        if let Some(raw) = measured.raw_with_jobs {
            println!(
                "| operator's rate as a fraction of the raw client's, jobs included | {:.2} |",
                raw.as_secs_f64() / operator.as_secs_f64()
            );
        }
    }
    println!("| operator peak RSS | {:.0} MB |", measured.rss);
    println!("| operator CPU time | {:.1} s |", measured.cpu);

    println!(
        "| API writes per second, raw client, until every pod and service exists | {:.0} |",
        writes_per_second(&measured.raw_spent.requests, jobs_wanted, measured.raw)
    );
    if let Some(took) = measured.times.get(EVERY_CHILD_EXISTS) {
        println!(
            "| API writes per second, operator run, until every pod and service exists | {:.0} |",
            writes_per_second(&measured.window.requests, jobs_wanted, *took)
        );
    }
    requests_table(measured, &minimum(framework));
    cpu_table(measured);
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

/// Requests per job by verb and resource: the operator's run until every pod and service
/// existed and in all, and the raw client's until every pod and service existed, next to the
/// operator's minimum.
fn requests_table(measured: &Measured, minimum: &BTreeMap<String, f64>) {
    let columns = [
        &measured.window.requests,
        &measured.whole.requests,
        &measured.raw_spent.requests,
    ];
    println!();
    println!(
        "| API requests per job | operator run, until all exist | operator run | raw client, until all exist | operator's minimum |"
    );
    println!("|---|---|---|---|---|");
    let mut keys: Vec<&String> = columns.iter().flat_map(|c| c.keys()).collect();
    keys.sort();
    keys.dedup();
    let cell = |n: Option<&f64>| n.map_or(String::new(), |n| format!("{n:.2}"));
    let mut totals = [0.0; 3];
    for key in keys {
        let row: Vec<Option<&f64>> = columns.iter().map(|c| c.get(key)).collect();
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

/// CPU seconds by part of the cluster, in the same windows as the requests, and how many of the
/// machine's cores they kept busy on average until every pod and service existed.
fn cpu_table(measured: &Measured) {
    let columns = [
        &measured.window.cpu,
        &measured.whole.cpu,
        &measured.raw_spent.cpu,
    ];
    if columns.iter().all(|c| c.is_empty()) {
        return;
    }
    println!();
    println!(
        "| CPU seconds | operator run, until all exist | operator run | raw client, until all exist |"
    );
    println!("|---|---|---|---|");
    let mut parts: Vec<&String> = columns.iter().flat_map(|c| c.keys()).collect();
    parts.sort();
    parts.dedup();
    let cell = |n: Option<&f64>| n.map_or(String::new(), |n| format!("{n:.1}"));
    for part in parts {
        let cells: Vec<String> = columns.iter().map(|c| cell(c.get(part))).collect();
        println!("| {part} | {} |", cells.join(" | "));
    }
    let all = |c: &BTreeMap<String, f64>| c.values().sum::<f64>();
    let [window, whole, raw] = columns.map(all);
    println!("| all | {window:.1} | {whole:.1} | {raw:.1} |");
    if let Some(took) = measured.times.get(EVERY_CHILD_EXISTS) {
        println!(
            "| cores busy, on average | {:.2} | | {:.2} |",
            window / took.as_secs_f64(),
            raw / measured.raw.as_secs_f64()
        );
    }
}

const EVERY_CHILD_EXISTS: &str = "2. every pod and service exists";

async fn measure<J: TrainingJob>(
    client: &Client,
    ns: &str,
    jobs_wanted: usize,
    concurrency: usize,
    framework: &Registered,
    limit: Duration,
    raw: Duration,
) -> Result<(BTreeMap<&'static str, Duration>, Spent), Error> {
    let jobs_api = Api::<J>::namespaced(client.clone(), ns);
    let pods_api = Api::<Pod>::namespaced(client.clone(), ns);
    let jobs = follow(jobs_api.clone());
    let (pods, services) = follow_children(client, ns);
    let mut times = BTreeMap::new();

    let start = Instant::now();
    let jobs_api = Arc::new(jobs_api);
    stream::iter(0..jobs_wanted)
        .map(|i| {
            let api = jobs_api.clone();
            async move {
                api.create(&PostParams::default(), &job::<J>(&format!("bench-{i}"))?)
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

    let want_pods = jobs_wanted * 4;
    let children_took = until("every pod and service exists", start, limit, || {
        pods.len() >= want_pods && services.len() >= want_pods
    })
    .await?;
    times.insert(EVERY_CHILD_EXISTS, children_took);
    say(&format!(
        "the operator's rate as a fraction of the raw client's: {:.2}",
        raw.as_secs_f64() / children_took.as_secs_f64()
    ));
    let window = Spent::read(client).await?;
    times.insert(
        "3. every job is Running",
        until("every job is Running", start, limit, || {
            let state = jobs.state();
            state.len() == jobs_wanted
                && state.iter().all(|j| {
                    last_condition(j.as_ref()) == Some("Running")
                        && j.status().is_some_and(|s| {
                            s.replica_statuses
                                .get("Worker")
                                .is_some_and(|w| w.active == 3)
                        })
                })
        })
        .await?,
    );

    // Play the kubelet: every worker's (and Master's) framework container exits 0.
    let finish = Instant::now();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let container = framework.framework.container;
    let workers: Vec<String> = (0..jobs_wanted)
        .flat_map(|i| finishers(framework, i))
        .collect();
    let pods_api = Arc::new(pods_api);
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
    times.insert(
        "4. every worker completed (status patched)",
        finish.elapsed(),
    );
    times.insert(
        "5. every job is Succeeded, after the workers completed",
        until("every job is Succeeded", finish, limit, || {
            jobs.state()
                .iter()
                .filter(|j| last_condition(j.as_ref()) == Some("Succeeded"))
                .count()
                == jobs_wanted
        })
        .await?,
    );
    Ok((times, window))
}
