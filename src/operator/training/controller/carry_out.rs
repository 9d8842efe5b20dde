//! Carrying a plan out: create the pods and services it wants (those not created already and
//! on their way to the caches), delete those it does not, delete the job when its TTL passed,
//! and record one event per kind of change.

use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::DeleteParams;
use kube::{Api, Resource, ResourceExt};

use super::{Context, POD_GROUP_POLL, ReconcileError, companions, pod_group};
use crate::error_text::OneLine;
use crate::operator::runtime::events::EventType;
use crate::operator::runtime::expectations::Kind;
use crate::operator::runtime::lock;
use crate::operator::runtime::writes::{Created, Deleted, create_once, delete_exactly};
use crate::operator::training::engine::build;
use crate::operator::training::engine::conditions;
use crate::operator::training::engine::observe::Deletion;
use crate::operator::training::engine::plan::Plan;
use crate::operator::training::framework::{Event, ReplicaType, TrainingJob};

/// Create and delete what the plan says; keep going past a failure and report the first.
/// `Ok(Some(after))` asks to look again after that long: pods are waiting for the gang
/// scheduler to admit the job's PodGroup (which is not watched), or objects created earlier
/// have not shown up in the caches yet.
pub(super) async fn carry_out<J: TrainingJob>(
    job: &J,
    defaulted: &J,
    ctx: &Context,
    namespace: &str,
    job_uid: &str,
    plan: &Plan,
) -> Result<Option<Duration>, ReconcileError> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    let mut first_error = None;

    let pods_admitted = pod_group_admits(defaulted, ctx, namespace, plan, &mut first_error).await;
    let companions_written =
        companions_written(defaulted, ctx, namespace, plan, &mut first_error).await;
    let creations = creations(ctx, job, plan, pods_admitted, companions_written);
    create_all(
        job,
        defaulted,
        ctx,
        &pods,
        &services,
        &creations,
        &mut first_error,
    )
    .await;
    delete_all(job, ctx, job_uid, &pods, &services, plan, &mut first_error).await;
    if plan.delete_job
        && let Err(e) = delete_job(job, ctx, namespace, job_uid).await
    {
        first_error.get_or_insert(e);
    }
    first_error.map_or(Ok(creations.look_again), Err)
}

/// Without its PodGroup (or, with Volcano, before the group is admitted) pods would not be
/// gang-scheduled: they wait, as upstream's do. Services do not. Whether the job's pods may be
/// created; a failure to sync the group goes to `first_error` and holds them back.
async fn pod_group_admits<J: TrainingJob>(
    defaulted: &J,
    ctx: &Context,
    namespace: &str,
    plan: &Plan,
    first_error: &mut Option<ReconcileError>,
) -> bool {
    if ctx.options.gang_scheduler.is_none() {
        return true;
    }
    let finished = conditions::is_finished(&plan.status);
    let creating_pods = !plan.create_pods.is_empty();
    match pod_group::sync_pod_group(defaulted, ctx, namespace, finished, creating_pods).await {
        Ok(admitted) => admitted,
        Err(e) => {
            first_error.get_or_insert(e);
            false
        }
    }
}

/// The pods use them (MPIJob's launcher runs as its ServiceAccount and mounts the
/// ConfigMap): without them, no pod is created. Whether they are written (or need not be,
/// the job being finished); a failure goes to `first_error`.
async fn companions_written<J: TrainingJob>(
    defaulted: &J,
    ctx: &Context,
    namespace: &str,
    plan: &Plan,
    first_error: &mut Option<ReconcileError>,
) -> bool {
    if !conditions::is_finished(&plan.status)
        && let Err(e) = companions::sync_companions(defaulted, ctx, namespace).await
    {
        first_error.get_or_insert(e);
        return false;
    }
    true
}

/// The pods and services this reconcile creates, and when to look again.
struct Creations {
    pods: Vec<(ReplicaType, i32)>,
    services: Vec<(ReplicaType, i32)>,
    look_again: Option<Duration>,
}

/// Of the plan's pods and services, those to create now: pods only once the PodGroup admits
/// them and their companions are written, and neither when created recently and still on
/// their way to the caches; and when to look again for those that wait.
fn creations<J: TrainingJob>(
    ctx: &Context,
    job: &J,
    plan: &Plan,
    pods_admitted: bool,
    companions_written: bool,
) -> Creations {
    let waiting_for_pod_group = !pods_admitted && !plan.create_pods.is_empty();
    if waiting_for_pod_group {
        tracing::info!("waiting for the PodGroup to be admitted before creating pods");
    }
    let (pods, pods_expiry) = if pods_admitted && companions_written {
        not_on_their_way(ctx, Kind::Pod, job, &plan.create_pods)
    } else {
        (Vec::new(), None)
    };
    let (services, services_expiry) =
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
    Creations {
        pods,
        services,
        look_again,
    }
}

/// Create the services and pods, side by side, and record one event per kind of object
/// created; failures go to `first_error`, services' first.
async fn create_all<J: TrainingJob>(
    job: &J,
    defaulted: &J,
    ctx: &Context,
    pods: &Api<Pod>,
    services: &Api<Service>,
    creations: &Creations,
    first_error: &mut Option<ReconcileError>,
) {
    let service_creates = creations.services.iter().map(|&(rtype, index)| {
        let service = build::service(defaulted, rtype, index);
        create(ctx, job, services, service, Kind::Service, rtype, index)
    });
    publish_template_warnings(job, defaulted, ctx, &creations.pods);
    let pod_creates = creations.pods.iter().map(|&(rtype, index)| {
        let pod = build::pod(defaulted, rtype, index, &ctx.options);
        create(ctx, job, pods, pod, Kind::Pod, rtype, index)
    });
    let (service_results, pod_results) =
        futures::join!(join_all(service_creates), join_all(pod_creates));
    let created_services = done(service_results, first_error);
    let created_pods = done(pod_results, first_error);
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
}

/// What the templates of the pods about to be created do that the cluster may not: a
/// Warning log line and event each. Once per replica type whose pods this reconcile creates,
/// not on every reconcile.
fn publish_template_warnings<J: TrainingJob>(
    job: &J,
    defaulted: &J,
    ctx: &Context,
    create_pods: &[(ReplicaType, i32)],
) {
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
}

/// Delete the pods and services the plan no longer wants, side by side, and record one event
/// per kind of object deleted; failures go to `first_error`, pods' first. The pods are
/// remembered as deleted first, so a failure is never handled twice.
async fn delete_all<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    job_uid: &str,
    pods: &Api<Pod>,
    services: &Api<Service>,
    plan: &Plan,
    first_error: &mut Option<ReconcileError>,
) {
    {
        let mut deleted = lock(&ctx.deleted);
        for uid in plan.delete_pods.iter().filter_map(|d| d.uid.clone()) {
            deleted.insert(uid, job_uid.to_owned());
        }
    }
    let pod_deletes = plan
        .delete_pods
        .iter()
        .map(|d| delete_pod(ctx, job, pods, d));
    let service_deletes = plan
        .delete_services
        .iter()
        .map(|name| delete_service(ctx, job, services, name));
    let (pod_results, service_results) =
        futures::join!(join_all(pod_deletes), join_all(service_deletes));
    let deleted_pods = done(pod_results, first_error);
    let deleted_services = done(service_results, first_error);
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
}

/// Delete the job itself, its ttlSecondsAfterFinished having passed: only the job of this
/// UID, and one already gone is no error.
async fn delete_job<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    job_uid: &str,
) -> Result<(), ReconcileError> {
    let api: Api<J> = Api::namespaced(ctx.client.clone(), namespace);
    let uid = Some(job_uid.to_owned());
    match delete_exactly(&api, &job.name_any(), uid, DeleteParams::background()).await {
        Ok(Deleted::Sent) => {
            ctx.metrics.job_deleted(J::FRAMEWORK.name, namespace);
            tracing::info!("deleted: ttlSecondsAfterFinished passed");
            ctx.events.publish(
                job,
                EventType::Normal,
                "SuccessfulDeleteJob".into(),
                format!("Deleted job: {}", job.name_any()),
                "Delete",
            );
            Ok(())
        }
        Ok(Deleted::Gone | Deleted::Replaced) => Ok(()),
        Err(source) => {
            ctx.events.publish(
                job,
                EventType::Warning,
                "FailedDeleteJob".into(),
                format!("Error deleting: {}", OneLine(&source)),
                "Delete",
            );
            Err(ReconcileError::DeleteJob {
                kind: J::FRAMEWORK.kind,
                namespace: namespace.to_owned(),
                name: job.name_any(),
                source,
            })
        }
    }
}

async fn create<J: TrainingJob, K>(
    ctx: &Context,
    job: &J,
    api: &Api<K>,
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
    match create_once(api, &object).await {
        Ok(Created::New(_)) => {
            ctx.metrics.object(metric);
            tracing::debug!(
                replica_type = rtype.lower(),
                replica_index = index,
                "created {kind} {name}"
            );
            if expected == Kind::Pod {
                publish_framework_event(ctx, job, job.created_event(rtype, Ok(&name)));
            }
            Ok(Some(name))
        }
        // Deterministic names: it exists, so there is nothing to do.
        Ok(Created::Exists) => Ok(None),
        Err(source) => {
            ctx.expectations.forget(expected, &namespace, &name);
            if expected == Kind::Service {
                ctx.metrics.object("failed_service_creation");
            }
            tracing::warn!(replica_type = rtype.lower(), replica_index = index, error = %OneLine(&source), "cannot create {kind} {name}");
            if expected == Kind::Pod {
                let why = OneLine(&source).to_string();
                publish_framework_event(ctx, job, job.created_event(rtype, Err(&why)));
            }
            ctx.events.publish(
                job,
                EventType::Warning,
                format!("FailedCreate{noun}"),
                format!("Error creating: {}", OneLine(&source)),
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

async fn delete_pod<J: TrainingJob>(
    ctx: &Context,
    job: &J,
    api: &Api<Pod>,
    deletion: &Deletion,
) -> Result<Option<String>, ReconcileError> {
    let uid = deletion.uid.clone();
    match delete_exactly(api, &deletion.name, uid, DeleteParams::default()).await {
        Ok(Deleted::Sent) => {
            ctx.metrics.object("deleted_pods");
            tracing::debug!("deleted pod {}", deletion.name);
            Ok(Some(deletion.name.clone()))
        }
        // Gone already, or replaced by a newer pod of the same name that this deletion was not for.
        Ok(Deleted::Gone | Deleted::Replaced) => Ok(None),
        Err(source) => {
            ctx.events.publish(
                job,
                EventType::Warning,
                "FailedDeletePod".into(),
                format!("Error deleting: {}", OneLine(&source)),
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

async fn delete_service<J: TrainingJob>(
    ctx: &Context,
    job: &J,
    api: &Api<Service>,
    name: &str,
) -> Result<Option<String>, ReconcileError> {
    match delete_exactly(api, name, None, DeleteParams::default()).await {
        Ok(Deleted::Sent) => Ok(Some(name.to_owned())),
        Ok(Deleted::Gone | Deleted::Replaced) => Ok(None),
        Err(source) => {
            ctx.events.publish(
                job,
                EventType::Warning,
                "FailedDeleteService".into(),
                format!("Error deleting: {}", OneLine(&source)),
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

/// The framework's own event about a pod it created or could not create (MPIJob's Launcher).
fn publish_framework_event<J: TrainingJob>(ctx: &Context, job: &J, event: Option<Event>) {
    if let Some(event) = event {
        let type_ = if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.events
            .publish(job, type_, event.reason, event.message, "Create");
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
fn publish_done<J: TrainingJob>(
    ctx: &Context,
    job: &J,
    reason: &str,
    what: &str,
    names: &[String],
) {
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

/// Of the replicas in `wanted`, those whose pod (or service) was not created recently; and
/// when the first expectation of the others runs out, to look again then in case their
/// objects never show up.
fn not_on_their_way<J: TrainingJob>(
    ctx: &Context,
    kind: Kind,
    job: &J,
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
            let name = match kind {
                Kind::Pod => job.pod_name(rtype, index),
                Kind::Service => build::name(&job_name, rtype, index),
            };
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
