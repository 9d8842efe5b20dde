//! A cache of the operator's pods (or services) that finds a job's own in a few lookups: a
//! reconcile reads its job's children, not every cached one. At 10,000 jobs the caches hold
//! 80,000 objects, and a scan of them on every reconcile made the operator's CPU grow with the
//! square of the jobs.
//!
//! # Guarantees
//! - The cache and its index follow the same watch events, the index after the cache.
//! - `of_job(namespace, job)` returns, as cached, every object in `namespace` whose controller
//!   is named `job` or that carries `job` in its job-name label. It may return others too (a
//!   controller of another kind with the same name): callers still test each one.
//! - After a relist, objects deleted while the watch was down leave the index as they leave
//!   the cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};

use crate::operator::engine::build::LABEL_JOB_NAME;
use crate::operator::lock;

/// A job's key: (namespace, job name).
type JobKey = (String, String);

/// By job, the names of the cached objects that may be its.
type Names = HashMap<JobKey, Vec<String>>;

pub struct ByJob<K: Resource<DynamicType = ()> + 'static> {
    cache: Store<K>,
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    names: Names,
    /// During a relist, the index of what it listed so far: it replaces `names` when the list
    /// is complete, as the cache's buffer replaces the cache.
    relisting: Option<Names>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> ByJob<K> {
    /// An index over `cache`; feed it the events the cache's writer takes, with `observe`.
    pub fn new(cache: Store<K>) -> Self {
        ByJob {
            cache,
            index: Mutex::new(Index::default()),
        }
    }

    /// Follow one watch event, after the cache's writer took it.
    pub fn observe(&self, event: &Event<K>) {
        let mut index = lock(&self.index);
        match event {
            Event::Apply(object) => add(&mut index.names, object),
            Event::Delete(object) => remove(&mut index.names, object),
            Event::Init => index.relisting = Some(Names::new()),
            Event::InitApply(object) => {
                // Also into the index in use: the cache takes the listed objects at the end,
                // and until then answers with what it had; an extra name is only skipped.
                add(&mut index.names, object);
                if let Some(relisting) = &mut index.relisting {
                    add(relisting, object);
                }
            }
            Event::InitDone => {
                if let Some(relisting) = index.relisting.take() {
                    index.names = relisting;
                }
            }
        }
    }

    /// The cached objects that may be the job's (see the module's guarantees).
    pub fn of_job(&self, namespace: &str, job: &str) -> Vec<Arc<K>> {
        let key = (namespace.to_owned(), job.to_owned());
        let mut index = lock(&self.index);
        let Some(names) = index.names.get_mut(&key) else {
            return Vec::new();
        };
        let mut found = Vec::with_capacity(names.len());
        // A name whose object is gone, or no longer points at the job, is dropped here.
        names.retain(|name| {
            let cached = self.cache.get(&ObjectRef::new(name).within(namespace));
            match cached {
                Some(object) if job_names(object.as_ref()).contains(&Some(job)) => {
                    found.push(object);
                    true
                }
                _ => false,
            }
        });
        if names.is_empty() {
            index.names.remove(&key);
        }
        found
    }

    /// Whether the cache has synced.
    pub async fn wait_until_ready(&self) -> bool {
        self.cache.wait_until_ready().await.is_ok()
    }
}

/// The jobs an object may belong to: its controller's name, and its job-name label.
fn job_names<K: Resource>(object: &K) -> [Option<&str>; 2] {
    let controller = object
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.name.as_str());
    let labelled = object.labels().get(LABEL_JOB_NAME).map(String::as_str);
    [controller, labelled.filter(|l| Some(*l) != controller)]
}

fn add<K: Resource>(names: &mut Names, object: &K) {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    for job in job_names(object).into_iter().flatten() {
        let of_job = names
            .entry((namespace.clone(), job.to_owned()))
            .or_default();
        if !of_job.contains(&name) {
            of_job.push(name.clone());
        }
    }
}

fn remove<K: Resource>(names: &mut Names, object: &K) {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    for job in job_names(object).into_iter().flatten() {
        let key = (namespace.clone(), job.to_owned());
        if let Some(of_job) = names.get_mut(&key) {
            of_job.retain(|n| *n != name);
            if of_job.is_empty() {
                names.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::runtime::reflector;

    use super::*;

    fn pod(name: &str, controller: Option<&str>, label: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.namespace = Some("ns".to_owned());
        pod.metadata.owner_references = controller.map(|job| {
            vec![OwnerReference {
                name: job.to_owned(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        });
        pod.metadata.labels = label.map(|job| [(LABEL_JOB_NAME.to_owned(), job.to_owned())].into());
        pod
    }

    /// A cache and its index, fed the same events, as the watch feeds them.
    struct Fed {
        writer: reflector::store::Writer<Pod>,
        by_job: ByJob<Pod>,
    }

    impl Fed {
        fn new() -> Self {
            let (cache, writer) = reflector::store();
            Fed {
                writer,
                by_job: ByJob::new(cache),
            }
        }

        fn feed(&mut self, event: Event<Pod>) {
            self.writer.apply_watcher_event(&event);
            self.by_job.observe(&event);
        }

        fn names(&self, job: &str) -> Vec<String> {
            let mut names: Vec<String> = self
                .by_job
                .of_job("ns", job)
                .iter()
                .map(|p| p.name_any())
                .collect();
            names.sort();
            names
        }
    }

    #[test]
    fn a_job_finds_what_it_controls_and_what_carries_its_label() {
        let mut fed = Fed::new();
        fed.feed(Event::Apply(pod("a-0", Some("a"), Some("a"))));
        fed.feed(Event::Apply(pod("orphan", None, Some("a"))));
        fed.feed(Event::Apply(pod("relabelled", Some("a"), Some("b"))));
        fed.feed(Event::Apply(pod("b-0", Some("b"), Some("b"))));
        assert_eq!(fed.names("a"), ["a-0", "orphan", "relabelled"]);
        assert_eq!(fed.names("b"), ["b-0", "relabelled"]);
        assert!(fed.names("c").is_empty());
    }

    #[test]
    fn a_changed_or_deleted_object_leaves_the_jobs_it_no_longer_points_at() {
        let mut fed = Fed::new();
        fed.feed(Event::Apply(pod("p", None, Some("a"))));
        fed.feed(Event::Apply(pod("p", Some("b"), Some("b"))));
        assert!(fed.names("a").is_empty());
        assert_eq!(fed.names("b"), ["p"]);
        fed.feed(Event::Delete(pod("p", Some("b"), Some("b"))));
        assert!(fed.names("b").is_empty());
        assert!(fed.by_job.index.lock().unwrap().names.is_empty());
    }

    #[test]
    fn a_relist_drops_what_was_deleted_while_the_watch_was_down() {
        let mut fed = Fed::new();
        fed.feed(Event::Apply(pod("gone", Some("a"), Some("a"))));
        fed.feed(Event::Apply(pod("kept", Some("a"), Some("a"))));
        fed.feed(Event::Init);
        fed.feed(Event::InitApply(pod("kept", Some("a"), Some("a"))));
        fed.feed(Event::InitApply(pod("new", Some("a"), Some("a"))));
        // Until the list is complete the cache answers as before.
        assert_eq!(fed.names("a"), ["gone", "kept"]);
        fed.feed(Event::InitDone);
        assert_eq!(fed.names("a"), ["kept", "new"]);
        let index = fed.by_job.index.lock().unwrap();
        assert_eq!(index.names[&("ns".into(), "a".into())].len(), 2);
    }
}
