//! The server's verdict on a plan before anything is written: `mlkube validate` asks for a
//! server-side dry run of every object and lists every rejection, and what an apply the server
//! refused says about it.

use std::fmt::Write as _;

use futures::StreamExt;

use crate::deploy::cluster::{self, ApplyMode, CONCURRENCY, Cluster, Conflict};
use crate::deploy::key::Key;
use crate::deploy::plan::{Desired, Plan};

/// One object the server rejected, or could not check yet.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rejection {
    #[serde(flatten)]
    pub key: Key,
    pub component: String,
    pub message: String,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct Validation {
    pub valid: usize,
    pub rejected: Vec<Rejection>,
    /// Objects that can only be checked once something this apply creates exists.
    pub skipped: Vec<Rejection>,
}

/// How one object fared: fine, or `(skipped, why)`.
type Checked = Result<(), (bool, String)>;

/// `mlkube validate`: a server-side dry run of every object, every rejection listed.
pub async fn validate(cluster: &impl Cluster, plan: &Plan) -> Validation {
    let results: Vec<(&Desired, Checked)> = futures::stream::iter(
        plan.objects
            .iter()
            .map(|desired| async move {
                let Some(resolved) = cluster.resolve(&desired.api_version, &desired.key.kind)
                else {
                    if plan.defines(&desired.key.group, &desired.key.kind) {
                        return (
                            desired,
                            Err((
                                true,
                                "its CustomResourceDefinition is created by this apply".to_string(),
                            )),
                        );
                    }
                    return (
                        desired,
                        Err((
                            false,
                            format!(
                                "the cluster does not serve {} {}",
                                desired.api_version, desired.key.kind
                            ),
                        )),
                    );
                };
                let namespace = desired.key.namespace.as_deref();
                let mode = ApplyMode {
                    dry_run: true,
                    force: true,
                    manager: plan.manager(desired),
                };
                let result = match cluster
                    .apply(
                        &resolved,
                        namespace,
                        &desired.key.name,
                        &desired.value,
                        mode,
                    )
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if cluster::is_not_found(&e) && namespace.is_some() => Err((
                        true,
                        format!(
                            "namespace `{}` does not exist yet; apply creates it",
                            namespace.unwrap_or_default()
                        ),
                    )),
                    Err(e) => Err((false, rejection_message(&e))),
                };
                (desired, result)
            })
            .collect::<Vec<_>>(),
    )
    .buffered(CONCURRENCY)
    .collect()
    .await;
    let mut validation = Validation::default();
    for (desired, result) in results {
        match result {
            Ok(()) => validation.valid += 1,
            Err((skipped, message)) => {
                let rejection = Rejection {
                    key: desired.key.clone(),
                    component: desired.component.clone(),
                    message,
                };
                if skipped {
                    validation.skipped.push(rejection)
                } else {
                    validation.rejected.push(rejection)
                }
            }
        }
    }
    validation
}

/// The server's message with each invalid field on its own line.
fn rejection_message(error: &kube::Error) -> String {
    let kube::Error::Api(status) = error else {
        return error.to_string();
    };
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    if causes.is_empty() {
        return status.message.clone();
    }
    let mut message = status.reason.clone();
    for cause in causes {
        let _ = write!(message, "\n    {}: {}", cause.field, cause.message);
    }
    message
}

pub fn apply_failure(error: &kube::Error) -> String {
    match cluster::conflicts(error) {
        Some(conflicts) => conflict_failure(&conflicts, Some(error)),
        None => cluster::api_message(error),
    }
}

/// Every conflicting field with its manager, and how to go on; the server's message when it
/// named no field.
pub fn conflict_failure(conflicts: &[Conflict], error: Option<&kube::Error>) -> String {
    let mut message = String::from("conflicts with other field managers:");
    for c in conflicts {
        let _ = write!(message, "\n    {} is owned by \"{}\"", c.field, c.manager);
    }
    if let (true, Some(error)) = (conflicts.is_empty(), error) {
        let _ = write!(message, " {}", cluster::api_message(error));
    }
    message.push_str(
        "\n    hint: pass --force-conflicts to take these fields over, or stop the other manager setting them",
    );
    message
}
