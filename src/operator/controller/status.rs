//! Writing a job's status, when it changed, with the resourceVersion it was computed from: a
//! stale cache turns into a conflict and a retry, never into a lost update.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PostParams;
use kube::{Api, ResourceExt};

use super::{Context, ReconcileError};
use crate::operator::api::{FIELD_MANAGER, JobStatus};
use crate::operator::framework::TrainingJob;

/// Write `status` to the job's status subresource if it differs from the cached one.
pub(super) async fn write<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    status: &JobStatus,
    now: &Time,
) -> Result<(), ReconcileError> {
    let old = job.status().cloned().unwrap_or_default();
    if *status == old {
        return Ok(());
    }
    let name = job.name_any();
    let mut updated = job.clone();
    let mut written = status.clone();
    written.last_reconcile_time = Some(now.clone());
    *updated.status_mut() = Some(written);
    let api: Api<J> = Api::namespaced(ctx.client.clone(), namespace);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    api.replace_status(&name, &pp, &updated)
        .await
        .map_err(|source| ReconcileError::WriteStatus {
            kind: J::FRAMEWORK.kind,
            namespace: namespace.to_owned(),
            name: name.clone(),
            source,
        })?;
    if let Some(condition) = status.conditions.last()
        && old.conditions.last() != Some(condition)
    {
        tracing::info!(condition = %condition.type_, reason = condition.reason.as_deref().unwrap_or(""), "status");
    }
    Ok(())
}
