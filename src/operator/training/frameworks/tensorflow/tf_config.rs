//! TF_CONFIG: how each TensorFlow process learns the cluster and its own place in it.
//!
//! The format is upstream's, byte for byte: `{"cluster":{..},"task":{"type":..,"index":..},
//! "environment":"cloud"}` with lower-case replica types as sorted keys and every type listed
//! (Evaluator too), addresses `<job>-<type>-<i>.<ns>.svc[.<domain>]:<port>`. With
//! `enableDynamicWorker` the sparse form: a worker sees itself and every PS, a PS only itself.
//! Not set at all when the job has a single replica in total.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{TENSORFLOW, TFJob, TFJobSpec};
use crate::operator::training::framework::{Placement, TrainingJob};

/// The environment variable the TensorFlow runtime reads.
pub const ENV_NAME: &str = "TF_CONFIG";

#[derive(Serialize)]
struct Task<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    index: i32,
}

#[derive(Serialize)]
struct Full<'a> {
    cluster: BTreeMap<String, Vec<String>>,
    task: Task<'a>,
    environment: &'static str,
}

#[derive(Serialize)]
struct SparseCluster {
    worker: BTreeMap<String, String>,
    ps: Vec<String>,
}

#[derive(Serialize)]
struct Sparse<'a> {
    cluster: SparseCluster,
    task: Task<'a>,
}

/// The TF_CONFIG value of one replica of a defaulted spec, or `None` when the job is not
/// distributed (one replica in total).
pub fn for_replica(
    spec: &TFJobSpec,
    placement: &Placement<'_>,
    rtype: &str,
    index: i32,
) -> Option<String> {
    let total: i32 = spec
        .tf_replica_specs
        .values()
        .map(|r| r.replicas.unwrap_or(1))
        .sum();
    if total == 1 {
        return None;
    }
    let cluster = cluster(spec, placement);
    let rtype = rtype.to_ascii_lowercase();
    let task = Task {
        type_: &rtype,
        index,
    };
    let value = if spec.enable_dynamic_worker == Some(true) {
        serde_json::to_string(&Sparse {
            cluster: sparse(&cluster, &rtype, index),
            task,
        })
    } else {
        serde_json::to_string(&Full {
            cluster,
            task,
            environment: "cloud",
        })
    };
    Some(value.expect("TF_CONFIG serialises"))
}

/// Every replica's address, by lower-case type.
fn cluster(spec: &TFJobSpec, placement: &Placement<'_>) -> BTreeMap<String, Vec<String>> {
    let domain = placement.cluster_domain.filter(|d| !d.is_empty());
    spec.tf_replica_specs
        .iter()
        .map(|(key, replica)| {
            let lower = TFJob::replica_type(key)
                .map_or_else(|| key.to_ascii_lowercase(), |t| t.lower().to_owned());
            let port = TENSORFLOW.port_of(replica);
            let addresses = (0..replica.replicas.unwrap_or(1).max(0))
                .map(|i| {
                    let mut host =
                        format!("{}-{lower}-{i}.{}.svc", placement.job, placement.namespace)
                            .replace('/', "-");
                    if let Some(domain) = domain {
                        host.push('.');
                        host.push_str(domain);
                    }
                    format!("{host}:{port}")
                })
                .collect();
            (lower, addresses)
        })
        .collect()
}

fn sparse(cluster: &BTreeMap<String, Vec<String>>, rtype: &str, index: i32) -> SparseCluster {
    let mut sparse = SparseCluster {
        worker: BTreeMap::new(),
        ps: Vec::new(),
    };
    let own = |t: &str| {
        cluster
            .get(t)
            .and_then(|a| a.get(usize::try_from(index).ok()?))
            .cloned()
    };
    if rtype == "ps" {
        sparse.ps.extend(own("ps"));
    } else if rtype == "worker" {
        sparse.ps = cluster.get("ps").cloned().unwrap_or_default();
        if let Some(address) = own("worker") {
            sparse.worker.insert(index.to_string(), address);
        }
    }
    sparse
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::job;
    use crate::operator::training::frameworks::tensorflow::PORT_NAME;

    fn placement() -> Placement<'static> {
        Placement {
            job: "mnist",
            namespace: "kubeflow",
            cluster_domain: None,
        }
    }

    fn defaulted(spec: TFJobSpec) -> TFJobSpec {
        let mut job = TFJob::new("mnist", spec);
        crate::operator::training::engine::defaults::apply(&mut job);
        job.spec
    }

    #[test]
    fn full_form_lists_every_type_sorted_with_namespace_and_port() {
        let spec = defaulted(
            job("mnist")
                .replica("Worker", 2)
                .replica("PS", 1)
                .replica("Chief", 1)
                .replica("Evaluator", 1)
                .spec,
        );
        let config = for_replica(&spec, &placement(), "Worker", 1).unwrap();
        assert_eq!(
            config,
            r#"{"cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],"evaluator":["mnist-evaluator-0.kubeflow.svc:2222"],"ps":["mnist-ps-0.kubeflow.svc:2222"],"worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}"#
        );
    }

    #[test]
    fn custom_cluster_domain_follows_svc() {
        let spec = defaulted(job("mnist").replica("Worker", 2).spec);
        let placement = Placement {
            cluster_domain: Some("cluster.local"),
            ..placement()
        };
        let config = for_replica(&spec, &placement, "Worker", 0).unwrap();
        assert!(
            config.contains(r#""mnist-worker-0.kubeflow.svc.cluster.local:2222""#),
            "{config}"
        );
    }

    #[test]
    fn not_set_for_a_single_replica() {
        let spec = defaulted(job("mnist").replica("Worker", 1).spec);
        assert_eq!(for_replica(&spec, &placement(), "Worker", 0), None);
    }

    #[test]
    fn set_when_replicas_sum_to_zero_or_more_than_one() {
        let spec = defaulted(job("mnist").replica("Worker", 1).replica("PS", 1).spec);
        assert!(for_replica(&spec, &placement(), "PS", 0).is_some());
    }

    #[test]
    fn port_comes_from_the_replica_types_tfjob_port() {
        let mut template = crate::operator::training::fixtures::worker_template();
        template.spec.as_mut().unwrap().containers[0].ports =
            Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                name: Some(PORT_NAME.into()),
                container_port: 3333,
                ..Default::default()
            }]);
        let spec = defaulted(
            job("mnist")
                .replica_with("PS", 1, template)
                .replica("Worker", 1)
                .spec,
        );
        let config = for_replica(&spec, &placement(), "Worker", 0).unwrap();
        assert!(
            config.contains(r#""ps":["mnist-ps-0.kubeflow.svc:3333"]"#),
            "{config}"
        );
        assert!(
            config.contains(r#""worker":["mnist-worker-0.kubeflow.svc:2222"]"#),
            "{config}"
        );
    }

    #[test]
    fn dynamic_worker_sees_itself_and_every_ps() {
        let mut spec = defaulted(job("mnist").replica("Worker", 3).replica("PS", 2).spec);
        spec.enable_dynamic_worker = Some(true);
        assert_eq!(
            for_replica(&spec, &placement(), "Worker", 2).unwrap(),
            r#"{"cluster":{"worker":{"2":"mnist-worker-2.kubeflow.svc:2222"},"ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"]},"task":{"type":"worker","index":2}}"#
        );
    }

    #[test]
    fn dynamic_ps_sees_only_itself() {
        let mut spec = defaulted(job("mnist").replica("Worker", 3).replica("PS", 2).spec);
        spec.enable_dynamic_worker = Some(true);
        assert_eq!(
            for_replica(&spec, &placement(), "PS", 1).unwrap(),
            r#"{"cluster":{"worker":{},"ps":["mnist-ps-1.kubeflow.svc:2222"]},"task":{"type":"ps","index":1}}"#
        );
    }
}
