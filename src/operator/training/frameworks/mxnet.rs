//! MXNet: `MXJob`, parameter-server training (`jobMode: MXTrain`: Scheduler, Server, Worker) or
//! auto-tuning (`MXTune`: TunerTracker, TunerServer, Tuner).
//!
//! Every process of the `mxnet` container gets `MX_CONFIG` (see `mx_config`) and the DMLC
//! variables the parameter server reads: `DMLC_PS_ROOT_URI`/`DMLC_PS_ROOT_PORT` (the
//! Scheduler's bare service name and port; empty and 0 without one), `DMLC_NUM_SERVER`,
//! `DMLC_NUM_WORKER`, `DMLC_ROLE` (the lower-case replica type), `DMLC_USE_KUBERNETES=1`, and
//! for Workers `DMLC_WORKER_ID` (BytePS). The port is `mxjob-port` (9091).
//!
//! The Scheduler decides success; a job of a single Worker and nothing else succeeds with it.
//! Upstream stops there, so a tuning job never succeeds; here its Tuner decides.

mod mx_config;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::operator::training::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::operator::training::framework::{
    Framework, Namespaced, Placement, ReplicaType, TrainingJob, Wording, active, all_succeeded,
    env_var, job_accessors,
};

pub const SCHEDULER: ReplicaType = ReplicaType::new("Scheduler", "scheduler");
pub const SERVER: ReplicaType = ReplicaType::new("Server", "server");
pub const WORKER: ReplicaType = ReplicaType::new("Worker", "worker");
pub const TUNER_TRACKER: ReplicaType = ReplicaType::new("TunerTracker", "tunertracker");
pub const TUNER_SERVER: ReplicaType = ReplicaType::new("TunerServer", "tunerserver");
pub const TUNER: ReplicaType = ReplicaType::new("Tuner", "tuner");

pub static MXNET: Framework = Framework {
    kind: "MXJob",
    plural: "mxjobs",
    replica_specs_field: "mxReplicaSpecs",
    controller_name: "mxjob-controller",
    name: "mxnet",
    replica_types: &[
        SCHEDULER,
        SERVER,
        WORKER,
        TUNER_TRACKER,
        TUNER_SERVER,
        TUNER,
    ],
    container: "mxnet",
    port_name: "mxjob-port",
    default_port: 9091,
    default_restart_policy: RestartPolicy::Never,
    environment_in_every_container: true,
    replica_columns: &[],
    status_selector: false,
    unindexed: &[],
    wording: Wording {
        namespaced: Namespaced::Never,
        failing_kind: "mxjob",
        tensorflow_failures: false,
    },
};

/// An MXNet job: parameter-server training or auto-tuning, by `jobMode`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "MXJob",
    plural = "mxjobs",
    singular = "mxjob",
    namespaced,
    status = "JobStatus",
    doc = "MXJob runs a distributed MXNet job (Scheduler, Servers, Workers; or TunerTracker, \
           TunerServer, Tuner) as pods and headless services, with MX_CONFIG and the DMLC \
           variables injected into each."
)]
#[serde(rename_all = "camelCase")]
pub struct MXJobSpec {
    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// Training (`MXTrain`) or auto-tuning (`MXTune`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_mode: Option<JobMode>,

    /// The replica types: `Scheduler` (at most one replica), `Server`, `Worker`, and for tuning
    /// `TunerTracker`, `TunerServer`, `Tuner`.
    #[schemars(extend(
        "maxProperties" = 6,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k in ['Scheduler', 'Server', 'Worker', 'TunerTracker', 'TunerServer', 'Tuner'])",
                "message": "replica types are Scheduler, Server, Worker, TunerTracker, TunerServer and Tuner"
            },
            {
                "rule": "!('Scheduler' in self) || !has(self.Scheduler.replicas) || self.Scheduler.replicas <= 1",
                "message": "there can be only one Scheduler replica"
            }
        ]
    ))]
    pub mx_replica_specs: BTreeMap<String, ReplicaSpec>,
}

/// What an MXJob does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum JobMode {
    MXTrain,
    MXTune,
}

impl TrainingJob for MXJob {
    const FRAMEWORK: &'static Framework = &MXNET;

    job_accessors!(mx_replica_specs);

    fn succeeded(&self, status: &JobStatus) -> bool {
        self.leader()
            .is_some_and(|leader| all_succeeded(status, leader, self.replicas_of(leader)))
    }

    fn running(&self, status: &JobStatus) -> bool {
        self.leader()
            .is_some_and(|leader| active(status, leader) > 0)
    }

    /// Upstream's words.
    /// Upstream labels the Servers master.
    fn is_master_role(&self, rtype: ReplicaType, _index: i32) -> bool {
        rtype == SERVER
    }

    fn environment(
        &self,
        rtype: ReplicaType,
        index: i32,
        placement: &Placement<'_>,
    ) -> Vec<EnvVar> {
        let config = mx_config::MxConfig::of(self, placement, rtype, index);
        let root = config.address(SCHEDULER, 0);
        let mut env = vec![
            env_var(mx_config::ENV_NAME, config.to_json()),
            env_var("DMLC_PS_ROOT_PORT", root.port.to_string()),
            env_var("DMLC_PS_ROOT_URI", root.url),
            env_var("DMLC_NUM_SERVER", config.count(SERVER).to_string()),
            env_var("DMLC_NUM_WORKER", config.count(WORKER).to_string()),
            env_var("DMLC_ROLE", rtype.lower()),
            env_var("DMLC_USE_KUBERNETES", "1"),
        ];
        if rtype == WORKER {
            env.push(env_var("DMLC_WORKER_ID", index.to_string()));
        }
        env
    }
}

impl MXJob {
    /// The replica type that decides success: the Scheduler; else a single Worker alone; else
    /// (tuning) the Tuner.
    fn leader(&self) -> Option<ReplicaType> {
        let count = |t| self.replicas_of(t).unwrap_or(0);
        if self.replica_spec(SCHEDULER).is_some() {
            return Some(SCHEDULER);
        }
        if count(WORKER) == 1 && count(SERVER) == 0 {
            return Some(WORKER);
        }
        self.replica_spec(TUNER).is_some().then_some(TUNER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::framework::Outcome;
    use crate::operator::training::frameworks::test_support::{
        active, defaulted, env_of, placement, status_with, succeeded,
    };

    const TRAIN: &str = include_str!("../../../../examples/mxnet-dist.yaml");
    const TUNE: &str = include_str!("../../../../examples/mxnet-tune-gpu.yaml");

    #[test]
    fn every_role_learns_the_scheduler_the_counts_and_its_role() {
        let job: MXJob = defaulted(TRAIN);
        let place = placement("mxnet-job");
        let config = r#"{"cluster":{"scheduler":[{"url":"mxnet-job-scheduler-0","port":9991}],"server":[{"url":"mxnet-job-server-0","port":9991}],"worker":[{"url":"mxnet-job-worker-0","port":9991}]},"labels":{"scheduler":"","server":"","worker":""},"task":{"type":"worker","index":0}}"#;
        assert_eq!(
            env_of(&job.environment(WORKER, 0, &place)),
            [
                ("MX_CONFIG", config),
                ("DMLC_PS_ROOT_PORT", "9991"),
                ("DMLC_PS_ROOT_URI", "mxnet-job-scheduler-0"),
                ("DMLC_NUM_SERVER", "1"),
                ("DMLC_NUM_WORKER", "1"),
                ("DMLC_ROLE", "worker"),
                ("DMLC_USE_KUBERNETES", "1"),
                ("DMLC_WORKER_ID", "0"),
            ]
        );
        let server = job.environment(SERVER, 0, &place);
        assert_eq!(
            env_of(&server).len(),
            7,
            "no DMLC_WORKER_ID but for Workers"
        );
        assert_eq!(env_of(&server)[5], ("DMLC_ROLE", "server"));
        assert!(
            env_of(&server)[0]
                .1
                .ends_with(r#""task":{"type":"server","index":0}}"#)
        );
    }

    #[test]
    fn tuning_roles_have_no_scheduler_and_carry_their_tuner_server_key() {
        let mut job: MXJob = defaulted(TUNE);
        job.spec
            .mx_replica_specs
            .get_mut("TunerServer")
            .unwrap()
            .template
            .metadata
            .get_or_insert_default()
            .annotations = Some([("tuner-server-key".to_owned(), "gpu-1".to_owned())].into());
        let env = job.environment(TUNER, 0, &placement("auto-tuning-job"));
        let env = env_of(&env);
        let config = r#"{"cluster":{"tuner":[{"url":"auto-tuning-job-tuner-0","port":9991}],"tunerserver":[{"url":"auto-tuning-job-tunerserver-0","port":9991}],"tunertracker":[{"url":"auto-tuning-job-tunertracker-0","port":9991}]},"labels":{"tuner":"","tunerserver":"gpu-1","tunertracker":""},"task":{"type":"tuner","index":0}}"#;
        assert_eq!(env[0], ("MX_CONFIG", config));
        assert_eq!(
            env[1..],
            [
                ("DMLC_PS_ROOT_PORT", "0"),
                ("DMLC_PS_ROOT_URI", ""),
                ("DMLC_NUM_SERVER", "0"),
                ("DMLC_NUM_WORKER", "0"),
                ("DMLC_ROLE", "tuner"),
                ("DMLC_USE_KUBERNETES", "1"),
            ]
        );
    }

    #[test]
    fn defaults_add_the_mxjob_port() {
        let mut job: MXJob = serde_yaml::from_str(TRAIN).unwrap();
        let worker = job.spec.mx_replica_specs.get_mut("Worker").unwrap();
        worker.template.spec.as_mut().unwrap().containers[0].ports = None;
        crate::operator::training::engine::defaults::apply(&mut job);
        assert_eq!(MXNET.port_of(&job.spec.mx_replica_specs["Worker"]), 9091);
    }

    #[test]
    fn the_scheduler_decides_success_else_a_lone_worker_else_the_tuner() {
        let job: MXJob = defaulted(TRAIN);
        assert!(!job.succeeded(&status_with(&[("Worker", succeeded(&[0]))])));
        assert!(job.succeeded(&status_with(&[("Scheduler", succeeded(&[0]))])));
        assert!(job.running(&status_with(&[("Scheduler", active(1))])));
        assert!(job.is_master_role(SERVER, 0));
        assert!(!job.is_master_role(SCHEDULER, 0));

        let mut lone: MXJob = defaulted(TRAIN);
        lone.spec.mx_replica_specs.retain(|k, _| k == "Worker");
        assert!(lone.succeeded(&status_with(&[("Worker", succeeded(&[0]))])));

        let tune: MXJob = defaulted(TUNE);
        assert!(!tune.succeeded(&status_with(&[("TunerTracker", succeeded(&[0]))])));
        assert!(tune.succeeded(&status_with(&[("Tuner", succeeded(&[0]))])));
    }

    #[test]
    fn messages_are_upstreams() {
        let job: MXJob = defaulted(TRAIN);
        assert_eq!(job.message(Outcome::Running), "MXJob mxnet-job is running.");
        assert_eq!(
            job.message(Outcome::Succeeded),
            "MXJob mxnet-job is successfully completed."
        );
        let failed = Outcome::Failed {
            replicas: 1,
            rtype: WORKER,
        };
        assert_eq!(
            job.message(failed),
            "mxjob mxnet-job is failed because 1 Worker replica(s) failed."
        );
        let restarting = Outcome::Restarting {
            replicas: 1,
            rtype: WORKER,
        };
        assert_eq!(
            job.message(restarting),
            "mxjob mxnet-job is restarting because 1 Worker replica(s) failed."
        );
    }
}
