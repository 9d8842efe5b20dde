//! One reconcile: read the job's children from the caches, claim orphans, plan, write the
//! status, carry the plan out, record its events; and what happens when that fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::Instrument;

use super::stored_job::StoredJob;
use super::{Context, autoscaler, carry_out, claim, data, status};
use crate::error_text::OneLine;
use crate::operator::runtime::events::EventType;
use crate::operator::runtime::writes::is_conflict;
use crate::operator::training::api::MANAGED_BY_US;
use crate::operator::training::engine::adopt;
use crate::operator::training::engine::defaults;
use crate::operator::training::engine::observe::Observed;
use crate::operator::training::engine::plan;
use crate::operator::training::framework::Event;
use crate::operator::training::framework::TrainingJob;

/// How long a reconcile that found the job's cache behind the operator's own status write
/// waits at most before looking again.
const STALE_CACHE_BACKSTOP: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("{kind} {name} has no namespace")]
    NoNamespace { kind: &'static str, name: String },
    #[error("cannot read {kind} {namespace}/{name} back from the operator's cache")]
    ReadCachedJob {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot read {kind} {namespace}/{name} back before adopting its orphans")]
    RereadJob {
        kind: &'static str,
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
    #[error("cannot write the status of {kind} {namespace}/{name}")]
    WriteStatus {
        kind: &'static str,
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
    #[error(
        "{kind} {namespace}/{name} exists and belongs to {owner}, so the job cannot use it\nhint: delete it, or rename the job"
    )]
    NotOurs {
        kind: &'static str,
        namespace: String,
        name: String,
        owner: String,
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
    DeleteJob {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read VolumeManager {namespace}/{name}, which the job reads its data from")]
    ReadData {
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
            ReconcileError::NoNamespace { .. }
            | ReconcileError::ReadCachedJob { .. }
            | ReconcileError::RereadJob { .. } => "read_job",
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
            ReconcileError::Create {
                kind: "HorizontalPodAutoscaler",
                ..
            }
            | ReconcileError::NotOurs {
                kind: "HorizontalPodAutoscaler",
                ..
            } => "apply_autoscaler",
            ReconcileError::Create {
                kind: "ConfigMap" | "ServiceAccount" | "Role" | "RoleBinding",
                ..
            }
            | ReconcileError::NotOurs { .. } => "apply_companion",
            ReconcileError::Delete {
                kind: "HorizontalPodAutoscaler",
                ..
            } => "delete_autoscaler",
            ReconcileError::Create { .. } => "create_podgroup",
            ReconcileError::Delete { kind: "pod", .. } => "delete_pod",
            ReconcileError::Delete {
                kind: "service", ..
            } => "delete_service",
            ReconcileError::DeleteJob { .. } => "delete_job",
            ReconcileError::ReadData { .. } => "read_volume_manager",
            ReconcileError::Delete { .. } => "delete_podgroup",
        }
    }

    /// A write refused because the object changed since it was read (409): the cache is
    /// behind, and a prompt retry from a fresher cache is the fix.
    fn is_conflict(&self) -> bool {
        match self {
            ReconcileError::WriteStatus { source, .. }
            | ReconcileError::Adopt { source, .. }
            | ReconcileError::Release { source, .. } => is_conflict(source),
            _ => false,
        }
    }
}

/// Retry a failed reconcile soon; conflicts (a stale cache) sooner.
pub fn error_policy<J: TrainingJob>(
    job: Arc<StoredJob<J>>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    ctx.metrics.error(error.operation());
    let conflict = error.is_conflict();
    if !conflict {
        tracing::warn!(
            job = %format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any()),
            error = %OneLine(error),
            "reconcile failed"
        );
    }
    Action::requeue(if conflict {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(5)
    })
}

/// Reconcile one job.
pub async fn reconcile<J: TrainingJob>(
    stored: Arc<StoredJob<J>>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let name = stored.name_any();
    let namespace = stored
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace {
            kind: J::FRAMEWORK.kind,
            name: name.clone(),
        })?;
    let job = stored
        .job()
        .map_err(|source| ReconcileError::ReadCachedJob {
            kind: J::FRAMEWORK.kind,
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        })?;
    let span = tracing::info_span!("reconcile", job = %format!("{namespace}/{name}"));
    ctx.queue.remove(&namespace, &name);
    ctx.metrics.in_flight_add(1);
    let started = Instant::now();
    let result = reconcile_job(&job, &ctx, &namespace).instrument(span).await;
    ctx.metrics.in_flight_add(-1);
    ctx.metrics.reconciled(started.elapsed());
    result
}

async fn reconcile_job<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
) -> Result<Action, ReconcileError> {
    tracing::debug!("reconciling");
    if let Some(action) = left_alone(job, ctx, namespace) {
        return Ok(action);
    }
    // Children created before the caches synced would be invisible; wait for them.
    let _ = ctx.pods.wait_until_ready().await;
    let _ = ctx.services.wait_until_ready().await;

    let mut defaulted = job.clone();
    defaults::apply(&mut defaulted);
    if let Some(waiting) = data::attach(job, &mut defaulted, ctx, namespace).await? {
        return Ok(waiting);
    }
    let uid = job.uid().unwrap_or_default();
    let now = Time(Timestamp::now());

    let (pods, pods_to_claim) = claim::children(&ctx.pods, job, namespace, &uid);
    let (services, services_to_claim) = claim::children(&ctx.services, job, namespace, &uid);
    let pods = claim::mark_deleted(ctx, &uid, pods, &now);
    let (claimed, claim_error) =
        claim::claim_children(job, ctx, namespace, &pods_to_claim, &services_to_claim).await;
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

    status::write(job, ctx, namespace, &plan.status).await?;
    for transition in &plan.transitions {
        ctx.metrics.job(*transition, J::FRAMEWORK.name, namespace);
    }

    let result = carry_out::carry_out(job, &defaulted, ctx, namespace, &uid, &plan).await;
    let autoscaled = autoscaler::sync_autoscaler(&defaulted, ctx, namespace, &plan.status).await;
    publish_events(job, ctx, &plan.events);
    let look_again = result?;
    autoscaled?;
    // Children that could not be claimed are claimed on the retry.
    if let Some(error) = claim_error {
        return Err(error);
    }
    Ok(next_reconcile(plan.requeue_after, look_again))
}

/// What to do instead of reconciling a job that is not this reconcile's to change: one being
/// deleted, one another controller manages, or one whose cache has not shown the operator's
/// last status write yet.
fn left_alone<J: TrainingJob>(job: &J, ctx: &Context, namespace: &str) -> Option<Action> {
    if job.meta().deletion_timestamp.is_some() {
        return Some(Action::await_change());
    }
    if let Some(manager) = job.run_policy().and_then(|r| r.managed_by.as_deref())
        && manager != MANAGED_BY_US
    {
        tracing::debug!(managed_by = manager, "left to another controller");
        return Some(Action::await_change());
    }
    if ctx.written.is_stale(job, namespace) {
        tracing::debug!("the cache has not shown the last status write yet");
        // The write's watch event normally comes first; the requeue is a backstop, so a
        // job is never left waiting for an event that does not come.
        return Some(Action::requeue(STALE_CACHE_BACKSTOP));
    }
    None
}

/// Record the events the plan made, whether or not carrying it out failed.
fn publish_events<J: TrainingJob>(job: &J, ctx: &Context, events: &[Event]) {
    for e in events {
        let kind = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let (reason, note) = (e.reason.clone(), e.message.clone());
        match &e.occurrence {
            Some(occurrence) => {
                ctx.events
                    .publish_state(job, kind, reason, note, "Reconcile", occurrence);
            }
            None => ctx.events.publish(job, kind, reason, note, "Reconcile"),
        }
    }
}

/// When to reconcile the job again: the sooner of when the plan asks (a deadline, a TTL) and
/// when carrying it out asks; else on its next change.
fn next_reconcile(requeue_after: Option<Duration>, look_again: Option<Duration>) -> Action {
    let requeue_after = match (requeue_after, look_again) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match requeue_after {
        Some(after) => Action::requeue(after.max(Duration::from_millis(100))),
        None => Action::await_change(),
    }
}
