//! The caches this process reads: the served Gateway and GatewayClass, and the HTTPRoutes,
//! Services, EndpointSlices and ReferenceGrants of the watched namespaces (one, or all). Every
//! change to any of them wakes the translation. Secrets and ConfigMaps are never read.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::Notify;

use super::world::{GROUP, World};

/// Where the caches look.
pub struct Scope {
    pub gateway_namespace: String,
    pub gateway: String,
    pub class: String,
    /// Every namespace's routes and backends, or only the Gateway's.
    pub all_namespaces: bool,
}

/// The caches, filled by tasks of their own.
pub struct Caches {
    gateways: Store<DynamicObject>,
    classes: Store<DynamicObject>,
    routes: Store<DynamicObject>,
    services: Store<DynamicObject>,
    slices: Store<DynamicObject>,
    grants: Store<DynamicObject>,
}

/// The Gateway API resource of `kind`.
pub fn gateway_api(kind: &str, plural: &str, version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
}

impl Caches {
    /// Start watching; `changed` is told of every change.
    pub fn start(client: &Client, scope: &Scope, changed: &Arc<Notify>) -> Caches {
        let watched = (!scope.all_namespaces).then_some(scope.gateway_namespace.as_str());
        let by_name =
            |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        let start = |resource: ApiResource, namespace: Option<&str>, config: watcher::Config| {
            let api = match namespace {
                Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            cache(api, resource, config, changed.clone())
        };
        Caches {
            gateways: start(
                gateway_api("Gateway", "gateways", "v1"),
                Some(&scope.gateway_namespace),
                by_name(&scope.gateway),
            ),
            classes: start(
                gateway_api("GatewayClass", "gatewayclasses", "v1"),
                None,
                by_name(&scope.class),
            ),
            routes: start(
                gateway_api("HTTPRoute", "httproutes", "v1"),
                watched,
                watcher::Config::default(),
            ),
            services: start(
                ApiResource::erase::<Service>(&()),
                watched,
                watcher::Config::default(),
            ),
            slices: start(
                ApiResource::erase::<EndpointSlice>(&()),
                watched,
                watcher::Config::default(),
            ),
            grants: start(
                gateway_api("ReferenceGrant", "referencegrants", "v1"),
                watched,
                watcher::Config::default(),
            ),
        }
    }

    /// Wait until every cache holds what the cluster has.
    pub async fn synced(&self) {
        let all = [
            &self.gateways,
            &self.classes,
            &self.routes,
            &self.services,
            &self.slices,
            &self.grants,
        ];
        for store in all {
            // The writer lives as long as the process: its task never ends.
            let _ = store.wait_until_ready().await;
        }
    }

    /// What the caches hold now.
    pub fn world(&self) -> World {
        World {
            gateway: self.gateway(),
            routes: values(&self.routes),
            services: values(&self.services),
            slices: values(&self.slices),
            grants: values(&self.grants),
        }
    }

    /// The served Gateway, `Null` if it is not there.
    pub fn gateway(&self) -> Value {
        values(&self.gateways).pop().unwrap_or(Value::Null)
    }

    /// The served GatewayClass, `Null` if it is not there.
    pub fn class(&self) -> Value {
        values(&self.classes).pop().unwrap_or(Value::Null)
    }
}

fn values(store: &Store<DynamicObject>) -> Vec<Value> {
    (store.state().iter())
        .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
        .collect()
}

/// A cache of `api`'s objects, kept by a task that tells `changed` of each event. A refused
/// watch is retried with backoff and logged.
fn cache(
    api: Api<DynamicObject>,
    resource: ApiResource,
    config: watcher::Config,
    changed: Arc<Notify>,
) -> Store<DynamicObject> {
    let writer = Writer::new(resource.clone());
    let store = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    tokio::spawn(stream.for_each(move |event| {
        match event {
            Ok(_) => changed.notify_one(),
            Err(e) => tracing::warn!(kind = %resource.kind, error = %e, "watch failed; retrying"),
        }
        async {}
    }));
    store
}
