//! The volume controller's loop: watches VolumeManagers, the pods it made for them and the
//! cluster's nodes (one cache each), runs `plan` for a VolumeManager when it or one of its pods
//! changes, or, for one not Completed, when a node changes, and carries the plan out.
//!
//! # Expected flow
//! Once the VolumeManager CRD is served (see `runtime::installed`), a reconcile reads the
//! VolumeManager's pods and the nodes from the caches, plans, adds the finalizer if the plan
//! asks, writes the status if it changed, records a `TooFewNodes` warning for each volume that
//! waits for nodes and a `VolumeFailed` warning for each that failed otherwise (saying what to
//! fix), then deletes and creates pods, and last removes the finalizer once every node is clean.
//!
//! # Guarantees
//! - The status is written before any pod is deleted: the nodes a deleted fetcher ran on are
//!   recorded first (see `plan`).
//! - No plan is made before the node cache has synced: an empty cache would read as a cluster
//!   without nodes.
//! - Creation is create-if-absent with deterministic names (AlreadyExists is success), so a
//!   stale cache never makes a second fetcher for one replica.
//! - Every write uses `FIELD_MANAGER`; the status is a merge patch of the `status` field alone
//!   (the CRD has no status subresource), so it never races the user's spec edits.
//!
//! # Errors
//! A failed API call is logged with the VolumeManager, counted in
//! `mlkube_operator_reconcile_errors_total{operation}`, and retried after a short delay.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::api::{State, VolumeManager, VolumeManagerStatus};
use super::plan::{self, FINALIZER, Finalizer, Observed, Plan};
use super::pods::{self, Placement};
use crate::error_text::OneLine;
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::events::{EventType, Events};
use crate::operator::runtime::manager::Shared;
use crate::operator::runtime::metrics::Metrics;
use crate::operator::runtime::shutdown;
use crate::operator::runtime::writes::{
    Created, Deleted, create_once, delete_exactly, is_conflict,
};
use crate::operator::runtime::{installed, watched};

/// How long a failed reconcile waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);
/// How long a reconcile that met a conflict waits: its cache is a write behind.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);
/// How long a reconcile waits for the node cache to sync before it looks again.
const NODES_SYNCING: Duration = Duration::from_millis(500);
/// The controller events name as their reporter.
const CONTROLLER_NAME: &str = "volume-controller";

/// What the volume controller runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace; `None`: all.
    pub namespace: Option<String>,
    pub placement: Placement,
    /// How many VolumeManagers are reconciled at once.
    pub concurrency: u16,
}

/// Why a reconcile did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot {operation} for VolumeManager {namespace}/{name}")]
    Write {
        operation: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    placement: Placement,
    events: Events,
    metrics: Arc<Metrics>,
}

/// The VolumeManager kind, as discovery lists it.
fn served() -> installed::Served {
    installed::Served {
        kind: "VolumeManager",
        plural: "volumemanagers",
        group: "kvc.kubeflow.org".to_owned(),
        api_version: "kvc.kubeflow.org/v1".to_owned(),
        flag_name: "volumes",
        flag: "--controllers",
        component: "volume-controller",
    }
}

/// Run until `shared.stop`: wait for the CRD, then reconcile VolumeManagers.
pub async fn run(shared: Shared, settings: Settings) {
    let Shared {
        client,
        metrics,
        health,
        ready,
        stop,
    } = shared;
    let waiting = installed::Waiting::AtStart;
    if !installed::await_installed(&client, &served(), &health, stop.clone(), waiting).await {
        return;
    }
    let namespace = settings.namespace.as_deref();
    let managers: Api<VolumeManager> = watched(&client, namespace);
    let pods_api: Api<Pod> = watched(&client, namespace);
    let (pod_store, pod_writer) = reflector::store();
    let pod_stream = watcher(pods_api, watcher::Config::default().labels(pods::ROLE))
        .default_backoff()
        .reflect(pod_writer)
        .touched_objects();
    let (node_store, node_stream) = watch_nodes(&client);
    let context = Arc::new(Context {
        events: Events::start(
            client.clone(),
            CONTROLLER_NAME,
            std::env::var("HOSTNAME").ok(),
            metrics.clone(),
        ),
        client,
        pods: pod_store.clone(),
        nodes: node_store.clone(),
        placement: settings.placement,
        metrics,
    });
    tracing::info!("running the volume controller");
    let controller = Controller::new(managers, watcher::Config::default());
    let store = controller.store();
    let unsettled = store.clone();
    let controller = controller
        .owns_stream(pod_stream)
        .watches_stream(node_stream, move |_: Node| not_completed(&unsettled))
        .with_config(ControllerConfig::default().concurrency(settings.concurrency.max(1)))
        .graceful_shutdown_on(stop.clone())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %OneLine(&e), "volume reconcile did not complete");
            }
        });
    // Ready once the caches hold what the cluster has: a VolumeManager's pods are read from
    // the pod cache, and a reconcile on an empty one would place its data again.
    let managers = store.clone();
    let synced = async move {
        if pod_store.wait_until_ready().await.is_ok()
            && node_store.wait_until_ready().await.is_ok()
            && managers.wait_until_ready().await.is_ok()
        {
            ready.open();
        }
    };
    futures::future::join(shutdown::drive(controller, &store, stop), synced).await;
}

/// A cache of the cluster's nodes, and the stream of changed nodes that drives it. Only what
/// eligibility reads is kept (labels, spec): a node's status (its images, conditions) is dropped.
/// Until its first list succeeds no reconcile plans (see `reconcile`), so a refused watch is
/// said at warn level.
fn watch_nodes(
    client: &Client,
) -> (
    Store<Node>,
    impl futures::Stream<Item = Result<Node, watcher::Error>> + use<>,
) {
    let (store, writer) = reflector::store();
    let stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .inspect_err(|e| {
            tracing::warn!(
                error = %OneLine(e),
                "cannot watch nodes, so no VolumeManager is planned; the component's ClusterRole grants list and watch on nodes"
            );
        })
        .modify(|node| {
            node.status = None;
            node.metadata.managed_fields = None;
        })
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// The VolumeManagers a node's change may concern: those not Completed (one waiting for nodes
/// among them), and not being deleted.
fn not_completed(store: &Store<VolumeManager>) -> Vec<ObjectRef<VolumeManager>> {
    store
        .state()
        .iter()
        .filter(|vm| vm.metadata.deletion_timestamp.is_none())
        .filter(|vm| vm.status.as_ref().and_then(|s| s.state) != Some(State::Completed))
        .map(|vm| ObjectRef::from_obj(vm.as_ref()))
        .collect()
}

fn error_policy(vm: Arc<VolumeManager>, error: &ReconcileError, _: Arc<Context>) -> Action {
    let ReconcileError::Write { source, .. } = error;
    if is_conflict(source) {
        // Read from a cache that had not caught up with a write: soon it has.
        tracing::debug!(volume_manager = %vm.name_any(), error = %OneLine(error), "conflict; retrying");
        return Action::requeue(CONFLICT_RETRY);
    }
    tracing::warn!(volume_manager = %vm.name_any(), error = %OneLine(error), "reconcile failed");
    Action::requeue(RETRY)
}

/// Plan `vm` and carry the plan out.
pub async fn reconcile(
    vm: Arc<VolumeManager>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    if ctx.nodes.wait_until_ready().now_or_never().is_none() {
        return Ok(Action::requeue(NODES_SYNCING));
    }
    let started = Instant::now();
    let uid = vm.uid().unwrap_or_default();
    let owned: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| p.labels().get(pods::OWNER_UID) == Some(&uid))
        .collect();
    let owned: Vec<&Pod> = owned.iter().map(Arc::as_ref).collect();
    let nodes = ctx.nodes.state();
    let nodes: Vec<&Node> = nodes.iter().map(Arc::as_ref).collect();
    let observed = Observed {
        pods: &owned,
        nodes: &nodes,
    };
    let plan = plan::plan(&ctx.placement, &vm, &observed);
    let result = carry_out(&vm, &ctx, plan).await;
    ctx.metrics.reconciled(started.elapsed());
    result.map(|()| Action::await_change())
}

async fn carry_out(vm: &VolumeManager, ctx: &Context, plan: Plan) -> Result<(), ReconcileError> {
    let namespace = vm.namespace().unwrap_or_default();
    let managers: Api<VolumeManager> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let fail = |operation: &'static str| {
        let name = vm.name_any();
        let namespace = namespace.clone();
        move |source| ReconcileError::Write {
            operation,
            namespace,
            name,
            source,
        }
    };
    // Each write's answer carries the resourceVersion the next one holds to.
    let mut version = vm.resource_version();
    if plan.finalizer == Finalizer::Add {
        let finalizers: Vec<String> = vm
            .finalizers()
            .iter()
            .cloned()
            .chain([FINALIZER.to_owned()])
            .collect();
        let body = json!({ "metadata": { "finalizers": finalizers } });
        version = patch(&managers, vm, version, body)
            .await
            .map_err(fail("add the finalizer"))?;
    }
    if vm.status.as_ref() != Some(&plan.status) {
        let body = json!({ "status": status_patch(&plan.status) });
        version = patch(&managers, vm, version, body)
            .await
            .map_err(fail("write the status"))?;
    }
    // States, not acts: each recorded once while it lasts (as its message says it).
    let warnings = (plan.too_few_nodes.iter().map(|s| ("TooFewNodes", s)))
        .chain(plan.failed.iter().map(|f| ("VolumeFailed", f)));
    for (reason, message) in warnings {
        ctx.events.publish_state(
            vm,
            EventType::Warning,
            reason.to_owned(),
            message.clone(),
            "Place",
            message,
        );
    }
    for name in &plan.delete {
        match delete_exactly(&pods, name, None, DeleteParams::background()).await {
            Ok(Deleted::Sent) => ctx.metrics.object("volume pod deleted"),
            Ok(Deleted::Gone | Deleted::Replaced) => {}
            Err(e) => return Err(fail("delete a pod")(e)),
        }
    }
    for pod in &plan.create {
        match create_once(&pods, pod).await {
            Ok(Created::New(_)) => ctx.metrics.object("volume pod created"),
            Ok(Created::Exists) => {}
            Err(e) => return Err(fail("create a pod")(e)),
        }
    }
    if plan.finalizer == Finalizer::Remove {
        let finalizers: Vec<&String> = vm.finalizers().iter().filter(|f| *f != FINALIZER).collect();
        let body = json!({ "metadata": { "finalizers": finalizers } });
        patch(&managers, vm, version, body)
            .await
            .map_err(fail("remove the finalizer"))?;
    }
    Ok(())
}

/// A merge patch of `vm` that holds `version`, so a change made since it was read (someone
/// else's finalizer) turns into a conflict and a retry, never into a lost write; the version
/// the patch made.
async fn patch(
    api: &Api<VolumeManager>,
    vm: &VolumeManager,
    version: Option<String>,
    mut body: serde_json::Value,
) -> Result<Option<String>, kube::Error> {
    body["metadata"]["resourceVersion"] = json!(version);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patched = api
        .patch(&vm.name_any(), &params, &Patch::Merge(body))
        .await?;
    Ok(patched.resource_version())
}

/// The status as a merge patch: fields the status no longer has are written as null, so
/// they are removed.
fn status_patch(status: &VolumeManagerStatus) -> serde_json::Value {
    json!({
        "volumes": status.volumes,
        "state": status.state,
        "message": status.message,
        "nodesToClean": (!status.nodes_to_clean.is_empty()).then_some(&status.nodes_to_clean),
    })
}
