//! A job's companions (`TrainingJob::companions`: MPIJob's ConfigMap and its launcher's
//! ServiceAccount, Role and RoleBinding): written before the job's pods, again only when what
//! the job asks for changes.
//!
//! # Expected flow
//! On each reconcile of an unfinished job, each companion the framework wants is compared with
//! the one last written for the job. A new one is read first: one that another object controls
//! is never changed (a Warning `ErrResourceExists`, as upstream's, and an error, so no pod is
//! created that would use it); otherwise it is server-side applied with `FIELD_MANAGER`, which
//! creates it or brings it to what the job asks for.
//!
//! # Caveats
//! Companions are not watched (as PodGroups are not): one deleted by hand comes back when the
//! job asks for a different one (a Worker more or less) or the operator restarts. Finished
//! jobs keep theirs until the job is deleted, as upstream's do.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::{Context, ReconcileError};
use crate::error_text::OneLine;
use crate::operator::api::FIELD_MANAGER;
use crate::operator::events::EventType;
use crate::operator::framework::{Companion, CompanionKind, TrainingJob};
use crate::operator::lock;

/// Write the job's companions that differ from those last written; stop at the first failure.
pub(super) async fn sync_companions<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
) -> Result<(), ReconcileError> {
    let job_name = job.name_any();
    for companion in job.companions() {
        let digest = SeenCompanions::digest(&companion);
        if ctx
            .companions
            .is_seen(namespace, &job_name, &companion, digest)
        {
            continue;
        }
        apply(job, ctx, namespace, &companion).await?;
        ctx.companions
            .seen(namespace, &job_name, &companion, digest);
    }
    Ok(())
}

/// The API resource of a companion kind.
fn resource(kind: CompanionKind) -> ApiResource {
    match kind {
        CompanionKind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
        CompanionKind::ServiceAccount => ApiResource::erase::<ServiceAccount>(&()),
        CompanionKind::Role => ApiResource::erase::<Role>(&()),
        CompanionKind::RoleBinding => ApiResource::erase::<RoleBinding>(&()),
    }
}

/// The kind's name, as errors and events say it.
pub(super) fn kind_name(kind: CompanionKind) -> &'static str {
    match kind {
        CompanionKind::ConfigMap => "ConfigMap",
        CompanionKind::ServiceAccount => "ServiceAccount",
        CompanionKind::Role => "Role",
        CompanionKind::RoleBinding => "RoleBinding",
    }
}

async fn apply<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    companion: &Companion,
) -> Result<(), ReconcileError> {
    let kind = kind_name(companion.kind);
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &resource(companion.kind));
    let failed = |source| ReconcileError::Create {
        kind,
        namespace: namespace.to_owned(),
        name: companion.name.clone(),
        source,
    };
    let existing = api.get_opt(&companion.name).await.map_err(failed)?;
    let job_uid = job.uid().unwrap_or_default();
    if let Some(existing) = &existing
        && let Some(owner) = existing
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
        && owner.uid != job_uid
    {
        // Upstream's words.
        let message = format!(
            "Resource {:?} of MPIJobKind {kind:?} already exists and is not managed by {}",
            companion.name,
            J::FRAMEWORK.kind
        );
        ctx.events.publish(
            job,
            EventType::Warning,
            "ErrResourceExists".into(),
            message,
            "Create",
        );
        return Err(ReconcileError::NotOurs {
            kind,
            namespace: namespace.to_owned(),
            name: companion.name.clone(),
            owner: format!("{} {}", owner.kind, owner.name),
        });
    }
    // Forced: the operator is the one writer of these fields (see `pod_group`).
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch(&companion.name, &params, &Patch::Apply(&companion.object))
        .await
    {
        Ok(_) => {
            tracing::debug!("applied {kind} {}", companion.name);
            Ok(())
        }
        Err(source) => {
            let verb = if existing.is_some() {
                "updating"
            } else {
                "creating"
            };
            ctx.events.publish(
                job,
                EventType::Warning,
                format!("FailedCreate{kind}"),
                format!(
                    "Error {verb} {kind} {}: {}",
                    companion.name,
                    OneLine(&source)
                ),
                "Create",
            );
            Err(failed(source))
        }
    }
}

/// A job's companions, by kind and name, with the digest of each one last written.
type Digests = HashMap<(CompanionKind, String), u64>;

/// Per job (namespace, name), the digests of its companions last written.
#[derive(Default)]
pub(super) struct SeenCompanions {
    digests: Mutex<HashMap<(String, String), Digests>>,
}

impl SeenCompanions {
    fn digest(companion: &Companion) -> u64 {
        let mut hasher = DefaultHasher::new();
        companion.object.to_string().hash(&mut hasher);
        hasher.finish()
    }

    fn is_seen(&self, namespace: &str, job: &str, companion: &Companion, digest: u64) -> bool {
        let key = (namespace.to_owned(), job.to_owned());
        lock(&self.digests)
            .get(&key)
            .and_then(|seen| seen.get(&(companion.kind, companion.name.clone())))
            == Some(&digest)
    }

    fn seen(&self, namespace: &str, job: &str, companion: &Companion, digest: u64) {
        let key = (namespace.to_owned(), job.to_owned());
        lock(&self.digests)
            .entry(key)
            .or_default()
            .insert((companion.kind, companion.name.clone()), digest);
    }

    /// The job is gone.
    pub(super) fn forget(&self, namespace: &str, job: &str) {
        lock(&self.digests).remove(&(namespace.to_owned(), job.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(hostfile: &str) -> Companion {
        Companion {
            kind: CompanionKind::ConfigMap,
            name: "pi-config".into(),
            object: json!({ "data": { "hostfile": hostfile } }),
        }
    }

    #[test]
    fn a_companion_is_seen_until_the_job_asks_for_another_or_is_forgotten() {
        let seen = SeenCompanions::default();
        let two = config_map("pi-worker-0 slots=1\npi-worker-1 slots=1\n");
        let one = config_map("pi-worker-0 slots=1\n");
        let digest = SeenCompanions::digest(&two);
        assert!(!seen.is_seen("ns", "pi", &two, digest));
        seen.seen("ns", "pi", &two, digest);
        assert!(seen.is_seen("ns", "pi", &two, digest));
        assert!(!seen.is_seen("other", "pi", &two, digest));
        assert!(!seen.is_seen("ns", "pi", &one, SeenCompanions::digest(&one)));
        seen.forget("ns", "pi");
        assert!(!seen.is_seen("ns", "pi", &two, digest));
    }
}
