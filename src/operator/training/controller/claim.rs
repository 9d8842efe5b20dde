//! Which cached pods and services are the job's, and adopting and releasing the others that
//! carry (or no longer carry) its labels.

use std::collections::BTreeSet;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::by_job::ByJob;
use super::records::FromChild;
use super::{Context, ReconcileError};
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::lock;
use crate::operator::runtime::writes::is_gone;
use crate::operator::training::engine::adopt::{self, Claim};
use crate::operator::training::framework::TrainingJob;

fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// From one cache, of the objects it has for the job: those the job controls, and those it
/// has to adopt or release (see `adopt::claim`).
pub(super) fn children<J: TrainingJob, K: FromChild>(
    cache: &ByJob,
    job: &J,
    namespace: &str,
    job_uid: &str,
) -> (Vec<K>, Vec<K>) {
    let relevant: Vec<K> = cache
        .of_job(namespace, &job.name_any())
        .iter()
        .map(|child| K::from_child(child))
        .filter(|o| controlled_by(o, job_uid) || adopt::claim(job, o).is_some())
        .collect();
    let to_claim = relevant
        .iter()
        .filter(|o| adopt::claim(job, *o).is_some())
        .cloned()
        .collect();
    let controlled = relevant
        .into_iter()
        .filter(|o| controlled_by(o, job_uid))
        .collect();
    (controlled, to_claim)
}

/// The job's pods, those this operator already deleted marked as being deleted.
pub(super) fn mark_deleted(
    ctx: &Context,
    job_uid: &str,
    mut pods: Vec<Pod>,
    now: &Time,
) -> Vec<Pod> {
    let mut deleted = lock(&ctx.deleted);
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

/// What one reconcile adopted (as the patches returned it) and released (by UID).
#[derive(Default)]
pub(super) struct Claimed {
    pub pods: Vec<Pod>,
    pub services: Vec<Service>,
    pub released: BTreeSet<String>,
}

/// Adopt the orphan pods and services that carry the job's labels and release those the job
/// controls whose labels no longer match (see `adopt`). Keeps going past a failure: returns
/// what was done, and the first error.
pub(super) async fn claim_children<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    pods: &[Pod],
    services: &[Service],
) -> (Claimed, Option<ReconcileError>) {
    let mut claimed = Claimed::default();
    if pods.is_empty() && services.is_empty() {
        return (claimed, None);
    }
    let mut first_error = None;
    let adopting = pods
        .iter()
        .any(|p| adopt::claim(job, p) == Some(Claim::Adopt))
        || services
            .iter()
            .any(|s| adopt::claim(job, s) == Some(Claim::Adopt));
    // The cache may not have seen the job deleted, or deleted and created again under the same
    // name: read it from the API server before giving it children, as upstream does.
    let may_adopt = adopting
        && match reread_allows_adoption(job, ctx, namespace).await {
            Ok(allowed) => allowed,
            Err(e) => {
                first_error = Some(e);
                false
            }
        };

    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    claimed.pods = claim_all(
        job,
        &pod_api,
        pods,
        "pod",
        may_adopt,
        &mut claimed.released,
        &mut first_error,
    )
    .await;
    let service_api: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    claimed.services = claim_all(
        job,
        &service_api,
        services,
        "service",
        may_adopt,
        &mut claimed.released,
        &mut first_error,
    )
    .await;
    (claimed, first_error)
}

/// Claim each of `objects` (see `claim_one`) at once: returns those adopted, adds the UIDs of
/// those released to `released`, and keeps the first error.
async fn claim_all<J: TrainingJob, K: FromChild>(
    job: &J,
    api: &Api<K>,
    objects: &[K],
    kind: &'static str,
    may_adopt: bool,
    released: &mut BTreeSet<String>,
    first_error: &mut Option<ReconcileError>,
) -> Vec<K> {
    let claims = objects
        .iter()
        .map(|o| claim_one(job, api, o, kind, may_adopt));
    let mut adopted = Vec::new();
    for result in join_all(claims).await {
        match result {
            Ok(Some((Claim::Adopt, object))) => adopted.push(object),
            Ok(Some((Claim::Release, object))) => released.extend(object.uid()),
            Ok(None) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    adopted
}

/// Read the job from the API server (not the cache) and say whether orphans may be adopted
/// into it: it is still there, with the same UID, and not being deleted.
async fn reread_allows_adoption<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
) -> Result<bool, ReconcileError> {
    let api: Api<J> = Api::namespaced(ctx.client.clone(), namespace);
    let name = job.name_any();
    let fresh = api
        .get_opt(&name)
        .await
        .map_err(|source| ReconcileError::RereadJob {
            kind: J::FRAMEWORK.kind,
            namespace: namespace.to_owned(),
            name: name.clone(),
            source,
        })?;
    let allowed = adopt::may_adopt_into(fresh.as_ref(), &job.uid().unwrap_or_default());
    if !allowed {
        tracing::info!("not adopting orphans: the job is gone, replaced or being deleted");
    }
    Ok(allowed)
}

/// Adopt or release one object, as `adopt::claim` says. `Ok(None)`: nothing was done (the
/// object is gone, or adoption is not allowed); otherwise the object as patched.
async fn claim_one<J: TrainingJob, K: FromChild>(
    job: &J,
    api: &Api<K>,
    object: &K,
    kind: &'static str,
    may_adopt: bool,
) -> Result<Option<(Claim, K)>, ReconcileError> {
    let Some(claim) = adopt::claim(job, object) else {
        return Ok(None);
    };
    let patch = match claim {
        Claim::Adopt if !may_adopt => return Ok(None),
        Claim::Adopt => adopt::adopt_patch(job, object),
        Claim::Release => adopt::release_patch(&job.uid().unwrap_or_default(), object),
    };
    let name = object.name_any();
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api.patch(&name, &pp, &Patch::Merge(&patch)).await {
        Ok(patched) => {
            match claim {
                Claim::Adopt => tracing::info!("adopted orphan {kind} {name}"),
                Claim::Release => {
                    tracing::info!("released {kind} {name}: its labels no longer match the job");
                }
            }
            Ok(Some((claim, patched)))
        }
        Err(e) if is_gone(&e) => Ok(None),
        Err(source) => {
            let namespace = object.namespace().unwrap_or_default();
            Err(match claim {
                Claim::Adopt => ReconcileError::Adopt {
                    kind,
                    namespace,
                    name,
                    source,
                },
                Claim::Release => ReconcileError::Release {
                    kind,
                    namespace,
                    name,
                    source,
                },
            })
        }
    }
}
