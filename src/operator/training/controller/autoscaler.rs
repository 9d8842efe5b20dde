//! The HorizontalPodAutoscaler (`autoscaling/v2`) of a job that asks for one (PyTorch's
//! `elasticPolicy.metrics`): named after the job, controlled by it, scaling its Workers
//! through the CRD's scale subresource, as upstream's is.
//!
//! # Expected flow
//! On each reconcile the autoscaler the job asks for (none once the job is finished or
//! suspended, or when its policy cannot be honoured: `engine::autoscaling` says so) is
//! compared with the one last written for the job. Only when it differs is the cluster asked:
//! the autoscaler is read, one that another object controls is left alone (a Warning
//! `ErrResourceExists`), otherwise it is server-side applied with `FIELD_MANAGER`, or deleted
//! when the job asks for none.
//!
//! # Where this differs from upstream, on purpose
//! A finished job's autoscaler is deleted; upstream's stays until the job is deleted, where it
//! can only fail to read the metrics of pods that are done, or, from Workers a failure left
//! running, rewrite the finished job's Worker replicas.
//!
//! # Caveats
//! Autoscalers are not watched: one changed or deleted by hand is put back when the job's
//! policy changes or the operator restarts. After a restart, every unfinished job of a kind
//! that can have one is read once, to delete an autoscaler its policy no longer asks for.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Context, ReconcileError};
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::events::EventType;
use crate::operator::runtime::lock;
use crate::operator::runtime::writes::{Deleted, delete_exactly};
use crate::operator::training::api::JobStatus;
use crate::operator::training::engine::conditions;
use crate::operator::training::framework::TrainingJob;

const KIND: &str = "HorizontalPodAutoscaler";

/// What was last written per job (namespace, name): a hash of the autoscaler, or `None` for
/// none.
#[derive(Default)]
pub(super) struct SeenAutoscalers(Mutex<HashMap<(String, String), Option<u64>>>);

impl SeenAutoscalers {
    fn get(&self, namespace: &str, name: &str) -> Option<Option<u64>> {
        lock(&self.0)
            .get(&(namespace.to_owned(), name.to_owned()))
            .copied()
    }

    fn set(&self, namespace: &str, name: &str, seen: Option<u64>) {
        lock(&self.0).insert((namespace.to_owned(), name.to_owned()), seen);
    }

    pub(super) fn forget(&self, namespace: &str, name: &str) {
        lock(&self.0).remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// Bring the job's autoscaler in step with what the (defaulted) job asks for; see the module.
pub(super) async fn sync_autoscaler<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    status: &JobStatus,
) -> Result<(), ReconcileError> {
    let name = job.name_any();
    let desired = desired(job, &name, namespace, status);
    let hash = desired.as_ref().map(digest);
    let seen = ctx.autoscalers.get(namespace, &name);
    // A job never seen that asks for none, of a kind that never has one: nothing to undo.
    if seen == Some(hash) || (seen.is_none() && hash.is_none() && !J::AUTOSCALES) {
        return Ok(());
    }
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    let failed = |source| ReconcileError::Create {
        kind: KIND,
        namespace: namespace.to_owned(),
        name: name.clone(),
        source,
    };
    let existing = api.get_opt(&name).await.map_err(failed)?;
    let job_uid = job.uid().unwrap_or_default();
    let controller = existing.as_ref().and_then(|e| {
        e.owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
    });
    if let (Some(owner), Some(_)) = (controller, &desired)
        && owner.uid != job_uid
    {
        return Err(not_ours(job, ctx, namespace, name, owner));
    }
    match &desired {
        Some(object) => {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            api.patch(&name, &params, &Patch::Apply(object))
                .await
                .map_err(failed)?;
            tracing::info!("applied the {KIND}");
        }
        None if controller.is_some_and(|o| o.uid == job_uid) => {
            let uid = existing.as_ref().and_then(|e| e.uid());
            delete(&api, namespace, &name, uid).await?;
        }
        None => {}
    }
    ctx.autoscalers.set(namespace, &name, hash);
    Ok(())
}

/// The autoscaler the job asks for: none once the job is finished or suspended, or when its
/// policy cannot be honoured.
fn desired<J: TrainingJob>(
    job: &J,
    name: &str,
    namespace: &str,
    status: &JobStatus,
) -> Option<serde_json::Value> {
    let suspended = job.run_policy().and_then(|r| r.suspend) == Some(true);
    let wanted = if conditions::is_finished(status) || suspended {
        None
    } else {
        job.autoscaler().and_then(Result::ok)
    };
    wanted.map(|spec| {
        json!({
            "apiVersion": "autoscaling/v2",
            "kind": KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "ownerReferences": [owner(job)],
            },
            "spec": spec,
        })
    })
}

/// What is remembered of an autoscaler written: a hash of it.
fn digest(desired: &serde_json::Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    desired.to_string().hash(&mut hasher);
    hasher.finish()
}

/// An autoscaler of the job's name that another object controls is left alone: a Warning
/// event, and the error to return.
fn not_ours<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    name: String,
    owner: &OwnerReference,
) -> ReconcileError {
    ctx.events.publish(
        job,
        EventType::Warning,
        "ErrResourceExists".into(),
        format!(
            "{KIND} {name} exists and is controlled by {} {}",
            owner.kind, owner.name
        ),
        "Create",
    );
    ReconcileError::NotOurs {
        kind: KIND,
        namespace: namespace.to_owned(),
        name,
        owner: format!("{} {}", owner.kind, owner.name),
    }
}

/// The job asks for no autoscaler: delete the one it controls (that one, by its UID); one
/// already gone is no error.
async fn delete(
    api: &Api<HorizontalPodAutoscaler>,
    namespace: &str,
    name: &str,
    uid: Option<String>,
) -> Result<(), ReconcileError> {
    match delete_exactly(api, name, uid, DeleteParams::background()).await {
        Ok(Deleted::Sent) => tracing::info!("deleted the {KIND}: the job asks for none"),
        Ok(Deleted::Gone | Deleted::Replaced) => {}
        Err(source) => {
            return Err(ReconcileError::Delete {
                kind: KIND,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            });
        }
    }
    Ok(())
}

/// The job as the autoscaler's controller, as for its pods.
fn owner<J: TrainingJob>(job: &J) -> serde_json::Value {
    json!({
        "apiVersion": J::api_version(&()),
        "kind": J::kind(&()),
        "name": job.name_any(),
        "uid": job.uid().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}
