//! The VolumeManager a job reads its data from (`engine::data`): read before the job's pods
//! are planned, its volumes mounted in the in-memory job the plan builds pods from.

use std::time::Duration;

use kube::Api;
use kube::runtime::controller::Action;

use super::{Context, ReconcileError};
use crate::operator::runtime::events::EventType;
use crate::operator::training::engine::conditions::is_finished;
use crate::operator::training::engine::data::{self, Readiness};
use crate::operator::training::framework::TrainingJob;
use crate::operator::volumes::api::VolumeManager;

/// How often a job waiting for its data looks at its VolumeManager again (it is not watched).
const WAITING_POLL: Duration = Duration::from_secs(5);

/// Mount the data of the VolumeManager that `job` names into `defaulted`, the copy its pods are
/// built from; the action to take instead of reconciling while the data is not in place. A
/// finished job creates no pods, so it does not wait.
pub async fn attach<J: TrainingJob>(
    job: &J,
    defaulted: &mut J,
    ctx: &Context,
    namespace: &str,
) -> Result<Option<Action>, ReconcileError> {
    let Some(name) = data::volume_manager(job) else {
        return Ok(None);
    };
    if job.status().is_some_and(is_finished) {
        return Ok(None);
    }
    let api: Api<VolumeManager> = Api::namespaced(ctx.client.clone(), namespace);
    let manager = api
        .get_opt(name)
        .await
        .map_err(|source| ReconcileError::ReadData {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    match data::readiness(name, manager.as_ref()) {
        Readiness::Ready(volumes) => {
            data::attach(defaulted, &volumes);
            Ok(None)
        }
        Readiness::Waiting { message, failed } => {
            tracing::debug!(volume_manager = name, "{message}");
            let kind = if failed {
                EventType::Warning
            } else {
                EventType::Normal
            };
            let reason = "WaitingForData".to_owned();
            ctx.events
                .publish_state(job, kind, reason, message.clone(), "Reconcile", &message);
            Ok(Some(Action::requeue(WAITING_POLL)))
        }
    }
}
