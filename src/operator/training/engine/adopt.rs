//! Which pods and services belong to a job, beyond those it already controls: upstream's
//! `ClaimPods`/`ClaimServices` (controller-runtime's ControllerRefManager). Pure: the
//! controller reads the objects from its caches, re-reads the job before adopting, and patches.
//!
//! # Expected flow
//! An object in the job's namespace that carries the job's selector labels
//! (`training.kubeflow.org/operator-name=tfjob-controller` and
//! `training.kubeflow.org/job-name=<job>`) and has no controller is an orphan: the job adopts it
//! by adding its controller owner reference, and from then on it is one of the job's pods or
//! services like any other. Typically it was left behind by an earlier job of the same name
//! deleted with `--cascade=orphan`. An adopted pod fills the slot its replica-type and
//! replica-index labels name, as every pod the operator creates does, so it is not created a
//! second time. An object the job controls whose labels no longer match is released: the job's
//! owner reference is removed and it is no longer the job's.
//!
//! # Guarantees
//! - An object another controller controls is never touched.
//! - Nothing is adopted into a job that is being deleted, nor into a job that is gone or was
//!   replaced by another of the same name: the controller re-reads the job from the API
//!   server (not its cache) first, and adopts only if the UID is the same and no deletion has
//!   started ([`may_adopt_into`]).
//! - Every patch carries the `resourceVersion` the decision was made on, so an object that
//!   changed meanwhile (relabelled, or adopted by someone else) makes the patch fail with a
//!   conflict instead of being adopted on stale grounds; the next reconcile decides again.
//!
//! # Caveats
//! The pod and service caches hold only objects with the operator-name label, so an object
//! that loses that label is neither counted nor released: it keeps its owner reference, and is
//! garbage-collected with the job. An orphan is only noticed on the job's next reconcile; the
//! caches trigger reconciles only through owner references.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};

use super::build::{self, LABEL_JOB_NAME, LABEL_OPERATOR};
use crate::operator::training::framework::{Framework, TrainingJob};

/// What to do with an object on the job's behalf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// An orphan with the job's labels: add the job's controller owner reference.
    Adopt,
    /// Controlled by the job, but its labels no longer match: remove the job's owner reference.
    Release,
}

/// Whether `object` is to be adopted by or released from `job`; `None` leaves it as it is
/// (the job's already, someone else's, or not matching).
pub fn claim<J: TrainingJob, K: Resource>(job: &J, object: &K) -> Option<Claim> {
    // Asked of each of a job's cached children on every reconcile: nothing here allocates.
    let job_meta = job.meta();
    // Upstream changes nothing for a job that is being deleted.
    if job_meta.deletion_timestamp.is_some() || object.meta().namespace != job_meta.namespace {
        return None;
    }
    let uid = job_meta.uid.as_deref()?;
    let job_name = job_meta.name.as_deref()?;
    match object
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
    {
        Some(controller) if controller.uid == uid => {
            (!matches_selector(J::FRAMEWORK, job_name, object)).then_some(Claim::Release)
        }
        Some(_) => None,
        None => (object.meta().deletion_timestamp.is_none()
            && matches_selector(J::FRAMEWORK, job_name, object))
        .then_some(Claim::Adopt),
    }
}

/// The job's selector: the labels every pod and service of the job carries.
fn matches_selector<K: Resource>(framework: &Framework, job_name: &str, object: &K) -> bool {
    let labels = object.labels();
    labels.get(LABEL_OPERATOR).map(String::as_str) == Some(framework.controller_name)
        && labels.get(LABEL_JOB_NAME).map(String::as_str) == Some(job_name)
}

/// Whether a fresh read of the job (`None`: not found) still allows adopting into the job with
/// `uid`: the same job, not being deleted.
pub fn may_adopt_into<J: TrainingJob>(fresh: Option<&J>, uid: &str) -> bool {
    fresh.is_some_and(|job| {
        job.uid().as_deref() == Some(uid) && job.meta().deletion_timestamp.is_none()
    })
}

/// The JSON merge patch that adopts `object`: its owner references plus the job's controller
/// reference, guarded by the object's `resourceVersion`.
pub fn adopt_patch<J: TrainingJob, K: Resource>(job: &J, object: &K) -> serde_json::Value {
    let mut owners: Vec<OwnerReference> = object.owner_references().to_vec();
    owners.push(build::owner_reference(job));
    owners_patch(object, &owners)
}

/// The JSON merge patch that releases `object` from the job with `job_uid`: its owner
/// references without the job's, guarded by the object's `resourceVersion`.
pub fn release_patch<K: Resource>(job_uid: &str, object: &K) -> serde_json::Value {
    let owners: Vec<OwnerReference> = object
        .owner_references()
        .iter()
        .filter(|o| o.uid != job_uid)
        .cloned()
        .collect();
    owners_patch(object, &owners)
}

/// A merge patch replaces a list whole; the `resourceVersion` makes the API server refuse it
/// (409 Conflict) if the object changed since it was read, so no concurrent change is lost.
fn owners_patch<K: Resource>(object: &K, owners: &[OwnerReference]) -> serde_json::Value {
    serde_json::json!({
        "metadata": {
            "resourceVersion": object.resource_version(),
            "ownerReferences": owners,
        }
    })
}

/// The job's objects after claiming: those it controls in the cache, without the ones just
/// released and with the ones just adopted (as the patch returned them). The cache catches up
/// later; this reconcile already counts the change.
pub fn after_claims<K: Resource + Clone>(
    controlled: Vec<K>,
    adopted: &[K],
    released: &BTreeSet<String>,
) -> Vec<K> {
    let adopted_uids: BTreeSet<String> = adopted.iter().filter_map(ResourceExt::uid).collect();
    controlled
        .into_iter()
        .filter(|o| {
            o.uid()
                .is_none_or(|uid| !released.contains(&uid) && !adopted_uids.contains(&uid))
        })
        .chain(adopted.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::{self, UID, at, job};
    use crate::operator::training::frameworks::tensorflow::{TFJob, WORKER};
    use k8s_openapi::api::core::v1::{Pod, Service};

    fn mnist() -> TFJob {
        job("mnist").replica("Worker", 2).build()
    }

    /// The pod the job would create for worker `index`, with `owners` instead of the job's.
    fn pod_owned_by(index: i32, owners: Vec<OwnerReference>) -> Pod {
        let mut pod = fixtures::pod(&mnist(), WORKER, index)
            .uid(&format!("pod-{index}"))
            .build();
        pod.metadata.owner_references = Some(owners);
        pod.metadata.resource_version = Some("42".into());
        pod
    }

    fn orphan(index: i32) -> Pod {
        pod_owned_by(index, Vec::new())
    }

    fn owner(kind: &str, uid: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: "someone".into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    fn ours(index: i32) -> Pod {
        fixtures::pod(&mnist(), WORKER, index)
            .uid(&format!("pod-{index}"))
            .build()
    }

    fn relabel(mut pod: Pod, key: &str, value: Option<&str>) -> Pod {
        let labels = pod.metadata.labels.get_or_insert_with(Default::default);
        match value {
            Some(value) => labels.insert(key.into(), value.into()),
            None => labels.remove(key),
        };
        pod
    }

    #[test]
    fn an_orphan_with_the_job_labels_is_adopted() {
        assert_eq!(claim(&mnist(), &orphan(0)), Some(Claim::Adopt));
    }

    #[test]
    fn an_orphan_owned_but_not_controlled_by_someone_else_is_adopted() {
        let pod = pod_owned_by(0, vec![owner("ConfigMap", "cm-uid", false)]);
        assert_eq!(claim(&mnist(), &pod), Some(Claim::Adopt));
        let patch = adopt_patch(&mnist(), &pod);
        let owners = patch["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(owners.len(), 2, "{patch}");
        assert_eq!(owners[0]["uid"], "cm-uid");
    }

    #[test]
    fn an_object_another_controller_controls_is_never_touched() {
        let job = mnist();
        let foreign = pod_owned_by(0, vec![owner("ConfigMap", "cm-uid", true)]);
        assert_eq!(claim(&job, &foreign), None);
        // Not even when its labels no longer match.
        let relabelled = relabel(foreign, LABEL_JOB_NAME, Some("other"));
        assert_eq!(claim(&job, &relabelled), None);
    }

    #[test]
    fn an_orphan_without_the_selector_labels_is_not_adopted() {
        let job = mnist();
        for (key, value) in [
            (LABEL_JOB_NAME, Some("other")),
            (LABEL_JOB_NAME, None),
            (LABEL_OPERATOR, Some("pytorch-controller")),
            (LABEL_OPERATOR, None),
        ] {
            let pod = relabel(orphan(0), key, value);
            assert_eq!(claim(&job, &pod), None, "{key}={value:?}");
        }
    }

    #[test]
    fn an_orphan_in_another_namespace_or_being_deleted_is_not_adopted() {
        let job = mnist();
        let mut elsewhere = orphan(0);
        elsewhere.metadata.namespace = Some("other".into());
        assert_eq!(claim(&job, &elsewhere), None);
        let mut deleting = orphan(0);
        deleting.metadata.deletion_timestamp = Some(at(0));
        assert_eq!(claim(&job, &deleting), None);
    }

    #[test]
    fn nothing_is_adopted_or_released_for_a_job_being_deleted() {
        let mut job = mnist();
        job.metadata.deletion_timestamp = Some(at(0));
        assert_eq!(claim(&job, &orphan(0)), None);
        let relabelled = relabel(ours(1), LABEL_JOB_NAME, Some("other"));
        assert_eq!(claim(&job, &relabelled), None);
    }

    #[test]
    fn the_jobs_own_object_is_kept_while_its_labels_match_and_released_after() {
        let job = mnist();
        assert_eq!(claim(&job, &ours(0)), None);
        for (key, value) in [(LABEL_JOB_NAME, Some("other")), (LABEL_OPERATOR, None)] {
            let pod = relabel(ours(0), key, value);
            assert_eq!(claim(&job, &pod), Some(Claim::Release), "{key}={value:?}");
        }
    }

    #[test]
    fn services_are_claimed_like_pods() {
        let job = mnist();
        let mut service = build::service(&job, WORKER, 0);
        assert_eq!(claim(&job, &service), None);
        service.metadata.owner_references = None;
        assert_eq!(claim::<TFJob, Service>(&job, &service), Some(Claim::Adopt));
    }

    #[test]
    fn the_adopt_patch_adds_the_jobs_controller_reference_guarded_by_the_resource_version() {
        let patch = adopt_patch(&mnist(), &orphan(0));
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        let owners = &patch["metadata"]["ownerReferences"];
        assert_eq!(owners.as_array().map(Vec::len), Some(1), "{patch}");
        assert_eq!(owners[0]["kind"], "TFJob");
        assert_eq!(owners[0]["apiVersion"], "kubeflow.org/v1");
        assert_eq!(owners[0]["name"], "mnist");
        assert_eq!(owners[0]["uid"], UID);
        assert_eq!(owners[0]["controller"], true);
        assert_eq!(owners[0]["blockOwnerDeletion"], true);
    }

    #[test]
    fn the_release_patch_keeps_every_other_owner() {
        let mut pod = ours(0);
        pod.metadata
            .owner_references
            .as_mut()
            .unwrap()
            .push(owner("ConfigMap", "cm-uid", false));
        pod.metadata.resource_version = Some("7".into());
        let patch = release_patch(UID, &pod);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let owners = patch["metadata"]["ownerReferences"].as_array().unwrap();
        let uids: Vec<&str> = owners.iter().filter_map(|o| o["uid"].as_str()).collect();
        assert_eq!(uids, ["cm-uid"]);
    }

    #[test]
    fn a_fresh_read_allows_adoption_only_into_the_same_live_job() {
        let job = mnist();
        assert!(may_adopt_into(Some(&job), UID));
        assert!(!may_adopt_into::<TFJob>(None, UID), "gone");
        assert!(!may_adopt_into(Some(&job), "an-earlier-uid"), "replaced");
        let mut deleting = mnist();
        deleting.metadata.deletion_timestamp = Some(at(0));
        assert!(!may_adopt_into(Some(&deleting), UID), "being deleted");
    }

    #[test]
    fn after_claims_counts_the_adopted_and_drops_the_released() {
        let controlled = vec![ours(0), ours(1)];
        let adopted = vec![orphan(2)];
        let released = BTreeSet::from(["pod-1".to_owned()]);
        let names: Vec<String> = after_claims(controlled, &adopted, &released)
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        assert_eq!(names, ["mnist-worker-0", "mnist-worker-2"]);
    }
}
