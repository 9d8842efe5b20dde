//! The pods and headless services of a job, and the spec of its gang-scheduling PodGroup (with
//! whether an existing group needs updating), built from its (defaulted) spec. Pure.
//!
//! A pod and its service share the name `{job}-{type}-{index}`; the name is deterministic, so
//! creating one that exists fails with AlreadyExists instead of making a duplicate. That, not
//! bookkeeping, is what guarantees one pod per replica across operator restarts and racing
//! replicas.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{EnvVar, Pod, PodSpec, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use super::quantity::Amount;
use crate::operator::training::api::RestartPolicy;
use crate::operator::training::framework::{Framework, Placement, ReplicaType, TrainingJob};
/// The settings that shape the pods, and the name a pod and its service share, live with the
/// trait the frameworks implement, which takes them; the engine builds with them.
pub use crate::operator::training::framework::{Options, name};

/// Its value is the framework's controller name (`tfjob-controller`).
pub const LABEL_OPERATOR: &str = "training.kubeflow.org/operator-name";
pub const LABEL_JOB_NAME: &str = "training.kubeflow.org/job-name";
pub const LABEL_REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";
pub const LABEL_REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";
pub const LABEL_JOB_ROLE: &str = "training.kubeflow.org/job-role";

/// Gang-scheduling annotations and labels (Volcano, scheduler-plugins).
pub const ANNOTATION_VOLCANO_GROUP: &str = "scheduling.k8s.io/group-name";
pub const ANNOTATION_VOLCANO_TASK: &str = "volcano.sh/task-spec";
pub const LABEL_SCHEDULER_PLUGINS_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// The `--gang-scheduler` name that means Volcano; any other means scheduler-plugins.
pub const GANG_VOLCANO: &str = "volcano";

/// Warning event reasons for pod template settings the operator overrides or keeps (upstream's).
pub const REASON_TEMPLATE_RESTART_POLICY: &str = "SetPodTemplateRestartPolicy";
pub const REASON_TEMPLATE_SCHEDULER_NAME: &str = "SetPodTemplateSchedulerName";

/// The labels every pod and service of a job carries.
pub fn job_labels(framework: &Framework, job: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            LABEL_OPERATOR.to_owned(),
            framework.controller_name.to_owned(),
        ),
        (LABEL_JOB_NAME.to_owned(), job.to_owned()),
    ])
}

/// The labels of one replica: the job's plus type and index (no index for a type the
/// framework leaves `unindexed`).
pub fn replica_labels(
    framework: &Framework,
    job: &str,
    rtype: ReplicaType,
    index: i32,
) -> BTreeMap<String, String> {
    let mut labels = type_labels(framework, job, rtype);
    if !framework.unindexed.contains(&rtype) {
        labels.insert(LABEL_REPLICA_INDEX.to_owned(), index.to_string());
    }
    labels
}

/// The labels of a replica type's pods: the job's plus the type.
pub fn type_labels(
    framework: &Framework,
    job: &str,
    rtype: ReplicaType,
) -> BTreeMap<String, String> {
    let mut labels = job_labels(framework, job);
    labels.insert(LABEL_REPLICA_TYPE.to_owned(), rtype.lower().to_owned());
    labels
}

/// The label selector, as a string, of a replica type's pods.
pub fn selector(framework: &Framework, job: &str, rtype: ReplicaType) -> String {
    type_labels(framework, job, rtype)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The controller owner reference pods and services carry.
pub fn owner_reference<J: TrainingJob>(job: &J) -> OwnerReference {
    let mut owner = job
        .controller_owner_ref(&())
        .unwrap_or_else(|| OwnerReference {
            api_version: J::api_version(&()).into_owned(),
            kind: J::kind(&()).into_owned(),
            name: job.name_any(),
            uid: job.uid().unwrap_or_default(),
            ..OwnerReference::default()
        });
    owner.controller = Some(true);
    owner.block_owner_deletion = Some(true);
    owner
}

/// The pod of replica `index` of type `rtype`.
pub fn pod<J: TrainingJob>(job: &J, rtype: ReplicaType, index: i32, options: &Options) -> Pod {
    let job_name = job.name_any();
    let namespace = job.namespace().unwrap_or_default();
    let replica = job.replica_spec(rtype).cloned().unwrap_or_default();
    let template = replica.template.clone();
    let template_meta = template.metadata.unwrap_or_default();

    let mut labels = pod_labels(job, &job_name, rtype, index, template_meta.labels);
    let mut annotations = template_meta.annotations.unwrap_or_default();

    let mut spec = template.spec.unwrap_or_default();
    spec.restart_policy = Some(pod_restart_policy(replica.restart_policy).to_owned());

    let placement = Placement {
        job: &job_name,
        namespace: &namespace,
        cluster_domain: options.cluster_domain.as_deref(),
    };
    inject_environment(job, rtype, index, &placement, &mut spec);
    let init = job.init_containers(rtype, index, options);
    if !init.is_empty() {
        spec.init_containers
            .get_or_insert_with(Vec::new)
            .extend(init);
    }

    job.finish_pod(rtype, index, &mut spec);

    if let Some(scheduler) = options.gang_scheduler.as_deref() {
        gang(
            &mut spec,
            &mut labels,
            &mut annotations,
            scheduler,
            &job_name,
            rtype,
        );
    }

    Pod {
        metadata: ObjectMeta {
            name: Some(job.pod_name(rtype, index)),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// A pod's labels: its template's, then the replica's (which win), and the master role.
fn pod_labels<J: TrainingJob>(
    job: &J,
    job_name: &str,
    rtype: ReplicaType,
    index: i32,
    template_labels: Option<BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut labels = template_labels.unwrap_or_default();
    labels.extend(replica_labels(J::FRAMEWORK, job_name, rtype, index));
    if job.is_master_role(rtype, index) {
        labels.insert(LABEL_JOB_ROLE.to_owned(), "master".to_owned());
    }
    labels
}

/// Put the environment the framework gives this replica into the framework's container, or
/// into every container for a framework that wants it there.
fn inject_environment<J: TrainingJob>(
    job: &J,
    rtype: ReplicaType,
    index: i32,
    placement: &Placement<'_>,
    spec: &mut PodSpec,
) {
    let environment = job.environment(rtype, index, placement);
    if environment.is_empty() {
        return;
    }
    let every = J::FRAMEWORK.environment_in_every_container;
    for container in spec
        .containers
        .iter_mut()
        .filter(|c| every || c.name == J::FRAMEWORK.container)
    {
        inject(container.env.get_or_insert_with(Vec::new), &environment);
    }
}

/// Set each of `environment` in `env`, replacing a variable of the same name.
fn inject(env: &mut Vec<EnvVar>, environment: &[EnvVar]) {
    env.retain(|e| !environment.iter().any(|wanted| wanted.name == e.name));
    env.extend_from_slice(environment);
}

/// The pod `restartPolicy` of a replica: the ReplicaSpec's, with `ExitCode` (which the kubelet
/// does not know) as `Never`.
fn pod_restart_policy(policy: Option<RestartPolicy>) -> &'static str {
    match policy.unwrap_or(RestartPolicy::Never) {
        RestartPolicy::Always => "Always",
        RestartPolicy::OnFailure => "OnFailure",
        RestartPolicy::Never | RestartPolicy::ExitCode => "Never",
    }
}

/// A pod template setting that `pod` overrides, or keeps against the operator's wish: worth a
/// Warning event on the job, since the pod will not be what the template says (or what gang
/// scheduling needs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateWarning {
    pub reason: &'static str,
    pub message: String,
}

/// The warnings for the pods of replica type `rtype`: its template sets a `restartPolicy` other
/// than the ReplicaSpec's (which wins), or, with a gang scheduler, a `schedulerName` other than
/// the gang scheduler's (which is kept, so the pod is not gang-scheduled).
///
/// Upstream warns whenever the template sets a restartPolicy at all, and about the scheduler
/// when no replica type names the gang scheduler; this warns only when the setting differs
/// from what the pod gets, and names the replica type and both values.
pub fn template_warnings<J: TrainingJob>(
    job: &J,
    rtype: ReplicaType,
    options: &Options,
) -> Vec<TemplateWarning> {
    let Some(replica) = job.replica_spec(rtype) else {
        return Vec::new();
    };
    let Some(template) = replica.template.spec.as_ref() else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let wanted = pod_restart_policy(replica.restart_policy);
    if let Some(own) = template.restart_policy.as_deref().filter(|p| !p.is_empty())
        && own != wanted
    {
        warnings.push(TemplateWarning {
            reason: REASON_TEMPLATE_RESTART_POLICY,
            message: format!(
                "Restart policy {own} in the pod template of {} is overwritten by the replica spec: the pods get {wanted}",
                rtype.lower()
            ),
        });
    }
    if let Some(scheduler) = options.gang_scheduler.as_deref()
        && let Some(own) = template.scheduler_name.as_deref().filter(|s| !s.is_empty())
        && own != scheduler
    {
        warnings.push(TemplateWarning {
            reason: REASON_TEMPLATE_SCHEDULER_NAME,
            message: format!(
                "Scheduler {own} in the pod template of {} is kept, so these pods are not gang-scheduled by {scheduler}",
                rtype.lower()
            ),
        });
    }
    warnings
}

fn gang(
    spec: &mut PodSpec,
    labels: &mut BTreeMap<String, String>,
    annotations: &mut BTreeMap<String, String>,
    scheduler: &str,
    job: &str,
    rtype: ReplicaType,
) {
    // An empty name is no choice: the API server would default it to default-scheduler.
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some(scheduler.to_owned());
    }
    if scheduler == GANG_VOLCANO {
        annotations.insert(ANNOTATION_VOLCANO_GROUP.to_owned(), job.to_owned());
        annotations.insert(ANNOTATION_VOLCANO_TASK.to_owned(), rtype.lower().to_owned());
    } else {
        labels.insert(LABEL_SCHEDULER_PLUGINS_GROUP.to_owned(), job.to_owned());
    }
}

/// The API group, version and kind of the PodGroup the gang scheduler reads: Volcano's for
/// `volcano`, scheduler-plugins' for any other name.
pub fn pod_group_gvk(scheduler: &str) -> (&'static str, &'static str, &'static str) {
    if scheduler == GANG_VOLCANO {
        ("scheduling.volcano.sh", "v1beta1", "PodGroup")
    } else {
        ("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
    }
}

/// The spec of the job's PodGroup: `minMember` is `schedulingPolicy.minAvailable`, else every
/// replica of every type; `minResources` is `schedulingPolicy.minResources`, else what those
/// pods request (see [`pod_group_min_resources`]); Volcano also gets a queue (`default` unless
/// set) and a priority class, scheduler-plugins the schedule timeout.
///
/// These are the only fields the operator sets ([`pod_group_outdated`] compares them).
pub fn pod_group_spec<J: TrainingJob>(job: &J, scheduler: &str) -> serde_json::Value {
    let policy = job
        .run_policy()
        .and_then(|r| r.scheduling_policy.clone())
        .unwrap_or_default();
    let total: i32 = job
        .replica_specs()
        .values()
        .map(|r| r.replicas.unwrap_or(1).max(0))
        .sum();
    let min_member = policy.min_available.unwrap_or(total);
    let mut spec = serde_json::json!({ "minMember": min_member });
    match &policy.min_resources {
        Some(resources) => spec["minResources"] = serde_json::json!(resources),
        None => {
            let computed = pod_group_min_resources(job, min_member);
            if !computed.is_empty() {
                spec["minResources"] = serde_json::json!(computed);
            }
        }
    }
    if scheduler == GANG_VOLCANO {
        spec["queue"] = serde_json::json!(policy.queue.as_deref().unwrap_or("default"));
        if let Some(class) = &policy.priority_class {
            spec["priorityClassName"] = serde_json::json!(class);
        }
    } else if let Some(timeout) = policy.schedule_timeout_seconds {
        spec["scheduleTimeoutSeconds"] = serde_json::json!(timeout);
    }
    spec
}

/// What the first `min_member` pods of the job need to be scheduled, for a PodGroup whose job
/// does not set `schedulingPolicy.minResources`: the gang scheduler admits the group only when
/// its queue has that much room. Each pod counts, per resource and container, the request, or
/// the limit where the container has no request for that resource (the API server defaults a
/// missing request to the limit).
///
/// Which pods are "first": upstream sorts the replica types by the value of their pod
/// template's PriorityClass, highest first, reading the PriorityClass objects, and leaves ties
/// in Go's random map order. This does not read PriorityClasses (a cluster read, and RBAC for a
/// cluster-scoped kind, only to order a sum): every type ranks equal, in the fixed order of
/// the framework's `replica_types` (those training cannot start without first), so the result is the same on every reconcile. Init containers are
/// not counted, as upstream does not count them. Upstream falls back to limits only for a
/// container with no requests at all; here the fallback is per resource, as the API server's
/// defaulting is.
///
/// A resource with a value that is not a quantity is left out rather than guessed: the pod
/// built from that template is rejected by the API server, which says why.
pub fn pod_group_min_resources<J: TrainingJob>(
    job: &J,
    min_member: i32,
) -> BTreeMap<String, Quantity> {
    let mut totals: BTreeMap<String, Amount> = BTreeMap::new();
    let mut unknown: BTreeSet<String> = BTreeSet::new();
    let mut left = min_member.max(0);
    for &rtype in J::FRAMEWORK.replica_types {
        let Some(replica) = job.replica_spec(rtype) else {
            continue;
        };
        let pods = replica.replicas.unwrap_or(1).clamp(0, left);
        left -= pods;
        if pods == 0 {
            continue;
        }
        let containers = replica.template.spec.iter().flat_map(|s| &s.containers);
        for resources in containers.filter_map(|c| c.resources.as_ref()) {
            let requests = resources.requests.as_ref();
            let limits = resources.limits.as_ref();
            let names: BTreeSet<&String> = requests
                .into_iter()
                .chain(limits)
                .flat_map(BTreeMap::keys)
                .collect();
            for name in names {
                let value = requests
                    .and_then(|r| r.get(name))
                    .or_else(|| limits.and_then(|l| l.get(name)));
                let sum = value
                    .and_then(|q| Amount::try_from(q).ok())
                    .and_then(|per_pod| per_pod.checked_mul(i128::from(pods)))
                    .and_then(|amount| {
                        totals
                            .get(name.as_str())
                            .copied()
                            .unwrap_or(Amount::ZERO)
                            .checked_add(amount)
                    });
                match sum {
                    Some(sum) => {
                        totals.insert(name.clone(), sum);
                    }
                    None => {
                        unknown.insert(name.clone());
                    }
                }
            }
        }
    }
    totals
        .into_iter()
        .filter(|(name, _)| !unknown.contains(name))
        .map(|(name, amount)| (name, amount.to_quantity()))
        .collect()
}

/// The top-level `spec` fields of an object that `manager` owns by server-side apply, read
/// from its managed fields: applying again without one of them removes it.
pub fn applied_spec_fields(meta: &ObjectMeta, manager: &str) -> BTreeSet<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry.manager.as_deref() == Some(manager)
                && entry.operation.as_deref() == Some("Apply")
                && entry.subresource.as_deref().is_none_or(str::is_empty)
        })
        .filter_map(|entry| entry.fields_v1.as_ref()?.0.get("f:spec")?.as_object())
        .flat_map(|spec| spec.keys())
        .filter_map(|key| key.strip_prefix("f:"))
        .map(str::to_owned)
        .collect()
}

/// Whether an existing PodGroup's `spec` has to be applied again to become `wanted` (from
/// [`pod_group_spec`]): a field the operator sets differs, or a field it applied before
/// (`applied`, from [`applied_spec_fields`]) is no longer wanted. Fields others set are left
/// alone, and so are not compared.
pub fn pod_group_outdated(
    existing: &serde_json::Value,
    wanted: &serde_json::Value,
    applied: &BTreeSet<String>,
) -> bool {
    let Some(wanted) = wanted.as_object() else {
        return false;
    };
    let changed = wanted
        .iter()
        .any(|(field, value)| existing.get(field) != Some(value));
    let dropped = applied
        .iter()
        .any(|field| !wanted.contains_key(field) && existing.get(field).is_some());
    changed || dropped
}

/// Whether the job's pods may be created, given its PodGroup's `status.phase`. Volcano admits
/// a group by moving it out of `Pending`; pods created before that would sit unschedulable
/// (or, worse, be partly scheduled), so upstream waits. scheduler-plugins needs no wait.
pub fn pod_group_admits_pods(scheduler: &str, phase: Option<&str>) -> bool {
    scheduler != GANG_VOLCANO || !matches!(phase, None | Some("" | "Pending"))
}

/// The headless service of replica `index` of type `rtype`: every named port of the
/// framework's container, selected by the replica's four labels.
pub fn service<J: TrainingJob>(job: &J, rtype: ReplicaType, index: i32) -> Service {
    let job_name = job.name_any();
    let replica = job.replica_spec(rtype);
    let ports: Vec<ServicePort> = replica
        .and_then(|r| r.template.spec.as_ref())
        .iter()
        .flat_map(|pod| &pod.containers)
        .filter(|c| c.name == J::FRAMEWORK.container)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(ServicePort {
                name: Some(p.name.clone()?),
                port: p.container_port,
                ..ServicePort::default()
            })
        })
        .collect();
    let labels = replica_labels(J::FRAMEWORK, &job_name, rtype, index);
    Service {
        metadata: ObjectMeta {
            name: Some(name(&job_name, rtype, index)),
            namespace: job.namespace(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            selector: Some(labels),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::job;
    use crate::operator::training::frameworks::tensorflow::{CHIEF, PS, TFJob, WORKER};

    #[test]
    fn pod_has_upstream_name_labels_owner_and_restart_policy() {
        let job = job("mnist")
            .replica("Worker", 2)
            .replica("PS", 1)
            .restart("Worker", RestartPolicy::ExitCode)
            .build();
        let pod = pod(&job, WORKER, 1, &Options::default());
        assert_eq!(pod.metadata.name.as_deref(), Some("mnist-worker-1"));
        let labels = pod.metadata.labels.unwrap();
        assert_eq!(labels[LABEL_OPERATOR], "tfjob-controller");
        assert_eq!(labels[LABEL_JOB_NAME], "mnist");
        assert_eq!(labels[LABEL_REPLICA_TYPE], "worker");
        assert_eq!(labels[LABEL_REPLICA_INDEX], "1");
        assert!(!labels.contains_key(LABEL_JOB_ROLE));
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("TFJob", Some(true), Some(true))
        );
        assert_eq!(pod.spec.unwrap().restart_policy.as_deref(), Some("Never"));
    }

    #[test]
    fn job_role_master_goes_to_worker_zero_without_a_chief_and_to_the_chief_with_one() {
        let workers_only = job("a").replica("Worker", 2).build();
        let role = |job: &TFJob, t, i| {
            pod(job, t, i, &Options::default())
                .metadata
                .labels
                .unwrap()
                .get(LABEL_JOB_ROLE)
                .cloned()
        };
        assert_eq!(role(&workers_only, WORKER, 0).as_deref(), Some("master"));
        let with_chief = job("b").replica("Chief", 1).replica("Worker", 2).build();
        assert_eq!(role(&with_chief, WORKER, 0), None);
        assert_eq!(role(&with_chief, CHIEF, 0).as_deref(), Some("master"));
    }

    #[test]
    fn tf_config_goes_only_into_the_tensorflow_container() {
        let mut template = crate::operator::training::fixtures::worker_template();
        template
            .spec
            .as_mut()
            .unwrap()
            .containers
            .push(k8s_openapi::api::core::v1::Container {
                name: "sidecar".into(),
                ..Default::default()
            });
        let job = job("mnist").replica_with("Worker", 2, template).build();
        let spec = pod(&job, WORKER, 0, &Options::default()).spec.unwrap();
        let env = |i: usize| spec.containers[i].env.clone().unwrap_or_default();
        assert_eq!(env(0)[0].name, "TF_CONFIG");
        assert!(env(1).is_empty());
    }

    #[test]
    fn service_is_headless_with_the_tensorflow_ports() {
        let job = job("mnist").replica("PS", 1).replica("Worker", 1).build();
        let service = service(&job, PS, 0);
        let spec = service.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        let ports = spec.ports.unwrap();
        assert_eq!(
            (ports[0].name.as_deref(), ports[0].port),
            (Some("tfjob-port"), 2222)
        );
        assert_eq!(spec.selector.unwrap().len(), 4);
    }

    #[test]
    fn volcano_gang_annotations() {
        let job = job("mnist").replica("Worker", 2).build();
        let options = Options {
            gang_scheduler: Some("volcano".into()),
            ..Options::default()
        };
        let pod = pod(&job, WORKER, 0, &options);
        let annotations = pod.metadata.annotations.unwrap();
        assert_eq!(annotations[ANNOTATION_VOLCANO_GROUP], "mnist");
        assert_eq!(annotations[ANNOTATION_VOLCANO_TASK], "worker");
        assert_eq!(pod.spec.unwrap().scheduler_name.as_deref(), Some("volcano"));
    }

    fn gang(scheduler: &str) -> Options {
        Options {
            gang_scheduler: Some(scheduler.into()),
            ..Options::default()
        }
    }

    fn template_with(
        change: impl FnOnce(&mut PodSpec),
    ) -> k8s_openapi::api::core::v1::PodTemplateSpec {
        let mut template = crate::operator::training::fixtures::worker_template();
        change(template.spec.as_mut().unwrap());
        template
    }

    fn reasons(warnings: &[TemplateWarning]) -> Vec<&'static str> {
        warnings.iter().map(|w| w.reason).collect()
    }

    #[test]
    fn scheduler_plugins_gang_label_and_scheduler_name() {
        let job = job("mnist").replica("Worker", 2).build();
        let pod = pod(&job, WORKER, 1, &gang("scheduler-plugins"));
        assert_eq!(
            pod.metadata.labels.unwrap()[LABEL_SCHEDULER_PLUGINS_GROUP],
            "mnist"
        );
        assert_eq!(pod.metadata.annotations, None);
        assert_eq!(
            pod.spec.unwrap().scheduler_name.as_deref(),
            Some("scheduler-plugins")
        );
    }

    #[test]
    fn a_template_restart_policy_other_than_the_replica_specs_is_overwritten_with_a_warning() {
        let template = template_with(|s| s.restart_policy = Some("OnFailure".into()));
        let job = job("j")
            .replica_with("Worker", 2, template)
            .restart("Worker", RestartPolicy::ExitCode)
            .build();
        let built = pod(&job, WORKER, 0, &Options::default());
        assert_eq!(built.spec.unwrap().restart_policy.as_deref(), Some("Never"));
        let warnings = template_warnings(&job, WORKER, &Options::default());
        assert_eq!(reasons(&warnings), [REASON_TEMPLATE_RESTART_POLICY]);
        assert!(warnings[0].message.contains("OnFailure"), "{warnings:?}");
        assert!(warnings[0].message.contains("worker"), "{warnings:?}");
    }

    #[test]
    fn a_template_restart_policy_equal_to_the_replica_specs_or_unset_is_no_warning() {
        let same = template_with(|s| s.restart_policy = Some("Never".into()));
        let job = job("j")
            .replica_with("Worker", 1, same)
            .replica("PS", 1)
            .build();
        for rtype in [WORKER, PS] {
            assert_eq!(template_warnings(&job, rtype, &Options::default()), []);
        }
    }

    #[test]
    fn a_template_scheduler_name_other_than_the_gang_scheduler_is_kept_with_a_warning() {
        let template = template_with(|s| s.scheduler_name = Some("my-scheduler".into()));
        let job = job("j").replica_with("Worker", 2, template).build();
        let options = gang("volcano");
        let built = pod(&job, WORKER, 0, &options);
        assert_eq!(
            built.spec.unwrap().scheduler_name.as_deref(),
            Some("my-scheduler")
        );
        let warnings = template_warnings(&job, WORKER, &options);
        assert_eq!(reasons(&warnings), [REASON_TEMPLATE_SCHEDULER_NAME]);
        assert!(warnings[0].message.contains("my-scheduler"), "{warnings:?}");
        // Without a gang scheduler the template's scheduler is simply used.
        assert_eq!(template_warnings(&job, WORKER, &Options::default()), []);
    }

    #[test]
    fn an_empty_or_matching_template_scheduler_name_gets_the_gang_scheduler_without_a_warning() {
        for name in ["", "volcano"] {
            let template = template_with(|s| s.scheduler_name = Some(name.into()));
            let job = job("j").replica_with("Worker", 1, template).build();
            let options = gang("volcano");
            let built = pod(&job, WORKER, 0, &options);
            assert_eq!(
                built.spec.unwrap().scheduler_name.as_deref(),
                Some("volcano")
            );
            assert_eq!(template_warnings(&job, WORKER, &options), []);
        }
    }

    #[test]
    fn pod_group_min_member_is_min_available_else_every_replica() {
        let all = job("j").replica("Worker", 2).replica("PS", 1).build();
        assert_eq!(pod_group_spec(&all, "volcano")["minMember"], 3);
        let some = job("j")
            .replica("Worker", 2)
            .replica("PS", 1)
            .run_policy(|r| {
                r.scheduling_policy = Some(crate::operator::training::api::SchedulingPolicy {
                    min_available: Some(2),
                    schedule_timeout_seconds: Some(30),
                    ..Default::default()
                })
            })
            .build();
        let volcano = pod_group_spec(&some, "volcano");
        assert_eq!(
            (&volcano["minMember"], &volcano["queue"]),
            (&serde_json::json!(2), &serde_json::json!("default"))
        );
        assert!(volcano.get("scheduleTimeoutSeconds").is_none());
        let plugins = pod_group_spec(&some, "scheduler-plugins");
        assert_eq!(plugins["scheduleTimeoutSeconds"], 30);
        assert!(plugins.get("queue").is_none());
    }

    /// A template whose `tensorflow` container has these requests and limits.
    fn resources(
        requests: &[(&str, &str)],
        limits: &[(&str, &str)],
    ) -> k8s_openapi::api::core::v1::PodTemplateSpec {
        let map = |pairs: &[(&str, &str)]| {
            (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        template_with(|s| {
            s.containers[0].resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                requests: map(requests),
                limits: map(limits),
                ..Default::default()
            });
        })
    }

    fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    fn min_available(n: i32) -> impl FnOnce(&mut crate::operator::training::api::RunPolicy) {
        move |r| {
            r.scheduling_policy = Some(crate::operator::training::api::SchedulingPolicy {
                min_available: Some(n),
                ..Default::default()
            })
        }
    }

    #[test]
    fn pod_group_min_resources_sum_the_requests_of_the_first_min_member_pods() {
        let worker = || resources(&[("cpu", "500m"), ("memory", "1Gi")], &[]);
        let ps = || resources(&[("cpu", "1"), ("memory", "512Mi")], &[]);
        let chief = || resources(&[("cpu", "2")], &[]);
        let evaluator = || resources(&[("nvidia.com/gpu", "1")], &[]);
        let cases = [
            (
                "every pod, by default",
                job("j")
                    .replica_with("Worker", 2, worker())
                    .replica_with("PS", 1, ps())
                    .build(),
                &[("cpu", "2"), ("memory", "2560Mi")][..],
            ),
            (
                "PS before workers",
                job("j")
                    .replica_with("Worker", 2, worker())
                    .replica_with("PS", 1, ps())
                    .run_policy(min_available(2))
                    .build(),
                &[("cpu", "1500m"), ("memory", "1536Mi")],
            ),
            (
                "the chief first, the evaluator last",
                job("j")
                    .replica_with("Evaluator", 1, evaluator())
                    .replica_with("Worker", 3, worker())
                    .replica_with("Chief", 1, chief())
                    .run_policy(min_available(3))
                    .build(),
                &[("cpu", "3"), ("memory", "2Gi")],
            ),
            (
                "minAvailable past the replicas takes every pod",
                job("j")
                    .replica_with("Worker", 1, worker())
                    .run_policy(min_available(5))
                    .build(),
                &[("cpu", "500m"), ("memory", "1Gi")],
            ),
            (
                "minAvailable 0 takes none",
                job("j")
                    .replica_with("Worker", 1, worker())
                    .run_policy(min_available(0))
                    .build(),
                &[],
            ),
            (
                "templates without resources ask for nothing",
                job("j").replica("Worker", 2).build(),
                &[],
            ),
        ];
        for (case, job, expected) in cases {
            let min_member = pod_group_spec(&job, "volcano")["minMember"]
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .unwrap();
            assert_eq!(
                pod_group_min_resources(&job, min_member),
                quantities(expected),
                "{case}"
            );
        }
    }

    #[test]
    fn pod_group_min_resources_fall_back_to_the_limit_per_resource() {
        let template = resources(&[("cpu", "250m")], &[("cpu", "1"), ("memory", "2Gi")]);
        let job = job("j").replica_with("Worker", 2, template).build();
        assert_eq!(
            pod_group_min_resources(&job, 2),
            quantities(&[("cpu", "500m"), ("memory", "4Gi")])
        );
    }

    #[test]
    fn pod_group_min_resources_sum_every_container_of_a_pod() {
        let mut template = resources(&[("cpu", "1")], &[]);
        let spec = template.spec.as_mut().unwrap();
        let mut sidecar = spec.containers[0].clone();
        sidecar.name = "sidecar".into();
        sidecar.resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
            requests: Some(quantities(&[("cpu", "100m"), ("memory", "64Mi")])),
            ..Default::default()
        });
        spec.containers.push(sidecar);
        let job = job("j").replica_with("Worker", 2, template).build();
        assert_eq!(
            pod_group_min_resources(&job, 2),
            quantities(&[("cpu", "2200m"), ("memory", "128Mi")])
        );
    }

    #[test]
    fn pod_group_min_resources_leave_out_a_resource_that_is_not_a_quantity() {
        let template = resources(&[("cpu", "lots"), ("memory", "1Gi")], &[]);
        let job = job("j").replica_with("Worker", 1, template).build();
        assert_eq!(
            pod_group_min_resources(&job, 1),
            quantities(&[("memory", "1Gi")])
        );
    }

    #[test]
    fn pod_group_spec_computes_min_resources_unless_the_user_set_them() {
        let template = resources(&[("cpu", "500m")], &[]);
        let computed = job("j").replica_with("Worker", 2, template.clone()).build();
        assert_eq!(
            pod_group_spec(&computed, "scheduler-plugins")["minResources"],
            serde_json::json!({ "cpu": "1" })
        );
        let set = job("j")
            .replica_with("Worker", 2, template)
            .run_policy(|r| {
                r.scheduling_policy = Some(crate::operator::training::api::SchedulingPolicy {
                    min_resources: Some(quantities(&[("cpu", "8")])),
                    ..Default::default()
                })
            })
            .build();
        assert_eq!(
            pod_group_spec(&set, "volcano")["minResources"],
            serde_json::json!({ "cpu": "8" })
        );
        let nothing = job("j").replica("Worker", 2).build();
        assert!(
            pod_group_spec(&nothing, "volcano")
                .get("minResources")
                .is_none()
        );
    }

    fn fields(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_pod_group_is_outdated_when_a_field_the_operator_sets_differs() {
        let wanted = serde_json::json!({ "minMember": 3, "queue": "default", "minResources": { "cpu": "1" } });
        let applied = fields(&["minMember", "queue", "minResources"]);
        let same = serde_json::json!({ "minMember": 3, "queue": "default", "minResources": { "cpu": "1" } });
        assert!(!pod_group_outdated(&same, &wanted, &applied));
        let others_field = serde_json::json!({ "minMember": 3, "queue": "default", "minResources": { "cpu": "1" }, "minTaskMember": { "worker": 1 } });
        assert!(
            !pod_group_outdated(&others_field, &wanted, &applied),
            "fields others set are not compared"
        );
        for changed in [
            serde_json::json!({ "minMember": 2, "queue": "default", "minResources": { "cpu": "1" } }),
            serde_json::json!({ "minMember": 3, "queue": "other", "minResources": { "cpu": "1" } }),
            serde_json::json!({ "minMember": 3, "queue": "default", "minResources": { "cpu": "2" } }),
            serde_json::json!({ "minMember": 3, "queue": "default" }),
            serde_json::Value::Null,
        ] {
            assert!(pod_group_outdated(&changed, &wanted, &applied), "{changed}");
        }
    }

    #[test]
    fn a_pod_group_is_outdated_when_a_field_the_operator_applied_is_no_longer_wanted() {
        let wanted = serde_json::json!({ "minMember": 3, "queue": "default" });
        let existing =
            serde_json::json!({ "minMember": 3, "queue": "default", "priorityClassName": "high" });
        assert!(pod_group_outdated(
            &existing,
            &wanted,
            &fields(&["minMember", "queue", "priorityClassName"])
        ));
        // Someone else's priority class is theirs to keep.
        assert!(!pod_group_outdated(
            &existing,
            &wanted,
            &fields(&["minMember", "queue"])
        ));
    }

    #[test]
    fn applied_spec_fields_are_the_operators_apply_entries_only() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let entry =
            |manager: &str, operation: &str, subresource: Option<&str>, spec: serde_json::Value| {
                ManagedFieldsEntry {
                    manager: Some(manager.into()),
                    operation: Some(operation.into()),
                    subresource: subresource.map(Into::into),
                    fields_type: Some("FieldsV1".into()),
                    fields_v1: Some(FieldsV1(
                        serde_json::json!({ "f:metadata": {}, "f:spec": spec }),
                    )),
                    ..Default::default()
                }
            };
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                entry(
                    "mlkube-operator",
                    "Apply",
                    None,
                    serde_json::json!({ "f:minMember": {}, "f:minResources": { "f:cpu": {} } }),
                ),
                entry(
                    "mlkube-operator",
                    "Update",
                    None,
                    serde_json::json!({ "f:queue": {} }),
                ),
                entry(
                    "someone",
                    "Apply",
                    None,
                    serde_json::json!({ "f:minTaskMember": {} }),
                ),
                entry(
                    "mlkube-operator",
                    "Apply",
                    Some("status"),
                    serde_json::json!({ "f:phase": {} }),
                ),
            ]),
            ..ObjectMeta::default()
        };
        assert_eq!(
            applied_spec_fields(&meta, "mlkube-operator"),
            fields(&["minMember", "minResources"])
        );
        assert!(applied_spec_fields(&ObjectMeta::default(), "mlkube-operator").is_empty());
    }

    #[test]
    fn volcano_pods_wait_for_the_pod_group_to_leave_pending() {
        for phase in [None, Some(""), Some("Pending")] {
            assert!(!pod_group_admits_pods("volcano", phase), "{phase:?}");
            assert!(
                pod_group_admits_pods("scheduler-plugins", phase),
                "{phase:?}"
            );
        }
        for phase in ["Inqueue", "Running", "Unknown"] {
            assert!(pod_group_admits_pods("volcano", Some(phase)), "{phase}");
        }
    }
}
