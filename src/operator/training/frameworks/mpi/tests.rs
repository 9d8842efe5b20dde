use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::launcher::{self, discover_hosts, hostfile, kubexec, launcher_environment};
use super::*;
use crate::operator::training::api::CleanPodPolicy;
use crate::operator::training::engine::build;
use crate::operator::training::framework::{CompanionKind, Outcome, env_var};
use crate::operator::training::frameworks::test_support::{
    active, defaulted, env_of, status_with, succeeded,
};

const EXAMPLE: &str = include_str!("../../../../../examples/mpi/tensorflow-mnist.yaml");
const ELASTIC: &str = include_str!("../../../../../examples/mpi/tensorflow-mnist-elastic.yaml");

/// Upstream's example, in the namespace `kubeflow`, as reconcile sees it.
fn example() -> MPIJob {
    let mut job: MPIJob = defaulted(EXAMPLE);
    job.metadata.namespace = Some("kubeflow".into());
    job
}

fn with(change: impl FnOnce(&mut MPIJobSpec)) -> MPIJob {
    let mut job = example();
    change(&mut job.spec);
    job
}

fn pod(job: &MPIJob, rtype: ReplicaType, index: i32) -> Pod {
    build::pod(job, rtype, index, &Options::default())
}

fn spec_of(pod: &Pod) -> &PodSpec {
    pod.spec.as_ref().unwrap()
}

#[test]
fn the_hostfile_lists_each_worker_with_its_slots_in_each_implementations_form() {
    let open_mpi = "tensorflow-mnist-worker-0 slots=1\ntensorflow-mnist-worker-1 slots=1\n";
    assert_eq!(hostfile(&example()), open_mpi);
    assert_eq!(
        hostfile(&with(
            |s| s.mpi_implementation = Some(MPIImplementation::OpenMPI)
        )),
        open_mpi
    );
    for hydra in [MPIImplementation::Intel, MPIImplementation::MPICH] {
        let job = with(|s| {
            s.mpi_implementation = Some(hydra);
            s.slots_per_worker = Some(4);
        });
        assert_eq!(
            hostfile(&job),
            "tensorflow-mnist-worker-0:4\ntensorflow-mnist-worker-1:4\n",
            "{hydra:?}"
        );
    }
    let eight = with(|s| s.slots_per_worker = Some(8));
    assert_eq!(
        hostfile(&eight),
        "tensorflow-mnist-worker-0 slots=8\ntensorflow-mnist-worker-1 slots=8\n"
    );
}

#[test]
fn the_launcher_is_a_host_too_when_it_runs_as_a_worker_or_asks_for_a_gpu() {
    let as_worker = with(|s| s.run_launcher_as_worker = Some(true));
    assert_eq!(
        hostfile(&as_worker),
        "tensorflow-mnist-launcher slots=1\ntensorflow-mnist-worker-0 slots=1\ntensorflow-mnist-worker-1 slots=1\n"
    );
    assert_eq!(
        discover_hosts(&as_worker),
        "#!/bin/sh\necho tensorflow-mnist-launcher:1\necho tensorflow-mnist-worker-0:1\necho tensorflow-mnist-worker-1:1\n"
    );
    let gpu = |run_as_worker| {
        let mut job = with(|s| s.run_launcher_as_worker = run_as_worker);
        let launcher = job.spec.mpi_replica_specs.get_mut("Launcher").unwrap();
        let container = &mut launcher.template.spec.as_mut().unwrap().containers[0];
        let limits = container
            .resources
            .as_mut()
            .unwrap()
            .limits
            .as_mut()
            .unwrap();
        limits.insert("nvidia.com/gpu".into(), Quantity("1".into()));
        job
    };
    assert!(hostfile(&gpu(None)).starts_with("tensorflow-mnist-launcher slots=1\n"));
    assert!(!hostfile(&gpu(Some(false))).contains("launcher"));
    let env = launcher_environment(&gpu(None), &[]);
    assert!(
        !env.iter().any(|e| e.name.starts_with("NVIDIA_")),
        "{env:?}"
    );
}

#[test]
fn workers_default_to_none_and_the_launcher_is_then_alone() {
    let mut job: MPIJob = serde_yaml::from_str(EXAMPLE).unwrap();
    job.spec
        .mpi_replica_specs
        .get_mut("Worker")
        .unwrap()
        .replicas = None;
    crate::operator::training::engine::defaults::apply(&mut job);
    assert_eq!(job.replicas_of(WORKER), Some(0));
    assert_eq!(job.replicas_of(LAUNCHER), Some(1));
    assert_eq!(hostfile(&job), "");
    assert!(!job.holds_back(LAUNCHER, &JobStatus::default()));
    // A rule without resource names would cover every pod of the namespace.
    assert_eq!(launcher::launcher_role(&job).rules, Some(Vec::new()));
}

#[test]
fn kubexec_runs_the_command_in_the_named_pod_and_main_container() {
    let script = kubexec(&example());
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains("exec /opt/kube/kubectl exec \"$pod\" -- /bin/sh -c \"$*\"\n"),
        "{script}"
    );
    let main = kubexec(&with(|s| s.main_container = Some("trainer".into())));
    assert!(
        main.contains("kubectl exec \"$pod\" --container=trainer -- "),
        "{main}"
    );
}

#[test]
fn the_launcher_gets_upstreams_variables_in_upstreams_order() {
    assert_eq!(
        env_of(&launcher_environment(&example(), &[])),
        [
            ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
            ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
            ("NVIDIA_VISIBLE_DEVICES", ""),
            ("NVIDIA_DRIVER_CAPABILITIES", ""),
            ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
        ]
    );
}

#[test]
fn each_implementation_gets_its_own_variables() {
    let env = |implementation| {
        let job = with(|s| s.mpi_implementation = Some(implementation));
        launcher_environment(&job, &[])
            .into_iter()
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .filter(|(name, _)| !name.starts_with("NVIDIA_"))
            .collect::<Vec<_>>()
    };
    let pairs = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        env(MPIImplementation::OpenMPI),
        pairs(&[
            ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
            ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ])
    );
    assert_eq!(
        env(MPIImplementation::Intel),
        pairs(&[
            ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
            ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
        ])
    );
    assert_eq!(
        env(MPIImplementation::MPICH),
        pairs(&[
            ("HYDRA_LAUNCHER", "rsh"),
            ("HYDRA_LAUNCHER_EXEC", "/etc/mpi/kubexec.sh"),
            ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
        ])
    );
}

#[test]
fn a_bootstrap_the_template_sets_is_kept_and_the_rest_replaced() {
    let mut job = example();
    let launcher = job.spec.mpi_replica_specs.get_mut("Launcher").unwrap();
    launcher.template.spec.as_mut().unwrap().containers[0].env = Some(vec![
        env_var("I_MPI_HYDRA_BOOTSTRAP", "ssh"),
        env_var("OMPI_MCA_plm_rsh_agent", "ssh"),
        env_var("EPOCHS", "3"),
    ]);
    let pod = pod(&job, LAUNCHER, 0);
    let env = spec_of(&pod).containers[0].env.clone().unwrap();
    let env = env_of(&env);
    assert_eq!(env[0], ("I_MPI_HYDRA_BOOTSTRAP", "ssh"));
    assert_eq!(env[1], ("EPOCHS", "3"));
    assert_eq!(env[2], ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"));
    assert_eq!(
        env.iter()
            .filter(|(n, _)| n.starts_with("I_MPI_HYDRA_BOOTSTRAP"))
            .count(),
        2
    );
}

#[test]
fn the_launcher_pod_runs_as_its_account_with_kubectl_and_the_config() {
    let job = example();
    let pod = pod(&job, LAUNCHER, 0);
    assert_eq!(
        pod.metadata.name.as_deref(),
        Some("tensorflow-mnist-launcher")
    );
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[build::LABEL_REPLICA_TYPE], "launcher");
    assert_eq!(labels[build::LABEL_JOB_ROLE], "master");
    assert_eq!(labels[build::LABEL_OPERATOR], "mpijob-controller");
    let spec = spec_of(&pod);
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("tensorflow-mnist-launcher")
    );
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    let init = &spec.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.name, "kubectl-delivery");
    assert_eq!(init.image.as_deref(), Some(DEFAULT_KUBECTL_DELIVERY_IMAGE));
    assert_eq!(
        env_of(init.env.as_ref().unwrap()),
        [("TARGET_DIR", "/opt/kube"), ("NAMESPACE", "kubeflow")]
    );
    let mounts: Vec<_> = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    assert_eq!(
        mounts,
        [
            ("mpi-job-kubectl", "/opt/kube"),
            ("mpi-job-config", "/etc/mpi")
        ]
    );
    let config = spec
        .volumes
        .iter()
        .flatten()
        .find_map(|v| v.config_map.as_ref())
        .unwrap();
    assert_eq!(config.name, "tensorflow-mnist-config");
    let files: Vec<_> = config
        .items
        .iter()
        .flatten()
        .map(|i| (i.key.as_str(), i.mode))
        .collect();
    assert_eq!(
        files,
        [
            ("kubexec.sh", Some(0o555)),
            ("hostfile", Some(0o444)),
            ("discover_hosts.sh", Some(0o555))
        ]
    );
    // No port is added: MPI has none.
    assert!(spec.containers[0].ports.is_none());

    let mirrored = Options {
        mpi_kubectl_delivery_image: Some("mirror.internal/kubectl-delivery:1".into()),
        ..Options::default()
    };
    let pod = build::pod(&job, LAUNCHER, 0, &mirrored);
    let init = &spec_of(&pod).init_containers.as_ref().unwrap()[0];
    assert_eq!(
        init.image.as_deref(),
        Some("mirror.internal/kubectl-delivery:1")
    );
}

#[test]
fn a_worker_sleeps_unless_told_otherwise_and_mounts_kubexec() {
    let job = example();
    let pod = pod(&job, WORKER, 1);
    assert_eq!(
        pod.metadata.name.as_deref(),
        Some("tensorflow-mnist-worker-1")
    );
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[build::LABEL_REPLICA_INDEX], "1");
    assert!(!labels.contains_key(build::LABEL_JOB_ROLE));
    let spec = spec_of(&pod);
    let container = &spec.containers[0];
    assert_eq!(container.command, Some(vec!["sleep".to_owned()]));
    assert_eq!(container.args, Some(vec!["365d".to_owned()]));
    assert!(container.env.is_none(), "{:?}", container.env);
    assert!(spec.init_containers.is_none());
    assert!(spec.service_account_name.is_none());
    let config = spec.volumes.as_ref().unwrap()[0]
        .config_map
        .as_ref()
        .unwrap();
    let keys: Vec<_> = config
        .items
        .iter()
        .flatten()
        .map(|i| i.key.as_str())
        .collect();
    assert_eq!(keys, ["kubexec.sh"]);

    let mut told = example();
    let worker = told.spec.mpi_replica_specs.get_mut("Worker").unwrap();
    worker.template.spec.as_mut().unwrap().containers[0].command =
        Some(vec!["/usr/sbin/sshd".into()]);
    let pod = build::pod(&told, WORKER, 0, &Options::default());
    let container = &spec_of(&pod).containers[0];
    assert_eq!(container.command, Some(vec!["/usr/sbin/sshd".to_owned()]));
    assert_eq!(container.args, None);
}

#[test]
fn the_launcher_waits_until_every_worker_runs() {
    let job = example();
    let workers = |status| status_with(&[("Worker", status)]);
    assert!(job.holds_back(LAUNCHER, &JobStatus::default()));
    assert!(job.holds_back(LAUNCHER, &workers(active(1))));
    assert!(!job.holds_back(LAUNCHER, &workers(active(2))));
    let mut one_done = active(1);
    one_done.succeeded = 1;
    assert!(!job.holds_back(LAUNCHER, &workers(one_done)));
    assert!(!job.holds_back(WORKER, &JobStatus::default()));
}

#[test]
fn the_launcher_decides_success_and_running() {
    let job = example();
    assert!(!job.succeeded(&status_with(&[("Worker", succeeded(&[0, 1]))])));
    assert!(job.succeeded(&status_with(&[("Launcher", succeeded(&[0]))])));
    assert!(job.running(&status_with(&[("Launcher", active(1))])));
    assert!(!job.running(&status_with(&[("Worker", active(2))])));
    assert!(job.is_master_role(LAUNCHER, 0));
    assert!(!job.is_master_role(WORKER, 0));
    assert!(!job.tolerates_failures_of(WORKER));
    assert!(!job.tolerates_failures_of(LAUNCHER));
}

#[test]
fn messages_are_upstreams() {
    let job = example();
    assert_eq!(
        job.message(Outcome::Running),
        "MPIJob tensorflow-mnist is running."
    );
    assert_eq!(
        job.message(Outcome::Succeeded),
        "MPIJob tensorflow-mnist is successfully completed."
    );
    let failed = Outcome::Failed {
        replicas: 1,
        rtype: LAUNCHER,
    };
    assert_eq!(
        job.message(failed),
        "MPIJob tensorflow-mnist is failed because 1 Launcher replica(s) failed."
    );
}

#[test]
fn the_deprecated_clean_pod_policy_stands_in_for_the_run_policys() {
    let elastic: MPIJob = defaulted(ELASTIC);
    let policy = elastic.spec.run_policy.as_ref().unwrap().clean_pod_policy;
    assert_eq!(policy, Some(CleanPodPolicy::Running));
    assert_eq!(
        example().spec.run_policy.unwrap().clean_pod_policy,
        Some(CleanPodPolicy::Running)
    );
    let mut neither: MPIJob = serde_yaml::from_str(EXAMPLE).unwrap();
    neither.spec.run_policy = None;
    crate::operator::training::engine::defaults::apply(&mut neither);
    assert_eq!(
        neither.spec.run_policy.unwrap().clean_pod_policy,
        Some(CleanPodPolicy::None)
    );
}

#[test]
fn the_companions_are_the_config_the_account_the_role_and_its_binding_owned_by_the_job() {
    let mut job = example();
    job.metadata.uid = Some("uid-1".into());
    let companions = job.companions();
    let kinds: Vec<_> = companions
        .iter()
        .map(|c| (c.kind, c.name.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (CompanionKind::ConfigMap, "tensorflow-mnist-config"),
            (CompanionKind::ServiceAccount, "tensorflow-mnist-launcher"),
            (CompanionKind::Role, "tensorflow-mnist-launcher"),
            (CompanionKind::RoleBinding, "tensorflow-mnist-launcher"),
        ]
    );
    for companion in &companions {
        let object = &companion.object;
        assert_eq!(object["metadata"]["namespace"], "kubeflow");
        assert_eq!(object["metadata"]["labels"]["app"], "tensorflow-mnist");
        let owner = &object["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["uid"], &owner["controller"]),
            (&"MPIJob".into(), &"uid-1".into(), &true.into())
        );
        assert!(object["apiVersion"].is_string() && object["kind"].is_string());
    }
    let role = &companions[2].object;
    let workers = serde_json::json!(["tensorflow-mnist-worker-0", "tensorflow-mnist-worker-1"]);
    assert_eq!(
        role["rules"],
        serde_json::json!([
            { "apiGroups": [""], "resources": ["pods"], "resourceNames": workers, "verbs": ["get"] },
            { "apiGroups": [""], "resources": ["pods/exec"], "resourceNames": workers, "verbs": ["create"] },
        ])
    );
    let binding = &companions[3].object;
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{ "kind": "ServiceAccount", "name": "tensorflow-mnist-launcher", "namespace": "kubeflow" }])
    );
    assert_eq!(binding["roleRef"]["name"], "tensorflow-mnist-launcher");
}

#[test]
fn a_launcher_account_from_the_template_is_bound_and_not_created() {
    let mut job = example();
    let launcher = job.spec.mpi_replica_specs.get_mut("Launcher").unwrap();
    launcher
        .template
        .spec
        .as_mut()
        .unwrap()
        .service_account_name = Some("trainer".into());
    let companions = job.companions();
    assert!(
        !companions
            .iter()
            .any(|c| c.kind == CompanionKind::ServiceAccount)
    );
    let binding = companions.last().unwrap();
    assert_eq!(binding.object["subjects"][0]["name"], "trainer");
    let pod = pod(&job, LAUNCHER, 0);
    assert_eq!(
        spec_of(&pod).service_account_name.as_deref(),
        Some("trainer")
    );
}

#[test]
fn both_upstream_examples_parse_as_mpijobs() {
    let elastic: MPIJob = defaulted(ELASTIC);
    assert_eq!(elastic.replicas_of(WORKER), Some(2));
    assert_eq!(elastic.spec.slots_per_worker, Some(1));
    assert_eq!(example().replicas_of(LAUNCHER), Some(1));
}

// The engine's decisions for an MPIJob.

mod plans {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::operator::training::engine::observe::Observed;
    use crate::operator::training::engine::plan::{Plan, plan};

    /// The pod of a replica in `phase`; a finished one's `mpi` container exited with `code`.
    fn in_phase(job: &MPIJob, rtype: ReplicaType, index: i32, phase: &str, code: i32) -> Pod {
        let mut pod = pod(job, rtype, index);
        let terminated = (phase != "Running").then(|| ContainerStatus {
            name: "mpi".into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        });
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: terminated.map(|t| vec![t]),
            ..PodStatus::default()
        });
        pod
    }

    fn plan_of(job: &MPIJob, pods: &[Pod]) -> Plan {
        let now = Time(Timestamp::from_second(1_700_000_000).unwrap());
        plan(
            job,
            Observed {
                pods,
                services: &[],
            },
            &now,
        )
    }

    fn running_workers(job: &MPIJob) -> Vec<Pod> {
        (0..2)
            .map(|i| in_phase(job, WORKER, i, "Running", 0))
            .collect()
    }

    /// The last condition's type, reason and message.
    fn last_condition(plan: &Plan) -> (String, String, String) {
        let last = plan.status.conditions.last().unwrap();
        (
            last.type_.clone(),
            last.reason.clone().unwrap_or_default(),
            last.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn the_launcher_has_no_replica_index_label_and_is_still_the_launcher() {
        let job = example();
        let launcher = in_phase(&job, LAUNCHER, 0, "Running", 0);
        let labels = launcher.metadata.labels.as_ref().unwrap();
        assert!(
            !labels.contains_key(build::LABEL_REPLICA_INDEX),
            "{labels:?}"
        );
        let mut pods = running_workers(&job);
        pods.push(launcher);
        let plan = plan_of(&job, &pods);
        assert!(plan.create_pods.is_empty() && plan.delete_pods.is_empty());
        assert_eq!(plan.status.replica_statuses["Launcher"].active, 1);
    }

    #[test]
    fn a_new_job_gets_its_workers_and_no_services_and_its_launcher_waits() {
        let job = example();
        let plan = plan_of(&job, &[]);
        assert_eq!(plan.create_pods, [(WORKER, 0), (WORKER, 1)]);
        assert!(plan.create_services.is_empty());
        let one = [in_phase(&job, WORKER, 0, "Running", 0)];
        assert!(plan_of(&job, &one).create_pods == [(WORKER, 1)]);
    }

    #[test]
    fn the_launcher_is_created_once_every_worker_runs() {
        let job = example();
        let plan = plan_of(&job, &running_workers(&job));
        assert_eq!(plan.create_pods, [(LAUNCHER, 0)]);
        assert!(plan.create_services.is_empty());
        // Running only once the Launcher runs.
        assert_ne!(last_condition(&plan).0, "Running");
        let mut pods = running_workers(&job);
        pods.push(in_phase(&job, LAUNCHER, 0, "Running", 0));
        let plan = plan_of(&job, &pods);
        assert!(plan.create_pods.is_empty());
        assert_eq!(
            last_condition(&plan),
            (
                "Running".into(),
                "MPIJobRunning".into(),
                "MPIJob tensorflow-mnist is running.".into()
            )
        );
    }

    #[test]
    fn a_failed_launcher_fails_the_job() {
        let job = example();
        let mut pods = running_workers(&job);
        pods.push(in_phase(&job, LAUNCHER, 0, "Failed", 1));
        let (kind, reason, message) = last_condition(&plan_of(&job, &pods));
        assert_eq!((kind.as_str(), reason.as_str()), ("Failed", "MPIJobFailed"));
        assert!(
            message.starts_with(
                "MPIJob tensorflow-mnist is failed because 1 Launcher replica(s) failed."
            ),
            "{message}"
        );
    }

    #[test]
    fn the_launcher_decides_success_whatever_the_workers_do() {
        let job = example();
        let pods = [
            in_phase(&job, WORKER, 0, "Running", 0),
            in_phase(&job, WORKER, 1, "Succeeded", 0),
            in_phase(&job, LAUNCHER, 0, "Succeeded", 0),
        ];
        assert_eq!(
            last_condition(&plan_of(&job, &pods)),
            (
                "Succeeded".into(),
                "MPIJobSucceeded".into(),
                "MPIJob tensorflow-mnist is successfully completed.".into()
            )
        );
        // Workers that finish on their own while the Launcher runs leave the job running.
        let pods = [
            in_phase(&job, WORKER, 0, "Succeeded", 0),
            in_phase(&job, WORKER, 1, "Succeeded", 0),
            in_phase(&job, LAUNCHER, 0, "Running", 0),
        ];
        assert_eq!(last_condition(&plan_of(&job, &pods)).0, "Running");
    }

    /// The `MPIJob*` events of a plan: (warning, reason, message).
    fn mpi_events(job: &MPIJob, pods: &[Pod]) -> Vec<(bool, String, String)> {
        plan_of(job, pods)
            .events
            .into_iter()
            .filter(|e| e.reason.starts_with("MPIJob"))
            .map(|e| (e.warning, e.reason, e.message))
            .collect()
    }

    fn with_uid(mut pod: Pod, uid: &str) -> Pod {
        pod.metadata.uid = Some(uid.into());
        pod
    }

    fn evicted(job: &MPIJob, index: i32) -> Pod {
        let mut pod = in_phase(job, WORKER, index, "Failed", 0);
        let status = pod.status.as_mut().unwrap();
        status.reason = Some("Evicted".into());
        status.container_statuses = None;
        pod
    }

    #[test]
    fn upstreams_mpijob_events_go_with_their_status_changes() {
        let job = example();
        let running = "MPIJob kubeflow/tensorflow-mnist is running";
        let event = |warning, reason: &str, message: &str| (warning, reason.into(), message.into());

        // Workers running, the Launcher to be created: nothing of MPIJob's own yet.
        assert_eq!(mpi_events(&job, &running_workers(&job)), []);
        let mut pods = running_workers(&job);
        pods.push(in_phase(&job, LAUNCHER, 0, "Pending", 0));
        pods[2].status.as_mut().unwrap().container_statuses = None;
        assert_eq!(mpi_events(&job, &pods), []);

        // The Launcher runs with every Worker: Running, upstream's event with it.
        let mut pods = running_workers(&job);
        pods.push(in_phase(&job, LAUNCHER, 0, "Running", 0));
        assert_eq!(
            mpi_events(&job, &pods),
            [event(false, "MPIJobRunning", running)]
        );
        // A Worker gone: no longer every Worker running.
        assert_eq!(mpi_events(&job, &pods[1..]), []);

        // A Worker evicted: the job fails, and says the Workers were evicted.
        let pods = [
            in_phase(&job, WORKER, 0, "Running", 0),
            evicted(&job, 1),
            in_phase(&job, LAUNCHER, 0, "Running", 0),
        ];
        let events = mpi_events(&job, &pods);
        assert_eq!(events[0].1, "MPIJobFailed", "{events:?}");
        assert_eq!(
            events[1..],
            [event(true, "MPIJobEvicted", "1/2 workers are evicted")]
        );

        // The Launcher succeeded: the engine's Succeeded event, nothing more.
        let pods = [
            in_phase(&job, WORKER, 0, "Running", 0),
            in_phase(&job, WORKER, 1, "Running", 0),
            in_phase(&job, LAUNCHER, 0, "Succeeded", 0),
        ];
        assert_eq!(
            mpi_events(&job, &pods),
            [event(
                false,
                "MPIJobSucceeded",
                "MPIJob tensorflow-mnist is successfully completed."
            )]
        );
    }

    #[test]
    fn a_state_event_is_one_occurrence_while_the_same_pods_are_in_it() {
        let job = example();
        let pods = |launcher: &str| {
            vec![
                with_uid(in_phase(&job, WORKER, 0, "Running", 0), "w0"),
                with_uid(in_phase(&job, WORKER, 1, "Running", 0), "w1"),
                with_uid(in_phase(&job, LAUNCHER, 0, "Running", 0), launcher),
            ]
        };
        let occurrence = |pods: &[Pod]| {
            let events = super::events::of_pods(&job, pods);
            assert_eq!(events.len(), 1, "{events:?}");
            events[0].occurrence.clone().unwrap()
        };
        assert_eq!(occurrence(&pods("l1")), occurrence(&pods("l1")));
        assert_ne!(occurrence(&pods("l1")), occurrence(&pods("l2")));
    }

    #[test]
    fn the_launcher_created_or_not_is_upstreams_event_and_a_worker_none() {
        use super::events::of_created;
        let created = of_created(LAUNCHER, Ok("pi-launcher")).unwrap();
        assert_eq!(
            (
                created.warning,
                created.reason.as_str(),
                created.message.as_str()
            ),
            (
                false,
                "MPIJobRunning",
                "launcher pod created success: pi-launcher"
            )
        );
        let failed = of_created(LAUNCHER, Err("forbidden")).unwrap();
        assert_eq!(
            (
                failed.warning,
                failed.reason.as_str(),
                failed.message.as_str()
            ),
            (
                true,
                "MPIJobFailed",
                "launcher pod created failed: forbidden"
            )
        );
        assert_eq!(of_created(WORKER, Ok("pi-worker-0")), None);
    }
}
