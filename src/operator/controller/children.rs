//! The pods and services of every framework's jobs, watched once for all of them: one watch and
//! one cache per kind, however many frameworks run (six by default). A change of a child goes
//! to the controller of the job kind that controls it, which reconciles that job.
//!
//! # Guarantees
//! - Every change a watch delivers, deletions included, queues the job that controls the
//!   object; a child no running framework controls changes nothing.
//! - An object is in its cache before its job is queued and before it ends the expectation of
//!   its creation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, Stream, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use super::Settings;
use super::by_job::ByJob;
use super::records::{PodRecord, Watched};
use crate::error_text::OneLine;
use crate::operator::engine::build::LABEL_OPERATOR;
use crate::operator::expectations::{Expectations, Kind};
use crate::operator::lock;

/// Where a change of a job's child goes: called with the job's namespace and name.
pub(super) type Route = Box<dyn Fn(&str, &str) + Send + Sync>;

/// The caches of the operator's pods and services, shared by every framework's controller.
pub struct Children {
    pub pods: Arc<ByJob>,
    pub services: Arc<ByJob>,
    /// Pods and services created that the caches may not show yet.
    pub(super) expectations: Arc<Expectations>,
    /// Per job kind (`TFJob`), where its children's changes go.
    routes: Mutex<HashMap<&'static str, Route>>,
}

impl Children {
    /// The caches, and the watches that fill them (they run while the future is polled). The
    /// watches see the children of the frameworks in `settings`, in its namespace or in all.
    pub(super) fn watch(
        client: &Client,
        settings: &Settings,
    ) -> (Arc<Children>, futures::future::BoxFuture<'static, ()>) {
        let (pods, services): (Api<PodRecord>, Api<PartialObjectMeta<Service>>) =
            match &settings.namespace {
                Some(ns) => (
                    Api::namespaced(client.clone(), ns),
                    Api::namespaced(client.clone(), ns),
                ),
                None => (Api::all(client.clone()), Api::all(client.clone())),
            };
        let controllers: Vec<&str> = settings
            .frameworks
            .iter()
            .map(|f| f.framework.controller_name)
            .collect();
        let config = watcher::Config::default()
            .labels(&format!("{LABEL_OPERATOR} in ({})", controllers.join(",")));
        let children = Arc::new(Children {
            pods: Arc::default(),
            services: Arc::default(),
            expectations: Arc::new(Expectations::default()),
            routes: Mutex::new(HashMap::new()),
        });
        let pod_watch = children.clone().follow(
            watcher(pods, config.clone()),
            children.pods.clone(),
            Kind::Pod,
        );
        // Services are read for their metadata alone, and the API server sends no more.
        let service_watch = children.clone().follow(
            watcher(services, config),
            children.services.clone(),
            Kind::Service,
        );
        // With the default backoff the watches retry for ever; they end only on a bug.
        let watches = async move {
            let (pods, services) = futures::join!(pod_watch, service_watch);
            for error in [pods.err(), services.err()].into_iter().flatten() {
                tracing::error!(error = %OneLine(&error), "a watch of the jobs' children ended");
            }
        };
        (children, watches.boxed())
    }

    /// Follow one kind of child's watch into its cache, and pass on every change.
    async fn follow<K: Watched>(
        self: Arc<Self>,
        watch: impl Stream<Item = watcher::Result<Event<K>>> + Send,
        cache: Arc<ByJob>,
        kind: Kind,
    ) -> Result<(), watcher::Error> {
        watch
            .default_backoff()
            .try_for_each(|event| {
                cache.observe(&event);
                if let Event::Apply(child) | Event::Delete(child) | Event::InitApply(child) = &event
                {
                    self.changed(kind, child);
                }
                std::future::ready(Ok(()))
            })
            .await
    }

    /// Send the changes of the children of jobs of `kind` to `route`.
    pub(super) fn route(&self, kind: &'static str, route: Route) {
        lock(&self.routes).insert(kind, route);
    }

    /// Pods and services caches have both synced.
    pub(super) async fn ready(&self) -> bool {
        self.pods.wait_until_ready().await && self.services.wait_until_ready().await
    }

    fn changed<K: Resource>(&self, kind: Kind, child: &K) {
        let namespace = child.namespace().unwrap_or_default();
        self.expectations
            .observe(kind, &namespace, &child.name_any());
        let Some(owner) = child
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
        else {
            return;
        };
        if let Some(route) = lock(&self.routes).get(owner.kind.as_str()) {
            route(&namespace, &owner.name);
        }
    }
}
