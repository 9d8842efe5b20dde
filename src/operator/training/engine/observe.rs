//! Observing: what the job's pods and services say, per replica type and index. Pure, and
//! free of decisions: which pod fills which index, which are surplus, and what a pod's
//! containers report (phase, exit code, why it failed or was restarted, whether it is stuck).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStatus, Pod, PodCondition, Service,
};
use kube::ResourceExt;

use super::build;
use crate::operator::training::api::ReplicaSpec;
use crate::operator::training::framework::{ReplicaType, TrainingJob};

/// The pods and services the job owns.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    pub pods: &'a [Pod],
    pub services: &'a [Service],
}

/// A pod to delete, with the UID it was observed with (deletes carry it as a precondition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub name: String,
    pub uid: Option<String>,
}

impl Deletion {
    pub fn of(pod: &Pod) -> Deletion {
        Deletion {
            name: pod.name_any(),
            uid: pod.metadata.uid.clone(),
        }
    }
}

/// The pod of one replica index, if any.
#[derive(Clone, Copy, Debug)]
pub enum Slot<'a> {
    /// No pod.
    Empty,
    /// A pod that is being deleted: neither active nor failed.
    Leaving,
    /// A pod, not being deleted.
    Pod(&'a Pod),
}

/// One replica type of the spec, as observed.
pub struct ReplicaPods<'a> {
    pub rtype: ReplicaType,
    pub spec: &'a ReplicaSpec,
    /// How many pods the spec wants (0 and up).
    pub replicas: i32,
    /// Index 0 to `replicas - 1` with its pod.
    pub slots: Vec<(i32, Slot<'a>)>,
    /// Pods past the last index (scale down).
    pub surplus_pods: Vec<Deletion>,
    /// Services past the last index.
    pub surplus_services: Vec<String>,
    /// The indexes without a service.
    pub missing_services: Vec<i32>,
}

/// The whole job, as observed.
pub struct Observation<'a> {
    /// Pods of a replica type the spec no longer has.
    pub strays: Vec<Deletion>,
    /// The spec's replica types, in the spec's order.
    pub replicas: Vec<ReplicaPods<'a>>,
}

/// Sort the job's pods and services into its replica types and indexes.
pub fn observe<'a, J: TrainingJob>(job: &'a J, observed: Observed<'a>) -> Observation<'a> {
    let mut strays = Vec::new();
    let mut by_slot: BTreeMap<(ReplicaType, i32), &Pod> = BTreeMap::new();
    for pod in observed.pods {
        match slot::<J>(pod.labels()) {
            Some(slot) if job.replica_spec(slot.0).is_some() => {
                by_slot.insert(slot, pod);
            }
            _ if !terminating(pod) => strays.push(Deletion::of(pod)),
            _ => {}
        }
    }
    let replicas = job
        .replicas()
        .map(|(rtype, spec)| replica_pods(job, rtype, spec, &by_slot, observed.services))
        .collect();
    Observation { strays, replicas }
}

fn replica_pods<'a, J: TrainingJob>(
    job: &J,
    rtype: ReplicaType,
    spec: &'a ReplicaSpec,
    by_slot: &BTreeMap<(ReplicaType, i32), &'a Pod>,
    services: &[Service],
) -> ReplicaPods<'a> {
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let wanted = |index: i32| (0..replicas).contains(&index);
    let surplus_pods = by_slot
        .range((rtype, i32::MIN)..=(rtype, i32::MAX))
        .filter(|&(&(_, index), pod)| !wanted(index) && !terminating(pod))
        .map(|(_, pod)| Deletion::of(pod))
        .collect();
    let surplus_services = services_of::<J>(services, rtype)
        .filter(|&(_, index)| !wanted(index))
        .map(|(name, _)| name)
        .collect();
    let name = job.name_any();
    let missing_services = (0..replicas)
        .filter(|&index| {
            let service = build::name(&name, rtype, index);
            !services.iter().any(|s| s.name_any() == service)
        })
        .collect();
    let slots = (0..replicas)
        .map(|index| {
            let slot = match by_slot.get(&(rtype, index)) {
                None => Slot::Empty,
                Some(pod) if terminating(pod) => Slot::Leaving,
                Some(pod) => Slot::Pod(pod),
            };
            (index, slot)
        })
        .collect();
    ReplicaPods {
        rtype,
        spec,
        replicas,
        slots,
        surplus_pods,
        surplus_services,
        missing_services,
    }
}

/// A pod's or service's place in the job, from its labels. The one pod of a type the
/// framework leaves `unindexed` is index 0 without the label (and with it, as an earlier
/// mlkube labelled it).
fn slot<J: TrainingJob>(labels: &BTreeMap<String, String>) -> Option<(ReplicaType, i32)> {
    let rtype = J::replica_type(labels.get(build::LABEL_REPLICA_TYPE)?)?;
    let index = match labels.get(build::LABEL_REPLICA_INDEX) {
        Some(index) => index.parse().ok()?,
        None if J::FRAMEWORK.unindexed.contains(&rtype) => 0,
        None => return None,
    };
    Some((rtype, index))
}

/// The services of a replica type with their index: (name, index).
fn services_of<J: TrainingJob>(
    services: &[Service],
    rtype: ReplicaType,
) -> impl Iterator<Item = (String, i32)> {
    services.iter().filter_map(move |s| {
        let (t, i) = slot::<J>(s.labels())?;
        (t == rtype).then(|| (s.name_any(), i))
    })
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

pub fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The exit code of the framework's container, if it terminated.
pub fn exit_code(pod: &Pod, container: &str) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container)?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// Why a pod failed, in words a user can act on. The framework's `container` is looked at
/// first: its exit is the one that matters.
pub fn failure_reason(pod: &Pod, container: &str) -> String {
    let status = pod.status.as_ref();
    if let Some(reason) = status.and_then(|s| s.reason.as_deref()) {
        let message = status
            .and_then(|s| s.message.as_deref())
            .unwrap_or_default();
        return if message.is_empty() {
            reason.to_owned()
        } else {
            format!("{reason}: {message}")
        };
    }
    let containers = status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten());
    let mut ordered: Vec<_> = containers.collect();
    ordered.sort_by_key(|c| c.name != container);
    for status in ordered {
        let state = status.state.as_ref();
        if let Some(t) = state
            .and_then(|s| s.terminated.as_ref())
            .filter(|t| t.exit_code != 0)
        {
            return ended(t, &status.name);
        }
        if let Some(reason) = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
        {
            return format!("{reason} in container {}", status.name);
        }
    }
    "the pod failed without a container exit".to_owned()
}

/// How the last run of a container the kubelet restarted ended (its `lastState`), the
/// framework's `container` first, then the others and the init containers: why the pod's
/// restarts count toward the backoff limit.
pub fn last_exit(pod: &Pod, container: &str) -> Option<String> {
    let status = pod.status.as_ref()?;
    let mut restarted: Vec<&ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .filter(|c| c.restart_count > 0)
        .collect();
    restarted.sort_by_key(|c| c.name != container);
    restarted.into_iter().find_map(|c| {
        let terminated = c.last_state.as_ref()?.terminated.as_ref()?;
        Some(ended(terminated, &c.name))
    })
}

/// How a run of `container` ended: `exit code N of container C`, after `OOMKilled: ` when the
/// kernel killed it for memory.
fn ended(terminated: &ContainerStateTerminated, container: &str) -> String {
    let code = terminated.exit_code;
    match terminated.reason.as_deref() {
        Some("OOMKilled") => format!("OOMKilled: exit code {code} of container {container}"),
        _ => format!("exit code {code} of container {container}"),
    }
}

/// Container waiting reasons that mean the pod will not start without help.
const STUCK_REASONS: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// The reason a container of the pod will not start without help, and that container's name.
pub fn stuck_reason(pod: &Pod) -> Option<(String, String)> {
    let status = pod.status.as_ref()?;
    status.container_statuses.iter().flatten().find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        STUCK_REASONS
            .contains(&reason)
            .then(|| (reason.to_owned(), c.name.clone()))
    })
}

/// The scheduler's answer for a pod it has not placed: its `PodScheduled` condition while
/// that is False (reason `Unschedulable`, message "0/2 nodes are available: ...").
pub fn not_scheduled(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
}

/// Container restarts by the kubelet, init containers included.
pub fn kubelet_restarts(pod: &Pod) -> i32 {
    let status = pod.status.as_ref();
    let containers = status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten());
    let init = status
        .iter()
        .flat_map(|s| s.init_container_statuses.iter().flatten());
    containers.chain(init).map(|c| c.restart_count).sum()
}
