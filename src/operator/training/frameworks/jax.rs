//! JAX: `JAXJob`, a set of identical Worker processes joined by `jax.distributed`.
//!
//! Worker 0 is the coordinator. Every process of the `jax` container gets `PYTHONUNBUFFERED`,
//! `COORDINATOR_PORT` (the Workers' `jaxjob-port`, 6666), `COORDINATOR_ADDRESS` (the bare
//! service name `<job>-worker-0`), `NUM_PROCESSES` and its `PROCESS_ID` (its index). The job
//! has succeeded when every Worker has.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::operator::training::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::operator::training::engine::build;
use crate::operator::training::framework::{
    Framework, Namespaced, Placement, ReplicaType, TrainingJob, Wording, active, all_succeeded,
    env_var, job_accessors,
};

pub const WORKER: ReplicaType = ReplicaType::new("Worker", "worker");

pub static JAX: Framework = Framework {
    kind: "JAXJob",
    plural: "jaxjobs",
    replica_specs_field: "jaxReplicaSpecs",
    controller_name: "jaxjob-controller",
    name: "jax",
    replica_types: &[WORKER],
    container: "jax",
    port_name: "jaxjob-port",
    default_port: 6666,
    default_restart_policy: RestartPolicy::Never,
    environment_in_every_container: true,
    replica_columns: &[],
    status_selector: true,
    unindexed: &[],
    wording: Wording {
        namespaced: Namespaced::Always,
        failing_kind: "JAXJob",
        tensorflow_failures: false,
    },
};

/// A distributed JAX job: `replicas` Worker processes, worker 0 coordinating.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "JAXJob",
    plural = "jaxjobs",
    singular = "jaxjob",
    namespaced,
    status = "JobStatus",
    doc = "JAXJob runs a distributed JAX job as Worker pods and headless services, each told the \
           coordinator's address, the number of processes and its own process id."
)]
#[serde(rename_all = "camelCase")]
pub struct JAXJobSpec {
    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// The replica types: only `Worker`.
    #[schemars(extend(
        "maxProperties" = 1,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k == 'Worker')",
                "message": "the only replica type is Worker"
            }
        ]
    ))]
    pub jax_replica_specs: BTreeMap<String, ReplicaSpec>,
}

impl TrainingJob for JAXJob {
    const FRAMEWORK: &'static Framework = &JAX;

    job_accessors!(jax_replica_specs);

    fn succeeded(&self, status: &JobStatus) -> bool {
        all_succeeded(status, WORKER, self.replicas_of(WORKER))
    }

    fn running(&self, status: &JobStatus) -> bool {
        active(status, WORKER) > 0
    }

    /// Upstream's words.
    /// Upstream labels index 0 of every type master; JAXJob has Workers only.
    fn is_master_role(&self, _rtype: ReplicaType, index: i32) -> bool {
        index == 0
    }

    fn environment(
        &self,
        _rtype: ReplicaType,
        index: i32,
        placement: &Placement<'_>,
    ) -> Vec<EnvVar> {
        let port = self.port_of(WORKER);
        let processes: i32 = self
            .replicas()
            .map(|(t, _)| self.replicas_of(t).unwrap_or(0))
            .sum();
        vec![
            env_var("PYTHONUNBUFFERED", "1"),
            env_var("COORDINATOR_PORT", port.to_string()),
            env_var("COORDINATOR_ADDRESS", build::name(placement.job, WORKER, 0)),
            env_var("NUM_PROCESSES", processes.to_string()),
            env_var("PROCESS_ID", index.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::api::RestartPolicy;
    use crate::operator::training::framework::Outcome;
    use crate::operator::training::frameworks::test_support::{
        active, defaulted, env_of, placement, status_with, succeeded,
    };

    const EXAMPLE: &str = include_str!("../../../../examples/jax-cpu-demo.yaml");

    #[test]
    fn every_worker_learns_the_coordinator_and_its_process_id() {
        let job: JAXJob = defaulted(EXAMPLE);
        for index in 0..2 {
            let env = job.environment(WORKER, index, &placement("jaxjob-simple"));
            let id = index.to_string();
            assert_eq!(
                env_of(&env),
                [
                    ("PYTHONUNBUFFERED", "1"),
                    ("COORDINATOR_PORT", "6666"),
                    ("COORDINATOR_ADDRESS", "jaxjob-simple-worker-0"),
                    ("NUM_PROCESSES", "2"),
                    ("PROCESS_ID", id.as_str()),
                ]
            );
        }
    }

    #[test]
    fn defaults_add_the_jaxjob_port_and_keep_on_failure() {
        let job: JAXJob = defaulted(EXAMPLE);
        let worker = &job.spec.jax_replica_specs["Worker"];
        assert_eq!(worker.restart_policy, Some(RestartPolicy::OnFailure));
        let ports = worker.template.spec.as_ref().unwrap().containers[0]
            .ports
            .clone()
            .unwrap();
        assert_eq!(ports[0].name.as_deref(), Some("jaxjob-port"));
        assert_eq!(ports[0].container_port, 6666);
    }

    #[test]
    fn the_job_succeeds_when_every_worker_has() {
        let job: JAXJob = defaulted(EXAMPLE);
        assert!(!job.succeeded(&status_with(&[("Worker", succeeded(&[0]))])));
        assert!(job.succeeded(&status_with(&[("Worker", succeeded(&[0, 1]))])));
        assert!(job.running(&status_with(&[("Worker", active(1))])));
        assert!(job.is_master_role(WORKER, 0));
        assert!(!job.is_master_role(WORKER, 1));
    }

    #[test]
    fn messages_are_upstreams() {
        let job: JAXJob = defaulted(EXAMPLE);
        assert_eq!(
            job.message(Outcome::Running),
            "JAXJob kubeflow/jaxjob-simple is running."
        );
        assert_eq!(
            job.message(Outcome::Succeeded),
            "JAXJob kubeflow/jaxjob-simple successfully completed."
        );
        let failed = Outcome::Failed {
            replicas: 1,
            rtype: WORKER,
        };
        assert_eq!(
            job.message(failed),
            "JAXJob jaxjob-simple is failed because 1 Worker replica(s) failed."
        );
        let restarting = Outcome::Restarting {
            replicas: 1,
            rtype: WORKER,
        };
        assert_eq!(
            job.message(restarting),
            "JAXJob jaxjob-simple is restarting because 1 Worker replica(s) failed."
        );
    }
}
