//! What an MPIJob's Launcher needs to start processes on its Workers: the job's ConfigMap (the
//! hostfile, `kubexec.sh`, `discover_hosts.sh`), its ServiceAccount, Role and RoleBinding, the
//! `kubectl-delivery` init container, the variables MPI reads, and the volumes that bring
//! them into the pods. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, KeyToPath, PodSpec,
    ResourceRequirements, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::{LAUNCHER, MPIImplementation, MPIJob, WORKER};
use crate::operator::training::engine::build;
use crate::operator::training::framework::{Companion, CompanionKind, TrainingJob, env_var};

/// Where the ConfigMap is mounted, in the Launcher and the Workers.
pub const CONFIG_DIR: &str = "/etc/mpi";
/// Where the init container puts `kubectl`, for `kubexec.sh`.
pub const KUBECTL_DIR: &str = "/opt/kube";
pub const HOSTFILE: &str = "hostfile";
pub const KUBEXEC: &str = "kubexec.sh";
pub const DISCOVER_HOSTS: &str = "discover_hosts.sh";
const CONFIG_VOLUME: &str = "mpi-job-config";
const KUBECTL_VOLUME: &str = "mpi-job-kubectl";
const SCRIPT_MODE: i32 = 0o555;
const HOSTFILE_MODE: i32 = 0o444;

/// `<job>-config`.
pub fn config_map_name(job: &MPIJob) -> String {
    format!("{}-config", job.job_name())
}

/// `<job>-launcher`: the Launcher pod, and its Role and RoleBinding.
pub fn launcher_name(job: &MPIJob) -> String {
    format!("{}-launcher", job.job_name())
}

/// The ServiceAccount the Launcher runs as: its template's, else `<job>-launcher`.
fn service_account(job: &MPIJob) -> (String, bool) {
    let own = job
        .replica_spec(LAUNCHER)
        .and_then(|r| r.template.spec.as_ref())
        .and_then(|pod| pod.service_account_name.clone())
        .filter(|name| !name.is_empty());
    match own {
        Some(name) => (name, false),
        None => (launcher_name(job), true),
    }
}

/// The Workers' pod names, in index order.
fn worker_names(job: &MPIJob) -> Vec<String> {
    (0..job.replicas_of(WORKER).unwrap_or(0).max(0))
        .map(|index| job.pod_name(WORKER, index))
        .collect()
}

/// The hosts and their slots, one line each: `host slots=N` for Open MPI, `host:N` for Hydra
/// (Intel MPI, MPICH). The Launcher comes first when it runs processes too.
pub fn hostfile(job: &MPIJob) -> String {
    let slots = job.slots();
    let hydra = matches!(
        job.spec.mpi_implementation,
        Some(MPIImplementation::Intel | MPIImplementation::MPICH)
    );
    let launcher = job.launcher_runs_processes().then(|| launcher_name(job));
    launcher
        .into_iter()
        .chain(worker_names(job))
        .map(|host| {
            if hydra {
                format!("{host}:{slots}\n")
            } else {
                format!("{host} slots={slots}\n")
            }
        })
        .collect()
}

/// The remote shell MPI calls as `kubexec.sh <pod> <command...>`: the command, in the pod's
/// main container, through the Launcher's `kubectl`.
pub fn kubexec(job: &MPIJob) -> String {
    let container = job
        .spec
        .main_container
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| format!(" --container={c}"))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n\
         # MPI's remote shell: kubexec.sh POD COMMAND... runs COMMAND in POD.\n\
         pod=\"$1\"\n\
         shift\n\
         exec {KUBECTL_DIR}/kubectl exec \"$pod\"{container} -- /bin/sh -c \"$*\"\n"
    )
}

/// Horovod elastic's host discovery: every host with its slots, `host:N` a line.
pub fn discover_hosts(job: &MPIJob) -> String {
    let slots = job.slots();
    let launcher = job.launcher_runs_processes().then(|| launcher_name(job));
    let mut script = "#!/bin/sh\n".to_owned();
    for host in launcher.into_iter().chain(worker_names(job)) {
        script.push_str(&format!("echo {host}:{slots}\n"));
    }
    script
}

/// The variables MPI reads in the Launcher's first container, in order. `own` is what the
/// template sets: Hydra's bootstrap variables it sets are kept, as upstream keeps them.
pub fn launcher_environment(job: &MPIJob, own: &[EnvVar]) -> Vec<EnvVar> {
    let kubexec = format!("{CONFIG_DIR}/{KUBEXEC}");
    let hostfile = format!("{CONFIG_DIR}/{HOSTFILE}");
    let unless_set = |name: &str, value: &str| {
        (!own.iter().any(|e| e.name == name)).then(|| env_var(name, value))
    };
    let open_mpi = || {
        vec![
            env_var("OMPI_MCA_plm_rsh_agent", &kubexec),
            env_var("OMPI_MCA_orte_default_hostfile", &hostfile),
        ]
    };
    let intel_bootstrap = || {
        [
            unless_set("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
            unless_set("I_MPI_HYDRA_BOOTSTRAP_EXEC", &kubexec),
        ]
        .into_iter()
        .flatten()
    };
    // Upstream's: the Launcher must not take a GPU it did not ask for.
    let no_gpu = || {
        (!job.launcher_has_gpu())
            .then(|| {
                [
                    env_var("NVIDIA_VISIBLE_DEVICES", ""),
                    env_var("NVIDIA_DRIVER_CAPABILITIES", ""),
                ]
            })
            .into_iter()
            .flatten()
    };
    match job.spec.mpi_implementation {
        None => open_mpi()
            .into_iter()
            .chain(no_gpu())
            .chain(intel_bootstrap())
            .collect(),
        Some(MPIImplementation::OpenMPI) => open_mpi().into_iter().chain(no_gpu()).collect(),
        Some(MPIImplementation::Intel) => intel_bootstrap()
            .chain([env_var("I_MPI_HYDRA_HOST_FILE", &hostfile)])
            .chain(no_gpu())
            .collect(),
        Some(MPIImplementation::MPICH) => [
            unless_set("HYDRA_LAUNCHER", "rsh"),
            unless_set("HYDRA_LAUNCHER_EXEC", &kubexec),
        ]
        .into_iter()
        .flatten()
        .chain([env_var("HYDRA_HOST_FILE", &hostfile)])
        .chain(no_gpu())
        .collect(),
    }
}

/// The Launcher's init container: it puts `kubectl` into the volume `kubexec.sh` runs it from.
///
/// It asks for upstream's CPU and memory, not for upstream's 5Gi of ephemeral storage: copying
/// one binary does not need it, and on nodes that report no ephemeral storage (kwok's) the
/// request leaves the Launcher unschedulable.
pub fn kubectl_delivery(job: &MPIJob, image: &str) -> Container {
    let amounts = BTreeMap::from([
        ("cpu".to_owned(), Quantity("100m".to_owned())),
        ("memory".to_owned(), Quantity("512Mi".to_owned())),
    ]);
    Container {
        name: "kubectl-delivery".to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        env: Some(vec![
            env_var("TARGET_DIR", KUBECTL_DIR),
            env_var("NAMESPACE", job.namespace().unwrap_or_default()),
        ]),
        volume_mounts: Some(vec![
            mount(KUBECTL_VOLUME, KUBECTL_DIR),
            mount(CONFIG_VOLUME, CONFIG_DIR),
        ]),
        resources: Some(ResourceRequirements {
            limits: Some(amounts.clone()),
            requests: Some(amounts),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

fn mount(volume: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: volume.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

/// The ConfigMap volume with these of its files, each with its mode.
fn config_volume(job: &MPIJob, files: &[(&str, i32)]) -> Volume {
    Volume {
        name: CONFIG_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(job),
            items: Some(
                files
                    .iter()
                    .map(|&(file, mode)| KeyToPath {
                        key: file.to_owned(),
                        path: file.to_owned(),
                        mode: Some(mode),
                    })
                    .collect(),
            ),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The Launcher's pod: its ServiceAccount, and in its first container MPI's variables, the
/// ConfigMap and `kubectl`.
pub fn finish_launcher(job: &MPIJob, spec: &mut PodSpec) {
    if spec
        .service_account_name
        .as_deref()
        .is_none_or(str::is_empty)
    {
        spec.service_account_name = Some(launcher_name(job));
    }
    if let Some(container) = spec.containers.first_mut() {
        let env = container.env.get_or_insert_with(Vec::new);
        let wanted = launcher_environment(job, env);
        env.retain(|e| !wanted.iter().any(|w| w.name == e.name));
        env.extend(wanted);
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .extend([
                mount(KUBECTL_VOLUME, KUBECTL_DIR),
                mount(CONFIG_VOLUME, CONFIG_DIR),
            ]);
    }
    spec.volumes.get_or_insert_with(Vec::new).extend([
        Volume {
            name: KUBECTL_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
        config_volume(
            job,
            &[
                (KUBEXEC, SCRIPT_MODE),
                (HOSTFILE, HOSTFILE_MODE),
                (DISCOVER_HOSTS, SCRIPT_MODE),
            ],
        ),
    ]);
}

/// A Worker's pod: without a command its first container sleeps (the Launcher's processes
/// arrive by exec), and it mounts `kubexec.sh`, whose path Open MPI checks on every host.
pub fn finish_worker(job: &MPIJob, spec: &mut PodSpec) {
    if let Some(container) = spec.containers.first_mut() {
        if container.command.as_ref().is_none_or(Vec::is_empty) {
            container.command = Some(vec!["sleep".to_owned()]);
            container.args = Some(vec!["365d".to_owned()]);
        }
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(mount(CONFIG_VOLUME, CONFIG_DIR));
    }
    spec.volumes
        .get_or_insert_with(Vec::new)
        .push(config_volume(job, &[(KUBEXEC, SCRIPT_MODE)]));
}

/// The metadata of a companion: its name, the job's namespace, upstream's `app` label, the
/// operator's label (by which the operator's watch selects it), and the job as its controller.
fn meta(job: &MPIJob, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: job.namespace(),
        labels: Some(BTreeMap::from([
            ("app".to_owned(), job.job_name().to_owned()),
            (
                build::LABEL_OPERATOR.to_owned(),
                MPIJob::FRAMEWORK.controller_name.to_owned(),
            ),
        ])),
        owner_references: Some(vec![build::owner_reference(job)]),
        ..ObjectMeta::default()
    }
}

/// The Launcher's Role: `get` and exec on the job's Workers, by name, and nothing else (no
/// rule at all without Workers: a rule without names would cover every pod).
pub fn launcher_role(job: &MPIJob) -> Role {
    let workers = worker_names(job);
    let rule = |resource: &str, verb: &str| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.to_owned()]),
        resource_names: Some(workers.clone()),
        verbs: vec![verb.to_owned()],
        ..PolicyRule::default()
    };
    Role {
        metadata: meta(job, launcher_name(job)),
        rules: Some(if workers.is_empty() {
            Vec::new()
        } else {
            vec![rule("pods", "get"), rule("pods/exec", "create")]
        }),
    }
}

/// The ConfigMap, the Launcher's ServiceAccount (unless its template names one), Role and
/// RoleBinding.
pub fn companions(job: &MPIJob) -> Vec<Companion> {
    let companion =
        |kind, name: String, object: serde_json::Value| Companion { kind, name, object };
    let config_map = ConfigMap {
        metadata: meta(job, config_map_name(job)),
        data: Some(BTreeMap::from([
            (HOSTFILE.to_owned(), hostfile(job)),
            (KUBEXEC.to_owned(), kubexec(job)),
            (DISCOVER_HOSTS.to_owned(), discover_hosts(job)),
        ])),
        ..ConfigMap::default()
    };
    let mut companions = vec![companion(
        CompanionKind::ConfigMap,
        config_map_name(job),
        serde_json::to_value(config_map).expect("a ConfigMap serialises"),
    )];
    let (account, ours) = service_account(job);
    if ours {
        let service_account = ServiceAccount {
            metadata: meta(job, account.clone()),
            ..ServiceAccount::default()
        };
        companions.push(companion(
            CompanionKind::ServiceAccount,
            account.clone(),
            serde_json::to_value(service_account).expect("a ServiceAccount serialises"),
        ));
    }
    companions.push(companion(
        CompanionKind::Role,
        launcher_name(job),
        serde_json::to_value(launcher_role(job)).expect("a Role serialises"),
    ));
    let binding = RoleBinding {
        metadata: meta(job, launcher_name(job)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: launcher_name(job),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: account,
            namespace: job.namespace(),
            ..Subject::default()
        }]),
    };
    companions.push(companion(
        CompanionKind::RoleBinding,
        launcher_name(job),
        serde_json::to_value(binding).expect("a RoleBinding serialises"),
    ));
    companions
}
