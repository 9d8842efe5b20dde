//! TensorFlow: `TFJob`, the framework the operator grew from.
//!
//! Replica types Chief (or its legacy alias Master), Worker, PS and Evaluator; the `tensorflow`
//! container gets `TF_CONFIG` (see `tf_config`) and a `tfjob-port` (2222). The Chief decides
//! success when there is one, else the workers do by `successPolicy` (worker 0, or all of them);
//! with `enableDynamicWorker` worker failures do not fail the job.

mod tf_config;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::operator::training::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::operator::training::framework::{
    Framework, Namespaced, Placement, ReplicaType, TrainingJob, Wording, job_accessors,
};

pub use tf_config::ENV_NAME;

pub const CHIEF: ReplicaType = ReplicaType::new("Chief", "chief");
pub const MASTER: ReplicaType = ReplicaType::new("Master", "master");
pub const WORKER: ReplicaType = ReplicaType::new("Worker", "worker");
pub const PS: ReplicaType = ReplicaType::new("PS", "ps");
pub const EVALUATOR: ReplicaType = ReplicaType::new("Evaluator", "evaluator");

/// The container TF_CONFIG goes into and whose ports the services expose.
pub const CONTAINER_NAME: &str = "tensorflow";
/// The name of the port the replicas talk to each other on.
pub const PORT_NAME: &str = "tfjob-port";
/// That port's number when the template does not set one.
pub const DEFAULT_PORT: i32 = 2222;

pub static TENSORFLOW: Framework = Framework {
    kind: "TFJob",
    plural: "tfjobs",
    replica_specs_field: "tfReplicaSpecs",
    controller_name: "tfjob-controller",
    name: "tensorflow",
    // Those training cannot start without first: gang scheduling counts resources in this order.
    replica_types: &[CHIEF, MASTER, PS, WORKER, EVALUATOR],
    container: CONTAINER_NAME,
    port_name: PORT_NAME,
    default_port: DEFAULT_PORT,
    default_restart_policy: RestartPolicy::Never,
    environment_in_every_container: false,
    replica_columns: &[("Workers", WORKER), ("PS", PS)],
    status_selector: false,
    unindexed: &[],
    wording: Wording {
        namespaced: Namespaced::Always,
        failing_kind: "TFJob",
        tensorflow_failures: true,
    },
};

/// A TensorFlow training job: a set of replica types (Chief, Worker, PS, Evaluator), each run as
/// `replicas` pods with a headless service apiece, wired together with `TF_CONFIG`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "TFJob",
    plural = "tfjobs",
    singular = "tfjob",
    namespaced,
    status = "JobStatus",
    doc = "TFJob runs a distributed TensorFlow training job (Chief, Workers, parameter servers, \
           Evaluator) as pods and headless services, with TF_CONFIG injected into each."
)]
#[serde(rename_all = "camelCase")]
pub struct TFJobSpec {
    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// When the job counts as succeeded without a Chief: `""` (worker 0 succeeded) or
    /// `AllWorkers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,

    /// The replica types, keyed `Chief`, `Master` (a legacy alias of Chief), `Worker`, `PS` or
    /// `Evaluator` (any letter case).
    #[schemars(extend(
        "maxProperties" = 5,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k.lowerAscii() in ['chief', 'master', 'worker', 'ps', 'evaluator'])",
                "message": "replica types are Chief, Master, Worker, PS and Evaluator"
            },
            {
                "rule": "self.filter(k, k.lowerAscii() in ['chief', 'master']).size() <= 1",
                "message": "at most one of Chief and Master may be set"
            },
            {
                "rule": "self.all(k, !(k.lowerAscii() in ['chief', 'master']) || !has(self[k].replicas) || self[k].replicas <= 1)",
                "message": "there can be only one Chief/Master replica"
            }
        ]
    ))]
    pub tf_replica_specs: BTreeMap<String, ReplicaSpec>,

    /// Workers may join and leave: TF_CONFIG uses the sparse cluster form and Worker failures do
    /// not fail the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_dynamic_worker: Option<bool>,
}

/// When a job without a Chief succeeds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SuccessPolicy {
    /// Worker 0 succeeded.
    #[serde(rename = "")]
    Default,
    /// Every worker succeeded.
    AllWorkers,
}

impl TrainingJob for TFJob {
    const FRAMEWORK: &'static Framework = &TENSORFLOW;

    job_accessors!(tf_replica_specs);

    fn apply_defaults(&mut self) {
        self.spec
            .success_policy
            .get_or_insert(SuccessPolicy::Default);
    }

    fn succeeded(&self, status: &JobStatus) -> bool {
        let Some((rtype, replicas)) = leader(self) else {
            return false;
        };
        let Some(replica) = status.replica_statuses.get(rtype.key()) else {
            return false;
        };
        if is_chief(rtype) {
            return replica.succeeded_indexes.contains(&0);
        }
        let all = (0..replicas).all(|i| replica.succeeded_indexes.contains(&i));
        match self.spec.success_policy.unwrap_or(SuccessPolicy::Default) {
            SuccessPolicy::AllWorkers => all,
            SuccessPolicy::Default => all || replica.succeeded_indexes.contains(&0),
        }
    }

    fn running(&self, status: &JobStatus) -> bool {
        let active = |t: ReplicaType| status.replica_statuses.get(t.key()).map_or(0, |r| r.active);
        match leader(self) {
            Some((rtype, _)) => active(rtype) > 0,
            None => status.replica_statuses.values().any(|r| r.active > 0),
        }
    }

    fn tolerates_failures_of(&self, rtype: ReplicaType) -> bool {
        self.spec.enable_dynamic_worker == Some(true) && rtype == WORKER
    }

    /// Chief/Master, else worker 0 when the job has neither.
    fn is_master_role(&self, rtype: ReplicaType, index: i32) -> bool {
        if is_chief(rtype) {
            return true;
        }
        let has_chief = self.replicas().any(|(t, _)| is_chief(t));
        !has_chief && rtype == WORKER && index == 0
    }

    fn environment(
        &self,
        rtype: ReplicaType,
        index: i32,
        placement: &Placement<'_>,
    ) -> Vec<EnvVar> {
        tf_config::for_replica(&self.spec, placement, rtype.key(), index)
            .map(|config| EnvVar {
                name: ENV_NAME.to_owned(),
                value: Some(config),
                value_from: None,
            })
            .into_iter()
            .collect()
    }
}

/// Chief and Master lead the job: they alone decide when it has succeeded.
pub fn is_chief(rtype: ReplicaType) -> bool {
    rtype == CHIEF || rtype == MASTER
}

/// The replica type that decides success: Chief or Master if the job has one, else Worker.
fn leader(job: &TFJob) -> Option<(ReplicaType, i32)> {
    [CHIEF, MASTER, WORKER]
        .into_iter()
        .find_map(|t| job.replicas_of(t).filter(|&n| n > 0).map(|n| (t, n)))
}
