//! The controller: per framework, watches its jobs, and for each job runs the engine's `plan`
//! and carries it out. `children` watches the pods and services of every framework's jobs once
//! and routes their changes, `reconcile` reads and decides, `claim` adopts and releases,
//! `status` writes the status, `carry_out` creates and deletes, `pod_group` serves the gang
//! scheduler.
//!
//! # Expected flow
//! A job, or one of its pods or services, changes; kube-runtime schedules a reconcile of the
//! job (one at a time per job, `--concurrency` jobs at once). `reconcile` defaults the job in
//! memory, reads its pods and services from the reflector caches, adopts the orphans among
//! them that carry the job's labels and releases those it controls whose labels no longer
//! match (`adopt`; adoption only after an uncached re-read confirms the job), computes the
//! plan, writes the status if it changed, then creates and deletes pods and services and
//! records events. With `--gang-scheduler` it first creates the job's PodGroup, or applies
//! it again when the job's scheduling policy or templates changed what it should say (deletes
//! it once the job is finished); pods are created only once the group exists and, with
//! Volcano, is admitted (PodGroups are not watched: the job is polled meanwhile).
//!
//! # Guarantees
//! - No duplicate pods: names are deterministic and creation is create-if-absent
//!   (AlreadyExists is success), also across restarts and with two replicas racing. An
//!   adopted pod fills the slot its labels name, in the reconcile that adopts it.
//! - The status is written before acting, with the resourceVersion it was computed from: a
//!   stale cache turns into a conflict and a retry, never into a counted-twice restart.
//! - A pod the operator deleted is treated as being deleted until the cache no longer has it,
//!   so one failure is never handled twice.
//! - Adoption and release patches carry the resourceVersion they were decided on; an object
//!   another controller controls is never changed.
//! - The PodGroup is written by server-side apply with `FIELD_MANAGER`: fields others set on it
//!   are kept, and a field the operator stops setting is removed.
//!
//! # Errors
//! A watch of a framework's jobs answered 404 asks discovery whether their CRD is gone; if it
//! is, that framework's controller stops and waits for the CRD as at start (see `runtime::installed`).
//! Every failed API call is logged with the job, recorded as an event where the user can see it
//! (except adoption and release, which upstream does silently too), counted in
//! `mlkube_operator_reconcile_errors_total{operation}`, and retried by `error_policy` after a
//! short delay. A failed adoption does not hold the reconcile up: the pod it was for is not
//! created again (its name is taken), and the retry adopts it.

mod autoscaler;
mod by_job;
mod carry_out;
mod children;
mod claim;
mod companions;
mod data;
mod pod_group;
mod reconcile;
mod records;
mod status;
mod stored_job;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedReceiver;
use futures::future::{BoxFuture, join_all};
use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::controller::{Config as ControllerConfig, Error as ControllerError};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, CustomResourceExt, Resource, ResourceExt};

use super::crd;
use super::engine::build;
use super::framework::{CompanionKind, Framework, TrainingJob};
use crate::error_text::OneLine;
use crate::operator::runtime::events::Events;
use crate::operator::runtime::expectations::Expectations;
use crate::operator::runtime::http::Health;
use crate::operator::runtime::installed;
use crate::operator::runtime::manager::Shared;
use crate::operator::runtime::metrics::Metrics;
use crate::operator::runtime::shutdown::{self, Stop};
use crate::operator::runtime::{lock, watched};
use by_job::ByJob;
use stored_job::StoredJob;

pub use children::Children;
pub use reconcile::{ReconcileError, error_policy, reconcile};

/// How often a job whose pods wait for their PodGroup to be admitted looks again.
const POD_GROUP_POLL: Duration = Duration::from_secs(2);

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: Client,
    pub pods: Arc<ByJob>,
    pub services: Arc<ByJob>,
    /// Where reconciles report events about jobs.
    events: Events,
    pub metrics: Arc<Metrics>,
    pub options: build::Options,
    /// Pods this operator deleted (pod UID → job UID) that the cache may still show.
    deleted: Mutex<HashMap<String, String>>,
    /// Pods and services created that the caches may not show yet.
    expectations: Arc<Expectations>,
    /// Jobs (namespace, name) with a change not reconciled yet: the work queue.
    queue: Arc<WorkQueue>,
    /// The job versions the last status writes replaced, which the cache may still show.
    written: status::Written,
    /// The PodGroups last read or written, so a reconcile need not read them again.
    pod_groups: pod_group::SeenPodGroups,
    /// The autoscalers last written, so a reconcile need not write them again.
    autoscalers: autoscaler::SeenAutoscalers,
    /// The companions last written, so a reconcile need not write them again.
    companions: companions::SeenCompanions,
}

impl Context {
    /// Forget what was remembered about a job that is gone.
    fn forget(&self, namespace: &str, name: &str) {
        self.written.forget(namespace, name);
        self.pod_groups.forget(namespace, name);
        self.autoscalers.forget(namespace, name);
        self.companions.forget(namespace, name);
    }
}

/// The jobs waiting for a reconcile because they, or one of their pods or services, changed;
/// its size is the work-queue depth metric. kube-runtime keeps its queue to itself, so this
/// follows the same triggers: a job enters when a watch delivers it or a child it controls,
/// and leaves when its reconcile starts (or the job turns out to be gone). Like upstream's
/// work queue, a job counts once however many changes wait, and a timed requeue (deadline,
/// TTL, retry) is not counted while it waits for its time.
struct WorkQueue {
    jobs: Mutex<HashSet<(String, String)>>,
    metrics: Arc<Metrics>,
}

impl WorkQueue {
    fn add(&self, namespace: Option<String>, name: String) {
        if lock(&self.jobs).insert((namespace.unwrap_or_default(), name)) {
            self.metrics.queue_depth_add(1);
        }
    }

    fn remove(&self, namespace: &str, name: &str) {
        if lock(&self.jobs).remove(&(namespace.to_owned(), name.to_owned())) {
            self.metrics.queue_depth_add(-1);
        }
    }

    /// Empty the queue: its controller has stopped.
    fn clear(&self) {
        let mut jobs = lock(&self.jobs);
        self.metrics
            .queue_depth_add(-i64::try_from(jobs.len()).unwrap_or(i64::MAX));
        jobs.clear();
    }
}

/// One outcome of a framework's controller: a job reconciled, or why not.
type ControllerResult<J> = Result<
    (ObjectRef<StoredJob<J>>, kube::runtime::controller::Action),
    ControllerError<ReconcileError, watcher::Error>,
>;

/// How one run of a framework's controller ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Stopped,
    /// Its CRD was deleted: it waits for the CRD again.
    CrdDeleted,
}

/// What the operator was started with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: Option<String>,
    /// How many jobs of each framework are reconciled at once.
    pub concurrency: u16,
    pub options: build::Options,
    /// The frameworks whose jobs to run (`registry::ALL` for all).
    pub frameworks: Vec<&'static Registered>,
}

/// A framework the operator can run: its facts, its CRD and its controller (the list of them
/// is `registry::ALL`).
#[derive(Debug)]
pub struct Registered {
    pub framework: &'static Framework,
    /// The framework's CustomResourceDefinition, generated from its types.
    pub crd: fn() -> CustomResourceDefinition,
    /// Run the framework's controller (see [`run`]).
    pub(crate) run: RunFramework,
    /// The kinds of its jobs' companions, which the controller watches.
    pub(crate) companion_kinds: &'static [CompanionKind],
}

impl Registered {
    /// `J`'s entry.
    pub const fn of<J: TrainingJob + CustomResourceExt>() -> Registered {
        Registered {
            framework: J::FRAMEWORK,
            crd: crd::definition_of::<J>,
            run: run_framework::<J>,
            companion_kinds: J::COMPANION_KINDS,
        }
    }
}

/// One framework's controller, as [`run`] starts it: `run_framework::<J>`. It takes its jobs'
/// children from the shared caches, and asks them for their changes while it runs.
pub type RunFramework =
    fn(Client, Settings, Arc<Metrics>, Arc<Children>, Arc<Health>, Stop) -> BoxFuture<'static, ()>;

/// Run the controller until `shared.stop` resolves and the reconciles in flight have finished.
///
/// Its readiness gate opens once the pod and service caches have synced; `shared.health` says
/// which frameworks wait for their CRD (see `runtime::installed`).
pub async fn run(shared: Shared, settings: Settings) {
    let Shared {
        client,
        metrics,
        health,
        ready,
        stop,
    } = shared;
    let (children, watches) = Children::watch(&client, &settings);
    let runs: Vec<_> = settings
        .frameworks
        .iter()
        .map(|registered| {
            (registered.run)(
                client.clone(),
                settings.clone(),
                metrics.clone(),
                children.clone(),
                health.clone(),
                stop.clone(),
            )
        })
        .collect();
    let synced = async move {
        if children.ready().await {
            ready.open();
        }
        std::future::pending::<()>().await;
    };
    // The watches and the readiness signal run until every controller has stopped.
    let background = futures::future::join(watches, synced);
    futures::future::select(join_all(runs).boxed(), background.boxed()).await;
}

/// Run the controller of one framework's jobs, as [`run`] does: once its CRD is installed,
/// and again each time its CRD comes back after it was deleted (see `runtime::installed`).
pub fn run_framework<J: TrainingJob>(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    children: Arc<Children>,
    health: Arc<Health>,
    stop: Stop,
) -> BoxFuture<'static, ()> {
    let queue = Arc::new(WorkQueue {
        jobs: Mutex::new(HashSet::new()),
        metrics: metrics.clone(),
    });
    async move {
        let served = served::<J>();
        let mut waiting = installed::Waiting::AtStart;
        while installed::await_installed(&client, &served, &health, stop.clone(), waiting).await {
            let ended = run_one::<J>(
                client.clone(),
                settings.clone(),
                metrics.clone(),
                children.clone(),
                queue.clone(),
                stop.clone(),
            )
            .await;
            // The children of jobs of a kind that is gone change nothing.
            children.route(J::FRAMEWORK.kind, Box::new(|_, _| {}));
            queue.clear();
            if ended == Ended::Stopped {
                break;
            }
            waiting = installed::Waiting::AfterDeletion;
        }
    }
    .boxed()
}

/// `J`'s kind, as discovery lists it.
fn served<J: TrainingJob>() -> installed::Served {
    installed::Served {
        kind: J::FRAMEWORK.kind,
        plural: J::FRAMEWORK.plural,
        group: J::group(&()).into_owned(),
        api_version: J::api_version(&()).into_owned(),
        flag_name: J::FRAMEWORK.name,
        flag: "--frameworks",
        component: "training-operator",
    }
}

/// Run the controller until `stop`, or until the watch of its jobs finds their CRD deleted.
async fn run_one<J: TrainingJob>(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    children: Arc<Children>,
    queue: Arc<WorkQueue>,
    stop: Stop,
) -> Ended {
    let children_changed = route_children::<J>(&children, &queue);
    let (job_store, job_stream) = watch_jobs::<J>(&client, settings.namespace.as_deref(), &queue);
    let context = new_context::<J>(&client, settings.options, metrics, &children, &queue);

    let for_gone_jobs = context.clone();
    let crd_deleted = Arc::new(installed::CrdDeleted::default());
    let stop_or_deleted: Stop =
        futures::future::select(stop.clone(), crd_deleted.clone().wait().boxed())
            .map(|_| ())
            .boxed()
            .shared();
    let controller = Controller::for_stream(job_stream, job_store.clone())
        // A short debounce folds the burst of pod updates a starting job makes into fewer
        // reconciles (and status writes).
        .with_config(
            ControllerConfig::default()
                .concurrency(settings.concurrency.max(1))
                .debounce(Duration::from_millis(200)),
        )
        .reconcile_on(children_changed)
        .graceful_shutdown_on(stop_or_deleted.clone())
        .run(reconcile::reconcile, reconcile::error_policy, context)
        .for_each(|result| {
            let failed_watch = settle(result, &queue, &for_gone_jobs);
            let (client, stop, crd_deleted) = (client.clone(), stop.clone(), crd_deleted.clone());
            async move {
                let Some(error) = failed_watch else { return };
                if installed::deleted(&client, &served::<J>(), &error, stop).await {
                    crd_deleted.set();
                } else {
                    // The jobs wait until the watch heals.
                    tracing::warn!(error = %OneLine(&error), "reconcile did not complete");
                }
            }
        });
    shutdown::drive(controller, &job_store, stop_or_deleted).await;
    if crd_deleted.seen() && stop.peek().is_none() {
        Ended::CrdDeleted
    } else {
        Ended::Stopped
    }
}

/// A change of a child of one of `J`'s jobs queues the job and triggers its reconcile: the
/// stream of those jobs, for the controller.
fn route_children<J: TrainingJob>(
    children: &Children,
    queue: &Arc<WorkQueue>,
) -> UnboundedReceiver<ObjectRef<StoredJob<J>>> {
    let (trigger, children_changed) = futures::channel::mpsc::unbounded();
    let route_queue = queue.clone();
    children.route(
        J::FRAMEWORK.kind,
        Box::new(move |namespace, name| {
            route_queue.add(Some(namespace.to_owned()), name.to_owned());
            // Closed only once the controller has stopped.
            let _ = trigger.unbounded_send(ObjectRef::<StoredJob<J>>::new(name).within(namespace));
        }),
    );
    children_changed
}

/// The watch of `J`'s jobs (in `namespace`, else in all): their cache, and the stream of the
/// jobs it touches, each queued as it comes.
fn watch_jobs<J: TrainingJob>(
    client: &Client,
    namespace: Option<&str>,
    queue: &Arc<WorkQueue>,
) -> (
    reflector::Store<StoredJob<J>>,
    impl Stream<Item = Result<StoredJob<J>, watcher::Error>> + Send + 'static,
) {
    // Cached compactly, and read into `J` for each reconcile (see `stored_job`).
    let jobs: Api<StoredJob<J>> = watched(client, namespace);
    let (job_store, job_writer) = reflector::store();
    let job_stream = {
        let queue = queue.clone();
        watcher(jobs, watcher::Config::default())
            .default_backoff()
            // Neither is read (but for the annotation naming a job's data), and a `kubectl
            // apply`'d job's last-applied annotation is as big as the job again; a status write
            // replaces the status alone.
            .modify(|j: &mut StoredJob<J>| {
                j.managed_fields_mut().clear();
                let annotations = &mut j.meta_mut().annotations;
                if let Some(kept) = annotations.as_mut() {
                    kept.retain(|key, _| key == super::engine::data::VOLUME_MANAGER);
                }
                if annotations.as_ref().is_some_and(|kept| kept.is_empty()) {
                    *annotations = None;
                }
            })
            .reflect(job_writer)
            .touched_objects()
            .inspect_ok(move |j: &StoredJob<J>| queue.add(j.namespace(), j.name_any()))
    };
    (job_store, job_stream)
}

/// What `J`'s reconciles share: the client, the shared caches of children, and `J`'s own
/// event recorder, queue and memory of what it wrote.
fn new_context<J: TrainingJob>(
    client: &Client,
    options: build::Options,
    metrics: Arc<Metrics>,
    children: &Children,
    queue: &Arc<WorkQueue>,
) -> Arc<Context> {
    let events = Events::start(
        client.clone(),
        J::FRAMEWORK.controller_name,
        std::env::var("HOSTNAME").ok(),
        metrics.clone(),
    );
    Arc::new(Context {
        client: client.clone(),
        pods: children.pods.clone(),
        services: children.services.clone(),
        events,
        metrics,
        options,
        deleted: Mutex::new(HashMap::new()),
        expectations: children.expectations.clone(),
        queue: queue.clone(),
        written: status::Written::default(),
        pod_groups: pod_group::SeenPodGroups::default(),
        autoscalers: autoscaler::SeenAutoscalers::default(),
        companions: companions::SeenCompanions::watching(children.companions.clone()),
    })
}

/// Close the books on one outcome of the controller; a failed watch of the jobs is returned,
/// for the caller to tell whether their CRD is gone.
fn settle<J: TrainingJob>(
    result: ControllerResult<J>,
    queue: &WorkQueue,
    context: &Context,
) -> Option<watcher::Error> {
    match result {
        // Deleted before its turn came.
        Err(ControllerError::ObjectNotFound(job)) => {
            let namespace = job.namespace.as_deref().unwrap_or_default();
            queue.remove(namespace, &job.name);
            context.forget(namespace, &job.name);
            None
        }
        // `error_policy` has logged it.
        Err(ControllerError::ReconcilerFailed(..)) | Ok(_) => None,
        Err(ControllerError::QueueError(e)) => Some(e),
        Err(e) => {
            tracing::warn!(error = %OneLine(&e), "reconcile did not complete");
            None
        }
    }
}
