//! Whether the job's autoscaler can be made (PyTorch's `elasticPolicy.metrics`). A policy that
//! cannot be honoured is said in a condition and a Warning event, never left silent; the job
//! runs on with its Worker replicas. The autoscaler itself is written by the controller.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::operator::training::api::JobCondition;
use crate::operator::training::framework::{Event, TrainingJob};

/// The condition of a job whose autoscaler cannot be made: present, and False, only then.
pub const AUTOSCALER_READY: &str = "AutoscalerReady";
/// Its reason, and the Warning event's.
pub const INVALID_POLICY: &str = "InvalidElasticPolicy";

/// Set or clear the condition from the job's policy; a new or changed refusal is also an event.
/// The condition goes first in the list, so the printer column (the last condition) keeps
/// showing the job's state.
pub fn check<J: TrainingJob>(
    job: &J,
    now: &Time,
    conditions: &mut Vec<JobCondition>,
    events: &mut Vec<Event>,
) {
    let existing = conditions.iter().position(|c| c.type_ == AUTOSCALER_READY);
    let Some(Err(why)) = job.autoscaler() else {
        if let Some(at) = existing {
            conditions.remove(at);
        }
        return;
    };
    let message = format!("{why}; the job runs without an autoscaler");
    if let Some(at) = existing {
        if conditions[at].message.as_deref() == Some(message.as_str()) {
            return;
        }
        conditions.remove(at);
    }
    conditions.insert(
        0,
        JobCondition {
            type_: AUTOSCALER_READY.to_owned(),
            status: "False".to_owned(),
            reason: Some(INVALID_POLICY.to_owned()),
            message: Some(message.clone()),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
        },
    );
    events.push(Event {
        warning: true,
        reason: INVALID_POLICY.to_owned(),
        message,
        occurrence: None,
    });
}
