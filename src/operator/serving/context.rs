//! What every reconcile of an InferenceService shares (the caches, the client, the settings)
//! and the writes and reads its steps make: the controller's caches read by InferenceService,
//! writes only to objects it controls, and the store's credentials read KServe's way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::api::{ClusterServingRuntime, InferenceService, ServingRuntime};
use super::objects::Ingress;
use super::predictor::ISVC_LABEL;
use super::select::Runtime;
use super::traffic::Revision;
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::events::Events;
use crate::operator::runtime::lock;
use crate::operator::runtime::metrics::Metrics;
use crate::operator::runtime::writes::{Created, create_once, is_gone};

/// How long after the gateway acknowledged a route a revision it no longer names is deleted.
pub const DRAIN: Duration = Duration::from_secs(5);

/// What the InferenceService controller runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: Option<String>,
    pub concurrency: u16,
    pub ingress: Ingress,
    /// The storage initializer's image.
    pub storage_image: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot {operation} for InferenceService {namespace}/{name}")]
pub struct ReconcileError {
    operation: &'static str,
    namespace: String,
    name: String,
    #[source]
    pub(super) source: kube::Error,
}

/// What every reconcile shares.
pub struct Context {
    pub(super) client: Client,
    pub(super) deployments: Store<Deployment>,
    pub(super) services: Store<Service>,
    pub(super) policies: Store<NetworkPolicy>,
    pub(super) pods: Store<Pod>,
    pub(super) routes: Store<DynamicObject>,
    pub(super) runtimes: Store<ServingRuntime>,
    pub(super) cluster_runtimes: Store<ClusterServingRuntime>,
    pub(super) settings: Settings,
    pub(super) events: Events,
    pub(super) metrics: Arc<Metrics>,
    /// When the gateway was first seen acknowledging a route's generation, by route UID.
    pub(super) acknowledged: Mutex<HashMap<(String, i64), Instant>>,
    /// The generation of each route this process wrote last, by route UID.
    pub(super) written: Mutex<HashMap<String, i64>>,
}

/// The Gateway API's HTTPRoute, for the dynamic API.
pub fn route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

impl Context {
    pub(super) fn client(&self) -> &Client {
        &self.client
    }
    pub(super) fn settings(&self) -> &Settings {
        &self.settings
    }
    pub(super) fn events(&self) -> &Events {
        &self.events
    }
    pub(super) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The runtimes `isvc` may use: its namespace's and the cluster's.
    pub(super) fn runtimes_for(
        &self,
        namespace: &str,
    ) -> (Vec<Arc<ServingRuntime>>, Vec<Arc<ClusterServingRuntime>>) {
        let own = (self.runtimes.state().into_iter())
            .filter(|r| r.namespace().as_deref() == Some(namespace))
            .collect();
        (own, self.cluster_runtimes.state())
    }

    /// The objects of `K` in the cache labelled with `isvc`'s name and controlled by it.
    pub(super) fn owned<K: Resource<DynamicType = ()> + Clone>(
        store: &Store<K>,
        isvc: &InferenceService,
    ) -> Vec<Arc<K>> {
        let uid = isvc.metadata.uid.as_deref();
        (store.state().into_iter())
            .filter(|o| o.namespace() == isvc.namespace())
            .filter(|o| {
                (o.owner_references().iter())
                    .any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == uid)
            })
            .collect()
    }

    pub(super) fn deployments(&self, isvc: &InferenceService) -> Vec<Arc<Deployment>> {
        Self::owned(&self.deployments, isvc)
    }

    pub(super) fn service(&self, isvc: &InferenceService, name: &str) -> Option<Arc<Service>> {
        self.services
            .get(&ObjectRef::new(name).within(&isvc.namespace().unwrap_or_default()))
    }

    pub(super) fn policy(&self, isvc: &InferenceService, name: &str) -> Option<Arc<NetworkPolicy>> {
        self.policies
            .get(&ObjectRef::new(name).within(&isvc.namespace().unwrap_or_default()))
    }

    pub(super) fn pods(&self, isvc: &InferenceService) -> Vec<Arc<Pod>> {
        (self.pods.state().into_iter())
            .filter(|p| {
                p.namespace() == isvc.namespace()
                    && p.labels().get(ISVC_LABEL) == isvc.metadata.name.as_ref()
            })
            .collect()
    }

    pub(super) fn route(&self, isvc: &InferenceService) -> Option<Arc<DynamicObject>> {
        let reference = ObjectRef::new_with(&isvc.name_any(), route_resource())
            .within(&isvc.namespace().unwrap_or_default());
        self.routes.get(&reference)
    }

    /// Remember the generation of a route this process just wrote (the API server's answer).
    pub(super) fn wrote(&self, route: &DynamicObject) {
        if let (Some(uid), Some(generation)) = (route.uid(), route.metadata.generation) {
            lock(&self.written).insert(uid, generation);
        }
    }

    /// The generation of `route` this process wrote last, if it wrote one.
    pub(super) fn written(&self, route: &DynamicObject) -> Option<i64> {
        lock(&self.written).get(&route.uid()?).copied()
    }

    /// Whether the gateway acknowledged `route`'s generation at least [`DRAIN`] ago (it is
    /// remembered from the first reconcile that saw it).
    pub(super) fn drained(&self, route: &DynamicObject) -> bool {
        let key = (
            route.uid().unwrap_or_default(),
            route.metadata.generation.unwrap_or_default(),
        );
        let mut seen = lock(&self.acknowledged);
        seen.retain(|(uid, _), at| *uid != key.0 || at.elapsed() < Duration::from_secs(600));
        seen.entry(key).or_insert_with(Instant::now).elapsed() >= DRAIN
    }
}

/// The error of a failed write, naming what it wrote.
pub(super) fn failed(
    isvc: &InferenceService,
    operation: &'static str,
) -> impl FnOnce(kube::Error) -> ReconcileError {
    let (namespace, name) = (isvc.namespace().unwrap_or_default(), isvc.name_any());
    move |source| ReconcileError {
        operation,
        namespace,
        name,
        source,
    }
}

/// Server-side apply `object` as the operator, taking its fields over: only ever called on
/// objects this InferenceService controls.
pub(super) async fn apply<K>(api: &Api<K>, name: &str, object: &K) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(object))
        .await
        .map(|_| ())
}

/// Create `object` when absent: the object as stored, or the one of its name that exists when
/// it is `isvc`'s; `None` when that one is another's.
pub(super) async fn create_owned<K>(
    api: &Api<K>,
    object: &K,
    isvc: &InferenceService,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match create_once(api, object).await? {
        Created::New(created) => Ok(Some(created)),
        Created::Exists => {
            let existing = api.get(&object.name_any()).await?;
            Ok(controlled_by(existing.owner_references(), isvc).then_some(existing))
        }
    }
}

pub(super) fn controlled_by(
    references: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    isvc: &InferenceService,
) -> bool {
    references
        .iter()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == isvc.metadata.uid.as_ref())
}

/// Delete `name` of `api`, gone already being fine.
pub(super) async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_gone(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The store's endpoint and keys for the storage initializer, KServe's way: the first Secret
/// of the predictor's ServiceAccount (`default` when it names none) annotated with
/// `serving.kserve.io/s3-endpoint` gives `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` from
/// its keys of those names, and the endpoint, `s3-usehttps` and `s3-region` from its
/// annotations. Only the Secrets' metadata is read.
pub(super) async fn store_env(
    client: &Client,
    isvc: &InferenceService,
) -> Result<Vec<EnvVar>, kube::Error> {
    let namespace = isvc.namespace().unwrap_or_default();
    let account = isvc
        .spec
        .predictor
        .service_account_name
        .as_deref()
        .unwrap_or("default");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let Some(account) = accounts.get_opt(account).await? else {
        return Ok(Vec::new());
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    for reference in account.secrets.iter().flatten() {
        let Some(name) = &reference.name else {
            continue;
        };
        let Some(meta) = secrets.get_metadata_opt(name).await? else {
            continue;
        };
        let annotations = meta.metadata.annotations.unwrap_or_default();
        if let Some(endpoint) = annotations.get("serving.kserve.io/s3-endpoint") {
            return Ok(s3_env(name, endpoint, &annotations));
        }
    }
    Ok(Vec::new())
}

fn s3_env(
    secret: &str,
    endpoint: &str,
    annotations: &std::collections::BTreeMap<String, String>,
) -> Vec<EnvVar> {
    let key = |env: &str| -> EnvVar {
        serde_json::from_value(json!({
            "name": env, "valueFrom": { "secretKeyRef": { "name": secret, "key": env } }
        }))
        .unwrap_or_default()
    };
    let https = annotations
        .get("serving.kserve.io/s3-usehttps")
        .map(String::as_str)
        != Some("0");
    let scheme = if https { "https" } else { "http" };
    let value = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    };
    let mut env = vec![
        key("AWS_ACCESS_KEY_ID"),
        key("AWS_SECRET_ACCESS_KEY"),
        value("S3_ENDPOINT", endpoint.to_owned()),
        value("AWS_ENDPOINT_URL", format!("{scheme}://{endpoint}")),
        value("S3_USE_HTTPS", if https { "1" } else { "0" }.into()),
    ];
    if let Some(region) = annotations.get("serving.kserve.io/s3-region") {
        env.push(value("AWS_DEFAULT_REGION", region.clone()));
    }
    env
}

/// The runtimes as `select` reads them.
pub(super) fn candidates<'a>(
    own: &'a [Arc<ServingRuntime>],
    cluster: &'a [Arc<ClusterServingRuntime>],
) -> Vec<Runtime<'a>> {
    let own = own.iter().map(|r| Runtime {
        name: r.metadata.name.as_deref().unwrap_or_default(),
        cluster: false,
        created: r.metadata.creation_timestamp.as_ref(),
        spec: &r.spec,
    });
    let cluster = cluster.iter().map(|r| Runtime {
        name: r.metadata.name.as_deref().unwrap_or_default(),
        cluster: true,
        created: r.metadata.creation_timestamp.as_ref(),
        spec: &r.spec.spec,
    });
    own.chain(cluster).collect()
}

/// Whether a revision's Deployment has a pod available: Ready for `MIN_READY_SECONDS`.
pub(super) fn available(deployment: &Deployment) -> bool {
    (deployment.status.as_ref())
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
        >= 1
}

/// The revisions among `deployments`, with their readiness (a pod available).
pub(super) fn revisions(deployments: &[Arc<Deployment>]) -> Vec<Revision<'_>> {
    (deployments.iter())
        .map(|d| Revision {
            name: d.metadata.name.as_deref().unwrap_or_default(),
            ready: available(d),
        })
        .collect()
}
