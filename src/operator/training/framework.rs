//! The seam between the job engine and the frameworks: what a framework is (its facts, as data)
//! and what its job type answers (a few functions).
//!
//! The engine reads every job through [`TrainingJob`]: its replica specs, run policy and status
//! are the same `kubeflow.org/v1` types for every kind. A framework adds only its facts
//! ([`Framework`]), its defaults, the environment its processes read, and when its job has
//! succeeded.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerSpec;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};

/// A replica type: the key of the replica specs map (`Worker`) and its lower-case form, used in
/// pod names and labels (`worker`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaType {
    key: &'static str,
    lower: &'static str,
}

impl ReplicaType {
    pub const fn new(key: &'static str, lower: &'static str) -> ReplicaType {
        ReplicaType { key, lower }
    }

    /// The canonical key: `Worker`, `PS`, `Master`, ...
    pub fn key(self) -> &'static str {
        self.key
    }

    /// The lower-case form used in pod names, labels and the injected environment.
    pub fn lower(self) -> &'static str {
        self.lower
    }
}

impl fmt::Display for ReplicaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key)
    }
}

/// `{job}-{type}-{index}`, with `/` replaced by `-` as upstream does.
pub fn name(job: &str, rtype: ReplicaType, index: i32) -> String {
    format!("{job}-{}-{index}", rtype.lower()).replace('/', "-")
}

/// What sets one framework apart, as data.
#[derive(Debug)]
pub struct Framework {
    /// The kind, e.g. `TFJob`; also the prefix of every condition reason (`TFJobRunning`).
    pub kind: &'static str,
    /// The resource's plural, e.g. `tfjobs`.
    pub plural: &'static str,
    /// The spec's replica map field in the API, e.g. `tfReplicaSpecs`.
    pub replica_specs_field: &'static str,
    /// The value of the `training.kubeflow.org/operator-name` label, e.g. `tfjob-controller`.
    pub controller_name: &'static str,
    /// The framework's name: what `--frameworks` and the metrics' `framework` label call it,
    /// e.g. `tensorflow`.
    pub name: &'static str,
    /// The replica types a job may have. Gang scheduling counts their resources in this order.
    pub replica_types: &'static [ReplicaType],
    /// The container the framework's environment goes into and whose ports the services expose.
    pub container: &'static str,
    /// The name of the port the replicas talk to each other on, and its default number.
    pub port_name: &'static str,
    pub default_port: i32,
    /// A replica's restart policy when its spec has none.
    pub default_restart_policy: RestartPolicy,
    /// Whether the environment goes into every container of a pod, not only `container`.
    pub environment_in_every_container: bool,
    /// The replica types whose counts `kubectl get` shows, after State and Age, with their
    /// column names: TFJob's `Workers` and `PS`.
    pub replica_columns: &'static [(&'static str, ReplicaType)],
    /// Whether each replica type's status carries its pods' label `selector`, as upstream
    /// writes it for the kinds whose CRD scales by it (PyTorchJob, PaddleJob, JAXJob) only.
    pub status_selector: bool,
    /// The replica types of one pod whose pod has no `replica-index` label, as upstream's
    /// (MPIJob's Launcher): Kubeflow's SDK lists a replica index's pods by that label.
    pub unindexed: &'static [ReplicaType],
    /// How upstream's controller of the kind words its condition messages.
    pub wording: Wording,
}

/// How upstream's controller of a kind words its condition messages, word for word (tools
/// match them): the few facts in which the kinds differ.
#[derive(Clone, Copy, Debug)]
pub struct Wording {
    /// When the Running and Succeeded messages name the job `namespace/name` ("JAXJob ns/a is
    /// running.", "... successfully completed.") rather than by its name ("MXJob a is
    /// running.", "... is successfully completed.").
    pub namespaced: Namespaced,
    /// The kind as the Failed and Restarting messages spell it (MXJob's controller: `mxjob`).
    pub failing_kind: &'static str,
    /// TFJob's words for failures: "TFJob ns/a has failed because ...", and a restart worded
    /// by upstream's shared pod handling: "job a is restarting because Worker replica(s)
    /// failed." (no count).
    pub tensorflow_failures: bool,
}

/// When a kind's Running and Succeeded messages name the job with its namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespaced {
    Always,
    Never,
    /// Only when the job has no Master (PyTorchJob, PaddleJob).
    WithoutMaster,
}

/// The Master replica type, by which [`Namespaced::WithoutMaster`] words a job.
const MASTER: ReplicaType = ReplicaType::new("Master", "master");

impl Wording {
    /// The condition message of `outcome` for the job `namespace/name` of `kind`.
    fn message(&self, kind: &str, job: (&str, &str), has_master: bool, outcome: Outcome) -> String {
        let (namespace, name) = job;
        let namespaced = match self.namespaced {
            Namespaced::Always => true,
            Namespaced::Never => false,
            Namespaced::WithoutMaster => !has_master,
        };
        let failing = self.failing_kind;
        match outcome {
            Outcome::Running if namespaced => format!("{kind} {namespace}/{name} is running."),
            Outcome::Running => format!("{kind} {name} is running."),
            Outcome::Succeeded if namespaced => {
                format!("{kind} {namespace}/{name} successfully completed.")
            }
            Outcome::Succeeded => format!("{kind} {name} is successfully completed."),
            Outcome::Failed { replicas, rtype } if self.tensorflow_failures => format!(
                "{failing} {namespace}/{name} has failed because {replicas} {rtype} replica(s) failed."
            ),
            Outcome::Failed { replicas, rtype } => {
                format!("{failing} {name} is failed because {replicas} {rtype} replica(s) failed.")
            }
            Outcome::Restarting { rtype, .. } if self.tensorflow_failures => {
                format!("job {name} is restarting because {rtype} replica(s) failed.")
            }
            Outcome::Restarting { replicas, rtype } => format!(
                "{failing} {name} is restarting because {replicas} {rtype} replica(s) failed."
            ),
        }
    }
}

impl Framework {
    /// The replica type a map key (or a label) names, in any letter case.
    pub fn replica_type(&self, key: &str) -> Option<ReplicaType> {
        self.replica_types
            .iter()
            .copied()
            .find(|t| t.key().eq_ignore_ascii_case(key))
    }

    /// The port the replicas of `replica` talk on: the one named `port_name` of the framework's
    /// container, else `default_port`.
    pub fn port_of(&self, replica: &ReplicaSpec) -> i32 {
        replica
            .template
            .spec
            .iter()
            .flat_map(|pod| &pod.containers)
            .filter(|c| c.name == self.container)
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(self.port_name))
            .map_or(self.default_port, |p| p.container_port)
    }

    /// The condition reason for `what` (`Running`): the kind then what happened.
    pub fn reason(&self, what: &str) -> String {
        format!("{}{what}", self.kind)
    }
}

/// A `kubeflow.org/v1` training job of one framework, as the engine reads and runs it.
pub trait TrainingJob:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The framework's facts.
    const FRAMEWORK: &'static Framework;

    fn replica_specs(&self) -> &BTreeMap<String, ReplicaSpec>;
    fn replica_specs_mut(&mut self) -> &mut BTreeMap<String, ReplicaSpec>;
    fn run_policy(&self) -> Option<&RunPolicy>;
    fn run_policy_mut(&mut self) -> &mut Option<RunPolicy>;
    fn status(&self) -> Option<&JobStatus>;
    fn status_mut(&mut self) -> &mut Option<JobStatus>;

    /// The framework's own defaults, after the engine's (replicas, restart policy, port).
    fn apply_defaults(&mut self) {}

    /// Whether the job has succeeded, from the replica statuses being computed.
    fn succeeded(&self, status: &JobStatus) -> bool;

    /// Whether the job is running, from the replica statuses being computed.
    fn running(&self, status: &JobStatus) -> bool;

    /// Whether failures of this replica type leave the job running.
    fn tolerates_failures_of(&self, _rtype: ReplicaType) -> bool {
        false
    }

    /// Upstream's condition message for this outcome, word for word, as the kind's
    /// [`Wording`] says (they differ between frameworks, and tools match them).
    fn message(&self, outcome: Outcome) -> String {
        let meta = self.meta();
        let job = (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        );
        let has_master = self.replica_spec(MASTER).is_some();
        (Self::FRAMEWORK.wording).message(Self::FRAMEWORK.kind, job, has_master, outcome)
    }

    /// Whether this replica carries the `training.kubeflow.org/job-role=master` label.
    fn is_master_role(&self, rtype: ReplicaType, index: i32) -> bool;

    /// The HorizontalPodAutoscaler the job asks for (PyTorch's `elasticPolicy.metrics`),
    /// scaling it through its scale subresource; an error says why the job's policy cannot be
    /// honoured.
    fn autoscaler(&self) -> Option<Result<HorizontalPodAutoscalerSpec, String>> {
        None
    }

    /// Whether jobs of this kind can ask for an autoscaler at all.
    const AUTOSCALES: bool = false;

    /// The environment the framework's container of this replica gets, replacing any variable
    /// of the same name in the template.
    fn environment(&self, rtype: ReplicaType, index: i32, placement: &Placement<'_>)
    -> Vec<EnvVar>;

    /// Init containers added before the template's own (PyTorch workers wait for the Master),
    /// with the images the operator was configured with.
    fn init_containers(
        &self,
        _rtype: ReplicaType,
        _index: i32,
        _options: &Options,
    ) -> Vec<Container> {
        Vec::new()
    }

    /// The framework's defaults that come before the engine's, where the engine's would hide
    /// what the user left out (MPIJob: Worker `replicas` 0, the spec's own `cleanPodPolicy`).
    fn apply_early_defaults(&mut self) {}

    /// Whether every pod template must have a container named `FRAMEWORK.container` (a CRD
    /// rule). MPIJob's processes run in each template's first container, whatever its name.
    const CONTAINER_REQUIRED: bool = true;

    /// The name of the pod of replica `index` of type `rtype`: `{job}-{type}-{index}`
    /// ([`name`]), unless the framework names it otherwise.
    fn pod_name(&self, rtype: ReplicaType, index: i32) -> String {
        name(&self.name_any(), rtype, index)
    }

    /// Whether each replica gets a headless service (MPIJob's reach each other by exec).
    fn has_services(&self) -> bool {
        true
    }

    /// Whether the pods of `rtype` are not created yet, given the replica statuses being
    /// computed (MPIJob's Launcher waits until every Worker runs).
    fn holds_back(&self, _rtype: ReplicaType, _status: &JobStatus) -> bool {
        false
    }

    /// The framework's last changes to a replica's pod spec, after the environment and init
    /// containers (MPIJob: its volumes, mounts and the launcher's ServiceAccount).
    fn finish_pod(&self, _rtype: ReplicaType, _index: i32, _spec: &mut PodSpec) {}

    /// Objects the job needs besides its pods and services, owned by it and written before its
    /// pods (MPIJob: its ConfigMap, and the launcher's ServiceAccount, Role and RoleBinding).
    fn companions(&self) -> Vec<Companion> {
        Vec::new()
    }

    /// The kinds of the jobs' [`companions`](TrainingJob::companions): the operator watches
    /// these kinds only when a framework it runs has them.
    const COMPANION_KINDS: &'static [CompanionKind] = &[];

    /// The framework's own events about the states the job's pods are in, besides the
    /// engine's (MPIJob's `MPIJobRunning` and `MPIJobEvicted`), each with its occurrence.
    fn pod_state_events(&self, _pods: &[Pod]) -> Vec<Event> {
        Vec::new()
    }

    /// The framework's own event for a pod of `rtype` created (`Ok`, its name) or not (`Err`,
    /// why), besides `SuccessfulCreatePod` and `FailedCreatePod` (MPIJob's Launcher).
    fn created_event(&self, _rtype: ReplicaType, _created: Result<&str, &str>) -> Option<Event> {
        None
    }

    /// The replica type of a map key in any letter case.
    fn replica_type(key: &str) -> Option<ReplicaType> {
        Self::FRAMEWORK.replica_type(key)
    }

    /// The job's replica types with their specs, in the map's order.
    fn replicas(&self) -> impl Iterator<Item = (ReplicaType, &ReplicaSpec)> {
        self.replica_specs()
            .iter()
            .filter_map(|(key, spec)| Some((Self::replica_type(key)?, spec)))
    }

    /// The spec of one replica type.
    fn replica_spec(&self, rtype: ReplicaType) -> Option<&ReplicaSpec> {
        self.replica_specs().get(rtype.key())
    }

    /// The port the replicas of `rtype` talk on (see [`Framework::port_of`]); the framework's
    /// default when the job has no such replicas.
    fn port_of(&self, rtype: ReplicaType) -> i32 {
        self.replica_spec(rtype)
            .map_or(Self::FRAMEWORK.default_port, |r| Self::FRAMEWORK.port_of(r))
    }

    /// How many pods of this type the job wants (after defaulting: `replicas`, else 1).
    fn replicas_of(&self, rtype: ReplicaType) -> Option<i32> {
        self.replica_spec(rtype).map(|r| r.replicas.unwrap_or(1))
    }
}

/// An object a job needs besides its pods and services, as it is to be applied: a whole
/// object of one of the kinds in [`CompanionKind`], owned by the job.
#[derive(Clone, Debug, PartialEq)]
pub struct Companion {
    pub kind: CompanionKind,
    pub name: String,
    /// The whole object, `apiVersion` and `kind` included.
    pub object: serde_json::Value,
}

/// The kinds a job's companions may be: what the operator's RBAC lets it write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompanionKind {
    ConfigMap,
    ServiceAccount,
    Role,
    RoleBinding,
}

/// A job state whose condition message each framework words its own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Running,
    Succeeded,
    /// `replicas` pods of `rtype` failed and will not run again.
    Failed {
        replicas: usize,
        rtype: ReplicaType,
    },
    /// `replicas` pods of `rtype` failed, and are run again.
    Restarting {
        replicas: usize,
        rtype: ReplicaType,
    },
}

/// Where a job's pods run, for addressing each other.
pub struct Placement<'a> {
    pub job: &'a str,
    pub namespace: &'a str,
    /// Appended after `.svc` when set (upstream's `CUSTOM_CLUSTER_DOMAIN`).
    pub cluster_domain: Option<&'a str>,
}

/// Operator-wide settings that shape the pods.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Appended to service addresses in the injected environment (`CUSTOM_CLUSTER_DOMAIN`).
    pub cluster_domain: Option<String>,
    /// The gang scheduler, when one is configured: `volcano` or a scheduler-plugins name.
    pub gang_scheduler: Option<String>,
    /// The image of PyTorch workers' `init-pytorch` container
    /// (`--pytorch-init-container-image`); `None`: upstream's default.
    pub pytorch_init_image: Option<String>,
    /// The image of MPIJob launchers' `kubectl-delivery` container
    /// (`--mpi-kubectl-delivery-image`); `None`: mlkube's default.
    pub mpi_kubectl_delivery_image: Option<String>,
}

/// An event to record on the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: String,
    pub message: String,
    /// For an event that reports a state rather than an act (a pod the scheduler cannot
    /// place): which occurrence of the state it is. Every reconcile sees the state again, but
    /// it is recorded once per occurrence (see `events`).
    pub occurrence: Option<String>,
}

/// A variable with a plain value, as the frameworks inject them.
pub fn env_var(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// Whether every one of the `replicas` pods of `rtype` has succeeded (none wanted: false).
pub fn all_succeeded(status: &JobStatus, rtype: ReplicaType, replicas: Option<i32>) -> bool {
    let (Some(replicas), Some(replica)) = (replicas, status.replica_statuses.get(rtype.key()))
    else {
        return false;
    };
    replicas > 0 && (0..replicas).all(|i| replica.succeeded_indexes.contains(&i))
}

/// How many pods of `rtype` are active.
pub fn active(status: &JobStatus, rtype: ReplicaType) -> i32 {
    status
        .replica_statuses
        .get(rtype.key())
        .map_or(0, |r| r.active)
}

/// The [`TrainingJob`] accessors every job type writes alike, for a spec with the replica map
/// field `$specs` and an optional `run_policy`, and a status of [`JobStatus`].
macro_rules! job_accessors {
    ($specs:ident) => {
        fn replica_specs(
            &self,
        ) -> &::std::collections::BTreeMap<String, $crate::operator::training::api::ReplicaSpec> {
            &self.spec.$specs
        }

        fn replica_specs_mut(
            &mut self,
        ) -> &mut ::std::collections::BTreeMap<String, $crate::operator::training::api::ReplicaSpec>
        {
            &mut self.spec.$specs
        }

        fn run_policy(&self) -> Option<&$crate::operator::training::api::RunPolicy> {
            self.spec.run_policy.as_ref()
        }

        fn run_policy_mut(&mut self) -> &mut Option<$crate::operator::training::api::RunPolicy> {
            &mut self.spec.run_policy
        }

        fn status(&self) -> Option<&$crate::operator::training::api::JobStatus> {
            self.status.as_ref()
        }

        fn status_mut(&mut self) -> &mut Option<$crate::operator::training::api::JobStatus> {
            &mut self.status
        }
    };
}
pub(crate) use job_accessors;
