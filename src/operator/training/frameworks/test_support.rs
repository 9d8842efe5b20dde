//! What the frameworks' unit tests share: an upstream example as the reconciler sees it, the
//! injected environment as (name, value) pairs, and a status with given replica counts.

use k8s_openapi::api::core::v1::EnvVar;

use crate::operator::training::api::{JobStatus, ReplicaStatus};
use crate::operator::training::engine::defaults;
use crate::operator::training::framework::{Placement, TrainingJob};

/// The job a YAML document describes, defaulted as reconcile does.
pub fn defaulted<J: TrainingJob>(yaml: &str) -> J {
    let mut job: J = serde_yaml::from_str(yaml).expect("the example parses as the job type");
    defaults::apply(&mut job);
    job
}

/// Where the job `job` runs, in the namespace `kubeflow`.
pub fn placement(job: &str) -> Placement<'_> {
    Placement {
        job,
        namespace: "kubeflow",
        cluster_domain: None,
    }
}

/// The variables in order, as (name, value); a variable taken from a field reads `<field>`.
pub fn env_of(env: &[EnvVar]) -> Vec<(&str, &str)> {
    env.iter()
        .map(|e| {
            let value = match (&e.value, &e.value_from) {
                (Some(value), _) => value.as_str(),
                (None, Some(from)) => from.field_ref.as_ref().map_or("?", |f| {
                    if f.field_path == "status.podIP" {
                        "<status.podIP>"
                    } else {
                        "?"
                    }
                }),
                (None, None) => "",
            };
            (e.name.as_str(), value)
        })
        .collect()
}

/// A status with these replica statuses, by replica type key.
pub fn status_with(replicas: &[(&str, ReplicaStatus)]) -> JobStatus {
    JobStatus {
        replica_statuses: replicas
            .iter()
            .map(|(key, status)| ((*key).to_owned(), status.clone()))
            .collect(),
        ..JobStatus::default()
    }
}

/// A replica status with these indexes succeeded.
pub fn succeeded(indexes: &[i32]) -> ReplicaStatus {
    ReplicaStatus {
        succeeded_indexes: indexes.to_vec(),
        ..ReplicaStatus::default()
    }
}

/// A replica status with `n` active pods.
pub fn active(n: i32) -> ReplicaStatus {
    ReplicaStatus {
        active: n,
        ..ReplicaStatus::default()
    }
}
