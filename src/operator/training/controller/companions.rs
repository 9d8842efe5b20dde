//! A job's companions (`TrainingJob::companions`: MPIJob's ConfigMap and its launcher's
//! ServiceAccount, Role and RoleBinding): written before the job's pods, again when what the
//! job asks for changes or someone else changed or deleted them.
//!
//! # Expected flow
//! On each reconcile of an unfinished job, each companion the framework wants is compared with
//! the one last written for the job, and the version the operator wrote with the one its watch
//! (`children`) last saw. When either differs it is read: one that another object controls is
//! never changed (a Warning `ErrResourceExists`, as upstream's, and an error, so no pod is
//! created that would use it); otherwise it is server-side applied with `FIELD_MANAGER`, which
//! creates it or brings the fields the operator sets back to what the job asks for.
//!
//! # Guarantees
//! - A companion deleted, or whose fields the operator sets were changed by someone else (a
//!   hostfile edited by hand), is written again by the reconcile its watch event queues.
//! - A reconcile that sees what it wrote last writes nothing.
//!
//! # Caveats
//! Fields the operator does not set (a key added to the ConfigMap by hand) are left alone, as
//! server-side apply leaves them. Finished jobs keep their companions until the job is deleted,
//! as upstream's do, and they are not repaired any more.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::children::Companions;
use super::{Context, ReconcileError};
use crate::error_text::OneLine;
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::events::EventType;
use crate::operator::runtime::lock;
use crate::operator::training::framework::{Companion, CompanionKind, TrainingJob};

/// Write the job's companions that differ from those last written; stop at the first failure.
pub(super) async fn sync_companions<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
) -> Result<(), ReconcileError> {
    let job_name = job.name_any();
    for companion in job.companions() {
        let written = Written {
            digest: SeenCompanions::digest(&companion),
            version: ctx
                .companions
                .cached_version(namespace, &job_name, &companion),
        };
        if ctx
            .companions
            .is_seen(namespace, &job_name, &companion, &written)
        {
            continue;
        }
        let version = apply(job, ctx, namespace, &companion).await?;
        let written = Written { version, ..written };
        ctx.companions
            .seen(namespace, &job_name, &companion, written);
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

/// Apply `companion`; its version as written.
async fn apply<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    companion: &Companion,
) -> Result<Option<String>, ReconcileError> {
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
        Ok(applied) => {
            tracing::debug!("applied {kind} {}", companion.name);
            Ok(applied.resource_version())
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

/// A companion as written: the digest of what the job asked for, and the version the API
/// server gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Written {
    digest: u64,
    version: Option<String>,
}

/// A job's companions, by kind and name, each as last written.
type Digests = HashMap<(CompanionKind, String), Written>;

/// Per job (namespace, name), its companions as last written, and the watch's caches of them.
pub(super) struct SeenCompanions {
    digests: Mutex<HashMap<(String, String), Digests>>,
    cached: Arc<Companions>,
}

impl SeenCompanions {
    /// Compare what is written with what the watches of companions cache.
    pub(super) fn watching(cached: Arc<Companions>) -> SeenCompanions {
        SeenCompanions {
            digests: Mutex::default(),
            cached,
        }
    }

    fn digest(companion: &Companion) -> u64 {
        let mut hasher = DefaultHasher::new();
        companion.object.to_string().hash(&mut hasher);
        hasher.finish()
    }

    /// The version of the companion that the watch last saw.
    fn cached_version(&self, namespace: &str, job: &str, companion: &Companion) -> Option<String> {
        self.cached
            .resource_version(companion.kind, namespace, job, &companion.name)
    }

    /// Whether `now` (the digest wanted, the version cached) is what was last written.
    fn is_seen(&self, namespace: &str, job: &str, companion: &Companion, now: &Written) -> bool {
        let key = (namespace.to_owned(), job.to_owned());
        now.version.is_some()
            && lock(&self.digests)
                .get(&key)
                .and_then(|seen| seen.get(&(companion.kind, companion.name.clone())))
                == Some(now)
    }

    fn seen(&self, namespace: &str, job: &str, companion: &Companion, written: Written) {
        let key = (namespace.to_owned(), job.to_owned());
        lock(&self.digests)
            .entry(key)
            .or_default()
            .insert((companion.kind, companion.name.clone()), written);
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

    fn written(companion: &Companion, version: &str) -> Written {
        Written {
            digest: SeenCompanions::digest(companion),
            version: Some(version.into()),
        }
    }

    #[test]
    fn a_companion_is_seen_until_the_job_asks_for_another_or_someone_else_changes_it() {
        let seen = SeenCompanions::watching(Arc::default());
        let two = config_map("pi-worker-0 slots=1\npi-worker-1 slots=1\n");
        let one = config_map("pi-worker-0 slots=1\n");
        let as_written = written(&two, "7");
        assert!(!seen.is_seen("ns", "pi", &two, &as_written));
        seen.seen("ns", "pi", &two, as_written.clone());
        assert!(seen.is_seen("ns", "pi", &two, &as_written));
        assert!(!seen.is_seen("other", "pi", &two, &as_written));
        assert!(!seen.is_seen("ns", "pi", &one, &written(&one, "7")));
        assert!(
            !seen.is_seen("ns", "pi", &two, &written(&two, "8")),
            "changed by someone else"
        );
        let deleted = Written {
            version: None,
            ..as_written.clone()
        };
        assert!(!seen.is_seen("ns", "pi", &two, &deleted), "deleted");
        seen.forget("ns", "pi");
        assert!(!seen.is_seen("ns", "pi", &two, &as_written));
    }
}
