//! Test builders that read like the scenario: "a job with a chief and two workers, the chief
//! succeeded". Used by the unit tests of every pure module.

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::api::{ReplicaSpec, RestartPolicy, RunPolicy};
use super::engine::{build, defaults};
use super::framework::ReplicaType;
use super::frameworks::tensorflow::{TFJob, TFJobSpec};

pub const NAMESPACE: &str = "ns";
pub const UID: &str = "job-uid";

/// A template with one container named `tensorflow`.
pub fn worker_template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "tensorflow".into(),
                image: Some("kubeflow/tf-dist-mnist-test:1.0".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

pub struct JobBuilder {
    pub name: String,
    pub spec: TFJobSpec,
}

pub fn job(name: &str) -> JobBuilder {
    JobBuilder {
        name: name.into(),
        spec: TFJobSpec::default(),
    }
}

impl JobBuilder {
    pub fn replica(self, key: &str, replicas: i32) -> Self {
        self.replica_with(key, replicas, worker_template())
    }

    pub fn replica_with(mut self, key: &str, replicas: i32, template: PodTemplateSpec) -> Self {
        self.spec.tf_replica_specs.insert(
            key.into(),
            ReplicaSpec {
                replicas: Some(replicas),
                template,
                restart_policy: None,
            },
        );
        self
    }

    pub fn restart(mut self, key: &str, policy: RestartPolicy) -> Self {
        if let Some(replica) = self.spec.tf_replica_specs.get_mut(key) {
            replica.restart_policy = Some(policy);
        }
        self
    }

    pub fn run_policy(mut self, change: impl FnOnce(&mut RunPolicy)) -> Self {
        change(self.spec.run_policy.get_or_insert_with(RunPolicy::default));
        self
    }

    /// The job as the API server would hand it over, defaulted as reconcile does.
    pub fn build(self) -> TFJob {
        let mut job = self.undefaulted();
        defaults::apply(&mut job);
        job
    }

    /// The job as the API server would hand it over.
    pub fn undefaulted(self) -> TFJob {
        let mut job = TFJob::new(&self.name, self.spec);
        job.metadata.namespace = Some(NAMESPACE.into());
        job.metadata.uid = Some(UID.into());
        job.metadata.resource_version = Some("1".into());
        job
    }
}

pub fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_700_000_000 + seconds).expect("a valid timestamp"))
}

/// The pod the operator would create for a replica, in the phase the builder methods set.
pub struct PodBuilder {
    pub pod: Pod,
}

pub fn pod(job: &TFJob, rtype: ReplicaType, index: i32) -> PodBuilder {
    let pod = build::pod(job, rtype, index, &build::Options::default());
    PodBuilder { pod }
}

impl PodBuilder {
    fn status(&mut self) -> &mut PodStatus {
        self.pod.status.get_or_insert_with(PodStatus::default)
    }

    fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.into());
        self
    }

    pub fn running(self) -> Self {
        self.phase("Running")
    }

    pub fn succeeded(self) -> Self {
        self.terminated(0, "Completed").phase("Succeeded")
    }

    /// Failed, the `tensorflow` container having exited with `code`.
    pub fn failed(self, code: i32) -> Self {
        let reason = if code == 137 { "OOMKilled" } else { "Error" };
        self.terminated(code, reason).phase("Failed")
    }

    /// Failed by the kubelet without a container exit, e.g. `Evicted`.
    pub fn failed_by(mut self, reason: &str) -> Self {
        self.status().reason = Some(reason.into());
        self.status().message = Some(format!("The node was low on resource: {reason}"));
        self.phase("Failed")
    }

    pub fn waiting(mut self, reason: &str) -> Self {
        self.status().container_statuses = Some(vec![ContainerStatus {
            name: "tensorflow".into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    message: None,
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
        self.phase("Pending")
    }

    /// Pending, the scheduler having found no node for it since `since` (seconds).
    pub fn unschedulable(mut self, message: &str, since: i64) -> Self {
        self.status().conditions = Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some(message.into()),
            last_transition_time: Some(at(since)),
            ..PodCondition::default()
        }]);
        self.phase("Pending")
    }

    pub fn restarts(mut self, count: i32) -> Self {
        let statuses = self.status().container_statuses.get_or_insert_with(|| {
            vec![ContainerStatus {
                name: "tensorflow".into(),
                ..ContainerStatus::default()
            }]
        });
        statuses[0].restart_count = count;
        self
    }

    /// Running again after the kubelet restarted its `tensorflow` container `count` times, the
    /// last run having exited with `code` (`lastState`), as `OnFailure` and `Always` pods do.
    pub fn restarted(mut self, count: i32, code: i32) -> Self {
        let reason = if code == 137 { "OOMKilled" } else { "Error" };
        self.status().container_statuses = Some(vec![ContainerStatus {
            name: "tensorflow".into(),
            restart_count: count,
            last_state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some(reason.into()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
        self.phase("Running")
    }

    pub fn deleting(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(at(0));
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.pod.metadata.uid = Some(uid.into());
        self
    }

    fn terminated(mut self, code: i32, reason: &str) -> Self {
        self.status().container_statuses = Some(vec![ContainerStatus {
            name: "tensorflow".into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some(reason.into()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
        self
    }

    pub fn build(self) -> Pod {
        self.pod
    }
}
