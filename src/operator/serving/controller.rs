//! The InferenceService controller's loop: watches InferenceServices, the Deployments,
//! Services, NetworkPolicies, pods and HTTPRoutes it made for them (one cache each, by the
//! `serving.kserve.io/inferenceservice` label) and the runtimes, and reconciles an
//! InferenceService whenever one of them changes, so traffic follows readiness continuously.
//!
//! # Expected flow
//! A reconcile selects the runtime (`select`), reads the store's credentials from the
//! predictor's ServiceAccount, builds the revision's pod (`predictor`), creates the revision
//! (Deployment and Service) if no revision runs that pod yet, decides the traffic (`traffic`)
//! from the revisions' readiness, writes the address Service, the HTTPRoute and the
//! autoscalers, retires what nothing sends to any more, and writes the status (`status`).
//!
//! # Guarantees
//! - A spec that cannot be served changes nothing that serves: its revisions and their traffic
//!   stay; the status and a Warning event say why, naming the fix.
//! - A revision gets requests only while it is ready; one that stops being ready gets its
//!   share moved to the rolled-out revision at its next reconcile (a pod's readiness change
//!   is a watch event away), with a Warning event.
//! - A revision is deleted only once the gateway has acknowledged a route that no longer names
//!   it, and `context::DRAIN` after: the gateway applies a route a moment after it says so.
//! - An object of the name it would write that is not this InferenceService's (no controller
//!   reference to it) is never written: the status says which, and what to rename.
//!
//! # Errors
//! A failed API call is logged with the InferenceService and retried after a short delay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use super::api::{ClusterServingRuntime, InferenceService, ServingRuntime};
use super::context::{Context, ReconcileError, Settings, route_resource};
use super::predictor::ISVC_LABEL;
use crate::error_text::OneLine;
use crate::operator::runtime::events::Events;
use crate::operator::runtime::http::{Gate, Health};
use crate::operator::runtime::manager::Shared;
use crate::operator::runtime::shutdown::Stop;
use crate::operator::runtime::writes::is_conflict;
use crate::operator::runtime::{installed, shutdown, watched};

/// How long a failed reconcile waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);
const CONFLICT_RETRY: Duration = Duration::from_millis(200);
/// The controller events name as their reporter.
const CONTROLLER_NAME: &str = "inferenceservice-controller";
/// The name of the flag value that runs this controller.
pub const FLAG_NAME: &str = "serving";

fn served() -> installed::Served {
    installed::Served {
        kind: "InferenceService",
        plural: "inferenceservices",
        group: super::api::GROUP.to_owned(),
        api_version: "serving.kserve.io/v1beta1".to_owned(),
        flag_name: FLAG_NAME,
        flag: "--controllers",
        component: "training-operator",
    }
}

/// Run until `shared.stop`: wait for the CRD, then reconcile InferenceServices.
pub async fn run(shared: Shared, settings: Settings) {
    let Shared {
        client,
        metrics,
        health,
        ready,
        stop,
    } = shared;
    if !kinds_installed(&client, &health, &stop).await {
        return;
    }
    let namespace = settings.namespace.clone();
    let ns = namespace.as_deref();
    // The objects the controller made, by their label.
    let labelled = || watcher::Config::default().labels(ISVC_LABEL);
    let (deployments, deployment_stream) = cached::<Deployment>(watched(&client, ns), labelled());
    let (services, service_stream) = cached::<Service>(watched(&client, ns), labelled());
    let (policies, policy_stream) = cached::<NetworkPolicy>(watched(&client, ns), labelled());
    let (pods, pod_stream) = cached::<Pod>(watched(&client, ns), labelled());
    let (routes, route_stream) = route_cache(&client, ns);
    let (runtimes, runtime_stream) =
        cached::<ServingRuntime>(watched(&client, ns), watcher::Config::default());
    let (cluster_runtimes, cluster_stream) =
        cached::<ClusterServingRuntime>(Api::all(client.clone()), watcher::Config::default());
    let concurrency = settings.concurrency.max(1);
    let events = Events::start(
        client.clone(),
        CONTROLLER_NAME,
        std::env::var("HOSTNAME").ok(),
        metrics.clone(),
    );
    let context = Arc::new(Context {
        client: client.clone(),
        deployments,
        services,
        policies,
        pods,
        routes,
        runtimes,
        cluster_runtimes,
        settings,
        events,
        metrics,
        acknowledged: Mutex::new(HashMap::new()),
        written: Mutex::new(HashMap::new()),
    });
    let synced_context = context.clone();
    tracing::info!("running the InferenceService controller");
    let controller = Controller::new(
        watched::<InferenceService>(&client, ns),
        watcher::Config::default(),
    );
    let store = controller.store();
    let (all_a, all_b) = (store.clone(), store.clone());
    let controller = controller
        .owns_stream(deployment_stream)
        .owns_stream(service_stream)
        .owns_stream(policy_stream)
        .watches_stream(pod_stream, |pod: Pod| owner_of(&pod))
        .owns_stream_with(route_stream, route_resource())
        .watches_stream(runtime_stream, move |r: ServingRuntime| in_namespace(&all_a, r.namespace()))
        .watches_stream(cluster_stream, move |_: ClusterServingRuntime| in_namespace(&all_b, None))
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(stop.clone())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %OneLine(&e), "inference service reconcile did not complete");
            }
        });
    let synced = open_when_synced(synced_context, store.clone(), ready);
    futures::future::join(shutdown::drive(controller, &store, stop), synced).await;
}

/// Open the controller's readiness gate once every cache holds what the cluster has: a
/// reconcile on an empty cache would create revisions that exist.
async fn open_when_synced(ctx: Arc<Context>, isvcs: Store<InferenceService>, ready: Gate) {
    let all = futures::future::join5(
        ctx.deployments.wait_until_ready(),
        ctx.pods.wait_until_ready(),
        ctx.routes.wait_until_ready(),
        ctx.runtimes.wait_until_ready(),
        ctx.cluster_runtimes.wait_until_ready(),
    )
    .await;
    let synced = [all.0, all.1, all.2, all.3, all.4]
        .iter()
        .all(Result::is_ok)
        && ctx.services.wait_until_ready().await.is_ok()
        && ctx.policies.wait_until_ready().await.is_ok()
        && isvcs.wait_until_ready().await.is_ok();
    if synced {
        ready.open();
    }
}

/// Wait until the API server serves InferenceServices and HTTPRoutes (the gateway component
/// renders their CRD); false when `stop` came first.
async fn kinds_installed(client: &Client, health: &Health, stop: &Stop) -> bool {
    for kind in [served(), routes_served()] {
        let waiting = installed::Waiting::AtStart;
        if !installed::await_installed(client, &kind, health, stop.clone(), waiting).await {
            return false;
        }
    }
    true
}

/// The Gateway API's HTTPRoute, which the controller writes and watches.
fn routes_served() -> installed::Served {
    installed::Served {
        kind: "HTTPRoute",
        plural: "httproutes",
        group: "gateway.networking.k8s.io".to_owned(),
        api_version: "gateway.networking.k8s.io/v1".to_owned(),
        flag_name: FLAG_NAME,
        flag: "--controllers",
        component: "gateway",
    }
}

/// A watch of `api` with `config`, its cache (without managed fields), and the stream that
/// fills it.
fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + use<K>,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

fn route_cache(
    client: &Client,
    namespace: Option<&str>,
) -> (
    Store<DynamicObject>,
    impl futures::Stream<Item = Result<DynamicObject, watcher::Error>> + use<>,
) {
    let resource = route_resource();
    let api = match namespace {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
        None => Api::<DynamicObject>::all_with(client.clone(), &resource),
    };
    let writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let stream = watcher(api, watcher::Config::default().labels(ISVC_LABEL))
        .default_backoff()
        .modify(|o| o.metadata.managed_fields = None)
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// The InferenceService a predictor pod belongs to.
fn owner_of(pod: &Pod) -> Option<ObjectRef<InferenceService>> {
    let name = pod.labels().get(ISVC_LABEL)?;
    Some(ObjectRef::new(name).within(&pod.namespace()?))
}

/// The InferenceServices of `namespace` (`None`: all) that a runtime's change may concern.
fn in_namespace(
    store: &Store<InferenceService>,
    namespace: Option<String>,
) -> Vec<ObjectRef<InferenceService>> {
    (store.state().iter())
        .filter(|i| namespace.is_none() || i.namespace() == namespace)
        .map(|i| ObjectRef::from_obj(i.as_ref()))
        .collect()
}

fn error_policy(isvc: Arc<InferenceService>, error: &ReconcileError, _: Arc<Context>) -> Action {
    if is_conflict(&error.source) {
        return Action::requeue(CONFLICT_RETRY);
    }
    tracing::warn!(inference_service = %isvc.name_any(), error = %OneLine(error), "reconcile failed");
    Action::requeue(RETRY)
}

/// Bring `isvc`'s revisions, route and status to what its spec and their readiness say.
pub async fn reconcile(
    isvc: Arc<InferenceService>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    if isvc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let result = super::carry::carry_out(&isvc, &ctx).await;
    ctx.metrics.reconciled(started.elapsed());
    result
}
