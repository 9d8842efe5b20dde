//! PaddlePaddle: `PaddleJob`, Workers with an optional Master, launched by
//! `paddle.distributed.launch`.
//!
//! Every process of the `paddle` container gets `PYTHONUNBUFFERED`, `PADDLE_JOB_ID` (the job's
//! name), `PADDLE_NNODES` (all replicas) and `PADDLE_MASTER`, the rendezvous: the Master's, or
//! without one worker 0's, `master` port (36543). The rendezvous itself reads its own pod IP
//! (`POD_IP_DUMMY`, from `status.podIP`); the others its bare service name
//! `<job>-<type>-0`. With a Master, the Master also gets `PADDLE_SERVER_NUM=1` and Workers
//! `PADDLE_TRAINER_NUM=1`. The Master decides success, else every Worker must succeed.
//! Replica types restart OnFailure unless they say otherwise.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};
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

/// The variable the rendezvous process reads its own pod IP from.
const POD_IP: &str = "POD_IP_DUMMY";

pub static PADDLE: Framework = Framework {
    kind: "PaddleJob",
    plural: "paddlejobs",
    replica_specs_field: "paddleReplicaSpecs",
    controller_name: "paddlejob-controller",
    name: "paddle",
    replica_types: &[MASTER, WORKER],
    container: "paddle",
    port_name: "master",
    default_port: 36543,
    default_restart_policy: RestartPolicy::OnFailure,
    environment_in_every_container: true,
    replica_columns: &[],
    status_selector: true,
    unindexed: &[],
    wording: Wording {
        namespaced: Namespaced::WithoutMaster,
        failing_kind: "PaddleJob",
        tensorflow_failures: false,
    },
};

/// A distributed PaddlePaddle job: Workers, optionally with a Master.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PaddleJob",
    plural = "paddlejobs",
    singular = "paddlejob",
    namespaced,
    status = "JobStatus",
    doc = "PaddleJob runs a distributed PaddlePaddle job (Workers, optionally a Master) as pods \
           and headless services, each told the rendezvous address and the number of nodes."
)]
#[serde(rename_all = "camelCase")]
pub struct PaddleJobSpec {
    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// The bounds of an elastic job. Accepted and defaulted as upstream does; the operator
    /// does not scale jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,

    /// The replica types: `Master` (optional) and `Worker`.
    #[schemars(extend(
        "maxProperties" = 2,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k in ['Master', 'Worker'])",
                "message": "replica types are Master and Worker"
            }
        ]
    ))]
    pub paddle_replica_specs: BTreeMap<String, ReplicaSpec>,
}

/// How far an elastic job may shrink and grow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    /// The fewest Workers (defaults to `maxReplicas`, else the Workers' `replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// The most Workers (defaults to `minReplicas`, else the Workers' `replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// Autoscaling metric specs (`autoscaling/v2` MetricSpec), kept as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("items" = { "type": "object", "x-kubernetes-preserve-unknown-fields": true }))]
    pub metrics: Vec<serde_json::Value>,
}

impl TrainingJob for PaddleJob {
    const FRAMEWORK: &'static Framework = &PADDLE;

    job_accessors!(paddle_replica_specs);

    /// An elastic policy's missing bound takes the other, else the Workers' replicas.
    fn apply_defaults(&mut self) {
        let workers = self.replicas_of(WORKER);
        let Some(policy) = self.spec.elastic_policy.as_mut() else {
            return;
        };
        match (policy.min_replicas, policy.max_replicas) {
            (Some(_), Some(_)) => {}
            (None, Some(max)) => policy.min_replicas = Some(max),
            (Some(min), None) => policy.max_replicas = Some(min),
            (None, None) => {
                policy.min_replicas = workers;
                policy.max_replicas = workers;
            }
        }
    }

    fn succeeded(&self, status: &JobStatus) -> bool {
        let leader = self.leader();
        all_succeeded(status, leader, self.replicas_of(leader))
    }

    fn running(&self, status: &JobStatus) -> bool {
        active(status, self.leader()) > 0
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
        let nodes: i32 = self
            .replicas()
            .map(|(t, _)| self.replicas_of(t).unwrap_or(0))
            .sum();
        let mut env = vec![
            env_var("PYTHONUNBUFFERED", "1"),
            env_var("PADDLE_JOB_ID", placement.job),
            env_var("PADDLE_NNODES", nodes.to_string()),
        ];
        let leader = self.leader();
        let port = self.port_of(leader);
        if rtype == leader && index == 0 {
            env.push(EnvVar {
                name: POD_IP.to_owned(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "status.podIP".to_owned(),
                        api_version: None,
                    }),
                    ..EnvVarSource::default()
                }),
            });
            env.push(env_var("PADDLE_MASTER", format!("$({POD_IP}):{port}")));
        } else {
            let address = build::name(placement.job, leader, 0);
            env.push(env_var("PADDLE_MASTER", format!("{address}:{port}")));
        }
        if leader == MASTER {
            let count = if rtype == MASTER {
                "PADDLE_SERVER_NUM"
            } else {
                "PADDLE_TRAINER_NUM"
            };
            env.push(env_var(count, "1"));
        }
        env
    }
}

impl PaddleJob {
    /// The Master when the job has one, else Worker: it hosts the rendezvous and decides
    /// success.
    fn leader(&self) -> ReplicaType {
        if self.replica_spec(MASTER).is_some() {
            MASTER
        } else {
            WORKER
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::framework::Outcome;
    use crate::operator::training::frameworks::test_support::{
        active, defaulted, env_of, placement, status_with, succeeded,
    };

    const EXAMPLE: &str = include_str!("../../../../examples/paddle-simple-cpu.yaml");

    fn with_master() -> PaddleJob {
        let mut job: PaddleJob = serde_yaml::from_str(EXAMPLE).unwrap();
        let worker = job.spec.paddle_replica_specs["Worker"].clone();
        job.spec
            .paddle_replica_specs
            .insert("master".into(), worker);
        crate::operator::training::engine::defaults::apply(&mut job);
        job
    }

    #[test]
    fn without_a_master_worker_0_is_the_rendezvous_on_its_pod_ip() {
        let job: PaddleJob = defaulted(EXAMPLE);
        let env = |i| job.environment(WORKER, i, &placement("paddle-simple-cpu"));
        assert_eq!(
            env_of(&env(0)),
            [
                ("PYTHONUNBUFFERED", "1"),
                ("PADDLE_JOB_ID", "paddle-simple-cpu"),
                ("PADDLE_NNODES", "2"),
                ("POD_IP_DUMMY", "<status.podIP>"),
                ("PADDLE_MASTER", "$(POD_IP_DUMMY):37777"),
            ]
        );
        assert_eq!(
            env_of(&env(1))[3..],
            [("PADDLE_MASTER", "paddle-simple-cpu-worker-0:37777")]
        );
    }

    #[test]
    fn with_a_master_it_is_the_rendezvous_and_roles_are_counted() {
        let job = with_master();
        let master = job.environment(MASTER, 0, &placement("p"));
        assert_eq!(
            env_of(&master)[2..],
            [
                ("PADDLE_NNODES", "4"),
                ("POD_IP_DUMMY", "<status.podIP>"),
                ("PADDLE_MASTER", "$(POD_IP_DUMMY):37777"),
                ("PADDLE_SERVER_NUM", "1"),
            ]
        );
        let worker = job.environment(WORKER, 0, &placement("p"));
        assert_eq!(
            env_of(&worker)[3..],
            [
                ("PADDLE_MASTER", "p-master-0:37777"),
                ("PADDLE_TRAINER_NUM", "1"),
            ]
        );
    }

    #[test]
    fn restart_policy_defaults_to_on_failure_and_elastic_bounds_to_the_workers() {
        let mut job: PaddleJob = serde_yaml::from_str(EXAMPLE).unwrap();
        let worker = job.spec.paddle_replica_specs.get_mut("Worker").unwrap();
        worker.restart_policy = None;
        worker.template.spec.as_mut().unwrap().containers[0].ports = None;
        job.spec.elastic_policy = Some(ElasticPolicy::default());
        crate::operator::training::engine::defaults::apply(&mut job);
        let worker = &job.spec.paddle_replica_specs["Worker"];
        assert_eq!(worker.restart_policy, Some(RestartPolicy::OnFailure));
        assert_eq!(PADDLE.port_of(worker), 36543);
        let policy = job.spec.elastic_policy.unwrap();
        assert_eq!(
            (policy.min_replicas, policy.max_replicas),
            (Some(2), Some(2))
        );
    }

    #[test]
    fn elastic_bounds_default_to_each_other() {
        let mut job: PaddleJob = serde_yaml::from_str(EXAMPLE).unwrap();
        job.spec.elastic_policy = Some(ElasticPolicy {
            max_replicas: Some(5),
            ..ElasticPolicy::default()
        });
        crate::operator::training::engine::defaults::apply(&mut job);
        let policy = job.spec.elastic_policy.unwrap();
        assert_eq!(
            (policy.min_replicas, policy.max_replicas),
            (Some(5), Some(5))
        );
    }

    #[test]
    fn the_master_decides_success_else_every_worker() {
        let job: PaddleJob = defaulted(EXAMPLE);
        assert!(!job.succeeded(&status_with(&[("Worker", succeeded(&[0]))])));
        assert!(job.succeeded(&status_with(&[("Worker", succeeded(&[0, 1]))])));
        assert!(job.running(&status_with(&[("Worker", active(1))])));
        assert!(!job.is_master_role(WORKER, 0));

        let job = with_master();
        assert!(!job.succeeded(&status_with(&[("Worker", succeeded(&[0, 1]))])));
        assert!(job.succeeded(&status_with(&[("Master", succeeded(&[0, 1]))])));
        assert!(job.is_master_role(MASTER, 0));
    }

    #[test]
    fn messages_are_upstreams_worded_by_whether_there_is_a_master() {
        let job: PaddleJob = defaulted(EXAMPLE);
        assert_eq!(
            job.message(Outcome::Running),
            "PaddleJob kubeflow/paddle-simple-cpu is running."
        );
        assert_eq!(
            job.message(Outcome::Succeeded),
            "PaddleJob kubeflow/paddle-simple-cpu successfully completed."
        );
        let job = with_master();
        assert_eq!(
            job.message(Outcome::Running),
            "PaddleJob paddle-simple-cpu is running."
        );
        assert_eq!(
            job.message(Outcome::Succeeded),
            "PaddleJob paddle-simple-cpu is successfully completed."
        );
        let failed = Outcome::Failed {
            replicas: 1,
            rtype: MASTER,
        };
        assert_eq!(
            job.message(failed),
            "PaddleJob paddle-simple-cpu is failed because 1 Master replica(s) failed."
        );
    }
}
