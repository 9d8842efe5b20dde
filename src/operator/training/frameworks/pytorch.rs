//! PyTorch: `PyTorchJob`, run by `torchrun` (or plain `torch.distributed`).
//!
//! Replica types Master (at most one pod) and Worker; the `pytorch` container has a
//! `pytorchjob-port` (23456) and restarts `OnFailure` by default. Every container of every pod
//! gets the rendezvous environment, as training-operator v1.9 sets it:
//!
//! - always `PYTHONUNBUFFERED=1`;
//! - with a Master: `MASTER_ADDR` and `PET_MASTER_ADDR` (`{job}-master-0`), `MASTER_PORT` and
//!   `PET_MASTER_PORT` (the Master's port), `WORLD_SIZE` (pods × processes per node, `auto`
//!   counting 1), `RANK` and `PET_NODE_RANK` (the Master 0, worker `i` `i + 1`); workers also
//!   get an `init-pytorch` init container that waits until the Master's name resolves, its
//!   image `--pytorch-init-container-image` (default `alpine:3.10`);
//! - `PET_NPROC_PER_NODE` from `nprocPerNode` (default `auto`);
//! - without `elasticPolicy`, `PET_NNODES` is the number of pods; with it, `PET_NNODES` is
//!   `min:max`, plus `PET_RDZV_ENDPOINT` (`rdzvHost`, else `{job}-worker-0`, and `rdzvPort`,
//!   else the Worker's port), `PET_RDZV_BACKEND` (default `c10d`) and, when set,
//!   `PET_MAX_RESTARTS`, `PET_NPROC_PER_NODE`, `PET_RDZV_ID`, `PET_RDZV_CONF` (`k=v,k=v`) and
//!   `PET_STANDALONE`.
//!
//! The Master decides success when there is one; else every worker succeeding does, or with
//! `elasticPolicy` any one.
//!
//! With `elasticPolicy.metrics`, a HorizontalPodAutoscaler owned by the job scales its Workers
//! through the CRD's scale subresource, as upstream's does (see `autoscaler`).

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscalerSpec, MetricSpec,
};
use k8s_openapi::api::core::v1::{Container, EnvVar, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::operator::training::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::operator::training::framework::{
    Framework, Namespaced, Options, Placement, ReplicaType, TrainingJob, Wording, job_accessors,
};

pub const MASTER: ReplicaType = ReplicaType::new("Master", "master");
pub const WORKER: ReplicaType = ReplicaType::new("Worker", "worker");

/// The container the environment's ports are read from and whose ports the services expose.
pub const CONTAINER_NAME: &str = "pytorch";
/// The name of the port the replicas talk to each other on, and its default number.
pub const PORT_NAME: &str = "pytorchjob-port";
pub const DEFAULT_PORT: i32 = 23456;
/// `nprocPerNode` when neither it nor `elasticPolicy.nProcPerNode` is set.
pub const DEFAULT_NPROC_PER_NODE: &str = "auto";
/// The image of the init container that waits for the Master when the operator is given none
/// (`--pytorch-init-container-image`), and its tries: upstream's defaults.
pub const DEFAULT_INIT_IMAGE: &str = "alpine:3.10";
const INIT_TRIES: u32 = 100;

pub static PYTORCH: Framework = Framework {
    kind: "PyTorchJob",
    plural: "pytorchjobs",
    replica_specs_field: "pytorchReplicaSpecs",
    controller_name: "pytorchjob-controller",
    name: "pytorch",
    replica_types: &[MASTER, WORKER],
    container: CONTAINER_NAME,
    port_name: PORT_NAME,
    default_port: DEFAULT_PORT,
    default_restart_policy: RestartPolicy::OnFailure,
    environment_in_every_container: true,
    replica_columns: &[],
    status_selector: true,
    unindexed: &[],
    wording: Wording {
        namespaced: Namespaced::WithoutMaster,
        failing_kind: "PyTorchJob",
        tensorflow_failures: false,
    },
};

/// A PyTorch training job: a Master and Workers, or Workers alone (elastic), each run as
/// `replicas` pods with a headless service apiece.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PyTorchJob",
    plural = "pytorchjobs",
    singular = "pytorchjob",
    namespaced,
    status = "JobStatus",
    doc = "PyTorchJob runs a distributed PyTorch training job (a Master and Workers) as pods and \
           headless services, with the torch.distributed rendezvous environment injected.",
    scale(
        spec_replicas_path = ".spec.pytorchReplicaSpecs.Worker.replicas",
        status_replicas_path = ".status.replicaStatuses.Worker.active",
        label_selector_path = ".status.replicaStatuses.Worker.selector"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.elasticPolicy) || self.pytorchReplicaSpecs.exists(k, k.lowerAscii() == 'worker')",
        "message": "pytorchReplicaSpecs.Worker must be configured if elasticPolicy is used"
    },
    {
        "rule": "!has(self.elasticPolicy) || !has(self.elasticPolicy.nProcPerNode) || !has(self.nprocPerNode)",
        "message": "elasticPolicy.nProcPerNode must not be used with nprocPerNode"
    }
]))]
pub struct PyTorchJobSpec {
    /// Policies that apply to the whole job: cleanup, TTL, deadline, backoff, gang scheduling,
    /// suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// Elastic training with torchrun's rendezvous: the range of workers and how they meet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,

    /// The replica types, keyed `Master` (one pod at most) or `Worker` (any letter case).
    #[serde(rename = "pytorchReplicaSpecs")]
    #[schemars(extend(
        "maxProperties" = 2,
        "x-kubernetes-validations" = [
            {
                "rule": "self.all(k, k.lowerAscii() in ['master', 'worker'])",
                "message": "replica types are Master and Worker"
            },
            {
                "rule": "self.all(k, k.lowerAscii() != 'master' || !has(self[k].replicas) || self[k].replicas == 1)",
                "message": "Master replicas must be 1"
            },
            {
                "rule": "self.all(k, k.lowerAscii() != 'worker' || !has(self[k].replicas) || self[k].replicas >= 1)",
                "message": "Worker replicas must be at least 1"
            }
        ]
    ))]
    pub pytorch_replica_specs: BTreeMap<String, ReplicaSpec>,

    /// Processes per pod: a number, `auto`, `cpu` or `gpu` (default `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
}

/// torchrun's elastic rendezvous.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    /// The fewest workers (default: maxReplicas, else the Worker replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// The most workers (default: minReplicas, else the Worker replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// `c10d` (default), `etcd` or `etcd-v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["c10d", "etcd", "etcd-v2"]))]
    pub rdzv_backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_id: Option<String>,
    /// Extra rendezvous settings, passed as `key=value,key=value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_conf: Option<Vec<RdzvConf>>,
    /// A single-node rendezvous (`--standalone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<bool>,
    /// Deprecated upstream in favour of `spec.nprocPerNode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_proc_per_node: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// Autoscaling metrics (`autoscaling/v2` MetricSpecs): with them, a HorizontalPodAutoscaler
    /// named after the job scales its Workers between minReplicas and maxReplicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_list")]
    pub metrics: Option<Vec<serde_json::Value>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RdzvConf {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

fn preserved_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

impl TrainingJob for PyTorchJob {
    const FRAMEWORK: &'static Framework = &PYTORCH;

    job_accessors!(pytorch_replica_specs);

    /// The elastic range from whichever bound is set, else the Worker replicas; `nprocPerNode`
    /// `auto` unless the elastic policy sets its own.
    fn apply_defaults(&mut self) {
        let workers = self.replicas_of(WORKER);
        let spec = &mut self.spec;
        if let Some(elastic) = spec.elastic_policy.as_mut() {
            match (elastic.min_replicas, elastic.max_replicas) {
                (Some(_), Some(_)) => {}
                (None, Some(max)) => elastic.min_replicas = Some(max),
                (Some(min), None) => elastic.max_replicas = Some(min),
                (None, None) => {
                    elastic.min_replicas = workers;
                    elastic.max_replicas = workers;
                }
            }
        }
        let elastic_nproc = spec
            .elastic_policy
            .as_ref()
            .is_some_and(|e| e.n_proc_per_node.is_some());
        if !elastic_nproc {
            spec.nproc_per_node
                .get_or_insert_with(|| DEFAULT_NPROC_PER_NODE.to_owned());
        }
    }

    fn succeeded(&self, status: &JobStatus) -> bool {
        let done = |t: ReplicaType| {
            status
                .replica_statuses
                .get(t.key())
                .map_or(0, |r| r.succeeded)
        };
        if let Some(masters) = self.replicas_of(MASTER) {
            return done(MASTER) >= masters;
        }
        let Some(workers) = self.replicas_of(WORKER) else {
            return false;
        };
        done(WORKER) >= workers || (self.spec.elastic_policy.is_some() && done(WORKER) > 0)
    }

    const AUTOSCALES: bool = true;

    /// Upstream's: named after the job, `minReplicas` and `maxReplicas` from the (defaulted)
    /// policy, the metrics as written, scaling the job's Workers.
    fn autoscaler(&self) -> Option<Result<HorizontalPodAutoscalerSpec, String>> {
        let elastic = self.spec.elastic_policy.as_ref()?;
        let metrics = elastic.metrics.as_ref()?;
        Some(autoscaler_spec(self, elastic, metrics))
    }

    fn running(&self, status: &JobStatus) -> bool {
        let leader = if self.replicas_of(MASTER).is_some() {
            MASTER
        } else {
            WORKER
        };
        status
            .replica_statuses
            .get(leader.key())
            .is_some_and(|r| r.active > 0)
    }

    /// The Master, else worker 0 when the job has none (upstream's `IsMasterRole`: its SDK
    /// finds an elastic job's logs by this label).
    fn is_master_role(&self, rtype: ReplicaType, index: i32) -> bool {
        if self.replicas().any(|(t, _)| t == MASTER) {
            return rtype == MASTER;
        }
        rtype == WORKER && index == 0
    }

    fn environment(&self, rtype: ReplicaType, index: i32, _: &Placement<'_>) -> Vec<EnvVar> {
        let mut env = vec![var("PYTHONUNBUFFERED", "1")];
        let pods: i32 = self.replicas().map(|(_, r)| r.replicas.unwrap_or(1)).sum();
        if self.replicas_of(MASTER).is_some() {
            let address = format!(
                "{}-master-0",
                self.metadata.name.as_deref().unwrap_or_default()
            );
            let port = self.port_of(MASTER).to_string();
            let nproc = self
                .spec
                .nproc_per_node
                .as_deref()
                .and_then(|n| n.parse::<i32>().ok())
                .unwrap_or(1);
            let rank = if rtype == WORKER { index + 1 } else { index };
            env.extend([
                var("MASTER_PORT", &port),
                var("PET_MASTER_PORT", &port),
                var("MASTER_ADDR", &address),
                var("PET_MASTER_ADDR", &address),
                var("WORLD_SIZE", &(pods * nproc).to_string()),
                var("RANK", &rank.to_string()),
                var("PET_NODE_RANK", &rank.to_string()),
            ]);
        }
        if let Some(nproc) = &self.spec.nproc_per_node {
            env.push(var("PET_NPROC_PER_NODE", nproc));
        }
        match &self.spec.elastic_policy {
            Some(elastic) => env.extend(self.elastic_environment(elastic)),
            None => env.push(var("PET_NNODES", &pods.to_string())),
        }
        env
    }

    fn init_containers(
        &self,
        rtype: ReplicaType,
        _index: i32,
        options: &Options,
    ) -> Vec<Container> {
        if rtype != WORKER || self.replicas_of(MASTER).is_none() {
            return Vec::new();
        }
        let master = format!(
            "{}-master-0",
            self.metadata.name.as_deref().unwrap_or_default()
        );
        let quantities = |cpu: &str, memory: &str| {
            BTreeMap::from([
                ("cpu".to_owned(), Quantity(cpu.to_owned())),
                ("memory".to_owned(), Quantity(memory.to_owned())),
            ])
        };
        vec![Container {
            name: "init-pytorch".to_owned(),
            image: Some(
                options
                    .pytorch_init_image
                    .as_deref()
                    .unwrap_or(DEFAULT_INIT_IMAGE)
                    .to_owned(),
            ),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            command: Some(vec![
                "sh".to_owned(),
                "-c".to_owned(),
                format!(
                    "err=1;for i in $(seq {INIT_TRIES}); do if nslookup {master}; then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"
                ),
            ]),
            resources: Some(ResourceRequirements {
                limits: Some(quantities("100m", "20Mi")),
                requests: Some(quantities("50m", "10Mi")),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }]
    }
}

impl PyTorchJob {
    fn elastic_environment(&self, elastic: &ElasticPolicy) -> Vec<EnvVar> {
        let host = elastic.rdzv_host.clone().unwrap_or_else(|| {
            format!(
                "{}-worker-0",
                self.metadata.name.as_deref().unwrap_or_default()
            )
        });
        let port = elastic.rdzv_port.unwrap_or_else(|| self.port_of(WORKER));
        let nnodes = match (elastic.min_replicas, elastic.max_replicas) {
            (Some(min), Some(max)) => format!("{min}:{max}"),
            _ => self.replicas_of(WORKER).unwrap_or(0).to_string(),
        };
        let mut env = vec![
            var("PET_RDZV_ENDPOINT", &format!("{host}:{port}")),
            var(
                "PET_RDZV_BACKEND",
                elastic.rdzv_backend.as_deref().unwrap_or("c10d"),
            ),
            var("PET_NNODES", &nnodes),
        ];
        if let Some(max) = elastic.max_restarts {
            env.push(var("PET_MAX_RESTARTS", &max.to_string()));
        }
        if let Some(nproc) = elastic.n_proc_per_node {
            env.push(var("PET_NPROC_PER_NODE", &nproc.to_string()));
        }
        if let Some(id) = &elastic.rdzv_id {
            env.push(var("PET_RDZV_ID", id));
        }
        if let Some(conf) = elastic.rdzv_conf.as_ref().filter(|c| !c.is_empty()) {
            let pairs: Vec<String> = conf
                .iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c.key.as_deref().unwrap_or_default(),
                        c.value.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            env.push(var("PET_RDZV_CONF", &pairs.join(",")));
        }
        if elastic.standalone == Some(true) {
            env.push(var("PET_STANDALONE", ""));
        }
        env
    }
}

/// The autoscaler's spec, or why the policy cannot be honoured: a metric the autoscaling API
/// would refuse (a `type` without its source), or bounds the other way round.
fn autoscaler_spec(
    job: &PyTorchJob,
    elastic: &ElasticPolicy,
    metrics: &[serde_json::Value],
) -> Result<HorizontalPodAutoscalerSpec, String> {
    let metrics = metrics
        .iter()
        .enumerate()
        .map(|(i, metric)| {
            let parsed: MetricSpec = serde_json::from_value(metric.clone())
                .map_err(|e| format!("elasticPolicy.metrics[{i}] is not a metric: {e}"))?;
            let has_source = match parsed.type_.as_str() {
                "Resource" => parsed.resource.is_some(),
                "Pods" => parsed.pods.is_some(),
                "Object" => parsed.object.is_some(),
                "External" => parsed.external.is_some(),
                "ContainerResource" => parsed.container_resource.is_some(),
                other => {
                    return Err(format!(
                        "elasticPolicy.metrics[{i}] has type {other:?}: one of Resource, Pods, Object, External, ContainerResource"
                    ));
                }
            };
            if !has_source {
                return Err(format!(
                    "elasticPolicy.metrics[{i}] has type {} but no {} field",
                    parsed.type_,
                    source_field(&parsed.type_)
                ));
            }
            Ok(parsed)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (min, max) = (elastic.min_replicas, elastic.max_replicas.unwrap_or(1));
    if max < 1 || min.is_some_and(|min| min < 1 || min > max) {
        return Err(format!(
            "elasticPolicy needs 1 <= minReplicas <= maxReplicas for an autoscaler, not {} and {max}",
            min.map_or("unset".to_owned(), |m| m.to_string())
        ));
    }
    Ok(HorizontalPodAutoscalerSpec {
        scale_target_ref: CrossVersionObjectReference {
            api_version: Some("kubeflow.org/v1".to_owned()),
            kind: PYTORCH.kind.to_owned(),
            name: job.metadata.name.clone().unwrap_or_default(),
        },
        min_replicas: min,
        max_replicas: max,
        metrics: Some(metrics),
        behavior: None,
    })
}

/// The field of a metric that its `type` names: `Resource` is `resource`, and so on.
fn source_field(type_: &str) -> String {
    let mut chars = type_.chars();
    chars
        .next()
        .map(|first| first.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::engine::{build, defaults};
    use serde_json::json;

    /// A PyTorchJob as the API server hands it over, defaulted as reconcile does.
    fn job(spec: serde_json::Value) -> PyTorchJob {
        let mut job: PyTorchJob = serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": { "name": "mnist", "namespace": "ns", "uid": "u" },
            "spec": spec
        }))
        .expect("a PyTorchJob");
        defaults::apply(&mut job);
        job
    }

    fn replica(replicas: i32) -> serde_json::Value {
        json!({ "replicas": replicas, "template": { "spec": { "containers": [
            { "name": "pytorch", "image": "pytorch:1" },
            { "name": "sidecar", "image": "busybox" }
        ] } } })
    }

    /// The environment of one container of a replica's pod, as (name, value).
    fn env(
        job: &PyTorchJob,
        rtype: ReplicaType,
        index: i32,
        container: usize,
    ) -> Vec<(String, String)> {
        let pod = build::pod(job, rtype, index, &build::Options::default());
        pod.spec.unwrap().containers[container]
            .env
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn elastic_metrics_ask_for_upstreams_autoscaler_or_say_why_not() {
        let elastic = |policy: serde_json::Value| {
            job(json!({ "elasticPolicy": policy, "pytorchReplicaSpecs": { "Worker": replica(2) } }))
        };
        let cpu = json!({ "type": "Resource", "resource": { "name": "cpu",
            "target": { "type": "Utilization", "averageUtilization": 80 } } });
        assert!(elastic(json!({ "maxReplicas": 3 })).autoscaler().is_none());
        let spec = elastic(json!({ "maxReplicas": 3, "metrics": [cpu] }))
            .autoscaler()
            .unwrap()
            .unwrap();
        assert_eq!((spec.min_replicas, spec.max_replicas), (Some(3), 3));
        assert_eq!(spec.scale_target_ref.name, "mnist");
        assert_eq!(serde_json::to_value(&spec.metrics).unwrap(), json!([cpu]));
        let refused = |policy| elastic(policy).autoscaler().unwrap().unwrap_err();
        assert_eq!(
            refused(json!({ "metrics": [{ "type": "Pods" }] })),
            "elasticPolicy.metrics[0] has type Pods but no pods field"
        );
        assert!(refused(json!({ "metrics": [{ "type": "Cpu" }] })).contains("one of Resource"));
        assert!(
            refused(json!({ "minReplicas": 4, "maxReplicas": 2, "metrics": [cpu] }))
                .contains("minReplicas <= maxReplicas")
        );
        assert!(
            job(json!({ "pytorchReplicaSpecs": { "Worker": replica(2) } }))
                .autoscaler()
                .is_none()
        );
    }

    #[test]
    fn the_master_leads_else_worker_0() {
        let led =
            job(json!({ "pytorchReplicaSpecs": { "Master": replica(1), "Worker": replica(2) } }));
        assert!(led.is_master_role(MASTER, 0));
        assert!(!led.is_master_role(WORKER, 0));
        let elastic = job(json!({ "pytorchReplicaSpecs": { "Worker": replica(2) } }));
        assert!(elastic.is_master_role(WORKER, 0));
        assert!(!elastic.is_master_role(WORKER, 1));
    }

    #[test]
    fn master_and_workers_get_upstreams_environment_in_every_container() {
        let job =
            job(json!({ "pytorchReplicaSpecs": { "Master": replica(1), "Worker": replica(2) } }));
        let worker = pairs(&[
            ("PYTHONUNBUFFERED", "1"),
            ("MASTER_PORT", "23456"),
            ("PET_MASTER_PORT", "23456"),
            ("MASTER_ADDR", "mnist-master-0"),
            ("PET_MASTER_ADDR", "mnist-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", "2"),
            ("PET_NODE_RANK", "2"),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_NNODES", "3"),
        ]);
        assert_eq!(env(&job, WORKER, 1, 0), worker);
        assert_eq!(env(&job, WORKER, 1, 1), worker, "the sidecar too");
        let master = env(&job, MASTER, 0, 0);
        assert!(master.contains(&("RANK".into(), "0".into())), "{master:?}");
    }

    #[test]
    fn workers_wait_for_the_master_in_an_init_container() {
        let job =
            job(json!({ "pytorchReplicaSpecs": { "Master": replica(1), "Worker": replica(1) } }));
        let pod = build::pod(&job, WORKER, 0, &build::Options::default());
        let init = pod.spec.unwrap().init_containers.unwrap();
        assert_eq!(init[0].name, "init-pytorch");
        assert!(init[0].command.as_ref().unwrap()[2].contains("nslookup mnist-master-0"));
        let master = build::pod(&job, MASTER, 0, &build::Options::default());
        assert!(master.spec.unwrap().init_containers.is_none());
    }

    /// A cluster that cannot pull `alpine:3.10` (air-gapped, or behind a mirror) could not run a
    /// PyTorchJob with a Master: the image was fixed in the code.
    #[test]
    fn regression_the_init_container_image_is_the_operators_setting() {
        let job =
            job(json!({ "pytorchReplicaSpecs": { "Master": replica(1), "Worker": replica(1) } }));
        let image = |options: &build::Options| {
            let pod = build::pod(&job, WORKER, 0, options);
            pod.spec.unwrap().init_containers.unwrap()[0].image.clone()
        };
        assert_eq!(
            image(&build::Options::default()).as_deref(),
            Some(DEFAULT_INIT_IMAGE)
        );
        let mirrored = build::Options {
            pytorch_init_image: Some("mirror.internal/library/alpine:3.19".into()),
            ..build::Options::default()
        };
        assert_eq!(
            image(&mirrored).as_deref(),
            Some("mirror.internal/library/alpine:3.19")
        );
    }

    #[test]
    fn a_numeric_nproc_per_node_multiplies_the_world_size() {
        let job = job(
            json!({ "nprocPerNode": "4", "pytorchReplicaSpecs": { "Master": replica(1), "Worker": replica(1) } }),
        );
        let env = env(&job, WORKER, 0, 0);
        assert!(env.contains(&("WORLD_SIZE".into(), "8".into())), "{env:?}");
        assert!(
            env.contains(&("PET_NPROC_PER_NODE".into(), "4".into())),
            "{env:?}"
        );
    }

    #[test]
    fn elastic_workers_get_the_rendezvous_environment() {
        let job = job(json!({
            "elasticPolicy": {
                "minReplicas": 1, "maxReplicas": 3, "maxRestarts": 5, "rdzvId": "r",
                "rdzvConf": [{ "key": "a", "value": "1" }, { "key": "b", "value": "2" }]
            },
            "pytorchReplicaSpecs": { "Worker": replica(2) }
        }));
        assert_eq!(
            env(&job, WORKER, 1, 0),
            pairs(&[
                ("PYTHONUNBUFFERED", "1"),
                ("PET_NPROC_PER_NODE", "auto"),
                ("PET_RDZV_ENDPOINT", "mnist-worker-0:23456"),
                ("PET_RDZV_BACKEND", "c10d"),
                ("PET_NNODES", "1:3"),
                ("PET_MAX_RESTARTS", "5"),
                ("PET_RDZV_ID", "r"),
                ("PET_RDZV_CONF", "a=1,b=2"),
            ])
        );
    }

    #[test]
    fn elastic_bounds_default_to_each_other_else_to_the_workers() {
        let only_max = job(
            json!({ "elasticPolicy": { "maxReplicas": 4 }, "pytorchReplicaSpecs": { "Worker": replica(2) } }),
        );
        let elastic = only_max.spec.elastic_policy.unwrap();
        assert_eq!(
            (elastic.min_replicas, elastic.max_replicas),
            (Some(4), Some(4))
        );
        let neither =
            job(json!({ "elasticPolicy": {}, "pytorchReplicaSpecs": { "Worker": replica(2) } }));
        let elastic = neither.spec.elastic_policy.unwrap();
        assert_eq!(
            (elastic.min_replicas, elastic.max_replicas),
            (Some(2), Some(2))
        );
    }

    #[test]
    fn defaults_are_on_failure_and_the_pytorchjob_port() {
        let job = job(json!({ "pytorchReplicaSpecs": { "worker": replica(1) } }));
        let worker = &job.spec.pytorch_replica_specs["Worker"];
        assert_eq!(worker.restart_policy, Some(RestartPolicy::OnFailure));
        let service = build::service(&job, WORKER, 0);
        let port = &service.spec.unwrap().ports.unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some(PORT_NAME), DEFAULT_PORT)
        );
        assert_eq!(job.spec.nproc_per_node.as_deref(), Some("auto"));
    }
}
