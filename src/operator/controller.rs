//! The controller: watches TFJobs and their pods and services, and for each job runs `plan`
//! and carries it out.
//!
//! # Expected flow
//! A TFJob, or one of its pods or services, changes; kube-runtime schedules a reconcile of the
//! job (one at a time per job, `--concurrency` jobs at once). `reconcile` defaults the job in
//! memory, reads its pods and services from the reflector caches, computes the plan, writes
//! the status if it changed, then creates and deletes pods and services and records events.
//! With `--gang-scheduler` it first creates the job's PodGroup (deletes it once the job is
//! finished); pods are created only once the group exists and, with Volcano, is admitted
//! (PodGroups are not watched: the job is polled meanwhile).
//!
//! # Guarantees
//! - No duplicate pods: names are deterministic and creation is create-if-absent
//!   (AlreadyExists is success), also across restarts and with two replicas racing.
//! - The status is written before acting, with the resourceVersion it was computed from: a
//!   stale cache turns into a conflict and a retry, never into a counted-twice restart.
//! - A pod the operator deleted is treated as being deleted until the cache no longer has it,
//!   so one failure is never handled twice.
//!
//! # Errors
//! Every failed API call is logged with the job, recorded as an event where the user can see it,
//! counted in `mlkube_operator_reconcile_errors_total{operation}`, and retried by
//! `error_policy` after a short delay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams, Preconditions,
};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::Instrument;

use super::api::{FIELD_MANAGER, MANAGED_BY_US, TFJob};
use super::build::{self, LABEL_OPERATOR, OPERATOR_NAME};
use super::conditions;
use super::defaults::{self, ReplicaType};
use super::metrics::Metrics;
use super::plan::{self, Deletion, Observed, Plan};

/// How often a job whose pods wait for their PodGroup to be admitted looks again.
const POD_GROUP_POLL: Duration = Duration::from_secs(2);

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: Client,
    pub pods: Store<Pod>,
    pub services: Store<Service>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub options: build::Options,
    /// Pods this operator deleted (pod UID → job UID) that the cache may still show.
    deleted: Mutex<HashMap<String, String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("TFJob {name} has no namespace")]
    NoNamespace { name: String },
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
            ReconcileError::NoNamespace { .. } => "read_job",
            ReconcileError::WriteStatus { .. } => "write_status",
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
}

/// What the operator was started with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: Option<String>,
    pub concurrency: u16,
    pub options: build::Options,
}

/// Run the controller until its streams end (they do not, short of a shutdown signal).
///
/// `ready` is called once the pod and service caches have synced.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    ready: impl FnOnce() + Send + 'static,
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

    // Managed fields are a large share of every cached object and never read: drop them.
    let (pod_store, pod_writer) = reflector::store();
    let pod_stream = watcher(pods, children.clone())
        .default_backoff()
        .modify(|p: &mut Pod| p.managed_fields_mut().clear())
        .reflect(pod_writer)
        .touched_objects();
    let (service_store, service_writer) = reflector::store();
    let service_stream = watcher(services, children)
        .default_backoff()
        .modify(|s: &mut Service| s.managed_fields_mut().clear())
        .reflect(service_writer)
        .touched_objects();

    let reporter = Reporter {
        controller: "tfjob-controller".to_owned(),
        instance: std::env::var("HOSTNAME").ok(),
    };
    let context = Arc::new(Context {
        client: client.clone(),
        pods: pod_store.clone(),
        services: service_store.clone(),
        recorder: Recorder::new(client, reporter),
        metrics,
        options: settings.options,
        deleted: Mutex::new(HashMap::new()),
    });

    tokio::spawn(async move {
        if pod_store.wait_until_ready().await.is_ok()
            && service_store.wait_until_ready().await.is_ok()
        {
            ready();
        }
    });

    Controller::new(jobs, watcher::Config::default())
        // A short debounce folds the burst of pod updates a starting job makes into fewer
        // reconciles (and status writes).
        .with_config(
            ControllerConfig::default()
                .concurrency(settings.concurrency.max(1))
                .debounce(Duration::from_millis(200)),
        )
        .owns_stream(pod_stream)
        .owns_stream(service_stream)
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile did not complete");
            }
        })
        .await;
}

/// Retry a failed reconcile soon; conflicts (a stale cache) sooner.
pub fn error_policy(job: Arc<TFJob>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.metrics.error(error.operation());
    let conflict = matches!(error, ReconcileError::WriteStatus { source: kube::Error::Api(e), .. } if e.code == 409);
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
    ctx.metrics.queue_add(1);
    let started = Instant::now();
    let result = reconcile_job(job, &ctx, &namespace, &name)
        .instrument(span)
        .await;
    ctx.metrics.queue_add(-1);
    ctx.metrics.reconciled(started.elapsed());
    result
}

async fn reconcile_job(
    job: Arc<TFJob>,
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Action, ReconcileError> {
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

    let pods = owned_pods(ctx, namespace, &uid, &now);
    let services: Vec<Service> = ctx
        .services
        .state_filter(|s| s.namespace().as_deref() == Some(namespace) && controlled_by(s, &uid))
        .iter()
        .map(|s| (**s).clone())
        .collect();

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
        publish(
            ctx,
            &job,
            kind,
            e.reason.clone(),
            e.message.clone(),
            "Reconcile",
        );
    }
    let waiting_for_pod_group = result?;

    // PodGroups are not watched: poll while the pods wait for one.
    let requeue_after = match (plan.requeue_after, waiting_for_pod_group) {
        (Some(after), true) => Some(after.min(POD_GROUP_POLL)),
        (None, true) => Some(POD_GROUP_POLL),
        (after, false) => after,
    };
    Ok(match requeue_after {
        Some(after) => Action::requeue(after.max(Duration::from_millis(100))),
        None => Action::await_change(),
    })
}

fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The job's pods from the cache, those this operator already deleted marked as being deleted.
fn owned_pods(ctx: &Context, namespace: &str, job_uid: &str, now: &Time) -> Vec<Pod> {
    let mut pods: Vec<Pod> = ctx
        .pods
        .state_filter(|p| p.namespace().as_deref() == Some(namespace) && controlled_by(p, job_uid))
        .iter()
        .map(|p| (**p).clone())
        .collect();
    let mut deleted = ctx
        .deleted
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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

/// Create and delete what the plan says; keep going past a failure and report the first.
/// `Ok(true)` means pods are waiting for the gang scheduler to admit the job's PodGroup.
async fn carry_out(
    job: &TFJob,
    defaulted: &TFJob,
    ctx: &Context,
    namespace: &str,
    job_uid: &str,
    plan: &Plan,
) -> Result<bool, ReconcileError> {
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
    let create_pods: &[(ReplicaType, i32)] = if pods_admitted {
        &plan.create_pods
    } else {
        if !plan.create_pods.is_empty() {
            tracing::info!("waiting for the PodGroup to be admitted before creating pods");
        }
        &[]
    };

    let service_creates = plan.create_services.iter().map(|&(rtype, index)| {
        let service = build::service(defaulted, rtype, index);
        create(ctx, job, &services, &pp, service, "service", rtype, index)
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
            publish(
                ctx,
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
        create(ctx, job, &pods, &pp, pod, "pod", rtype, index)
    });
    for result in join_all(service_creates)
        .await
        .into_iter()
        .chain(join_all(pod_creates).await)
    {
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }

    {
        let mut deleted = ctx
            .deleted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    for result in join_all(pod_deletes)
        .await
        .into_iter()
        .chain(join_all(service_deletes).await)
    {
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }

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
                publish(
                    ctx,
                    job,
                    EventType::Normal,
                    "SuccessfulDeleteJob".into(),
                    format!("Deleted job: {}", job.name_any()),
                    "Delete",
                );
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                publish(
                    ctx,
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
    first_error.map_or(Ok(!pods_admitted && !plan.create_pods.is_empty()), Err)
}

#[allow(clippy::too_many_arguments)]
async fn create<K>(
    ctx: &Context,
    job: &TFJob,
    api: &Api<K>,
    pp: &PostParams,
    object: K,
    kind: &'static str,
    rtype: ReplicaType,
    index: i32,
) -> Result<(), ReconcileError>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let (noun, metric) = if kind == "pod" {
        ("Pod", "created_pods")
    } else {
        ("Service", "succeeded_service_creation")
    };
    match api.create(pp, &object).await {
        Ok(_) => {
            ctx.metrics.object(metric);
            tracing::debug!(
                replica_type = rtype.lower(),
                replica_index = index,
                "created {kind} {name}"
            );
            publish(
                ctx,
                job,
                EventType::Normal,
                format!("SuccessfulCreate{noun}"),
                format!("Created {kind}: {name}"),
                "Create",
            );
            Ok(())
        }
        // Deterministic names: it exists, so there is nothing to do.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(source) => {
            if kind == "service" {
                ctx.metrics.object("failed_service_creation");
            }
            tracing::warn!(replica_type = rtype.lower(), replica_index = index, error = %source, "cannot create {kind} {name}");
            publish(
                ctx,
                job,
                EventType::Warning,
                format!("FailedCreate{noun}"),
                format!("Error creating: {source}"),
                "Create",
            );
            Err(ReconcileError::Create {
                kind,
                namespace: job.namespace().unwrap_or_default(),
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
) -> Result<(), ReconcileError> {
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
            publish(
                ctx,
                job,
                EventType::Normal,
                "SuccessfulDeletePod".into(),
                format!("Deleted pod: {}", deletion.name),
                "Delete",
            );
            Ok(())
        }
        // Gone already, or replaced by a newer pod of the same name that this deletion was not for.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(source) => {
            publish(
                ctx,
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
) -> Result<(), ReconcileError> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            publish(
                ctx,
                job,
                EventType::Normal,
                "SuccessfulDeleteService".into(),
                format!("Deleted service: {name}"),
                "Delete",
            );
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => {
            publish(
                ctx,
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

/// Record an event on the job, in the background: events are best-effort and a reconcile does
/// not wait for them. A failure to record is logged, never fatal.
fn publish(
    ctx: &Context,
    job: &TFJob,
    type_: EventType,
    reason: String,
    note: String,
    action: &str,
) {
    let mut note = note;
    if note.len() > 1000 {
        let mut cut = 1000;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    let event = KubeEvent {
        type_,
        reason,
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    let recorder = ctx.recorder.clone();
    let reference = job.object_ref(&());
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "cannot record event");
        }
    });
}

/// Create (or, once the job finished, delete) the job's PodGroup for the gang scheduler, and
/// say whether it admits the job's pods yet (see `build::pod_group_admits_pods`).
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
                publish(
                    ctx,
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
                publish(
                    ctx,
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
    let create_error = |source| ReconcileError::Create {
        kind: "PodGroup",
        namespace: namespace.to_owned(),
        name: name.clone(),
        source,
    };
    if let Some(existing) = api.get_opt(&name).await.map_err(create_error)? {
        return Ok(build::pod_group_admits_pods(
            scheduler,
            phase(&existing).as_deref(),
        ));
    }
    let mut group = DynamicObject::new(&name, &resource)
        .within(namespace)
        .data(serde_json::json!({ "spec": build::pod_group_spec(job, scheduler) }));
    group.metadata.owner_references = Some(vec![build::owner_reference(job)]);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&pp, &group).await {
        Ok(created) => {
            ctx.metrics.object("created_pod_groups");
            Ok(build::pod_group_admits_pods(
                scheduler,
                phase(&created).as_deref(),
            ))
        }
        // Created since the read: its scheduler has not had time to admit it.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            Ok(build::pod_group_admits_pods(scheduler, None))
        }
        Err(source) => {
            publish(
                ctx,
                job,
                EventType::Warning,
                "FailedCreatePodGroup".into(),
                format!("Error creating: {source}"),
                "Create",
            );
            Err(create_error(source))
        }
    }
}
