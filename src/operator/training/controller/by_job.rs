//! The cache of the operator's pods (or services), kept by job: a reconcile reads its job's
//! children in a lookup, not by a scan of every cached one. At 10,000 jobs the caches hold
//! 80,000 objects, and a scan of them on every reconcile made the operator's CPU grow with the
//! square of the jobs. It keeps compact records (see `records`), not whole objects.
//!
//! # Guarantees
//! - The cache follows the watch's events: an object applied is in it, one deleted is not.
//! - `of_job(namespace, job)` returns every cached object in `namespace` whose controller is
//!   named `job` or that carries `job` in its job-name label. It may return others too (a
//!   controller of another kind with the same name): callers still test each one.
//! - During a relist the cache answers as before it; when the list is complete it holds what
//!   was listed, so objects deleted while the watch was down are gone.
//! - `wait_until_ready` returns once the first list is complete.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use super::records::{Child, Watched};
use crate::operator::runtime::lock;
use crate::operator::training::engine::build::LABEL_JOB_NAME;

/// A job's key, or an object's: (namespace, name).
type Key = (String, String);

pub struct ByJob {
    state: Mutex<State>,
    /// Whether the first list is complete.
    synced: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    objects: Objects,
    /// During a relist, what it listed so far: it replaces `objects` when the list is
    /// complete.
    relisting: Option<Objects>,
}

#[derive(Default)]
struct Objects {
    by_name: HashMap<Key, Arc<Child>>,
    by_job: HashMap<Key, Vec<Arc<Child>>>,
}

impl Default for ByJob {
    fn default() -> Self {
        ByJob {
            state: Mutex::new(State::default()),
            synced: watch::Sender::new(false),
        }
    }
}

impl ByJob {
    /// Follow one watch event.
    pub fn observe<K: Watched>(&self, event: &Event<K>) {
        let mut state = lock(&self.state);
        match event {
            Event::Apply(object) => state.objects.put(object.child()),
            Event::Delete(object) => state.objects.remove(&key(object)),
            Event::Init => state.relisting = Some(Objects::default()),
            Event::InitApply(object) => match &mut state.relisting {
                Some(relisting) => relisting.put(object.child()),
                None => state.objects.put(object.child()),
            },
            Event::InitDone => {
                if let Some(listed) = state.relisting.take() {
                    state.objects = listed;
                }
                self.synced.send_replace(true);
            }
        }
    }

    /// The cached objects that may be the job's (see the module's guarantees).
    pub fn of_job(&self, namespace: &str, job: &str) -> Vec<Arc<Child>> {
        let key = (namespace.to_owned(), job.to_owned());
        lock(&self.state)
            .objects
            .by_job
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// Wait until the first list is complete; false if the cache can no longer be filled.
    pub async fn wait_until_ready(&self) -> bool {
        self.synced
            .subscribe()
            .wait_for(|synced| *synced)
            .await
            .is_ok()
    }
}

fn key<K: ResourceExt>(object: &K) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

impl Objects {
    fn put(&mut self, child: Child) {
        let child = Arc::new(child);
        let name = (child.namespace.clone(), child.name.clone());
        if let Some(old) = self.by_name.insert(name, child.clone()) {
            self.unindex(&old);
        }
        for job in job_names(&child).into_iter().flatten() {
            self.by_job
                .entry((child.namespace.clone(), job.to_owned()))
                .or_default()
                .push(child.clone());
        }
    }

    fn remove(&mut self, name: &Key) {
        if let Some(old) = self.by_name.remove(name) {
            self.unindex(&old);
        }
    }

    fn unindex(&mut self, child: &Arc<Child>) {
        for job in job_names(child).into_iter().flatten() {
            let key = (child.namespace.clone(), job.to_owned());
            if let Some(of_job) = self.by_job.get_mut(&key) {
                of_job.retain(|c| !Arc::ptr_eq(c, child));
                if of_job.is_empty() {
                    self.by_job.remove(&key);
                }
            }
        }
    }
}

/// The jobs an object may belong to: its controller's name, and its job-name label.
fn job_names(child: &Child) -> [Option<&str>; 2] {
    let controller = child.controller().map(|o| o.name.as_str());
    let labelled = child.label(LABEL_JOB_NAME);
    [controller, labelled.filter(|l| Some(*l) != controller)]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::PartialObjectMeta;

    use super::*;

    fn service(
        name: &str,
        controller: Option<&str>,
        label: Option<&str>,
    ) -> PartialObjectMeta<Service> {
        let mut service = PartialObjectMeta::<Service>::default();
        service.metadata.name = Some(name.to_owned());
        service.metadata.namespace = Some("ns".to_owned());
        service.metadata.owner_references = controller.map(|job| {
            vec![OwnerReference {
                name: job.to_owned(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        });
        service.metadata.labels =
            label.map(|job| [(LABEL_JOB_NAME.to_owned(), job.to_owned())].into());
        service
    }

    fn names(by_job: &ByJob, job: &str) -> Vec<String> {
        let mut names: Vec<String> = by_job
            .of_job("ns", job)
            .iter()
            .map(|c| c.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_job_finds_what_it_controls_and_what_carries_its_label() {
        let by_job = ByJob::default();
        by_job.observe(&Event::Apply(service("a-0", Some("a"), Some("a"))));
        by_job.observe(&Event::Apply(service("orphan", None, Some("a"))));
        by_job.observe(&Event::Apply(service("relabelled", Some("a"), Some("b"))));
        by_job.observe(&Event::Apply(service("b-0", Some("b"), Some("b"))));
        assert_eq!(names(&by_job, "a"), ["a-0", "orphan", "relabelled"]);
        assert_eq!(names(&by_job, "b"), ["b-0", "relabelled"]);
        assert!(names(&by_job, "c").is_empty());
    }

    #[test]
    fn a_changed_or_deleted_object_leaves_the_jobs_it_no_longer_points_at() {
        let by_job = ByJob::default();
        by_job.observe(&Event::Apply(service("p", None, Some("a"))));
        by_job.observe(&Event::Apply(service("p", Some("b"), Some("b"))));
        assert!(names(&by_job, "a").is_empty());
        assert_eq!(names(&by_job, "b"), ["p"]);
        by_job.observe(&Event::Delete(service("p", Some("b"), Some("b"))));
        assert!(names(&by_job, "b").is_empty());
        let state = by_job.state.lock().unwrap();
        assert!(state.objects.by_job.is_empty() && state.objects.by_name.is_empty());
    }

    #[test]
    fn a_relist_drops_what_was_deleted_while_the_watch_was_down() {
        let by_job = ByJob::default();
        by_job.observe(&Event::Apply(service("gone", Some("a"), Some("a"))));
        by_job.observe(&Event::Apply(service("kept", Some("a"), Some("a"))));
        by_job.observe(&Event::<PartialObjectMeta<Service>>::Init);
        by_job.observe(&Event::InitApply(service("kept", Some("a"), Some("a"))));
        by_job.observe(&Event::InitApply(service("new", Some("a"), Some("a"))));
        // Until the list is complete the cache answers as before.
        assert_eq!(names(&by_job, "a"), ["gone", "kept"]);
        by_job.observe(&Event::<PartialObjectMeta<Service>>::InitDone);
        assert_eq!(names(&by_job, "a"), ["kept", "new"]);
        assert_eq!(by_job.state.lock().unwrap().objects.by_name.len(), 2);
    }

    #[tokio::test]
    async fn the_cache_is_ready_once_the_first_list_is_complete() {
        let by_job = ByJob::default();
        by_job.observe(&Event::<PartialObjectMeta<Service>>::Init);
        let ready = by_job.wait_until_ready();
        futures::pin_mut!(ready);
        assert!(futures::poll!(ready.as_mut()).is_pending());
        by_job.observe(&Event::<PartialObjectMeta<Service>>::InitDone);
        assert!(ready.await);
    }
}
