//! The controller: watches TFJobs and their pods and services, and for each job runs `plan`
//! and carries it out.
//!
//! # Expected flow
//! A TFJob, or one of its pods or services, changes; kube-runtime schedules a reconcile of the
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
//! Every failed API call is logged with the job, recorded as an event where the user can see it
//! (except adoption and release, which upstream does silently too), counted in
//! `mlkube_operator_reconcile_errors_total{operation}`, and retried by `error_policy` after a
//! short delay. A failed adoption does not hold the reconcile up: the pod it was for is not
//! created again (its name is taken), and the retry adopts it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::runtime::controller::{Action, Config as ControllerConfig, Error as ControllerError};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::Instrument;

use super::adopt::{self, Claim};
use super::api::{FIELD_MANAGER, MANAGED_BY_US, TFJob};
use super::build::{self, LABEL_OPERATOR, OPERATOR_NAME};
use super::conditions;
use super::defaults::{self, ReplicaType};
use super::events::{EventType, Events};
use super::expectations::{Expectations, Kind};
use super::lock;
use super::metrics::Metrics;
use super::plan::{self, Deletion, Observed, Plan};

/// How often a job whose pods wait for their PodGroup to be admitted looks again.
const POD_GROUP_POLL: Duration = Duration::from_secs(2);

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: Client,
    pub pods: Store<Pod>,
    pub services: Store<Service>,
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
        let mut jobs = lock(&self.jobs);
        jobs.insert((namespace.unwrap_or_default(), name));
        self.metrics.set_queue_depth(jobs.len());
    }

    /// A child changed: queue the TFJob that controls it, if one does.
    fn add_controller_of<K: Resource>(&self, child: &K) {
        let controller = child
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "TFJob");
        if let Some(owner) = controller {
            self.add(child.namespace(), owner.name.clone());
        }
    }

    fn remove(&self, namespace: &str, name: &str) {
        let mut jobs = lock(&self.jobs);
        jobs.remove(&(namespace.to_owned(), name.to_owned()));
        self.metrics.set_queue_depth(jobs.len());
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("TFJob {name} has no namespace")]
    NoNamespace { name: String },
    #[error("cannot read TFJob {namespace}/{name} back before adopting its orphans")]
    RereadJob {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot adopt {kind} {namespace}/{name}")]
    Adopt {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot release {kind} {namespace}/{name}")]
    Release {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the status of TFJob {namespace}/{name}")]
    WriteStatus {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create {kind} {namespace}/{name}")]
    Create {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update {kind} {namespace}/{name}")]
    Update {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete {kind} {namespace}/{name}")]
    Delete {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError {
    /// The operation, for metrics: a fixed set of names.
    fn operation(&self) -> &'static str {
        match self {
            ReconcileError::NoNamespace { .. } | ReconcileError::RereadJob { .. } => "read_job",
            ReconcileError::WriteStatus { .. } => "write_status",
            ReconcileError::Adopt { kind: "pod", .. } => "adopt_pod",
            ReconcileError::Adopt { .. } => "adopt_service",
            ReconcileError::Release { kind: "pod", .. } => "release_pod",
            ReconcileError::Release { .. } => "release_service",
            ReconcileError::Update { .. } => "update_podgroup",
            ReconcileError::Create { kind: "pod", .. } => "create_pod",
            ReconcileError::Create {
                kind: "service", ..
            } => "create_service",
            ReconcileError::Create { .. } => "create_podgroup",
            ReconcileError::Delete { kind: "pod", .. } => "delete_pod",
            ReconcileError::Delete {
                kind: "service", ..
            } => "delete_service",
            ReconcileError::Delete { kind: "TFJob", .. } => "delete_job",
            ReconcileError::Delete { .. } => "delete_podgroup",
        }
    }

    /// A write refused because the object changed since it was read (409): the cache is
    /// behind, and a prompt retry from a fresher cache is the fix.
    fn is_conflict(&self) -> bool {
        match self {
            ReconcileError::WriteStatus { source, .. }
            | ReconcileError::Adopt { source, .. }
            | ReconcileError::Release { source, .. } => {
                matches!(source, kube::Error::Api(e) if e.code == 409)
            }
            _ => false,
        }
    }
}

/// What the operator was started with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: Option<String>,
    pub concurrency: u16,
    pub options: build::Options,
}

/// Run the controller until `stop` resolves and the reconciles in flight have finished.
///
/// `ready` is called once the pod and service caches have synced.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    ready: impl FnOnce() + Send + 'static,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (jobs, pods, services): (Api<TFJob>, Api<Pod>, Api<Service>) = match &settings.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let children = watcher::Config::default().labels(&format!("{LABEL_OPERATOR}={OPERATOR_NAME}"));
    let expectations = Arc::new(Expectations::default());
    let queue = Arc::new(WorkQueue {
        jobs: Mutex::new(HashSet::new()),
        metrics: metrics.clone(),
    });

    // Every object a watch delivers is in its cache once it passes `reflect`: only then does
    // it end the expectation of its creation and queue its job.
    let (job_store, job_writer) = reflector::store();
    let job_stream = {
        let queue = queue.clone();
        watcher(jobs, watcher::Config::default())
            .default_backoff()
            .modify(|j: &mut TFJob| j.managed_fields_mut().clear())
            .reflect(job_writer)
            .touched_objects()
            .inspect_ok(move |j: &TFJob| queue.add(j.namespace(), j.name_any()))
    };
    let (pod_store, pod_writer) = reflector::store();
    let pod_stream = {
        let (expectations, queue) = (expectations.clone(), queue.clone());
        watcher(pods, children.clone())
            .default_backoff()
            .modify(slim_pod)
            .reflect(pod_writer)
            .touched_objects()
            .inspect_ok(move |p: &Pod| {
                expectations.observe(Kind::Pod, &p.namespace().unwrap_or_default(), &p.name_any());
                queue.add_controller_of(p);
            })
    };
    let (service_store, service_writer) = reflector::store();
    let service_stream = {
        let (expectations, queue) = (expectations.clone(), queue.clone());
        watcher(services, children)
            .default_backoff()
            .modify(slim_service)
            .reflect(service_writer)
            .touched_objects()
            .inspect_ok(move |s: &Service| {
                expectations.observe(
                    Kind::Service,
                    &s.namespace().unwrap_or_default(),
                    &s.name_any(),
                );
                queue.add_controller_of(s);
            })
    };

    let events = Events::start(
        client.clone(),
        std::env::var("HOSTNAME").ok(),
        metrics.clone(),
    );
    let context = Arc::new(Context {
        client,
        pods: pod_store.clone(),
        services: service_store.clone(),
        events,
        metrics,
        options: settings.options,
        deleted: Mutex::new(HashMap::new()),
        expectations,
        queue: queue.clone(),
    });

    tokio::spawn(async move {
        if pod_store.wait_until_ready().await.is_ok()
            && service_store.wait_until_ready().await.is_ok()
        {
            ready();
        }
    });

    Controller::for_stream(job_stream, job_store)
        // A short debounce folds the burst of pod updates a starting job makes into fewer
        // reconciles (and status writes).
        .with_config(
            ControllerConfig::default()
                .concurrency(settings.concurrency.max(1))
                .debounce(Duration::from_millis(200)),
        )
        .owns_stream(pod_stream)
        .owns_stream(service_stream)
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            match result {
                // Deleted before its turn came.
                Err(ControllerError::ObjectNotFound(job)) => {
                    queue.remove(job.namespace.as_deref().unwrap_or_default(), &job.name);
                }
                Err(e) => tracing::debug!(error = %e, "reconcile did not complete"),
                Ok(_) => {}
            }
            std::future::ready(())
        })
        .await;
}

/// Of a cached pod, only what `plan` reads is kept: metadata and status. The spec (with every
/// container's environment and TF_CONFIG) and the managed fields are most of a pod's size, and
/// at thousands of pods most of the operator's memory.
fn slim_pod(pod: &mut Pod) {
    pod.managed_fields_mut().clear();
    pod.metadata.annotations = None;
    pod.spec = None;
}

/// Of a cached service, only the metadata is read.
fn slim_service(service: &mut Service) {
    service.managed_fields_mut().clear();
    service.metadata.annotations = None;
    service.spec = None;
    service.status = None;
}

/// Retry a failed reconcile soon; conflicts (a stale cache) sooner.
pub fn error_policy(job: Arc<TFJob>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.metrics.error(error.operation());
    let conflict = error.is_conflict();
    if !conflict {
        tracing::warn!(
            job = %format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any()),
            error = %error,
            cause = %error.source_chain(),
            "reconcile failed"
        );
    }
    Action::requeue(if conflict {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(5)
    })
}

trait SourceChain {
    fn source_chain(&self) -> String;
}

impl<E: std::error::Error> SourceChain for E {
    fn source_chain(&self) -> String {
        let mut parts = Vec::new();
        let mut source = self.source();
        while let Some(s) = source {
            parts.push(s.to_string());
            source = s.source();
        }
        parts.join(": ")
    }
}

/// Reconcile one TFJob.
pub async fn reconcile(job: Arc<TFJob>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let name = job.name_any();
    let namespace = job
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace { name: name.clone() })?;
    let span = tracing::info_span!("reconcile", job = %format!("{namespace}/{name}"));
    ctx.queue.remove(&namespace, &name);
    ctx.metrics.in_flight_add(1);
    let started = Instant::now();
    let result = reconcile_job(job, &ctx, &namespace, &name)
        .instrument(span)
        .await;
    ctx.metrics.in_flight_add(-1);
    ctx.metrics.reconciled(started.elapsed());
    result
}

async fn reconcile_job(
    job: Arc<TFJob>,
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Action, ReconcileError> {
    tracing::debug!("reconciling");
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if let Some(manager) = job
        .spec
        .run_policy
        .as_ref()
        .and_then(|r| r.managed_by.as_deref())
        && manager != MANAGED_BY_US
    {
        tracing::debug!(managed_by = manager, "left to another controller");
        return Ok(Action::await_change());
    }
    // Children created before the caches synced would be invisible; wait for them.
    let _ = ctx.pods.wait_until_ready().await;
    let _ = ctx.services.wait_until_ready().await;

    let mut defaulted = (*job).clone();
    defaults::apply(&mut defaulted.spec);
    let uid = job.uid().unwrap_or_default();
    let now = Time(Timestamp::now());

    let (pods, pods_to_claim) = children(&ctx.pods, &job, namespace, &uid);
    let (services, services_to_claim) = children(&ctx.services, &job, namespace, &uid);
    let pods = mark_deleted(ctx, &uid, pods, &now);
    let (claimed, claim_error) =
        claim_children(&job, ctx, namespace, &pods_to_claim, &services_to_claim).await;
    let pods = adopt::after_claims(pods, &claimed.pods, &claimed.released);
    let services = adopt::after_claims(services, &claimed.services, &claimed.released);

    let plan = plan::plan(
        &defaulted,
        Observed {
            pods: &pods,
            services: &services,
        },
        &now,
    );

    let old_status = job.status.clone().unwrap_or_default();
    if plan.status != old_status {
        let mut updated = (*job).clone();
        let mut status = plan.status.clone();
        status.last_reconcile_time = Some(now.clone());
        updated.status = Some(status);
        let api: Api<TFJob> = Api::namespaced(ctx.client.clone(), namespace);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        api.replace_status(name, &pp, &updated)
            .await
            .map_err(|source| ReconcileError::WriteStatus {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        if let Some(condition) = plan.status.conditions.last()
            && old_status.conditions.last() != Some(condition)
        {
            tracing::info!(condition = %condition.type_, reason = condition.reason.as_deref().unwrap_or(""), "status");
        }
    }
    for transition in &plan.transitions {
        ctx.metrics.job(*transition, namespace);
    }

    let result = carry_out(&job, &defaulted, ctx, namespace, &uid, &plan).await;
    for e in &plan.events {
        let kind = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.events
            .publish(&job, kind, e.reason.clone(), e.message.clone(), "Reconcile");
    }
    let look_again = result?;
    // Children that could not be claimed are claimed on the retry.
    if let Some(error) = claim_error {
        return Err(error);
    }

    let requeue_after = match (plan.requeue_after, look_again) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(match requeue_after {
        Some(after) => Action::requeue(after.max(Duration::from_millis(100))),
        None => Action::await_change(),
    })
}

/// Whether `object` is in `namespace`. Every reconcile asks this of every cached pod and
/// service, so it allocates nothing.
fn in_namespace<K: Resource>(object: &K, namespace: &str) -> bool {
    object.meta().namespace.as_deref() == Some(namespace)
}

fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// From one cache, in a single pass (every reconcile scans every cached pod and service): the
/// objects the job controls, and those it has to adopt or release (see `adopt::claim`).
fn children<K: Resource<DynamicType = ()> + Clone>(
    cache: &Store<K>,
    job: &TFJob,
    namespace: &str,
    job_uid: &str,
) -> (Vec<K>, Vec<Arc<K>>) {
    let relevant = cache.state_filter(|o| {
        in_namespace(o, namespace) && (controlled_by(o, job_uid) || adopt::claim(job, o).is_some())
    });
    let controlled = relevant
        .iter()
        .filter(|o| controlled_by(o.as_ref(), job_uid))
        .map(|o| (**o).clone())
        .collect();
    let to_claim = relevant
        .into_iter()
        .filter(|o| adopt::claim(job, o.as_ref()).is_some())
        .collect();
    (controlled, to_claim)
}

/// The job's pods, those this operator already deleted marked as being deleted.
fn mark_deleted(ctx: &Context, job_uid: &str, mut pods: Vec<Pod>, now: &Time) -> Vec<Pod> {
    let mut deleted = lock(&ctx.deleted);
    // Forget the pods of this job that the cache no longer has.
    deleted.retain(|pod_uid, owner| {
        owner != job_uid
            || pods
                .iter()
                .any(|p| p.metadata.uid.as_ref() == Some(pod_uid))
    });
    for pod in &mut pods {
        if pod
            .metadata
            .uid
            .as_ref()
            .is_some_and(|u| deleted.contains_key(u))
        {
            pod.metadata
                .deletion_timestamp
                .get_or_insert_with(|| now.clone());
        }
    }
    pods
}

/// Of the replicas in `wanted`, those whose pod (or service) was not created recently; and
/// when the first expectation of the others runs out, to look again then in case their
/// objects never show up.
fn not_on_their_way(
    ctx: &Context,
    kind: Kind,
    job: &TFJob,
    wanted: &[(ReplicaType, i32)],
) -> (Vec<(ReplicaType, i32)>, Option<Duration>) {
    let namespace = job.namespace().unwrap_or_default();
    let job_name = job.name_any();
    let now = Instant::now();
    let mut first_expiry: Option<Duration> = None;
    let to_create = wanted
        .iter()
        .copied()
        .filter(|&(rtype, index)| {
            let name = build::name(&job_name, rtype, index);
            match ctx.expectations.awaiting(kind, &namespace, &name, now) {
                Some(left) => {
                    first_expiry = Some(first_expiry.map_or(left, |f| f.min(left)));
                    false
                }
                None => true,
            }
        })
        .collect();
    (to_create, first_expiry)
}

/// What one reconcile adopted (as the patches returned it) and released (by UID).
#[derive(Default)]
struct Claimed {
    pods: Vec<Pod>,
    services: Vec<Service>,
    released: BTreeSet<String>,
}

/// Adopt the orphan pods and services that carry the job's labels and release those the job
/// controls whose labels no longer match (see `adopt`). Keeps going past a failure: returns
/// what was done, and the first error.
async fn claim_children(
    job: &TFJob,
    ctx: &Context,
    namespace: &str,
    pods: &[Arc<Pod>],
    services: &[Arc<Service>],
) -> (Claimed, Option<ReconcileError>) {
    let mut claimed = Claimed::default();
    if pods.is_empty() && services.is_empty() {
        return (claimed, None);
    }
    let mut first_error = None;
    let adopting = pods
        .iter()
        .any(|p| adopt::claim(job, p.as_ref()) == Some(Claim::Adopt))
        || services
            .iter()
            .any(|s| adopt::claim(job, s.as_ref()) == Some(Claim::Adopt));
    // The cache may not have seen the job deleted, or deleted and created again under the same
    // name: read it from the API server before giving it children, as upstream does.
    let may_adopt = adopting
        && match reread_allows_adoption(job, ctx, namespace).await {
            Ok(allowed) => allowed,
            Err(e) => {
                first_error = Some(e);
                false
            }
        };

    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    claimed.pods = claim_all(
        job,
        &pod_api,
        pods,
        "pod",
        may_adopt,
        &mut claimed.released,
        &mut first_error,
    )
    .await;
    let service_api: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    claimed.services = claim_all(
        job,
        &service_api,
        services,
        "service",
        may_adopt,
        &mut claimed.released,
        &mut first_error,
    )
    .await;
    (claimed, first_error)
}

/// Claim each of `objects` (see `claim_one`) at once: returns those adopted, adds the UIDs of
/// those released to `released`, and keeps the first error.
async fn claim_all<K>(
    job: &TFJob,
    api: &Api<K>,
    objects: &[Arc<K>],
    kind: &'static str,
    may_adopt: bool,
    released: &mut BTreeSet<String>,
    first_error: &mut Option<ReconcileError>,
) -> Vec<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let claims = objects
        .iter()
        .map(|o| claim_one(job, api, o.as_ref(), kind, may_adopt));
    let mut adopted = Vec::new();
    for result in join_all(claims).await {
        match result {
            Ok(Some((Claim::Adopt, object))) => adopted.push(object),
            Ok(Some((Claim::Release, object))) => released.extend(object.uid()),
            Ok(None) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    adopted
}

/// Read the job from the API server (not the cache) and say whether orphans may be adopted
/// into it: it is still there, with the same UID, and not being deleted.
async fn reread_allows_adoption(
    job: &TFJob,
    ctx: &Context,
    namespace: &str,
) -> Result<bool, ReconcileError> {
    let api: Api<TFJob> = Api::namespaced(ctx.client.clone(), namespace);
    let name = job.name_any();
    let fresh = api
        .get_opt(&name)
        .await
        .map_err(|source| ReconcileError::RereadJob {
            namespace: namespace.to_owned(),
            name: name.clone(),
            source,
        })?;
    let allowed = adopt::may_adopt_into(fresh.as_ref(), &job.uid().unwrap_or_default());
    if !allowed {
        tracing::info!("not adopting orphans: the job is gone, replaced or being deleted");
    }
    Ok(allowed)
}

/// Adopt or release one object, as `adopt::claim` says. `Ok(None)`: nothing was done (the
/// object is gone, or adoption is not allowed); otherwise the object as patched.
async fn claim_one<K>(
    job: &TFJob,
    api: &Api<K>,
    object: &K,
    kind: &'static str,
    may_adopt: bool,
) -> Result<Option<(Claim, K)>, ReconcileError>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(claim) = adopt::claim(job, object) else {
        return Ok(None);
    };
    let patch = match claim {
        Claim::Adopt if !may_adopt => return Ok(None),
        Claim::Adopt => adopt::adopt_patch(job, object),
        Claim::Release => adopt::release_patch(&job.uid().unwrap_or_default(), object),
    };
    let name = object.name_any();
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api.patch(&name, &pp, &Patch::Merge(&patch)).await {
        Ok(patched) => {
            match claim {
                Claim::Adopt => tracing::info!("adopted orphan {kind} {name}"),
                Claim::Release => {
                    tracing::info!("released {kind} {name}: its labels no longer match the job");
                }
            }
            Ok(Some((claim, patched)))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(source) => {
            let namespace = object.namespace().unwrap_or_default();
            Err(match claim {
                Claim::Adopt => ReconcileError::Adopt {
                    kind,
                    namespace,
                    name,
                    source,
                },
                Claim::Release => ReconcileError::Release {
                    kind,
                    namespace,
                    name,
                    source,
                },
            })
        }
    }
}

/// Create and delete what the plan says; keep going past a failure and report the first.
/// `Ok(Some(after))` asks to look again after that long: pods are waiting for the gang
/// scheduler to admit the job's PodGroup (which is not watched), or objects created earlier
/// have not shown up in the caches yet.
async fn carry_out(
    job: &TFJob,
    defaulted: &TFJob,
    ctx: &Context,
    namespace: &str,
    job_uid: &str,
    plan: &Plan,
) -> Result<Option<Duration>, ReconcileError> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let mut first_error = None;

    // Without its PodGroup (or, with Volcano, before the group is admitted) pods would not be
    // gang-scheduled: they wait, as upstream's do. Services do not.
    let mut pods_admitted = true;
    if ctx.options.gang_scheduler.is_some() {
        let finished = conditions::is_finished(&plan.status);
        match sync_pod_group(defaulted, ctx, namespace, finished).await {
            Ok(admitted) => pods_admitted = admitted,
            Err(e) => {
                pods_admitted = false;
                first_error.get_or_insert(e);
            }
        }
    }
    let waiting_for_pod_group = !pods_admitted && !plan.create_pods.is_empty();
    if waiting_for_pod_group {
        tracing::info!("waiting for the PodGroup to be admitted before creating pods");
    }
    let (create_pods, pods_expiry) = if pods_admitted {
        not_on_their_way(ctx, Kind::Pod, job, &plan.create_pods)
    } else {
        (Vec::new(), None)
    };
    let (create_services, services_expiry) =
        not_on_their_way(ctx, Kind::Service, job, &plan.create_services);
    // PodGroups are not watched: poll while the pods wait for one.
    let look_again = [
        pods_expiry,
        services_expiry,
        waiting_for_pod_group.then_some(POD_GROUP_POLL),
    ]
    .into_iter()
    .flatten()
    .min();

    let service_creates = create_services.iter().map(|&(rtype, index)| {
        let service = build::service(defaulted, rtype, index);
        create(
            ctx,
            job,
            &services,
            &pp,
            service,
            Kind::Service,
            rtype,
            index,
        )
    });
    // Once per replica type whose pods this reconcile creates, not on every reconcile.
    let mut created_types: Vec<ReplicaType> = create_pods.iter().map(|&(t, _)| t).collect();
    created_types.sort_unstable();
    created_types.dedup();
    for rtype in created_types {
        for warning in build::template_warnings(defaulted, rtype, &ctx.options) {
            tracing::warn!(
                replica_type = rtype.lower(),
                reason = warning.reason,
                "{}",
                warning.message
            );
            ctx.events.publish(
                job,
                EventType::Warning,
                warning.reason.to_owned(),
                warning.message,
                "Create",
            );
        }
    }
    let pod_creates = create_pods.iter().map(|&(rtype, index)| {
        let pod = build::pod(defaulted, rtype, index, &ctx.options);
        create(ctx, job, &pods, &pp, pod, Kind::Pod, rtype, index)
    });
    let (service_results, pod_results) =
        futures::join!(join_all(service_creates), join_all(pod_creates));
    let created_services = done(service_results, &mut first_error);
    let created_pods = done(pod_results, &mut first_error);
    publish_done(
        ctx,
        job,
        "SuccessfulCreateService",
        "Created service",
        &created_services,
    );
    publish_done(
        ctx,
        job,
        "SuccessfulCreatePod",
        "Created pod",
        &created_pods,
    );

    {
        let mut deleted = lock(&ctx.deleted);
        for uid in plan.delete_pods.iter().filter_map(|d| d.uid.clone()) {
            deleted.insert(uid, job_uid.to_owned());
        }
    }
    let pod_deletes = plan
        .delete_pods
        .iter()
        .map(|d| delete_pod(ctx, job, &pods, d));
    let service_deletes = plan
        .delete_services
        .iter()
        .map(|name| delete_service(ctx, job, &services, name));
    let (pod_results, service_results) =
        futures::join!(join_all(pod_deletes), join_all(service_deletes));
    let deleted_pods = done(pod_results, &mut first_error);
    let deleted_services = done(service_results, &mut first_error);
    publish_done(
        ctx,
        job,
        "SuccessfulDeletePod",
        "Deleted pod",
        &deleted_pods,
    );
    publish_done(
        ctx,
        job,
        "SuccessfulDeleteService",
        "Deleted service",
        &deleted_services,
    );

    if plan.delete_job {
        let api: Api<TFJob> = Api::namespaced(ctx.client.clone(), namespace);
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(job_uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&job.name_any(), &dp).await {
            Ok(_) => {
                ctx.metrics.job_deleted(namespace);
                tracing::info!("deleted: ttlSecondsAfterFinished passed");
                ctx.events.publish(
                    job,
                    EventType::Normal,
                    "SuccessfulDeleteJob".into(),
                    format!("Deleted job: {}", job.name_any()),
                    "Delete",
                );
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                ctx.events.publish(
                    job,
                    EventType::Warning,
                    "FailedDeleteJob".into(),
                    format!("Error deleting: {source}"),
                    "Delete",
                );
                first_error.get_or_insert(ReconcileError::Delete {
                    kind: "TFJob",
                    namespace: namespace.to_owned(),
                    name: job.name_any(),
                    source,
                });
            }
        }
    }
    first_error.map_or(Ok(look_again), Err)
}

#[allow(clippy::too_many_arguments)]
async fn create<K>(
    ctx: &Context,
    job: &TFJob,
    api: &Api<K>,
    pp: &PostParams,
    object: K,
    expected: Kind,
    rtype: ReplicaType,
    index: i32,
) -> Result<Option<String>, ReconcileError>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let namespace = job.namespace().unwrap_or_default();
    let (kind, noun, metric) = match expected {
        Kind::Pod => ("pod", "Pod", "created_pods"),
        Kind::Service => ("service", "Service", "succeeded_service_creation"),
    };
    ctx.expectations
        .expect(expected, &namespace, &name, Instant::now());
    match api.create(pp, &object).await {
        Ok(_) => {
            ctx.metrics.object(metric);
            tracing::debug!(
                replica_type = rtype.lower(),
                replica_index = index,
                "created {kind} {name}"
            );
            Ok(Some(name))
        }
        // Deterministic names: it exists, so there is nothing to do.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
        Err(source) => {
            ctx.expectations.forget(expected, &namespace, &name);
            if expected == Kind::Service {
                ctx.metrics.object("failed_service_creation");
            }
            tracing::warn!(replica_type = rtype.lower(), replica_index = index, error = %source, "cannot create {kind} {name}");
            ctx.events.publish(
                job,
                EventType::Warning,
                format!("FailedCreate{noun}"),
                format!("Error creating: {source}"),
                "Create",
            );
            Err(ReconcileError::Create {
                kind,
                namespace,
                name,
                source,
            })
        }
    }
}

async fn delete_pod(
    ctx: &Context,
    job: &TFJob,
    api: &Api<Pod>,
    deletion: &Deletion,
) -> Result<Option<String>, ReconcileError> {
    let dp = DeleteParams {
        preconditions: deletion.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&deletion.name, &dp).await {
        Ok(_) => {
            ctx.metrics.object("deleted_pods");
            tracing::debug!("deleted pod {}", deletion.name);
            Ok(Some(deletion.name.clone()))
        }
        // Gone already, or replaced by a newer pod of the same name that this deletion was not for.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(None),
        Err(source) => {
            ctx.events.publish(
                job,
                EventType::Warning,
                "FailedDeletePod".into(),
                format!("Error deleting: {source}"),
                "Delete",
            );
            Err(ReconcileError::Delete {
                kind: "pod",
                namespace: job.namespace().unwrap_or_default(),
                name: deletion.name.clone(),
                source,
            })
        }
    }
}

async fn delete_service(
    ctx: &Context,
    job: &TFJob,
    api: &Api<Service>,
    name: &str,
) -> Result<Option<String>, ReconcileError> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(Some(name.to_owned())),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(source) => {
            ctx.events.publish(
                job,
                EventType::Warning,
                "FailedDeleteService".into(),
                format!("Error deleting: {source}"),
                "Delete",
            );
            Err(ReconcileError::Delete {
                kind: "service",
                namespace: job.namespace().unwrap_or_default(),
                name: name.to_owned(),
                source,
            })
        }
    }
}

/// The names of the objects that creates (or deletes) acted on; the first error is kept.
fn done(
    results: Vec<Result<Option<String>, ReconcileError>>,
    first_error: &mut Option<ReconcileError>,
) -> Vec<String> {
    let mut names = Vec::new();
    for result in results {
        match result {
            Ok(Some(name)) => names.push(name),
            Ok(None) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    names
}

/// One Normal event for the objects a reconcile created or deleted: `Created pod: a` as
/// upstream has it for one, `Created pods: a, b, c` for several. Upstream records an event per
/// object; at 1,000 jobs that is 8,000 event writes, as many as the pods and services
/// themselves, on an API server that is already the bottleneck. Failures keep an event each.
fn publish_done(ctx: &Context, job: &TFJob, reason: &str, what: &str, names: &[String]) {
    let note = match names {
        [] => return,
        [one] => format!("{what}: {one}"),
        many => format!("{what}s: {}", many.join(", ")),
    };
    let action = if reason.starts_with("SuccessfulDelete") {
        "Delete"
    } else {
        "Create"
    };
    ctx.events
        .publish(job, EventType::Normal, reason.to_owned(), note, action);
}

/// Create or update (or, once the job finished, delete) the job's PodGroup for the gang
/// scheduler, and say whether it admits the job's pods yet (see `build::pod_group_admits_pods`).
///
/// The group is written by server-side apply with `FIELD_MANAGER`, only when it is missing or
/// `build::pod_group_outdated` says so: fields others set are kept, and a field the job no
/// longer asks for (a priority class removed) is removed. A group of the job's name that
/// another object controls is used as it is, never changed.
async fn sync_pod_group(
    job: &TFJob,
    ctx: &Context,
    namespace: &str,
    finished: bool,
) -> Result<bool, ReconcileError> {
    let Some(scheduler) = ctx.options.gang_scheduler.as_deref() else {
        return Ok(true);
    };
    let (group, version, kind) = build::pod_group_gvk(scheduler);
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        "podgroups",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    let name = job.name_any();
    if finished {
        return match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                ctx.events.publish(
                    job,
                    EventType::Normal,
                    "SuccessfulDeletePodGroup".into(),
                    format!("Deleted PodGroup: {name}"),
                    "Delete",
                );
                ctx.metrics.object("deleted_pod_groups");
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(true),
            Err(source) => {
                ctx.events.publish(
                    job,
                    EventType::Warning,
                    "FailedDeletePodGroup".into(),
                    format!("Error deleting: {source}"),
                    "Delete",
                );
                Err(ReconcileError::Delete {
                    kind: "PodGroup",
                    namespace: namespace.to_owned(),
                    name,
                    source,
                })
            }
        };
    }
    let phase = |group: &DynamicObject| group.data["status"]["phase"].as_str().map(str::to_owned);
    let wanted = build::pod_group_spec(job, scheduler);
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|source| ReconcileError::Create {
            kind: "PodGroup",
            namespace: namespace.to_owned(),
            name: name.clone(),
            source,
        })?;
    if let Some(existing) = &existing {
        let job_uid = job.uid().unwrap_or_default();
        let someone_elses = existing
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid != job_uid);
        let applied = build::applied_spec_fields(&existing.metadata, FIELD_MANAGER);
        if someone_elses || !build::pod_group_outdated(&existing.data["spec"], &wanted, &applied) {
            return Ok(build::pod_group_admits_pods(
                scheduler,
                phase(existing).as_deref(),
            ));
        }
    }
    let mut group = DynamicObject::new(&name, &resource)
        .within(namespace)
        .data(serde_json::json!({ "spec": wanted }));
    group.metadata.owner_references = Some(vec![build::owner_reference(job)]);
    // Forced: the operator is the one writer of these fields; a conflict with an earlier
    // writer (a person, or a version that created the group with a plain create) is resolved
    // in the job's favour, as upstream's update does.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(&name, &params, &Patch::Apply(&group)).await {
        Ok(applied) => {
            if existing.is_some() {
                ctx.metrics.object("updated_pod_groups");
                tracing::info!("updated PodGroup {name}: the job asks for a different spec");
            } else {
                ctx.metrics.object("created_pod_groups");
            }
            Ok(build::pod_group_admits_pods(
                scheduler,
                phase(&applied).as_deref(),
            ))
        }
        Err(source) => {
            let updating = existing.is_some();
            let (reason, verb, action) = if updating {
                ("FailedUpdatePodGroup", "updating", "Update")
            } else {
                ("FailedCreatePodGroup", "creating", "Create")
            };
            ctx.events.publish(
                job,
                EventType::Warning,
                reason.into(),
                format!("Error {verb}: {source}"),
                action,
            );
            let (kind, namespace) = ("PodGroup", namespace.to_owned());
            Err(if updating {
                ReconcileError::Update {
                    kind,
                    namespace,
                    name,
                    source,
                }
            } else {
                ReconcileError::Create {
                    kind,
                    namespace,
                    name,
                    source,
                }
            })
        }
    }
}
