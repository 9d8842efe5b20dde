//! MPI: `MPIJob`, one Launcher that runs `mpirun` (or Horovod's `horovodrun`) and Workers it
//! starts its processes on, as training-operator v1.9 runs the `kubeflow.org/v1` kind.
//!
//! The Launcher reaches the Workers by `kubectl exec`, not by ssh: the job's ConfigMap
//! (`<job>-config`, see [`launcher`]) holds the hostfile and `kubexec.sh`, the remote shell
//! Open MPI (`OMPI_MCA_plm_rsh_agent`) and Hydra (Intel MPI, MPICH) call with a Worker's pod
//! name; the launcher runs as a ServiceAccount of its own (`<job>-launcher`) whose Role lets it
//! exec into the job's Workers and nothing else, and gets `kubectl` from an init container.
//! The Launcher pod is `<job>-launcher`, Workers `<job>-worker-<index>`; there are no services.
//! Workers without a command sleep until the Launcher's processes arrive. The Launcher
//! decides success, and a failed Launcher or Worker fails the job.
//!
//! # Where this differs from upstream, on purpose
//! - The Launcher is created once every Worker runs (upstream creates it at once and its
//!   kubectl-delivery image waits, listing the namespace's pods): so its Role needs no `list`
//!   or `watch`, and grants `get` and exec on the job's own Workers only (upstream's grants
//!   `get list watch` on every pod of the namespace, and exec on every pod when the job has no
//!   Workers).
//! - `mpiImplementation` (`OpenMPI`, `Intel`, `MPICH`, as mpi-operator's v2beta1 has it) chooses
//!   the hostfile's form and the launcher's variables; unset, both Open MPI's and Intel MPI's
//!   variables are set, as upstream v1 sets them. `runLauncherAsWorker` puts the Launcher
//!   first in the hostfile (upstream v1 does that only for a Launcher with a GPU, which is
//!   what unset means).
//! - `discover_hosts.sh` (Horovod elastic's host discovery) lists every Worker the job asks
//!   for; upstream's lists those running when the ConfigMap was last written.
//! - A failed job's reason is `MPIJobFailed` (upstream writes `MPIJobMPIJobFailed`, its reason
//!   prefixed twice), and with `restartPolicy: ExitCode` a Worker that exits with a retryable
//!   code is recreated (upstream's MPIJob sets Restarting and never recreates it).
//! - A template's `serviceAccountName` is used, never created (upstream creates a missing one,
//!   owned by the job).
//! - `slotsPerWorker` is at least 1.
//! - The `kubectl-delivery` container asks for no ephemeral storage (upstream's asks for 5Gi to
//!   copy one binary, which leaves the Launcher unschedulable on nodes that report none). Its
//!   default image is mlkube's own, [`DEFAULT_KUBECTL_DELIVERY_IMAGE`], a pinned tag built for
//!   the real node (upstream's is `ghcr.io/kubeflow/training-v1/kubectl-delivery:latest`,
//!   which `--mpi-kubectl-delivery-image` runs unchanged).
//! - Upstream's events ([`events`]) are written once per occurrence, not on every reconcile;
//!   its second success event, reason `mpijobsSucceeded` (built from the plural), and its
//!   `... is exist` events about the companions on every reconcile are not written.

pub mod events;
pub mod launcher;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::operator::training::api::{
    CleanPodPolicy, JobStatus, ReplicaSpec, RestartPolicy, RunPolicy,
};
use crate::operator::training::engine::build;
use crate::operator::training::framework::{
    Companion, CompanionKind, Event, Framework, Namespaced, Options, Placement, ReplicaType,
    TrainingJob, Wording, active, all_succeeded, job_accessors,
};

pub const LAUNCHER: ReplicaType = ReplicaType::new("Launcher", "launcher");
pub const WORKER: ReplicaType = ReplicaType::new("Worker", "worker");

/// The image of the launcher's `kubectl-delivery` container unless `--mpi-kubectl-delivery-image`
/// says otherwise: mlkube's, which copies `kubectl` into `TARGET_DIR` and exits (`image/`).
pub const DEFAULT_KUBECTL_DELIVERY_IMAGE: &str = "mlkube/kubectl-delivery:0.1.0";

pub static MPI: Framework = Framework {
    kind: "MPIJob",
    plural: "mpijobs",
    replica_specs_field: "mpiReplicaSpecs",
    controller_name: "mpijob-controller",
    name: "mpi",
    replica_types: &[LAUNCHER, WORKER],
    // Upstream's default container name, whose exit code decides ExitCode restarts; the
    // launcher's variables go into each template's first container, whatever its name.
    container: "mpi",
    // No port: MPI processes find each other by the pods' addresses.
    port_name: "",
    default_port: 9999,
    default_restart_policy: RestartPolicy::Never,
    environment_in_every_container: false,
    replica_columns: &[],
    status_selector: false,
    unindexed: &[LAUNCHER],
    wording: Wording {
        namespaced: Namespaced::Never,
        failing_kind: "MPIJob",
        tensorflow_failures: false,
    },
};

/// A distributed MPI job: a Launcher that runs `mpirun` and Workers it runs its processes on.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "MPIJob",
    plural = "mpijobs",
    singular = "mpijob",
    namespaced,
    status = "JobStatus",
    doc = "MPIJob runs a distributed MPI job (a Launcher running mpirun, and Workers) as pods; \
           the Launcher starts its processes on the Workers through kubectl exec."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.cleanPodPolicy) || !has(self.runPolicy) || !has(self.runPolicy.cleanPodPolicy) || self.cleanPodPolicy == self.runPolicy.cleanPodPolicy",
        "message": "cleanPodPolicy and runPolicy.cleanPodPolicy differ; set only runPolicy.cleanPodPolicy"
    }
]))]
pub struct MPIJobSpec {
    /// How many processes each Worker runs: its `slots` in the hostfile (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub slots_per_worker: Option<i32>,

    /// Deprecated: `runPolicy.cleanPodPolicy`, which wins when both are set. Which pods are
    /// deleted when the job finishes (default None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<CleanPodPolicy>,

    /// The replica types: `Launcher` (exactly one replica) and `Worker` (default 0 replicas).
    #[schemars(extend(
        "maxProperties" = 2,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k in ['Launcher', 'Worker'])",
                "message": "replica types are Launcher and Worker"
            },
            {
                "rule": "'Launcher' in self",
                "message": "a Launcher replica type is required"
            },
            {
                "rule": "!('Launcher' in self) || !has(self.Launcher.replicas) || self.Launcher.replicas == 1",
                "message": "there must be only 1 Launcher replica"
            }
        ]
    ))]
    pub mpi_replica_specs: BTreeMap<String, ReplicaSpec>,

    /// The container `kubexec.sh` runs the launcher's processes in on each Worker (default: the
    /// pod's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_container: Option<String>,

    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// Which MPI the images hold, for the hostfile's form and the launcher's variables:
    /// `OpenMPI`, `Intel` or `MPICH`. Unset: Open MPI's hostfile, and both Open MPI's and Intel
    /// MPI's variables (as upstream's v1 MPIJob). An mlkube field, from mpi-operator's v2beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_implementation: Option<MPIImplementation>,

    /// Whether the Launcher runs processes too: it comes first in the hostfile. Unset: only
    /// when the Launcher asks for a GPU (as upstream's v1 MPIJob). An mlkube field, from
    /// mpi-operator's v2beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_launcher_as_worker: Option<bool>,
}

/// The MPI implementation in the job's images.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MPIImplementation {
    /// Open MPI: `host slots=N` lines, `OMPI_MCA_*` variables.
    OpenMPI,
    /// Intel MPI (Hydra): `host:N` lines, `I_MPI_HYDRA_*` variables.
    Intel,
    /// MPICH (Hydra): `host:N` lines, `HYDRA_*` variables.
    MPICH,
}

impl TrainingJob for MPIJob {
    const FRAMEWORK: &'static Framework = &MPI;
    const CONTAINER_REQUIRED: bool = false;

    job_accessors!(mpi_replica_specs);

    /// Upstream's: Worker `replicas` default to 0, and the spec's own `cleanPodPolicy` stands
    /// in for `runPolicy.cleanPodPolicy` when only it is set.
    fn apply_early_defaults(&mut self) {
        for (key, replica) in &mut self.spec.mpi_replica_specs {
            if key.eq_ignore_ascii_case(WORKER.key()) {
                replica.replicas.get_or_insert(0);
            }
        }
        if let Some(policy) = self.spec.clean_pod_policy {
            let run_policy = self.spec.run_policy.get_or_insert_with(RunPolicy::default);
            run_policy.clean_pod_policy.get_or_insert(policy);
        }
    }

    fn succeeded(&self, status: &JobStatus) -> bool {
        all_succeeded(status, LAUNCHER, self.replicas_of(LAUNCHER))
    }

    fn running(&self, status: &JobStatus) -> bool {
        active(status, LAUNCHER) > 0
    }

    /// Upstream's words.
    fn is_master_role(&self, rtype: ReplicaType, _index: i32) -> bool {
        rtype == LAUNCHER
    }

    /// None through the engine: the launcher's variables go into its first container, by
    /// [`finish_pod`](TrainingJob::finish_pod).
    fn environment(&self, _: ReplicaType, _: i32, _: &Placement<'_>) -> Vec<EnvVar> {
        Vec::new()
    }

    fn init_containers(
        &self,
        rtype: ReplicaType,
        _index: i32,
        options: &Options,
    ) -> Vec<Container> {
        if rtype != LAUNCHER {
            return Vec::new();
        }
        let image = options
            .mpi_kubectl_delivery_image
            .as_deref()
            .unwrap_or(DEFAULT_KUBECTL_DELIVERY_IMAGE);
        vec![launcher::kubectl_delivery(self, image)]
    }

    fn pod_name(&self, rtype: ReplicaType, index: i32) -> String {
        let job = self.metadata.name.as_deref().unwrap_or_default();
        match rtype {
            LAUNCHER => format!("{job}-launcher"),
            _ => build::name(job, rtype, index),
        }
    }

    fn has_services(&self) -> bool {
        false
    }

    /// The Launcher waits until every Worker runs (or has finished): its `mpirun` execs into
    /// them at once.
    fn holds_back(&self, rtype: ReplicaType, status: &JobStatus) -> bool {
        if rtype != LAUNCHER {
            return false;
        }
        let workers = self.replicas_of(WORKER).unwrap_or(0);
        let ready = status
            .replica_statuses
            .get(WORKER.key())
            .map_or(0, |w| w.active + w.succeeded);
        ready < workers
    }

    fn finish_pod(&self, rtype: ReplicaType, _index: i32, spec: &mut PodSpec) {
        match rtype {
            LAUNCHER => launcher::finish_launcher(self, spec),
            _ => launcher::finish_worker(self, spec),
        }
    }

    fn companions(&self) -> Vec<Companion> {
        launcher::companions(self)
    }

    const COMPANION_KINDS: &'static [CompanionKind] = &[
        CompanionKind::ConfigMap,
        CompanionKind::ServiceAccount,
        CompanionKind::Role,
        CompanionKind::RoleBinding,
    ];

    fn pod_state_events(&self, pods: &[Pod]) -> Vec<Event> {
        events::of_pods(self, pods)
    }

    fn created_event(&self, rtype: ReplicaType, created: Result<&str, &str>) -> Option<Event> {
        events::of_created(rtype, created)
    }
}

impl MPIJob {
    /// The job's name.
    fn job_name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The processes each Worker runs.
    fn slots(&self) -> i32 {
        self.spec.slots_per_worker.unwrap_or(1)
    }

    /// Whether the Launcher asks for a GPU: a resource limit named `*.com/gpu`, or with `gpu`
    /// in its name, on any of its containers (upstream's test).
    fn launcher_has_gpu(&self) -> bool {
        self.replica_spec(LAUNCHER)
            .and_then(|r| r.template.spec.as_ref())
            .into_iter()
            .flat_map(|pod| &pod.containers)
            .filter_map(|c| c.resources.as_ref()?.limits.as_ref())
            .flat_map(|limits| limits.keys())
            .any(|name| name.ends_with(".com/gpu") || name.contains("gpu"))
    }

    /// Whether the Launcher is a host of the hostfile too.
    fn launcher_runs_processes(&self) -> bool {
        self.spec
            .run_launcher_as_worker
            .unwrap_or_else(|| self.launcher_has_gpu())
    }
}

#[cfg(test)]
mod tests;
