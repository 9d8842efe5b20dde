//! Defaulting, as upstream does it: in memory at the start of every reconcile, never persisted.
//!
//! Replica-type keys are case-normalised (`WORKER` becomes `Worker`), `replicas` defaults to 1,
//! `restartPolicy` to the framework's (Never for TFJob, OnFailure for PyTorchJob),
//! `cleanPodPolicy` to None, and the framework's port (`tfjob-port` 2222) is appended to the
//! framework's container (`tensorflow`, else container 0) unless a port of that name exists.
//! The framework adds its own, before the engine's where the engine's would hide what the user left
//! out (MPIJob), and after (TFJob: `successPolicy` `""`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ContainerPort;

use crate::operator::training::api::{CleanPodPolicy, ReplicaSpec, RunPolicy};
use crate::operator::training::framework::{Framework, TrainingJob};

/// Apply upstream's defaults to a job: the engine's, then the framework's.
pub fn apply<J: TrainingJob>(job: &mut J) {
    job.apply_early_defaults();
    let specs = std::mem::take(job.replica_specs_mut());
    let mut normalised = BTreeMap::new();
    for (key, mut replica) in specs {
        let key = J::replica_type(&key).map_or(key, |t| t.key().to_owned());
        default_replica(J::FRAMEWORK, &mut replica);
        normalised.insert(key, replica);
    }
    *job.replica_specs_mut() = normalised;

    let run_policy = job.run_policy_mut().get_or_insert_with(RunPolicy::default);
    run_policy
        .clean_pod_policy
        .get_or_insert(CleanPodPolicy::None);
    job.apply_defaults();
}

fn default_replica(framework: &Framework, replica: &mut ReplicaSpec) {
    replica.replicas.get_or_insert(1);
    replica
        .restart_policy
        .get_or_insert(framework.default_restart_policy);
    // A framework without a port (MPIJob) gets none.
    if framework.port_name.is_empty() {
        return;
    }
    let Some(pod) = replica.template.spec.as_mut() else {
        return;
    };
    let index = pod
        .containers
        .iter()
        .position(|c| c.name == framework.container)
        .unwrap_or(0);
    let Some(container) = pod.containers.get_mut(index) else {
        return;
    };
    let ports = container.ports.get_or_insert_with(Vec::new);
    if !ports
        .iter()
        .any(|p| p.name.as_deref() == Some(framework.port_name))
    {
        ports.push(ContainerPort {
            name: Some(framework.port_name.to_owned()),
            container_port: framework.default_port,
            ..ContainerPort::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::api::RestartPolicy;
    use crate::operator::training::fixtures::{job, worker_template};
    use crate::operator::training::frameworks::tensorflow::{PORT_NAME, SuccessPolicy};

    #[test]
    fn replica_type_keys_are_case_normalised() {
        let mut job = job("j")
            .replica("WORKER", 2)
            .replica("ps", 1)
            .replica("evaluator", 1)
            .undefaulted();
        apply(&mut job);
        let spec = job.spec;
        let keys: Vec<_> = spec.tf_replica_specs.keys().map(String::as_str).collect();
        assert_eq!(keys, ["Evaluator", "PS", "Worker"]);
    }

    #[test]
    fn replicas_restart_policy_and_clean_pod_policy_default_as_upstream() {
        let mut job = job("j").replica("Worker", 1).undefaulted();
        job.spec
            .tf_replica_specs
            .get_mut("Worker")
            .unwrap()
            .replicas = None;
        apply(&mut job);
        let spec = job.spec;
        let worker = &spec.tf_replica_specs["Worker"];
        assert_eq!(worker.replicas, Some(1));
        assert_eq!(worker.restart_policy, Some(RestartPolicy::Never));
        let run_policy = spec.run_policy.unwrap();
        assert_eq!(run_policy.clean_pod_policy, Some(CleanPodPolicy::None));
        assert_eq!(spec.success_policy, Some(SuccessPolicy::Default));
    }

    #[test]
    fn tfjob_port_is_appended_even_next_to_a_custom_named_port() {
        let mut template = worker_template();
        let container = &mut template.spec.as_mut().unwrap().containers[0];
        container.ports = Some(vec![ContainerPort {
            name: Some("grpc".into()),
            container_port: 9000,
            ..Default::default()
        }]);
        let mut job = job("j").replica_with("Worker", 1, template).undefaulted();
        apply(&mut job);
        let spec = job.spec;
        let ports = spec.tf_replica_specs["Worker"]
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .ports
            .clone()
            .unwrap();
        let names: Vec<_> = ports.iter().map(|p| p.name.clone().unwrap()).collect();
        assert_eq!(names, ["grpc", "tfjob-port"]);
        assert_eq!(ports[1].container_port, 2222);
    }

    #[test]
    fn an_existing_tfjob_port_is_kept() {
        let mut template = worker_template();
        let container = &mut template.spec.as_mut().unwrap().containers[0];
        container.ports = Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: 3333,
            ..Default::default()
        }]);
        let mut job = job("j").replica_with("Worker", 1, template).undefaulted();
        apply(&mut job);
        let spec = job.spec;
        let ports = spec.tf_replica_specs["Worker"]
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .ports
            .clone()
            .unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].container_port, 3333);
    }

    #[test]
    fn the_port_goes_to_the_tensorflow_container_not_the_first() {
        let mut template = worker_template();
        let pod = template.spec.as_mut().unwrap();
        pod.containers.insert(
            0,
            k8s_openapi::api::core::v1::Container {
                name: "sidecar".into(),
                image: Some("busybox".into()),
                ..Default::default()
            },
        );
        let mut job = job("j").replica_with("Worker", 1, template).undefaulted();
        apply(&mut job);
        let spec = job.spec;
        let containers = &spec.tf_replica_specs["Worker"]
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers;
        assert!(containers[0].ports.is_none());
        assert_eq!(
            containers[1].ports.as_ref().unwrap()[0].name.as_deref(),
            Some(PORT_NAME)
        );
    }
}
