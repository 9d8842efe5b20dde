//! What the caches keep of the operator's pods and services: compact records of the fields a
//! reconcile reads, not whole objects. At 10,000 jobs the caches hold 40,000 pods and 40,000
//! services: a k8s-openapi `Pod` keeps a slot for every field of its spec and status even when
//! they are empty (2.4 KB before any of its strings), and every label is two strings in a map.
//!
//! # Guarantees
//! - A record keeps, of the metadata, the name, namespace, UID, resource version, owner
//!   references, deletion timestamp and the four labels the operator reads (operator name, job
//!   name, replica type and index); of a pod's status, the phase, its reason and message, its
//!   `PodScheduled` condition while it is False (the scheduler's why), and each container's
//!   name, restart count, exit code and reason, and waiting reason, and of its last run
//!   (`lastState`, why it was restarted) the exit code and reason.
//! - `FromChild` gives the engine the object it reads, with those fields and no others.
//! - Pods are read from the watch into `PodRecord`, which skips the spec as it parses; services
//!   and a job's companions (MPIJob's ConfigMap, ServiceAccount, Role, RoleBinding) are
//!   watched as metadata only.

use std::borrow::Cow;
use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod,
    PodCondition, PodStatus, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::api::PartialObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::operator::training::engine::build::{
    LABEL_JOB_NAME, LABEL_OPERATOR, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE,
};

/// The labels a reconcile reads; a record keeps no others.
const READ_LABELS: [&str; 4] = [
    LABEL_OPERATOR,
    LABEL_JOB_NAME,
    LABEL_REPLICA_TYPE,
    LABEL_REPLICA_INDEX,
];

/// A cached pod or service.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Child {
    pub name: String,
    pub namespace: String,
    uid: Option<String>,
    resource_version: Option<String>,
    pub owners: Vec<OwnerReference>,
    deletion_timestamp: Option<Time>,
    labels: Vec<(&'static str, String)>,
    /// A pod's; a service has none.
    status: Option<StatusRecord>,
}

impl Child {
    fn new(meta: &ObjectMeta, status: Option<StatusRecord>) -> Child {
        let labels = meta.labels.as_ref();
        Child {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            owners: meta.owner_references.clone().unwrap_or_default(),
            deletion_timestamp: meta.deletion_timestamp.clone(),
            labels: READ_LABELS
                .iter()
                .filter_map(|key| Some((*key, labels?.get(*key)?.clone())))
                .collect(),
            status,
        }
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The version of the object the watch last delivered.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// The object's controller, if it has one.
    pub fn controller(&self) -> Option<&OwnerReference> {
        self.owners.iter().find(|o| o.controller == Some(true))
    }

    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            owner_references: (!self.owners.is_empty()).then(|| self.owners.clone()),
            deletion_timestamp: self.deletion_timestamp.clone(),
            labels: (!self.labels.is_empty()).then(|| {
                self.labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect()
            }),
            ..ObjectMeta::default()
        }
    }
}

/// A watched kind: what its cache keeps of an object.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    fn child(&self) -> Child;
}

/// The object the engine reads, from a cached record.
pub trait FromChild: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug {
    fn from_child(child: &Child) -> Self;
}

impl FromChild for Pod {
    fn from_child(child: &Child) -> Pod {
        Pod {
            metadata: child.metadata(),
            spec: None,
            status: child.status.as_ref().map(StatusRecord::status),
        }
    }
}

impl FromChild for Service {
    fn from_child(child: &Child) -> Service {
        Service {
            metadata: child.metadata(),
            ..Service::default()
        }
    }
}

/// Services and companions are watched as metadata only.
impl<K> Watched for PartialObjectMeta<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    PartialObjectMeta<K>: DeserializeOwned,
{
    fn child(&self) -> Child {
        Child::new(&self.metadata, None)
    }
}

impl Watched for PodRecord {
    fn child(&self) -> Child {
        Child::new(&self.metadata, self.status.clone())
    }
}

/// A pod as read from the watch: its spec is skipped as it is parsed.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodRecord {
    pub metadata: ObjectMeta,
    pub status: Option<StatusRecord>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusRecord {
    pub phase: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub container_statuses: Option<Vec<ContainerRecord>>,
    pub init_container_statuses: Option<Vec<ContainerRecord>>,
    /// Of the pod's conditions, only `PodScheduled` while it is False: most pods never have
    /// one, so the others are not kept.
    #[serde(default, rename = "conditions", deserialize_with = "not_scheduled")]
    pub not_scheduled: Option<ConditionRecord>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionRecord {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<Time>,
}

/// The pod's `PodScheduled` condition if it is False.
fn not_scheduled<'de, D: Deserializer<'de>>(
    conditions: D,
) -> Result<Option<ConditionRecord>, D::Error> {
    let conditions: Option<Vec<ConditionRecord>> = Option::deserialize(conditions)?;
    Ok(conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False"))
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecord {
    pub name: String,
    #[serde(default)]
    pub restart_count: i32,
    pub state: Option<StateRecord>,
    /// How the run before a restart ended: the backoff limit's message says it.
    pub last_state: Option<StateRecord>,
}

/// A container's state: the running state's start time is not read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StateRecord {
    pub terminated: Option<TerminatedRecord>,
    pub waiting: Option<WaitingRecord>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TerminatedRecord {
    #[serde(default)]
    pub exit_code: i32,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct WaitingRecord {
    pub reason: Option<String>,
}

impl Resource for PodRecord {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        Pod::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl StatusRecord {
    fn status(&self) -> PodStatus {
        let containers = |records: &Option<Vec<ContainerRecord>>| {
            records
                .as_ref()
                .map(|r| r.iter().map(ContainerRecord::status).collect())
        };
        PodStatus {
            phase: self.phase.clone(),
            reason: self.reason.clone(),
            message: self.message.clone(),
            container_statuses: containers(&self.container_statuses),
            init_container_statuses: containers(&self.init_container_statuses),
            conditions: self.not_scheduled.as_ref().map(|c| {
                vec![PodCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                    ..PodCondition::default()
                }]
            }),
            ..PodStatus::default()
        }
    }
}

impl ContainerRecord {
    fn status(&self) -> ContainerStatus {
        ContainerStatus {
            name: self.name.clone(),
            restart_count: self.restart_count,
            state: self.state.as_ref().map(StateRecord::state),
            last_state: self.last_state.as_ref().map(StateRecord::state),
            ..ContainerStatus::default()
        }
    }
}

impl StateRecord {
    fn state(&self) -> ContainerState {
        ContainerState {
            running: None,
            terminated: self.terminated.as_ref().map(|t| ContainerStateTerminated {
                exit_code: t.exit_code,
                reason: t.reason.clone(),
                ..ContainerStateTerminated::default()
            }),
            waiting: self.waiting.as_ref().map(|w| ContainerStateWaiting {
                reason: w.reason.clone(),
                ..ContainerStateWaiting::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served_metadata() -> serde_json::Value {
        json!({
            "name": "mnist-worker-0", "namespace": "ml", "uid": "u1", "resourceVersion": "7",
            "generateName": "g", "creationTimestamp": "2026-11-23T09:00:00Z",
            "labels": {
                "training.kubeflow.org/operator-name": "tfjob-controller",
                "training.kubeflow.org/job-name": "mnist",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/job-role": "master",
                "team": "vision",
            },
            "annotations": { "big": "x" },
            "ownerReferences": [
                { "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist",
                  "uid": "j1", "controller": true },
                { "apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "c1" },
            ],
            "managedFields": [{ "manager": "kwok", "operation": "Update" }],
            "deletionTimestamp": "2026-11-23T10:00:00Z",
        })
    }

    /// The metadata as the engine sees it: `served_metadata` without what is not kept.
    fn kept_metadata() -> ObjectMeta {
        let mut meta: ObjectMeta = serde_json::from_value(served_metadata()).unwrap();
        meta.generate_name = None;
        meta.creation_timestamp = None;
        meta.annotations = None;
        meta.managed_fields = None;
        let labels = meta.labels.as_mut().unwrap();
        labels.remove("training.kubeflow.org/job-role");
        labels.remove("team");
        meta
    }

    #[test]
    fn a_cached_pod_keeps_what_a_reconcile_reads_and_nothing_else() {
        let served = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": served_metadata(),
            "spec": { "containers": [{ "name": "tensorflow", "image": "tf" }] },
            "status": {
                "phase": "Failed", "reason": "Evicted", "message": "low on memory",
                "podIP": "10.0.0.1",
                "containerStatuses": [{
                    "name": "tensorflow", "restartCount": 2, "image": "tf", "imageID": "",
                    "ready": false,
                    "state": { "terminated": { "exitCode": 137, "reason": "OOMKilled",
                                               "startedAt": "2026-11-23T09:00:00Z" } },
                    "lastState": { "terminated": { "exitCode": 1, "reason": "Error",
                                                   "finishedAt": "2026-11-23T08:59:00Z" } },
                }],
                "initContainerStatuses": [{
                    "name": "init", "restartCount": 1, "image": "i", "imageID": "", "ready": false,
                    "state": { "waiting": { "reason": "CrashLoopBackOff", "message": "m" } },
                }],
                "conditions": [
                    { "type": "Ready", "status": "False", "reason": "PodFailed" },
                    { "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/2 nodes are available", "lastProbeTime": null,
                      "lastTransitionTime": "2026-11-23T09:00:00Z" },
                ],
            },
        });
        let record: PodRecord = serde_json::from_value(served.clone()).unwrap();
        let pod = Pod::from_child(&record.child());

        let mut want: Pod = serde_json::from_value(served).unwrap();
        want.metadata = kept_metadata();
        want.spec = None;
        let status = want.status.as_mut().unwrap();
        status.pod_ip = None;
        for c in status.container_statuses.iter_mut().flatten() {
            c.image = String::new();
            if let Some(t) = c.state.as_mut().and_then(|s| s.terminated.as_mut()) {
                t.started_at = None;
            }
            if let Some(t) = c.last_state.as_mut().and_then(|s| s.terminated.as_mut()) {
                t.finished_at = None;
            }
        }
        for c in status.init_container_statuses.iter_mut().flatten() {
            c.image = String::new();
            if let Some(w) = c.state.as_mut().and_then(|s| s.waiting.as_mut()) {
                w.message = None;
            }
        }
        status
            .conditions
            .as_mut()
            .unwrap()
            .retain(|c| c.type_ == "PodScheduled");
        assert_eq!(pod, want);
    }

    #[test]
    fn a_cached_service_keeps_its_metadata_as_a_pod_does() {
        let served: PartialObjectMeta<Service> = serde_json::from_value(json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": served_metadata(),
        }))
        .unwrap();
        let service = Service::from_child(&served.child());
        assert_eq!(
            service,
            Service {
                metadata: kept_metadata(),
                ..Service::default()
            }
        );
    }

    #[test]
    fn a_pod_record_is_read_from_the_pods_path() {
        assert_eq!(PodRecord::kind(&()), "Pod");
        assert_eq!(
            PodRecord::url_path(&(), Some("ml")),
            "/api/v1/namespaces/ml/pods"
        );
    }
}
