//! The operator at scale: 1,000 TFJobs of 1 PS + 3 workers (4,000 pods, 4,000 services) on the
//! local control plane, or with `FRAMEWORK=pytorch` 1,000 PyTorchJobs of 1 Master + 3 workers.
//! A benchmark, not a timed test.
//!
//!     cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
//!     cargo bench --bench operator          # JOBS=1000 CONCURRENCY=32 by default
//!     FRAMEWORK=pytorch cargo bench --bench operator
//!
//! It starts the release `mlkube operator` as a child process scoped to a fresh namespace,
//! submits the jobs, and measures: the time until every pod exists, until every job is Running,
//! then (after playing the kubelet and completing every worker, and the Master) until every job
//! is Succeeded;
//! and the operator's peak RSS and CPU seconds from /proc. Prints a Markdown table on stdout,
//! progress on stderr.
//!
//! The measuring must not load the machine it measures: pods and services are followed as
//! metadata only, and a run starts only once an earlier run's namespace is gone (deleting
//! 8,000 objects keeps the control plane busy for minutes) and waits for its own to go.

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
use mlkube::operator::framework::TrainingJob;
use mlkube::operator::frameworks::pytorch::PyTorchJob;
use mlkube::operator::frameworks::tensorflow::TFJob;
use mlkube::operator::frameworks::{self, Registered};
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

/// Poll a store-derived condition every 50 ms until it holds; the elapsed time since `since`.
/// Wait until no namespace of an earlier run is left.
async fn until_no_bench_namespace(namespaces: &Api<Namespace>) -> Result<(), Error> {
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
        if since.elapsed() > Duration::from_secs(900) {
            return Err(format!("{} still exist after 15 minutes", left.join(", ")).into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

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
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((peak_kb / 1024.0, ticks / 100.0))
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

#[tokio::main]
async fn main() -> Result<(), Error> {
    // `cargo bench` passes `--bench`; nothing else is understood.
    let jobs_wanted = setting("JOBS", 1000);
    let concurrency = setting("CONCURRENCY", 32);
    let name = std::env::var("FRAMEWORK").unwrap_or_else(|_| "tensorflow".to_owned());
    let framework = frameworks::by_name(&name).ok_or_else(|| format!("no framework {name}"))?;
    let crd = (framework.crd)();
    let crd_name = crd.metadata.name.clone().unwrap_or_default();
    let client = Client::try_default()
        .await
        .map_err(|e| format!("no cluster: {e}; run `eval \"$(cluster/local-cluster.sh env)\"`"))?;

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
    until_no_bench_namespace(&namespaces).await?;
    let ns = format!("{NAMESPACE_PREFIX}{}", std::process::id());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": ns } }))?,
        )
        .await?;
    say(&format!(
        "namespace {ns}, {jobs_wanted} jobs, operator concurrency {concurrency}"
    ));

    let mut operator = std::process::Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args([
            "operator",
            "--namespace",
            &ns,
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--frameworks", &name])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let pid = operator.id();

    let result = match framework.framework.kind {
        "PyTorchJob" => measure::<PyTorchJob>(&client, &ns, jobs_wanted, framework).await,
        _ => measure::<TFJob>(&client, &ns, jobs_wanted, framework).await,
    };

    let (rss, cpu) = usage(pid).unwrap_or((f64::NAN, f64::NAN));
    let _ = operator.kill();
    let _ = operator.wait();
    let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
    let times = result?;
    until_no_bench_namespace(&namespaces).await?;

    let shape = if framework.framework.kind == "PyTorchJob" {
        "1 Master + 3 workers"
    } else {
        "1 PS + 3 workers"
    };
    println!(
        "| {jobs_wanted} {}s ({shape}), concurrency {concurrency} | |",
        framework.framework.kind
    );
    println!("|---|---|");
    for (what, took) in &times {
        println!("| {what} | {:.1} s |", took.as_secs_f64());
    }
    println!("| operator peak RSS | {rss:.0} MB |");
    println!("| operator CPU time | {cpu:.1} s |");
    Ok(())
}

async fn measure<J: TrainingJob>(
    client: &Client,
    ns: &str,
    jobs_wanted: usize,
    framework: &Registered,
) -> Result<BTreeMap<&'static str, Duration>, Error> {
    let jobs_api = Api::<J>::namespaced(client.clone(), ns);
    let pods_api = Api::<Pod>::namespaced(client.clone(), ns);
    let jobs = follow(jobs_api.clone());
    let pods = follow(Api::<PartialObjectMeta<Pod>>::namespaced(
        client.clone(),
        ns,
    ));
    let services = follow(Api::<PartialObjectMeta<Service>>::namespaced(
        client.clone(),
        ns,
    ));
    let mut times = BTreeMap::new();
    let limit = Duration::from_secs(900);

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
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    times.insert("1. all jobs submitted", start.elapsed());
    say(&format!(
        "submitted in {:.1}s",
        start.elapsed().as_secs_f64()
    ));

    let want_pods = jobs_wanted * 4;
    times.insert(
        "2. every pod and service exists",
        until("every pod and service exists", start, limit, || {
            pods.len() >= want_pods && services.len() >= want_pods
        })
        .await?,
    );
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
        .buffer_unordered(32)
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
    Ok(times)
}
