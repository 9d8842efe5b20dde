//! The pods and services of every framework's jobs, and their companions (MPIJob's ConfigMap,
//! ServiceAccount, Role and RoleBinding), watched once for all of them: one watch and one cache
//! per kind, however many frameworks run (seven by default). A change of a child goes to the
//! controller of the job kind that controls it, which reconciles that job.
//!
//! # Guarantees
//! - Every change a watch delivers, deletions included, queues the job that controls the
//!   object; a child no running framework controls changes nothing.
//! - An object is in its cache before its job is queued and before it ends the expectation of
//!   its creation.
//! - A companion kind is watched only when a framework that runs has it, so the operator needs
//!   `list` and `watch` on it only then.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, join_all};
use futures::{FutureExt, Stream, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use super::Settings;
use super::by_job::ByJob;
use super::records::{PodRecord, Watched};
use crate::error_text::OneLine;
use crate::operator::runtime::expectations::{Expectations, Kind};
use crate::operator::runtime::{lock, watched};
use crate::operator::training::engine::build::LABEL_OPERATOR;
use crate::operator::training::framework::CompanionKind;

/// Where a change of a job's child goes: called with the job's namespace and name.
pub(super) type Route = Box<dyn Fn(&str, &str) + Send + Sync>;

/// The caches of the operator's pods and services, shared by every framework's controller.
pub struct Children {
    pub pods: Arc<ByJob>,
    pub services: Arc<ByJob>,
    /// The jobs' companions, by kind.
    pub(super) companions: Arc<Companions>,
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
        let namespace = settings.namespace.as_deref();
        let pods: Api<PodRecord> = watched(client, namespace);
        let services: Api<PartialObjectMeta<Service>> = watched(client, namespace);
        let controllers: Vec<&str> = settings
            .frameworks
            .iter()
            .map(|f| f.framework.controller_name)
            .collect();
        let config = watcher::Config::default()
            .labels(&format!("{LABEL_OPERATOR} in ({})", controllers.join(",")));
        let companion_kinds: BTreeSet<CompanionKind> = settings
            .frameworks
            .iter()
            .flat_map(|f| f.companion_kinds)
            .copied()
            .collect();
        let children = Arc::new(Children {
            pods: Arc::default(),
            services: Arc::default(),
            companions: Arc::new(Companions {
                caches: companion_kinds
                    .iter()
                    .map(|kind| (*kind, Arc::default()))
                    .collect(),
            }),
            expectations: Arc::new(Expectations::default()),
            routes: Mutex::new(HashMap::new()),
        });
        let mut watches = vec![
            children
                .clone()
                .follow(
                    watcher(pods, config.clone()),
                    children.pods.clone(),
                    Some(Kind::Pod),
                )
                .boxed(),
            // Services are read for their metadata alone, and the API server sends no more.
            children
                .clone()
                .follow(
                    watcher(services, config.clone()),
                    children.services.clone(),
                    Some(Kind::Service),
                )
                .boxed(),
        ];
        let namespace = settings.namespace.as_deref();
        for kind in companion_kinds {
            watches.push(
                children
                    .clone()
                    .follow_companions(client, namespace, &config, kind),
            );
        }
        // With the default backoff the watches retry for ever; they end only on a bug.
        let watches = async move {
            for error in join_all(watches).await.into_iter().filter_map(Result::err) {
                tracing::error!(error = %OneLine(&error), "a watch of the jobs' children ended");
            }
        };
        (children, watches.boxed())
    }

    /// Follow the watch of one kind of companion, as metadata, into its cache.
    fn follow_companions(
        self: Arc<Self>,
        client: &Client,
        namespace: Option<&str>,
        config: &watcher::Config,
        kind: CompanionKind,
    ) -> BoxFuture<'static, Result<(), watcher::Error>> {
        let cache = self.companions.caches[&kind].clone();
        let config = config.clone();
        match kind {
            CompanionKind::ConfigMap => {
                let api = watched::<PartialObjectMeta<ConfigMap>>(client, namespace);
                self.follow(watcher(api, config), cache, None).boxed()
            }
            CompanionKind::ServiceAccount => {
                let api = watched::<PartialObjectMeta<ServiceAccount>>(client, namespace);
                self.follow(watcher(api, config), cache, None).boxed()
            }
            CompanionKind::Role => {
                let api = watched::<PartialObjectMeta<Role>>(client, namespace);
                self.follow(watcher(api, config), cache, None).boxed()
            }
            CompanionKind::RoleBinding => {
                let api = watched::<PartialObjectMeta<RoleBinding>>(client, namespace);
                self.follow(watcher(api, config), cache, None).boxed()
            }
        }
    }

    /// Follow one kind of child's watch into its cache, and pass on every change; `expected`
    /// says which creations it may be awaited for (none for companions).
    async fn follow<K: Watched>(
        self: Arc<Self>,
        watch: impl Stream<Item = watcher::Result<Event<K>>> + Send,
        cache: Arc<ByJob>,
        expected: Option<Kind>,
    ) -> Result<(), watcher::Error> {
        watch
            .default_backoff()
            .try_for_each(|event| {
                cache.observe(&event);
                if let Event::Apply(child) | Event::Delete(child) | Event::InitApply(child) = &event
                {
                    self.changed(expected, child);
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

    fn changed<K: Resource>(&self, expected: Option<Kind>, child: &K) {
        let namespace = child.namespace().unwrap_or_default();
        if let Some(kind) = expected {
            self.expectations
                .observe(kind, &namespace, &child.name_any());
        }
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

/// The caches of the jobs' companions, one per kind watched.
#[derive(Default)]
pub(super) struct Companions {
    caches: HashMap<CompanionKind, Arc<ByJob>>,
}

impl Companions {
    /// The version of job `job`'s companion `kind` `name` the watch last delivered; none if
    /// the cache does not have it (deleted, or not seen yet).
    pub(super) fn resource_version(
        &self,
        kind: CompanionKind,
        namespace: &str,
        job: &str,
        name: &str,
    ) -> Option<String> {
        self.caches
            .get(&kind)?
            .of_job(namespace, job)
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.resource_version().map(str::to_owned))
    }
}
