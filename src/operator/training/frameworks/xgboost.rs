//! XGBoost: `XGBoostJob`, a Rabit-style gang of one Master and any number of Workers.
//!
//! Every process of the `xgboost` container learns the tracker (the Master) and its rank from
//! `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`, `RANK` (Workers count on after the Master) and
//! `PYTHONUNBUFFERED`; with more than one process also the Workers' addresses (`WORKER_ADDRS`)
//! and port (`WORKER_PORT`). Addresses are the bare service names `<job>-<type>-<index>`. The
//! port is `xgboostjob-port` (9999). The Master decides success.

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

pub const MASTER: ReplicaType = ReplicaType::new("Master", "master");
pub const WORKER: ReplicaType = ReplicaType::new("Worker", "worker");

pub static XGBOOST: Framework = Framework {
    kind: "XGBoostJob",
    plural: "xgboostjobs",
    replica_specs_field: "xgbReplicaSpecs",
    controller_name: "xgboostjob-controller",
    name: "xgboost",
    replica_types: &[MASTER, WORKER],
    container: "xgboost",
    port_name: "xgboostjob-port",
    default_port: 9999,
    default_restart_policy: RestartPolicy::Never,
    environment_in_every_container: true,
    replica_columns: &[],
    status_selector: false,
    unindexed: &[],
    wording: Wording {
        namespaced: Namespaced::Never,
        failing_kind: "XGBoostJob",
        tensorflow_failures: false,
    },
};

/// A distributed XGBoost training job: one Master (the tracker, rank 0) and Workers.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "XGBoostJob",
    plural = "xgboostjobs",
    singular = "xgboostjob",
    namespaced,
    status = "JobStatus",
    doc = "XGBoostJob runs a distributed XGBoost training job (one Master, Workers) as pods and \
           headless services, each told the Master's address and its rank."
)]
#[serde(rename_all = "camelCase")]
pub struct XGBoostJobSpec {
    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// The replica types: `Master` (exactly one replica) and `Worker`.
    #[schemars(extend(
        "maxProperties" = 2,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k in ['Master', 'Worker'])",
                "message": "replica types are Master and Worker"
            },
            {
                "rule": "'Master' in self",
                "message": "a Master replica type is required"
            },
            {
                "rule": "!('Master' in self) || (has(self.Master.replicas) && self.Master.replicas == 1)",
                "message": "Master replicas must be 1"
            }
        ]
    ))]
    pub xgb_replica_specs: BTreeMap<String, ReplicaSpec>,
}

impl TrainingJob for XGBoostJob {
    const FRAMEWORK: &'static Framework = &XGBOOST;

    job_accessors!(xgb_replica_specs);

    fn succeeded(&self, status: &JobStatus) -> bool {
        all_succeeded(status, MASTER, self.replicas_of(MASTER))
    }

    fn running(&self, status: &JobStatus) -> bool {
        active(status, MASTER) > 0
    }

    /// Upstream's words.
    fn is_master_role(&self, rtype: ReplicaType, _index: i32) -> bool {
        rtype == MASTER
    }

    fn environment(
        &self,
        rtype: ReplicaType,
        index: i32,
        placement: &Placement<'_>,
    ) -> Vec<EnvVar> {
        let rank = match rtype {
            WORKER => index + self.replicas_of(MASTER).unwrap_or(0),
            _ => index,
        };
        let world_size: i32 = self
            .replicas()
            .map(|(t, _)| self.replicas_of(t).unwrap_or(0))
            .sum();
        let mut env = vec![
            env_var("MASTER_PORT", self.port_of(MASTER).to_string()),
            env_var("MASTER_ADDR", build::name(placement.job, MASTER, 0)),
            env_var("WORLD_SIZE", world_size.to_string()),
            env_var("RANK", rank.to_string()),
            env_var("PYTHONUNBUFFERED", "1"),
        ];
        if world_size > 1 {
            // Upstream lists world size - 1 workers, whatever the Worker replicas say.
            let workers: Vec<String> = (0..world_size - 1)
                .map(|i| build::name(placement.job, WORKER, i))
                .collect();
            env.push(env_var("WORKER_PORT", self.port_of(WORKER).to_string()));
            env.push(env_var("WORKER_ADDRS", workers.join(",")));
        }
        env
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

    const EXAMPLE: &str = include_str!("../../../../examples/xgboost-iris-train.yaml");

    fn example() -> XGBoostJob {
        defaulted(EXAMPLE)
    }

    #[test]
    fn master_is_rank_0_and_workers_count_on_after_it() {
        let job = example();
        let env = |t, i| job.environment(t, i, &placement("xgboost-dist-iris-test-train"));
        let (master, worker_0, worker_1) = (env(MASTER, 0), env(WORKER, 0), env(WORKER, 1));
        assert_eq!(
            env_of(&master),
            [
                ("MASTER_PORT", "9991"),
                ("MASTER_ADDR", "xgboost-dist-iris-test-train-master-0"),
                ("WORLD_SIZE", "3"),
                ("RANK", "0"),
                ("PYTHONUNBUFFERED", "1"),
                ("WORKER_PORT", "9991"),
                (
                    "WORKER_ADDRS",
                    "xgboost-dist-iris-test-train-worker-0,xgboost-dist-iris-test-train-worker-1"
                ),
            ]
        );
        assert_eq!(env_of(&worker_0)[3], ("RANK", "1"));
        assert_eq!(env_of(&worker_1)[3], ("RANK", "2"));
    }

    #[test]
    fn a_lone_master_gets_no_worker_variables() {
        let mut job = example();
        job.spec.xgb_replica_specs.remove("Worker");
        let env = job.environment(MASTER, 0, &placement("j"));
        let names: Vec<_> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "MASTER_PORT",
                "MASTER_ADDR",
                "WORLD_SIZE",
                "RANK",
                "PYTHONUNBUFFERED"
            ]
        );
    }

    #[test]
    fn defaults_add_the_port_and_keep_the_restart_policies() {
        let mut job: XGBoostJob = serde_yaml::from_str(EXAMPLE).unwrap();
        let master = job.spec.xgb_replica_specs.get_mut("Master").unwrap();
        master.template.spec.as_mut().unwrap().containers[0].ports = None;
        master.restart_policy = None;
        crate::operator::training::engine::defaults::apply(&mut job);
        let master = &job.spec.xgb_replica_specs["Master"];
        assert_eq!(master.restart_policy, Some(RestartPolicy::Never));
        assert_eq!(XGBOOST.port_of(master), 9999);
        let worker = &job.spec.xgb_replica_specs["Worker"];
        assert_eq!(worker.restart_policy, Some(RestartPolicy::ExitCode));
    }

    #[test]
    fn the_master_decides_success() {
        let job = example();
        assert!(!job.succeeded(&status_with(&[("Worker", succeeded(&[0, 1]))])));
        assert!(job.succeeded(&status_with(&[("Master", succeeded(&[0]))])));
        assert!(job.running(&status_with(&[("Master", active(1))])));
        assert!(!job.running(&status_with(&[("Worker", active(2))])));
        assert!(job.is_master_role(MASTER, 0));
        assert!(!job.is_master_role(WORKER, 0));
    }

    #[test]
    fn messages_are_upstreams() {
        let job = example();
        let name = "xgboost-dist-iris-test-train";
        assert_eq!(
            job.message(Outcome::Running),
            format!("XGBoostJob {name} is running.")
        );
        assert_eq!(
            job.message(Outcome::Succeeded),
            format!("XGBoostJob {name} is successfully completed.")
        );
        let failed = Outcome::Failed {
            replicas: 2,
            rtype: WORKER,
        };
        assert_eq!(
            job.message(failed),
            format!("XGBoostJob {name} is failed because 2 Worker replica(s) failed.")
        );
        let restarting = Outcome::Restarting {
            replicas: 2,
            rtype: WORKER,
        };
        assert_eq!(
            job.message(restarting),
            format!("XGBoostJob {name} is restarting because 2 Worker replica(s) failed.")
        );
    }
}
