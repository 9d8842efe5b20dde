//! The job's PodGroup for the gang scheduler: created, kept up to date, deleted when the job
//! finished; and whether it admits the job's pods yet.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::{Context, ReconcileError};
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::events::EventType;
use crate::operator::runtime::lock;
use crate::operator::runtime::writes::{Deleted, delete_exactly};
use crate::operator::training::engine::build;
use crate::operator::training::framework::TrainingJob;

/// Create or update (or, once the job finished, delete) the job's PodGroup for the gang
/// scheduler, and say whether it admits the job's pods yet (see `build::pod_group_admits_pods`).
///
/// The group is written by server-side apply with `FIELD_MANAGER`, only when it is missing or
/// `build::pod_group_outdated` says so: fields others set are kept, and a field the job no
/// longer asks for (a priority class removed) is removed. A group of the job's name that
/// another object controls is used as it is, never changed.
///
/// The group is read only when pods are about to be created (they wait for it) or the job asks
/// for a different group than the last one seen; otherwise the last one seen stands, and a
/// reconcile costs no request here.
pub(super) async fn sync_pod_group<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    finished: bool,
    creating_pods: bool,
) -> Result<bool, ReconcileError> {
    let Some(scheduler) = ctx.options.gang_scheduler.as_deref() else {
        return Ok(true);
    };
    let (group, version, kind) = build::pod_group_gvk(scheduler);
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        "podgroups",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    let name = job.name_any();
    if finished {
        return delete_pod_group(job, ctx, &api, namespace, name).await;
    }
    let wanted = build::pod_group_spec(job, scheduler);
    if !creating_pods && ctx.pod_groups.is_seen(namespace, &name, &wanted) {
        return Ok(true);
    }
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|source| ReconcileError::Create {
            kind: "PodGroup",
            namespace: namespace.to_owned(),
            name: name.clone(),
            source,
        })?;
    if let Some(existing) = &existing
        && stands_as_it_is(job, existing, &wanted)
    {
        ctx.pod_groups.seen(namespace, &name, &wanted);
        return Ok(admits(scheduler, existing));
    }
    match apply_pod_group(job, &api, &resource, namespace, &name, &wanted).await {
        Ok(applied) => {
            ctx.pod_groups.seen(namespace, &name, &wanted);
            if existing.is_some() {
                ctx.metrics.object("updated_pod_groups");
                tracing::info!("updated PodGroup {name}: the job asks for a different spec");
            } else {
                ctx.metrics.object("created_pod_groups");
            }
            Ok(admits(scheduler, &applied))
        }
        Err(source) => Err(apply_failed(
            job,
            ctx,
            namespace,
            name,
            existing.is_some(),
            source,
        )),
    }
}

/// Write the group the job asks for, by server-side apply, with the job as its controller.
async fn apply_pod_group<J: TrainingJob>(
    job: &J,
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
    wanted: &serde_json::Value,
) -> kube::Result<DynamicObject> {
    let mut group = DynamicObject::new(name, resource)
        .within(namespace)
        .data(serde_json::json!({ "spec": wanted }));
    group.metadata.owner_references = Some(vec![build::owner_reference(job)]);
    // Forced: the operator is the one writer of these fields; a conflict with an earlier
    // writer (a person, or a version that created the group with a plain create) is resolved
    // in the job's favour, as upstream's update does.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(&group)).await
}

/// The job finished: delete its PodGroup (one already gone is no error), and forget it.
async fn delete_pod_group<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    api: &Api<DynamicObject>,
    namespace: &str,
    name: String,
) -> Result<bool, ReconcileError> {
    ctx.pod_groups.forget(namespace, &name);
    match delete_exactly(api, &name, None, DeleteParams::default()).await {
        Ok(Deleted::Sent) => {
            ctx.events.publish(
                job,
                EventType::Normal,
                "SuccessfulDeletePodGroup".into(),
                format!("Deleted PodGroup: {name}"),
                "Delete",
            );
            ctx.metrics.object("deleted_pod_groups");
            Ok(true)
        }
        Ok(Deleted::Gone | Deleted::Replaced) => Ok(true),
        Err(source) => {
            ctx.events.publish(
                job,
                EventType::Warning,
                "FailedDeletePodGroup".into(),
                format!("Error deleting: {source}"),
                "Delete",
            );
            Err(ReconcileError::Delete {
                kind: "PodGroup",
                namespace: namespace.to_owned(),
                name,
                source,
            })
        }
    }
}

/// Whether the group as it exists is left as it is: another object controls it, or it says
/// what the job asks for in the fields the operator applied.
fn stands_as_it_is<J: TrainingJob>(
    job: &J,
    existing: &DynamicObject,
    wanted: &serde_json::Value,
) -> bool {
    let job_uid = job.uid().unwrap_or_default();
    let someone_elses = existing
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid != job_uid);
    let applied = build::applied_spec_fields(&existing.metadata, FIELD_MANAGER);
    someone_elses || !build::pod_group_outdated(&existing.data["spec"], wanted, &applied)
}

/// Whether `group`, by its `status.phase`, admits the job's pods yet.
fn admits(scheduler: &str, group: &DynamicObject) -> bool {
    let phase = group.data["status"]["phase"].as_str();
    build::pod_group_admits_pods(scheduler, phase)
}

/// The group could not be created (or updated): a Warning event, and the error to return.
fn apply_failed<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    name: String,
    updating: bool,
    source: kube::Error,
) -> ReconcileError {
    let (reason, verb, action) = if updating {
        ("FailedUpdatePodGroup", "updating", "Update")
    } else {
        ("FailedCreatePodGroup", "creating", "Create")
    };
    ctx.events.publish(
        job,
        EventType::Warning,
        reason.into(),
        format!("Error {verb}: {source}"),
        action,
    );
    let (kind, namespace) = ("PodGroup", namespace.to_owned());
    if updating {
        ReconcileError::Update {
            kind,
            namespace,
            name,
            source,
        }
    } else {
        ReconcileError::Create {
            kind,
            namespace,
            name,
            source,
        }
    }
}

/// Per job (namespace, name), a digest of the PodGroup spec it asked for when its group was
/// last read or written.
#[derive(Default)]
pub(super) struct SeenPodGroups {
    specs: Mutex<HashMap<(String, String), u64>>,
}

impl SeenPodGroups {
    fn digest(spec: &serde_json::Value) -> u64 {
        let mut hasher = DefaultHasher::new();
        spec.to_string().hash(&mut hasher);
        hasher.finish()
    }

    fn is_seen(&self, namespace: &str, job: &str, wanted: &serde_json::Value) -> bool {
        let key = (namespace.to_owned(), job.to_owned());
        lock(&self.specs).get(&key) == Some(&Self::digest(wanted))
    }

    fn seen(&self, namespace: &str, job: &str, wanted: &serde_json::Value) {
        let key = (namespace.to_owned(), job.to_owned());
        lock(&self.specs).insert(key, Self::digest(wanted));
    }

    /// The job is finished or gone.
    pub(super) fn forget(&self, namespace: &str, job: &str) {
        lock(&self.specs).remove(&(namespace.to_owned(), job.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_group_is_seen_until_the_job_asks_for_another_or_is_forgotten() {
        let seen = SeenPodGroups::default();
        let spec = json!({ "minMember": 4, "queue": "default" });
        assert!(!seen.is_seen("ns", "mnist", &spec));
        seen.seen("ns", "mnist", &spec);
        assert!(seen.is_seen("ns", "mnist", &spec));
        assert!(!seen.is_seen("other", "mnist", &spec));
        assert!(!seen.is_seen(
            "ns",
            "mnist",
            &json!({ "minMember": 3, "queue": "default" })
        ));
        seen.forget("ns", "mnist");
        assert!(!seen.is_seen("ns", "mnist", &spec));
    }
}
