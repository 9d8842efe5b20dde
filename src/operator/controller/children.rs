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
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, TryStreamExt};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod,
    PodStatus, Service,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::Settings;
use super::by_job::ByJob;
use crate::error_text::OneLine;
use crate::operator::engine::build::LABEL_OPERATOR;
use crate::operator::expectations::{Expectations, Kind};
use crate::operator::lock;

/// Where a change of a job's child goes: called with the job's namespace and name.
pub(super) type Route = Box<dyn Fn(&str, &str) + Send + Sync>;

/// The caches of the operator's pods and services, shared by every framework's controller.
pub struct Children {
    pub pods: Arc<ByJob<Pod>>,
    pub services: Arc<ByJob<Service>>,
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
        let (pods, services): (Api<Pod>, Api<Service>) = match &settings.namespace {
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
        let (pod_store, pod_writer) = reflector::store();
        let (service_store, service_writer) = reflector::store();
        let children = Arc::new(Children {
            pods: Arc::new(ByJob::new(pod_store)),
            services: Arc::new(ByJob::new(service_store)),
            expectations: Arc::new(Expectations::default()),
            routes: Mutex::new(HashMap::new()),
        });
        let pod_watch = children.clone().follow(
            pods,
            config.clone(),
            (pod_writer, children.pods.clone()),
            Kind::Pod,
        );
        let service_watch = children.clone().follow(
            services,
            config,
            (service_writer, children.services.clone()),
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

    /// Watch one kind of child into its cache and the cache's index, and pass on every change.
    async fn follow<K>(
        self: Arc<Self>,
        api: Api<K>,
        config: watcher::Config,
        (writer, index): (reflector::store::Writer<K>, Arc<ByJob<K>>),
        kind: Kind,
    ) -> Result<(), watcher::Error>
    where
        K: Resource<DynamicType = ()> + Slim + Clone + DeserializeOwned + Debug + Send + Sync,
        K: 'static,
    {
        watcher(api, config)
            .default_backoff()
            .modify(K::slim)
            .reflect(writer)
            .try_for_each(|event| {
                index.observe(&event);
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

/// What of a child the caches keep.
trait Slim {
    fn slim(&mut self);
}

/// Of a cached pod, only what `plan` reads is kept: the metadata, and of the status the phase,
/// its reason and message, and each container's name, restart count and state (the running
/// state's start time aside). The spec (with every container's environment and TF_CONFIG), the
/// managed fields, the pod's conditions and addresses and the containers' images are most of a
/// pod's size, and at tens of thousands of pods most of the operator's memory.
impl Slim for Pod {
    fn slim(&mut self) {
        self.managed_fields_mut().clear();
        self.metadata.annotations = None;
        self.spec = None;
        self.status = self.status.take().map(|status| PodStatus {
            phase: status.phase,
            reason: status.reason,
            message: status.message,
            container_statuses: status.container_statuses.map(slim_containers),
            init_container_statuses: status.init_container_statuses.map(slim_containers),
            ..PodStatus::default()
        });
    }
}

fn slim_containers(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    statuses
        .into_iter()
        .map(|status| ContainerStatus {
            name: status.name,
            restart_count: status.restart_count,
            state: status.state.map(|state| ContainerState {
                running: None,
                terminated: state.terminated.map(|t| ContainerStateTerminated {
                    exit_code: t.exit_code,
                    reason: t.reason,
                    ..ContainerStateTerminated::default()
                }),
                waiting: state.waiting.map(|w| ContainerStateWaiting {
                    reason: w.reason,
                    ..ContainerStateWaiting::default()
                }),
            }),
            ..ContainerStatus::default()
        })
        .collect()
}

/// Of a cached service, only the metadata is read.
impl Slim for Service {
    fn slim(&mut self) {
        self.managed_fields_mut().clear();
        self.metadata.annotations = None;
        self.spec = None;
        self.status = None;
    }
}
