//! Defaulting, as upstream does it: in memory at the start of every reconcile, never persisted.
//!
//! Replica-type keys are case-normalised (`WORKER` becomes `Worker`), `replicas` defaults to 1,
//! `restartPolicy` to Never, `cleanPodPolicy` to None, `successPolicy` to `""`, and a
//! `tfjob-port` 2222 container port is appended to the `tensorflow` container (or container 0)
//! unless a port of that name exists.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ContainerPort;

use super::api::{CleanPodPolicy, ReplicaSpec, RestartPolicy, RunPolicy, SuccessPolicy, TFJobSpec};

/// The container TF_CONFIG goes into and whose ports the services expose.
pub const CONTAINER_NAME: &str = "tensorflow";
/// The name of the port the replicas talk to each other on.
pub const PORT_NAME: &str = "tfjob-port";
/// That port's number when the template does not set one.
pub const DEFAULT_PORT: i32 = 2222;

/// A replica type, in the spelling the API uses for map keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicaType {
    Chief,
    Master,
    Worker,
    PS,
    Evaluator,
}

impl ReplicaType {
    pub const ALL: [ReplicaType; 5] = [
        ReplicaType::Chief,
        ReplicaType::Master,
        ReplicaType::Worker,
        ReplicaType::PS,
        ReplicaType::Evaluator,
    ];

    /// The type a map key names, in any letter case.
    pub fn parse(key: &str) -> Option<ReplicaType> {
        ReplicaType::ALL
            .into_iter()
            .find(|t| t.key().eq_ignore_ascii_case(key))
    }

    /// The canonical key: `Chief`, `Master`, `Worker`, `PS`, `Evaluator`.
    pub fn key(self) -> &'static str {
        match self {
            ReplicaType::Chief => "Chief",
            ReplicaType::Master => "Master",
            ReplicaType::Worker => "Worker",
            ReplicaType::PS => "PS",
            ReplicaType::Evaluator => "Evaluator",
        }
    }

    /// The lower-case form used in pod names, labels and TF_CONFIG.
    pub fn lower(self) -> &'static str {
        match self {
            ReplicaType::Chief => "chief",
            ReplicaType::Master => "master",
            ReplicaType::Worker => "worker",
            ReplicaType::PS => "ps",
            ReplicaType::Evaluator => "evaluator",
        }
    }

    /// Chief and Master lead the job: they alone decide when it has succeeded.
    pub fn is_chief(self) -> bool {
        matches!(self, ReplicaType::Chief | ReplicaType::Master)
    }
}

/// Apply upstream's defaults to a spec.
pub fn apply(spec: &mut TFJobSpec) {
    let specs = std::mem::take(&mut spec.tf_replica_specs);
    let mut normalised = BTreeMap::new();
    for (key, mut replica) in specs {
        let key = ReplicaType::parse(&key).map_or(key, |t| t.key().to_owned());
        default_replica(&mut replica);
        normalised.insert(key, replica);
    }
    spec.tf_replica_specs = normalised;

    let run_policy = spec.run_policy.get_or_insert_with(RunPolicy::default);
    run_policy
        .clean_pod_policy
        .get_or_insert(CleanPodPolicy::None);
    spec.success_policy.get_or_insert(SuccessPolicy::Default);
}

fn default_replica(replica: &mut ReplicaSpec) {
    replica.replicas.get_or_insert(1);
    replica.restart_policy.get_or_insert(RestartPolicy::Never);
    let Some(pod) = replica.template.spec.as_mut() else {
        return;
    };
    let index = pod
        .containers
        .iter()
        .position(|c| c.name == CONTAINER_NAME)
        .unwrap_or(0);
    let Some(container) = pod.containers.get_mut(index) else {
        return;
    };
    let ports = container.ports.get_or_insert_with(Vec::new);
    if !ports.iter().any(|p| p.name.as_deref() == Some(PORT_NAME)) {
        ports.push(ContainerPort {
            name: Some(PORT_NAME.to_owned()),
            container_port: DEFAULT_PORT,
            ..ContainerPort::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::fixtures::{job, worker_template};

    #[test]
    fn replica_type_keys_are_case_normalised() {
        let mut spec = job("j")
            .replica("WORKER", 2)
            .replica("ps", 1)
            .replica("evaluator", 1)
            .spec;
        apply(&mut spec);
        let keys: Vec<_> = spec.tf_replica_specs.keys().map(String::as_str).collect();
        assert_eq!(keys, ["Evaluator", "PS", "Worker"]);
    }

    #[test]
    fn replicas_restart_policy_and_clean_pod_policy_default_as_upstream() {
        let mut spec = job("j").replica("Worker", 1).spec;
        spec.tf_replica_specs.get_mut("Worker").unwrap().replicas = None;
        apply(&mut spec);
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
        let mut spec = job("j").replica_with("Worker", 1, template).spec;
        apply(&mut spec);
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
        let mut spec = job("j").replica_with("Worker", 1, template).spec;
        apply(&mut spec);
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
        let mut spec = job("j").replica_with("Worker", 1, template).spec;
        apply(&mut spec);
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
