//! The Framework controller: watches Frameworks, and the ConfigMaps and pods labelled
//! `FC_FRAMEWORK_NAME`, and for each Framework runs `sync::decide`, carries out the creations
//! and deletions, and writes the status with their results.
//!
//! # Expected flow
//! A Framework, or its ConfigMap or one of its pods, changes; a reconcile of the Framework runs
//! at once (one at a time per Framework, no debounce). It reads the three caches, decides,
//! carries out the creations and deletions, and writes the decided status with what they
//! produced (UIDs, deletes sent) in one write, to the status subresource with the
//! resourceVersion it was decided from, as FrameworkController writes once per sync. Its own
//! write triggers the next step.
//!
//! # Guarantees
//! - Persist before act: every action follows from a state the stored status holds already
//!   (`sync`'s decisions act only on states they started from), so a lost write or a restart
//!   can never act twice on one decision; an object created but not recorded is deleted,
//!   never adopted. While the cache still shows a version the operator's own writes replaced,
//!   it decides from what its last write stored; a concurrent change of the Framework turns
//!   the write into a conflict and a retry.
//! - Deletes carry the UID they were decided on as a precondition; a ConfigMap is deleted in
//!   the foreground, so it outlives its pods.
//! - No Framework stalls the others: one whose spec cannot run (`check`) fails by its own
//!   decisions, with one Warning event written after the status that fails it; a status
//!   write the API server refuses for its size is reported once per version of the Framework
//!   (`StatusTooLarge`) and tried again every minute, not every 2 s.
//!
//! # Caveats
//! - The CRD is looked up at start (see `runtime::installed`); a CRD deleted while the
//!   controller runs is not waited for again: its watch retries with backoff.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::config::FcConfig;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::DeleteParams;
use kube::runtime::controller::{
    Action as Requeue, Config as ControllerConfig, Error as ControllerError,
};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use super::api::{Framework, FrameworkState, FrameworkStatus};
use super::completion as cc;
use super::objects::{self, FRAMEWORK_NAME, config_map_name};
use super::sync::{self, Action, Done, Observed};
use crate::error_text::OneLine;
use crate::operator::runtime::events::{EventType, Events};
use crate::operator::runtime::http::Gate;
use crate::operator::runtime::manager::Shared;
use crate::operator::runtime::metrics::{Metrics, Transition};
use crate::operator::runtime::shutdown;
use crate::operator::runtime::writes::{
    Created, Deleted, create_once, delete_exactly, replace_status,
};
use crate::operator::runtime::{installed, lock, watched};

/// The name that turns it on in `--frameworks` and the operator component's `frameworks`.
pub const FLAG_NAME: &str = "frameworkcontroller";
/// Events are reported as FrameworkController's.
const CONTROLLER_NAME: &str = "frameworkcontroller";

/// What the Framework controller runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace; `None`: all.
    pub namespace: Option<String>,
    /// How many Frameworks are reconciled at once (the configuration's `workerNumber`, when it
    /// has one, instead).
    pub concurrency: u16,
    /// FrameworkController's configuration.
    pub config: Arc<FcConfig>,
}

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot write the status of Framework {namespace}/{name}")]
    WriteStatus {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot {operation} {object}")]
    Act {
        operation: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot build pod {role}-{index}")]
    Build {
        role: String,
        index: i32,
        #[source]
        source: objects::BuildError,
    },
}

struct Context {
    client: Client,
    config_maps: Store<ConfigMap>,
    pods: Store<Pod>,
    events: Events,
    metrics: Arc<Metrics>,
    /// Per Framework, what its status writes replaced and stored, while the cache may lag.
    written: Mutex<HashMap<(String, String), Written>>,
    config: Arc<FcConfig>,
}

/// The operator's status writes of one Framework that the cache may not show yet.
struct Written {
    /// The resourceVersions they replaced.
    replaced: HashSet<String>,
    /// The Framework as the last one stored it.
    latest: Arc<Framework>,
}

fn key_of(framework: &Framework) -> (String, String) {
    (
        framework.namespace().unwrap_or_default(),
        framework.name_any(),
    )
}

impl Context {
    /// The Framework to decide on: the cached one, or, while the cache still shows a version
    /// the operator's own writes replaced, the one its last write stored (FrameworkController
    /// too decides from the status it expects, not from a lagging cache), so that a change of
    /// a pod is followed at once, not after the watch event of the operator's own write.
    fn current(&self, cached: Arc<Framework>) -> Arc<Framework> {
        let key = key_of(&cached);
        let mut written = lock(&self.written);
        let Some(entry) = written.get(&key) else {
            return cached;
        };
        if (cached.resource_version()).is_some_and(|v| entry.replaced.contains(&v)) {
            return entry.latest.clone();
        }
        written.remove(&key);
        cached
    }

    /// Whether both children's caches hold their first list.
    fn synced(&self) -> bool {
        let ready = |store: Option<Result<(), _>>| matches!(store, Some(Ok(())));
        ready(self.config_maps.wait_until_ready().now_or_never())
            && ready(self.pods.wait_until_ready().now_or_never())
    }

    fn wrote(&self, replaced: &Framework, stored: &Framework) {
        let Some(version) = replaced.resource_version() else {
            return;
        };
        let mut written = lock(&self.written);
        let entry = written.entry(key_of(replaced)).or_insert_with(|| Written {
            replaced: HashSet::new(),
            latest: Arc::new(stored.clone()),
        });
        entry.replaced.insert(version);
        entry.latest = Arc::new(stored.clone());
    }
}

/// Run the controller until `shared.stop`; its readiness gate opens once its caches are synced.
pub async fn run(shared: Shared, settings: Settings) {
    let Shared {
        client,
        metrics,
        health,
        ready,
        stop,
    } = shared;
    if !installed::await_installed(
        &client,
        &served(),
        &health,
        stop.clone(),
        installed::Waiting::AtStart,
    )
    .await
    {
        return;
    }
    let (config_maps, cm_changes) = watch_children::<ConfigMap>(&client, &settings);
    let (pods, pod_changes) = watch_children::<Pod>(&client, &settings);
    let frameworks: Api<Framework> = watched(&client, settings.namespace.as_deref());
    let caches = (config_maps.clone(), pods.clone());
    let context = new_context(&client, caches, metrics, settings.config.clone());
    let children = futures::stream::select(cm_changes, pod_changes);
    let ready = ready_once_synced(config_maps, pods, ready);
    let for_gone = context.clone();
    let controller = Controller::new(frameworks, watcher::Config::default());
    let store = controller.store();
    let workers = settings.config.workers.unwrap_or(settings.concurrency);
    // No debounce: each change of a Framework, its ConfigMap or a pod is decided on as it
    // comes, so that its status shows every state FrameworkController's would (a pod's
    // Pending, a deletion under way).
    let controller = controller
        .with_config(ControllerConfig::default().concurrency(workers.max(1)))
        .reconcile_on(children)
        .graceful_shutdown_on(stop.clone())
        .run(reconcile, error_policy, context)
        .for_each(move |result| {
            // A Framework deleted before its turn: forget its writes.
            if let Err(ControllerError::ObjectNotFound(gone)) = result {
                let key = (gone.namespace.unwrap_or_default(), gone.name);
                lock(&for_gone.written).remove(&key);
            }
            async {}
        });
    futures::future::join(shutdown::drive(controller, &store, stop), ready).await;
}

/// The API the controller serves, as the CRD lookup at start names it.
fn served() -> installed::Served {
    installed::Served {
        kind: "Framework",
        plural: "frameworks",
        group: "frameworkcontroller.microsoft.com".to_owned(),
        api_version: "frameworkcontroller.microsoft.com/v1".to_owned(),
        flag_name: "fc",
        flag: "--controllers",
        component: "training-operator",
    }
}

/// What every reconcile shares: the client, the children's caches, the event recorder and the
/// metrics.
fn new_context(
    client: &Client,
    (config_maps, pods): (Store<ConfigMap>, Store<Pod>),
    metrics: Arc<Metrics>,
    config: Arc<FcConfig>,
) -> Arc<Context> {
    Arc::new(Context {
        client: client.clone(),
        config_maps,
        pods,
        events: Events::start(
            client.clone(),
            CONTROLLER_NAME,
            std::env::var("HOSTNAME").ok(),
            metrics.clone(),
        ),
        metrics,
        written: Mutex::new(HashMap::new()),
        config,
    })
}

/// Open the controller's readiness gate once both caches are synced.
async fn ready_once_synced(config_maps: Store<ConfigMap>, pods: Store<Pod>, ready: Gate) {
    if config_maps.wait_until_ready().await.is_ok() && pods.wait_until_ready().await.is_ok() {
        ready.open();
    }
}

/// A cache of `K`s labelled with a Framework's name, and the stream of the Frameworks whose
/// children changed. The stream drives the cache.
fn watch_children<K>(
    client: &Client,
    settings: &Settings,
) -> (
    Store<K>,
    impl futures::Stream<Item = ObjectRef<Framework>> + Send + 'static,
)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = watched(client, settings.namespace.as_deref());
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().labels(FRAMEWORK_NAME);
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .touched_objects()
        .filter_map(|o| async move {
            let o = o.ok()?;
            let name = o.labels().get(FRAMEWORK_NAME)?.clone();
            Some(ObjectRef::<Framework>::new(&name).within(&o.namespace()?))
        });
    (store, stream)
}

fn error_policy(framework: Arc<Framework>, error: &ReconcileError, ctx: Arc<Context>) -> Requeue {
    tracing::warn!(error = %OneLine(error), "reconcile failed");
    ctx.metrics.error("reconcile");
    if let ReconcileError::WriteStatus { source, .. } = error
        && too_large(source)
    {
        // Nothing but a smaller status helps: said once per version of the Framework, and
        // tried again slowly.
        let occurrence = framework.resource_version().unwrap_or_default();
        ctx.events.publish_state(
            framework.as_ref(),
            EventType::Warning,
            "StatusTooLarge".into(),
            status_too_large(&framework, source),
            "Sync",
            &occurrence,
        );
        return Requeue::requeue(Duration::from_secs(60));
    }
    Requeue::requeue(Duration::from_secs(2))
}

/// Whether the API server refused a write for its size: its own limit (413) or etcd's.
fn too_large(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else {
        return false;
    };
    status.code == 413 || status.message.contains("request is too large")
}

/// The note of a status write refused for its size.
fn status_too_large(framework: &Framework, error: &kube::Error) -> String {
    let tasks: usize = (framework.status.iter())
        .flat_map(|s| &s.attempt_status.task_role_statuses)
        .map(|r| r.task_statuses.len())
        .sum();
    format!(
        "the status of its {tasks} Tasks is too large to write ({}); hint: the Tasks' completion statuses repeat their containers' termination messages, so keep those short, or split the Framework into smaller ones",
        OneLine(error)
    )
}

/// A random version-4 UUID.
fn new_uid() -> String {
    let mut bytes = crate::random::bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A delay for a transient conflict, drawn in the configuration's range.
fn conflict_delay((min, max): (i64, i64)) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&crate::random::bytes()[..8]);
    let span = u64::try_from(max - min + 1).unwrap_or(1);
    min + i64::try_from(u64::from_le_bytes(bytes) % span).unwrap_or(0)
}

async fn reconcile(
    framework: Arc<Framework>,
    ctx: Arc<Context>,
) -> Result<Requeue, ReconcileError> {
    // Nothing is decided before the children's caches hold their first list: a ConfigMap or
    // pod not listed yet would look deleted by others (a standby just elected, a restart).
    // Looked at, not awaited: a reconcile that waits holds a slot the lists may need.
    if !ctx.synced() {
        return Ok(Requeue::requeue(Duration::from_millis(100)));
    }
    let framework = ctx.current(framework);
    let started = std::time::Instant::now();
    let namespace = framework.namespace().unwrap_or_default();
    let cm = ctx
        .config_maps
        .get(&ObjectRef::new(&config_map_name(&framework.name_any())).within(&namespace));
    let pods = cached_pods(&ctx, &framework, &namespace);
    let plan = decide(&framework, cm.as_deref(), &pods, &ctx.config);
    if let Some(blocked) = &plan.blocked {
        ctx.events.publish(
            framework.as_ref(),
            EventType::Warning,
            "Blocked".into(),
            blocked.clone(),
            "Sync",
        );
    }
    carry_out_all(&ctx, &framework, plan.status, cm.as_deref(), plan.actions).await?;
    if let Some(refusal) = &plan.refused {
        // Once: the decision that acts on a refusal moves the Framework on.
        tracing::warn!(framework = %format!("{namespace}/{}", framework.name_any()), reason = refusal.reason(), "spec refused");
        ctx.events.publish(
            framework.as_ref(),
            EventType::Warning,
            refusal.reason().into(),
            refusal.message(),
            "Sync",
        );
    }
    ctx.metrics.reconciled(started.elapsed());
    Ok(match plan.wake_after {
        Some(after) => Requeue::requeue(after),
        None => Requeue::await_change(),
    })
}

/// The cached pods of the Framework's Tasks, by name.
fn cached_pods(ctx: &Context, framework: &Framework, namespace: &str) -> HashMap<String, Arc<Pod>> {
    (framework.status.iter())
        .flat_map(|s| &s.attempt_status.task_role_statuses)
        .flat_map(|r| &r.task_statuses)
        .filter_map(|t| {
            let name = &t.attempt_status.pod_name;
            let pod = ctx.pods.get(&ObjectRef::new(name).within(namespace))?;
            Some((name.clone(), pod))
        })
        .collect()
}

/// The decision on `framework` from what the caches show now.
fn decide(
    framework: &Framework,
    cm: Option<&ConfigMap>,
    pods: &HashMap<String, Arc<Pod>>,
    config: &FcConfig,
) -> sync::Plan {
    let pod = |name: &str| pods.get(name).map(AsRef::as_ref);
    let observed = Observed {
        now: Timestamp::now(),
        framework_deleting: framework.metadata.deletion_timestamp.is_some(),
        config_map: cm,
        pod: &pod,
        conflict_delay_sec: conflict_delay(config.conflict_delay_sec),
        new_uid: &new_uid,
        config,
    };
    sync::decide(framework, &observed)
}

/// Carry out the actions in order, then write the decided `status` with what they produced
/// (UIDs, deletes sent) in one write, as FrameworkController writes once per sync. Each
/// action follows from a state the status `framework` holds was in already (the Task's
/// AttemptCreationPending before its pod is created, AttemptDeletionPending before a delete),
/// so none waits for the decision's own write. An action that fails stops the rest: what the
/// ones before it produced is written on the status the decision started from, and the error
/// is returned, to be retried.
async fn carry_out_all(
    ctx: &Context,
    framework: &Framework,
    mut status: FrameworkStatus,
    cm: Option<&ConfigMap>,
    actions: Vec<Action>,
) -> Result<(), ReconcileError> {
    let mut done = Vec::new();
    for action in actions {
        match carry_out(ctx, framework, &status, cm, action).await {
            Ok(Some(result)) => {
                sync::record(&mut status, result.clone(), Timestamp::now());
                done.push(result);
            }
            Ok(None) => {}
            Err(error) => {
                write_done_before(ctx, framework, done).await?;
                return Err(error);
            }
        }
    }
    write_status(ctx, framework, &status).await?;
    Ok(())
}

/// After an action failed: the results of the ones before it, on the status `framework` holds.
async fn write_done_before(
    ctx: &Context,
    framework: &Framework,
    done: Vec<Done>,
) -> Result<(), ReconcileError> {
    let Some(mut status) = framework.status.clone().filter(|_| !done.is_empty()) else {
        return Ok(());
    };
    for result in done {
        sync::record(&mut status, result, Timestamp::now());
    }
    write_status(ctx, framework, &status).await?;
    Ok(())
}

/// Write `status` if it differs from `framework`'s; the Framework as stored after.
async fn write_status(
    ctx: &Context,
    framework: &Framework,
    status: &FrameworkStatus,
) -> Result<Framework, ReconcileError> {
    if framework.status.as_ref() == Some(status) {
        return Ok(framework.clone());
    }
    let namespace = framework.namespace().unwrap_or_default();
    let name = framework.name_any();
    let api: Api<Framework> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut updated = framework.clone();
    updated.status = Some(status.clone());
    let stored =
        replace_status(&api, &updated)
            .await
            .map_err(|source| ReconcileError::WriteStatus {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
    if stored.resource_version() != framework.resource_version() {
        ctx.wrote(framework, &stored);
    }
    for transition in transitions(framework.status.as_ref(), status) {
        ctx.metrics.job(transition, FLAG_NAME, &namespace);
    }
    if framework.status.as_ref().map(|s| s.state) != Some(status.state) {
        tracing::info!(framework = %format!("{namespace}/{name}"), state = ?status.state, attempt = status.attempt_status.id, "state");
    }
    Ok(stored)
}

/// What a status write tells the job metrics: a Framework first seen is created, a new attempt
/// is a restart, and one that completes succeeded or failed by its last attempt.
fn transitions(old: Option<&FrameworkStatus>, new: &FrameworkStatus) -> Vec<Transition> {
    let mut found = Vec::new();
    let Some(old) = old else {
        found.push(Transition::Created);
        return found;
    };
    if new.attempt_status.id > old.attempt_status.id {
        found.push(Transition::Restarted);
    }
    if new.state == FrameworkState::Completed && old.state != FrameworkState::Completed {
        let failed =
            (new.attempt_status.completion_status.as_ref()).is_none_or(|c| c.status.failed());
        found.push(if failed {
            Transition::Failed
        } else {
            Transition::Succeeded
        });
    }
    found
}

/// Carry out one action; what it produced, for the status.
async fn carry_out(
    ctx: &Context,
    framework: &Framework,
    status: &FrameworkStatus,
    cm: Option<&ConfigMap>,
    action: Action,
) -> Result<Option<Done>, ReconcileError> {
    let namespace = framework.namespace().unwrap_or_default();
    match action {
        Action::CreateConfigMap => create_config_map(ctx, framework, status, &namespace).await,
        Action::DeleteConfigMap { uid } => delete_config_map(ctx, framework, &namespace, uid).await,
        Action::CreatePod { role, index } => {
            create_pod(ctx, framework, status, cm, role, index).await
        }
        Action::DeletePod { name, uid, force } => {
            delete_pod(ctx, &namespace, name, uid, force).await
        }
    }
}

/// Create the attempt's ConfigMap; its UID, for the status.
async fn create_config_map(
    ctx: &Context,
    framework: &Framework,
    status: &FrameworkStatus,
    namespace: &str,
) -> Result<Option<Done>, ReconcileError> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let object = objects::config_map(framework, status);
    match create_once(&api, &object).await {
        Ok(Created::New(created)) => {
            ctx.metrics.object("created_configmaps");
            Ok(Some(Done::ConfigMapCreated {
                uid: created.uid().unwrap_or_default(),
            }))
        }
        // Seen in the cache soon, and then deleted as not recorded.
        Ok(Created::Exists) => Ok(None),
        Err(source) => Err(act_error(
            "create",
            format!("ConfigMap {}", object.name_any()),
            source,
        )),
    }
}

/// Delete the attempt's ConfigMap `uid`, in the foreground; one already gone (or replaced)
/// counts as deleted.
async fn delete_config_map(
    ctx: &Context,
    framework: &Framework,
    namespace: &str,
    uid: String,
) -> Result<Option<Done>, ReconcileError> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let name = config_map_name(&framework.name_any());
    match delete_exactly(&api, &name, Some(uid), DeleteParams::foreground()).await {
        Ok(Deleted::Sent) => {
            ctx.metrics.object("deleted_configmaps");
            Ok(Some(Done::ConfigMapDeleteSent))
        }
        Ok(Deleted::Gone | Deleted::Replaced) => Ok(Some(Done::ConfigMapDeleteSent)),
        Err(source) => Err(act_error("delete", format!("ConfigMap {name}"), source)),
    }
}

/// Delete pod `name` of UID `uid`, with grace period 0 if `force`; one already gone (or
/// replaced) counts as deleted.
async fn delete_pod(
    ctx: &Context,
    namespace: &str,
    name: String,
    uid: String,
    force: bool,
) -> Result<Option<Done>, ReconcileError> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let params = DeleteParams {
        grace_period_seconds: force.then_some(0),
        ..DeleteParams::default()
    };
    match delete_exactly(&api, &name, Some(uid), params).await {
        Ok(Deleted::Sent) => {
            ctx.metrics.object("deleted_pods");
            Ok(Some(Done::PodDeleteSent { name, force }))
        }
        Ok(Deleted::Gone | Deleted::Replaced) => Ok(Some(Done::PodDeleteSent { name, force })),
        Err(source) => Err(act_error("delete", format!("pod {name}"), source)),
    }
}

fn act_error(operation: &'static str, object: String, source: kube::Error) -> ReconcileError {
    ReconcileError::Act {
        operation,
        object,
        source,
    }
}

/// Create a Task's pod; an API server refusal that a retry cannot fix completes its attempt.
async fn create_pod(
    ctx: &Context,
    framework: &Framework,
    status: &FrameworkStatus,
    cm: Option<&ConfigMap>,
    role: String,
    index: i32,
) -> Result<Option<Done>, ReconcileError> {
    let Some(cm) = cm.filter(|cm| cm.uid() == status.attempt_status.config_map_uid) else {
        return Ok(None);
    };
    let pod = match objects::pod(framework, status, cm, &role, index) {
        Ok(pod) => pod,
        // Checked before the attempt started; a template that still cannot be read is the
        // Task's, for good.
        Err(error @ objects::BuildError::Template { .. }) => {
            let message = OneLine(&error).to_string();
            let code = cc::POD_CREATION_PERMANENT_ERROR;
            return Ok(Some(refused(ctx, framework, role, index, code, &message)));
        }
        Err(source) => {
            return Err(ReconcileError::Build {
                role,
                index,
                source,
            });
        }
    };
    let namespace = framework.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let source = match create_once(&api, &pod).await {
        Ok(Created::New(created)) => {
            ctx.metrics.object("created_pods");
            return Ok(Some(Done::PodCreated {
                role,
                index,
                uid: created.uid().unwrap_or_default(),
            }));
        }
        Ok(Created::Exists) => return Ok(None),
        Err(source) => source,
    };
    if let kube::Error::Api(s) = &source
        && let Some(code) = cc::classify_pod_creation_error(s.code, &s.message)
    {
        return Ok(Some(refused(ctx, framework, role, index, code, &s.message)));
    }
    Err(act_error(
        "create",
        format!("pod {}", pod.name_any()),
        source,
    ))
}

/// The pod of Task `index` of `role` was refused for good: a warning event, and its attempt
/// completes with `code`.
fn refused(
    ctx: &Context,
    framework: &Framework,
    role: String,
    index: i32,
    code: cc::Code,
    message: &str,
) -> Done {
    ctx.events.publish(
        framework,
        EventType::Warning,
        "FailedCreatePod".into(),
        message.to_owned(),
        "Create",
    );
    Done::PodRefused {
        role,
        index,
        code,
        message: format!("Pod creation failed: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::operator::fc::api::FrameworkSpec;
    use crate::operator::fc::completion as cc;
    use crate::operator::fc::sync::new_status;

    #[test]
    fn a_write_refused_for_its_size_is_told_from_the_rest() {
        let refused = |code: u16, message: &str| {
            let status = kube::core::Status::failure(message, "").with_code(code);
            too_large(&kube::Error::Api(Box::new(status)))
        };
        assert!(refused(413, "Request entity too large: limit is 3145728"));
        assert!(refused(500, "etcdserver: request is too large"));
        assert!(!refused(500, "etcdserver: request timed out"));
        assert!(!refused(409, "the object has been modified"));
    }

    #[test]
    fn job_metrics_count_creation_restarts_and_the_end() {
        let start = new_status(
            &FrameworkSpec::default(),
            "fw",
            Time(Timestamp::UNIX_EPOCH),
            &|| "u".into(),
        );
        assert_eq!(transitions(None, &start), [Transition::Created]);
        assert!(transitions(Some(&start), &start).is_empty());
        let mut retried = start.clone();
        retried.attempt_status.id = 1;
        assert_eq!(transitions(Some(&start), &retried), [Transition::Restarted]);
        let mut done = retried.clone();
        done.state = FrameworkState::Completed;
        done.attempt_status.completion_status =
            Some(crate::operator::fc::api::FrameworkAttemptCompletionStatus {
                status: cc::SUCCEEDED.status("ok"),
                trigger: None,
            });
        assert_eq!(transitions(Some(&retried), &done), [Transition::Succeeded]);
        done.attempt_status.completion_status = None;
        assert_eq!(transitions(Some(&retried), &done), [Transition::Failed]);
    }
}
