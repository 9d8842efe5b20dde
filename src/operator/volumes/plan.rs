//! The decision core: from a VolumeManager and the pods it owns (as cached), what its status
//! says and which pods to create and delete. Pure: no client, no clock; the controller carries
//! the plan out. Most of the volume controller's tests live here.
//!
//! # Expected flow
//! A VolumeManager is created. It gets the finalizer [`FINALIZER`] (when it has data to place)
//! and, for each S3 volume, one fetcher pod per replica, which repel each other (a required pod
//! anti-affinity on `kubernetes.io/hostname`), so that `replicas` copies are on `replicas`
//! distinct nodes. A volume is Pending until all of its fetchers are scheduled, Running while
//! they copy, Completed once all succeeded: its status then names a hostPath volume source and
//! the nodes that hold the data (a `metadata.name` node affinity) for a pod to copy, and its
//! message lists them. An NFS volume is Completed at once with an NFS volume source. A volume
//! whose entry cannot be read, or whose fetcher failed, is Failed, with the message of what
//! failed (the fetcher's own: bad credentials, no such bucket or key, source unreachable,
//! timeout).
//!
//! Too few nodes: before creating a fetcher, the plan counts the nodes that may hold the data
//! ([`nodes::eligibility`]: not cordoned, taints tolerated, selected by the volume's
//! `nodeAffinity`, plus those already holding a replica). When there are fewer than `replicas`,
//! it places nothing more and the volume is Failed with what it needs and what there is
//! ("replicas 4 needs 4 nodes; 2 are eligible: node-1, node-2; not eligible: ..."), as KVC
//! refused a volume with more replicas than nodes rather than place part of it. Unlike KVC it
//! looks again whenever nodes change: once enough are eligible (or `replicas` is lowered), the
//! fetchers are created and the volume goes on as above.
//!
//! When the VolumeManager is deleted, fetchers still running are deleted, then one cleaner per
//! node that has (or may have) its data removes that node's directory; once all cleaners
//! succeeded the finalizer goes and the garbage collector takes the pods.
//!
//! # Guarantees
//! - A fetcher that fails leaves nothing on its node (it removes its partial copy), so a
//!   Failed volume holds no half-placed data there.
//! - The nodes that may hold data are written into the status before a fetcher is deleted, so
//!   a deletion cleans every node a fetcher ran on, also across restarts of the controller.
//!
//! # Caveats
//! - The fetcher pods are the record of a placement: a fetcher deleted by hand is created again
//!   and places the data again. A volume removed from `volumeConfigs`, or replicas lowered,
//!   keeps its data until the VolumeManager is deleted.
//! - A cleaner bound to a node that no longer exists never runs: the finalizer then stays until
//!   removed by hand (`kubectl patch vm NAME --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NFSVolumeSource, Node, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use kube::ResourceExt;

use super::api::{
    State, VolumeConfig, VolumeManager, VolumeManagerStatus, VolumeSource, VolumeStatus,
};
use super::pods::{self, Placement};
use super::source::{self, S3Source, Source};
use super::{checks, nodes};

/// The finalizer that holds a VolumeManager until its data is removed from every node.
pub const FINALIZER: &str = "kvc.kubeflow.org/data";

/// What to do about the finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finalizer {
    Keep,
    Add,
    Remove,
}

/// What a reconcile does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub status: VolumeManagerStatus,
    pub create: Vec<Pod>,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    pub finalizer: Finalizer,
    /// Each volume that waits for nodes: `volume <id>: <what it needs and what there is>`.
    pub too_few_nodes: Vec<String>,
    /// Each volume failed for another reason: `volume <id>: <why, and what to fix>`.
    pub failed: Vec<String>,
}

impl Plan {
    fn new(status: VolumeManagerStatus) -> Plan {
        Plan {
            status,
            create: Vec::new(),
            delete: Vec::new(),
            finalizer: Finalizer::Keep,
            too_few_nodes: Vec::new(),
            failed: Vec::new(),
        }
    }
}

/// What a volume is planned with: the VolumeManager's pods (fetchers and cleaners) and the
/// cluster's nodes.
pub struct Observed<'a> {
    pub pods: &'a [&'a Pod],
    pub nodes: &'a [&'a Node],
}

/// The plan for `vm`, from what is observed of it.
pub fn plan(placement: &Placement, vm: &VolumeManager, observed: &Observed) -> Plan {
    if vm.metadata.deletion_timestamp.is_some() {
        return plan_deletion(placement, vm, observed.pods);
    }
    let mut plan = Plan::new(VolumeManagerStatus::default());
    let mut volumes = Vec::new();
    let mut seen = BTreeSet::new();
    for config in &vm.spec.volume_configs {
        let volume = match checks::entry(config) {
            Err(message) => failed(config, message),
            Ok(()) if !seen.insert(config.id.as_str()) => failed(
                config,
                format!(
                    "id {:?} names two volumeConfigs; ids must differ",
                    config.id
                ),
            ),
            Ok(()) => volume(placement, vm, config, observed, &mut plan),
        };
        volumes.push(volume);
    }
    let places_data = vm
        .spec
        .volume_configs
        .iter()
        .any(|c| checks::entry(c).is_ok() && matches!(source::source(c), Ok(Source::S3(_))));
    if places_data && !vm.finalizers().iter().any(|f| f == FINALIZER) {
        plan.finalizer = Finalizer::Add;
    }
    plan.failed = failures(&volumes)
        .into_iter()
        .filter(|failure| !plan.too_few_nodes.contains(failure))
        .collect();
    plan.status = summary(volumes);
    plan.status.nodes_to_clean = nodes_to_clean(vm, observed.pods);
    plan
}

/// The nodes the status already names for cleaning, and those of the fetchers now: a fetcher
/// removed without the controller (its node lost, the pod garbage-collected) may have left a
/// partial copy there.
fn nodes_to_clean(vm: &VolumeManager, pods: &[&Pod]) -> Vec<String> {
    let recorded = vm
        .status
        .iter()
        .flat_map(|s| s.nodes_to_clean.iter().cloned());
    let fetched = pods
        .iter()
        .filter(|p| role(p) == Some(pods::FETCH))
        .filter_map(|p| p.spec.as_ref()?.node_name.clone());
    let nodes: BTreeSet<String> = recorded.chain(fetched).collect();
    nodes.into_iter().collect()
}

/// A volume that cannot be placed, and why.
fn failed(config: &VolumeConfig, message: String) -> VolumeStatus {
    VolumeStatus {
        id: config.id.clone(),
        state: Some(State::Failed),
        message: Some(message),
        ..VolumeStatus::default()
    }
}

/// One volume's status; the fetchers it still needs go into `plan`.
fn volume(
    placement: &Placement,
    vm: &VolumeManager,
    config: &VolumeConfig,
    observed: &Observed,
    plan: &mut Plan,
) -> VolumeStatus {
    match source::source(config) {
        Err(message) => failed(config, message),
        Ok(Source::Nfs { server, path }) => VolumeStatus {
            id: config.id.clone(),
            volume_source: Some(VolumeSource {
                nfs: Some(NFSVolumeSource {
                    server: server.clone(),
                    path: path.clone(),
                    read_only: None,
                }),
                ..VolumeSource::default()
            }),
            state: Some(State::Completed),
            message: Some(format!("NFS {server}:{path}, mounted where it is")),
            ..VolumeStatus::default()
        },
        Ok(Source::S3(s3)) => match not_granted(placement, &s3) {
            Some(message) => failed(config, message),
            None => s3_volume(placement, vm, config, &s3, observed, plan),
        },
    }
}

/// Why `s3`'s Secret may not be given to fetchers, if the controller was granted only some
/// (`--volume-secrets`): a VolumeManager could otherwise hand any Secret of its namespace to a
/// fetcher that signs requests with it to an endpoint of the author's choosing.
fn not_granted(placement: &Placement, s3: &S3Source) -> Option<String> {
    let granted = placement.secrets.as_ref()?;
    (!granted.contains(&s3.secret)).then(|| {
        format!(
            "options.awsCredentialsSecretName {:?} is not one of the Secrets this volume controller may give fetchers ({}); hint: name one of them, or have the volume-controller component's credentialSecrets grant it",
            s3.secret,
            granted.join(", ")
        )
    })
}

/// How one replica's fetcher stands.
#[derive(Clone, Debug, PartialEq)]
struct Replica {
    state: State,
    node: Option<String>,
    message: Option<String>,
    /// Why its pod, not yet ended, is being deleted (its node lost, say).
    deleted: Option<String>,
}

impl Replica {
    /// A replica whose fetcher is not created yet.
    fn missing() -> Replica {
        Replica {
            state: State::Pending,
            node: None,
            message: None,
            deleted: None,
        }
    }
}

/// An S3 volume's status, from its fetchers; missing ones are created unless it failed or
/// there are too few nodes for its replicas.
fn s3_volume(
    placement: &Placement,
    vm: &VolumeManager,
    config: &VolumeConfig,
    s3: &S3Source,
    observed: &Observed,
    plan: &mut Plan,
) -> VolumeStatus {
    let slug = pods::slug(&config.id);
    let replicas: Vec<Replica> = (0..config.replicas)
        .map(|r| fetcher_of(observed.pods, &slug, r).map_or_else(Replica::missing, replica))
        .collect();
    let nodes: BTreeSet<String> = replicas.iter().filter_map(|r| r.node.clone()).collect();
    let failure = replicas
        .iter()
        .enumerate()
        .find(|(_, r)| r.state == State::Failed);
    let shortage = failure
        .is_none()
        .then(|| too_few_nodes(config, &replicas, &nodes, observed.nodes))
        .flatten();
    let mut unbuilt = None;
    match &shortage {
        Some(shortage) => plan
            .too_few_nodes
            .push(format!("volume {}: {shortage}", config.id)),
        None if failure.is_none() => {
            let missing =
                (0..config.replicas).filter(|r| fetcher_of(observed.pods, &slug, *r).is_none());
            match missing
                .map(|r| pods::fetcher(placement, vm, config, s3, r))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(fetchers) => plan.create.extend(fetchers),
                Err(why) => unbuilt = Some(format!("the entry {why}")),
            }
        }
        None => {}
    }
    let (state, message) = match (failure, shortage, unbuilt) {
        (Some((r, replica)), _, _) => (State::Failed, failure_message(r, replica)),
        (None, Some(shortage), _) => (State::Failed, shortage),
        (None, None, Some(why)) => (State::Failed, why),
        (None, None, None) => progress(s3, &replicas, &nodes),
    };
    VolumeStatus {
        id: config.id.clone(),
        volume_source: (state != State::Failed).then(|| VolumeSource {
            host_path: Some(HostPathVolumeSource {
                path: pods::volume_dir(placement, vm, &slug),
                type_: Some("Directory".to_owned()),
            }),
            ..VolumeSource::default()
        }),
        node_affinity: node_affinity(&nodes),
        state: Some(state),
        message: Some(message),
    }
}

/// What a volume lacks when some of its replicas are not on a node yet and fewer nodes may
/// hold it than it has replicas; `held` are the nodes its fetchers are already on.
fn too_few_nodes(
    config: &VolumeConfig,
    replicas: &[Replica],
    held: &BTreeSet<String>,
    nodes: &[&Node],
) -> Option<String> {
    if replicas.iter().all(|r| r.node.is_some()) {
        return None;
    }
    let split = nodes::eligibility(config, nodes);
    let mut available = held.clone();
    available.extend(split.eligible);
    if available.len() >= replicas.len() {
        return None;
    }
    let eligible = match available.len() {
        0 => "none is eligible".to_owned(),
        1 => format!("1 is eligible: {}", listed(available.iter().cloned())),
        n => format!("{n} are eligible: {}", listed(available.iter().cloned())),
    };
    let ruled_out: Vec<String> = split
        .ruled_out
        .into_iter()
        .filter(|(node, _)| !held.contains(node))
        .map(|(node, why)| format!("{node} ({why})"))
        .collect();
    let ruled_out = if ruled_out.is_empty() {
        String::new()
    } else {
        format!("; not eligible: {}", listed(ruled_out.into_iter()))
    };
    let wanted = replicas.len();
    Some(format!(
        "replicas {wanted} needs {wanted} {}; {eligible}{ruled_out}",
        node_or_nodes(wanted)
    ))
}

fn node_or_nodes(count: usize) -> &'static str {
    if count == 1 { "node" } else { "nodes" }
}

/// At most [`LISTED`] names, then how many more there are.
fn listed(names: impl ExactSizeIterator<Item = String>) -> String {
    let more = names.len().saturating_sub(LISTED);
    let shown: Vec<String> = names.take(LISTED).collect();
    match more {
        0 => shown.join(", "),
        _ => format!("{} and {more} more", shown.join(", ")),
    }
}

/// How many nodes a message names before it counts the rest.
const LISTED: usize = 10;

fn failure_message(index: usize, replica: &Replica) -> String {
    let message = replica.message.as_deref().unwrap_or("the fetcher failed");
    match &replica.node {
        Some(node) => format!("replica {index} on node {node}: {message}"),
        None => format!("replica {index}: {message}"),
    }
}

/// The state and message of a volume none of whose replicas failed; `nodes` are those its
/// fetchers are on.
fn progress(s3: &S3Source, replicas: &[Replica], nodes: &BTreeSet<String>) -> (State, String) {
    let state = replicas
        .iter()
        .map(|r| r.state)
        .min()
        .unwrap_or(State::Completed);
    let url = s3.url();
    let message = match state {
        State::Completed => format!(
            "{url} placed on {} {}: {}",
            nodes.len(),
            node_or_nodes(nodes.len()),
            listed(nodes.iter().cloned())
        ),
        State::Running => format!(
            "placing {url}: {} of {} replicas done{}",
            replicas
                .iter()
                .filter(|r| r.state == State::Completed)
                .count(),
            replicas.len(),
            deleted_notes(replicas)
        ),
        _ => {
            let waiting: Vec<String> = replicas
                .iter()
                .enumerate()
                .filter(|(_, r)| r.state == State::Pending)
                .map(|(i, r)| match &r.message {
                    Some(why) => format!("replica {i}: {why}"),
                    None => format!("replica {i}: waiting for its pod"),
                })
                .collect();
            format!("placing {url}: {}", waiting.join("; "))
        }
    };
    (state, message)
}

/// `; replica <i> on <node>: <why>, placed again once its pod is gone` for each replica whose
/// fetcher is being deleted before it ended.
fn deleted_notes(replicas: &[Replica]) -> String {
    let notes = replicas.iter().enumerate().filter_map(|(i, r)| {
        let why = r.deleted.as_deref()?;
        let node = r.node.as_deref().unwrap_or("no node");
        Some(format!(
            "; replica {i} on {node}: {why}, placed again once its pod is gone"
        ))
    });
    notes.collect()
}

/// The fetcher of replica `r` of the volume `slug`, if cached.
fn fetcher_of<'a>(pods: &[&'a Pod], slug: &str, r: i64) -> Option<&'a Pod> {
    let replica = r.to_string();
    pods.iter().copied().find(|pod| {
        let labels = pod.labels();
        labels.get(pods::ROLE).map(String::as_str) == Some(pods::FETCH)
            && labels.get(pods::VOLUME).map(String::as_str) == Some(slug)
            && labels.get(pods::REPLICA) == Some(&replica)
    })
}

/// How a fetcher stands, read from its pod.
fn replica(pod: &Pod) -> Replica {
    let status = pod.status.clone().unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let container = status.container_statuses.iter().flatten().next();
    let state = match status.phase.as_deref() {
        Some("Succeeded") => State::Completed,
        Some("Failed") => State::Failed,
        Some("Running") => State::Running,
        _ if node.is_some() => State::Running,
        _ => State::Pending,
    };
    let message = match state {
        State::Failed => Some(failure_reason(pod)),
        State::Pending => status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .and_then(|c| c.message.clone()),
        _ => container
            .and_then(|c| c.state.as_ref()?.waiting.as_ref())
            .map(|w| {
                format!(
                    "{}: {}",
                    w.reason.as_deref().unwrap_or("waiting"),
                    w.message.as_deref().unwrap_or_default()
                )
            }),
    };
    let deleted = (pod.metadata.deletion_timestamp.is_some() && state != State::Failed)
        .then(|| deletion_reason(pod));
    Replica {
        state,
        node,
        message,
        deleted,
    }
}

/// Why a pod is being deleted: the reason Kubernetes gave (its `DisruptionTarget` condition,
/// as when its node is unreachable and the pod is evicted), else that it was deleted.
fn deletion_reason(pod: &Pod) -> String {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let target = conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True");
    match target.and_then(|c| c.message.as_deref()) {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ => "its pod was deleted".to_owned(),
    }
}

/// Why a fetcher failed: what it said, else what the kubelet said.
fn failure_reason(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let terminated = status
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.terminated.clone());
    if let Some(message) = terminated
        .as_ref()
        .and_then(|t| t.message.as_deref())
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        return message.to_owned();
    }
    if status.reason.as_deref() == Some("DeadlineExceeded") {
        return "timeout: the fetcher ran past its deadline and was stopped".to_owned();
    }
    match (terminated, status.message) {
        (_, Some(message)) if !message.is_empty() => message,
        (Some(t), _) => format!("the fetcher exited with code {}", t.exit_code),
        _ => "the fetcher failed".to_owned(),
    }
}

/// The node affinity that selects `nodes` by name; none for no nodes.
fn node_affinity(nodes: &BTreeSet<String>) -> Option<NodeAffinity> {
    (!nodes.is_empty()).then(|| NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".to_owned(),
                    operator: "In".to_owned(),
                    values: Some(nodes.iter().cloned().collect()),
                }]),
                ..NodeSelectorTerm::default()
            }],
        }),
        ..NodeAffinity::default()
    })
}

/// The nodes a node affinity of [`node_affinity`] selects.
fn nodes_of(affinity: Option<&NodeAffinity>) -> impl Iterator<Item = String> + '_ {
    affinity
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flat_map(|s| &s.node_selector_terms)
        .flat_map(|t| t.match_fields.iter().flatten())
        .filter(|f| f.key == "metadata.name")
        .flat_map(|f| f.values.iter().flatten().cloned())
}

/// `volume <id>: <message>` for each failed volume.
fn failures(volumes: &[VolumeStatus]) -> Vec<String> {
    volumes
        .iter()
        .filter(|v| v.state == Some(State::Failed))
        .map(|v| {
            format!(
                "volume {}: {}",
                v.id,
                v.message.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

/// The whole status from its volumes.
fn summary(volumes: Vec<VolumeStatus>) -> VolumeManagerStatus {
    let failed = failures(&volumes);
    let state = if failed.is_empty() {
        volumes
            .iter()
            .filter_map(|v| v.state)
            .min()
            .unwrap_or(State::Completed)
    } else {
        State::Failed
    };
    let done = volumes
        .iter()
        .filter(|v| v.state == Some(State::Completed))
        .count();
    let message = match state {
        State::Failed => failed.join("; "),
        _ => format!("{done} of {} volumes ready", volumes.len()),
    };
    VolumeManagerStatus {
        volumes,
        state: Some(state),
        message: Some(message),
        nodes_to_clean: Vec::new(),
    }
}

/// The plan of a VolumeManager being deleted: stop its fetchers, then clean every node that
/// may hold its data, then let it go.
fn plan_deletion(placement: &Placement, vm: &VolumeManager, pods: &[&Pod]) -> Plan {
    let mut status = vm.status.clone().unwrap_or_default();
    let mut plan = Plan::new(status.clone());
    if !vm.finalizers().iter().any(|f| f == FINALIZER) {
        return plan;
    }
    record_nodes(&mut status, vm, pods);
    let mut nodes: BTreeSet<String> = status
        .volumes
        .iter()
        .flat_map(|v| nodes_of(v.node_affinity.as_ref()))
        .collect();
    let fetchers: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| role(p) == Some(pods::FETCH))
        .collect();
    nodes.extend(
        fetchers
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone()),
    );
    nodes.extend(status.nodes_to_clean.iter().cloned());
    let running: Vec<&Pod> = fetchers.into_iter().filter(|p| !terminal(p)).collect();
    if !running.is_empty() {
        plan.delete = running
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        status.message = Some(format!("deleting: stopping {} fetchers", running.len()));
        plan.status = status;
        return plan;
    }
    let done = clean(placement, vm, pods, &nodes, &mut plan);
    status.message = Some(format!(
        "deleting: data removed from {done} of {} nodes",
        nodes.len()
    ));
    plan.status = status;
    if done == nodes.len() {
        plan.finalizer = Finalizer::Remove;
    }
    plan
}

/// Add the nodes of `vm`'s fetchers to the status of their volumes, so they are cleaned even
/// if the fetchers are gone before the cleaners ran.
fn record_nodes(status: &mut VolumeManagerStatus, vm: &VolumeManager, pods: &[&Pod]) {
    let mut by_slug: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in pods.iter().filter(|p| role(p) == Some(pods::FETCH)) {
        if let (Some(slug), Some(node)) = (
            pod.labels().get(pods::VOLUME),
            pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        ) {
            by_slug.entry(slug.clone()).or_default().insert(node);
        }
    }
    for config in &vm.spec.volume_configs {
        let Some(found) = by_slug.remove(&pods::slug(&config.id)) else {
            continue;
        };
        let index = match status.volumes.iter().position(|v| v.id == config.id) {
            Some(i) => i,
            None => {
                status.volumes.push(VolumeStatus {
                    id: config.id.clone(),
                    ..VolumeStatus::default()
                });
                status.volumes.len() - 1
            }
        };
        let volume = &mut status.volumes[index];
        let mut nodes: BTreeSet<String> = nodes_of(volume.node_affinity.as_ref()).collect();
        nodes.extend(found);
        volume.node_affinity = node_affinity(&nodes);
    }
}

/// Create or retry the cleaners of `nodes`; how many have succeeded.
fn clean(
    placement: &Placement,
    vm: &VolumeManager,
    pods: &[&Pod],
    nodes: &BTreeSet<String>,
    plan: &mut Plan,
) -> usize {
    let mut done = 0;
    for node in nodes {
        let name = pods::cleaner_name(vm, node);
        match pods.iter().find(|p| p.name_any() == name) {
            None => match pods::cleaner(placement, vm, node) {
                Ok(cleaner) => plan.create.push(cleaner),
                Err(why) => plan.failed.push(format!("node {node:?} {why}")),
            },
            Some(pod) if phase(pod) == Some("Succeeded") => done += 1,
            // Deleted, so that the next reconcile creates it again.
            Some(pod)
                if phase(pod) == Some("Failed") && pod.metadata.deletion_timestamp.is_none() =>
            {
                plan.delete.push(name);
            }
            Some(_) => {}
        }
    }
    done
}

fn role(pod: &Pod) -> Option<&str> {
    pod.labels().get(pods::ROLE).map(String::as_str)
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn terminal(pod: &Pod) -> bool {
    matches!(phase(pod), Some("Succeeded" | "Failed"))
}

#[cfg(test)]
mod tests;
