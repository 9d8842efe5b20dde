//! MPIJob on the real control plane, with the operator of `operator.rs` (running as the
//! component's ServiceAccount, so it may grant its launchers only what it holds): upstream's
//! examples run unmodified to Succeeded, a failing Launcher fails its job, and the Launcher's
//! Role lets it exec into the job's own Workers and do nothing else.

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::Role;
use kube::Api;
use kube::api::PostParams;
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::mpi::MPIJob;
use serde_json::json;

use crate::operator::{
    TIMEOUT, await_condition_type, await_running, example_in, pods, services, start_operator,
};
use crate::operator_identity::{Permission, permissions, token_kubeconfig};
use crate::support::{TestNamespace, client_from, eventually, submit};

/// An upstream example as it is, so kwok runs its pods for 5 seconds and they exit 0.
fn example(file: &str) -> MPIJob {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/mpi")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not an MPIJob: {e}", path.display()))
}

/// The same, with every pod left Running until the test says otherwise.
fn driven_by_hand(file: &str) -> MPIJob {
    example_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mpi"),
        file,
    )
}

/// The value of `name` in the first container of `pod`.
fn first_container_env(pod: &Pod, name: &str) -> Option<String> {
    pod.spec
        .as_ref()?
        .containers
        .first()?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

#[tokio::test]
async fn every_upstream_mpi_example_runs_to_succeeded_with_its_launcher_config() {
    let ns = TestNamespace::new("mpi-examples").await;
    let _operator = start_operator(&ns).await;
    for (file, name) in [
        ("tensorflow-mnist.yaml", "tensorflow-mnist"),
        ("tensorflow-mnist-elastic.yaml", "tensorflow-mnist-elastic"),
    ] {
        let jobs = submit(&ns, &example(file)).await;
        let launcher = format!("{name}-launcher");
        // The Launcher is created once its Workers run; kwok runs each pod 5 seconds.
        let seen = eventually(&format!("{launcher} to be created"), TIMEOUT, || async {
            let pods = pods(&ns, name).await;
            pods.contains_key(&launcher).then_some(pods)
        })
        .await;
        let names: BTreeSet<&str> = seen.keys().map(String::as_str).collect();
        let expected = [
            launcher.clone(),
            format!("{name}-worker-0"),
            format!("{name}-worker-1"),
        ];
        assert_eq!(names, expected.iter().map(String::as_str).collect());
        assert!(
            services(&ns, name).await.is_empty(),
            "an MPIJob has no services"
        );

        let launcher_pod = &seen[&launcher];
        assert_eq!(
            first_container_env(launcher_pod, "OMPI_MCA_plm_rsh_agent").as_deref(),
            Some("/etc/mpi/kubexec.sh")
        );
        let spec = launcher_pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some(launcher.as_str())
        );
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0].name,
            "kubectl-delivery"
        );

        let config = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
            .get(&format!("{name}-config"))
            .await
            .expect("the job's ConfigMap exists");
        let data = config.data.unwrap_or_default();
        assert_eq!(
            data["hostfile"],
            format!("{name}-worker-0 slots=1\n{name}-worker-1 slots=1\n")
        );
        assert!(data["kubexec.sh"].contains("kubectl exec"), "{data:?}");
        Api::<ServiceAccount>::namespaced(ns.client.clone(), &ns.name)
            .get(&launcher)
            .await
            .expect("the launcher's ServiceAccount exists");

        let job = await_condition_type(&jobs, name, "Succeeded", TIMEOUT).await;
        let last = job.status().unwrap().conditions.last().unwrap().clone();
        assert_eq!(last.reason.as_deref(), Some("MPIJobSucceeded"));
        assert_eq!(
            last.message.as_deref(),
            Some(format!("MPIJob {name} is successfully completed.").as_str())
        );
        let types: Vec<&str> = job
            .status()
            .unwrap()
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["Created", "Running", "Succeeded"], "{name}");
    }
}

#[tokio::test]
async fn a_failing_launcher_fails_the_job() {
    let ns = TestNamespace::new("mpi-fail").await;
    let _operator = start_operator(&ns).await;
    let mut job = serde_json::to_value(example("tensorflow-mnist.yaml")).unwrap();
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]["annotations"] =
        json!({ "mlkube.io/simulate-exit-code": "1", "mlkube.io/simulate-duration": "1s" });
    let job: MPIJob = serde_json::from_value(job).unwrap();
    let jobs = submit(&ns, &job).await;

    let failed = await_condition_type(&jobs, "tensorflow-mnist", "Failed", TIMEOUT).await;
    let last = failed.status().unwrap().conditions.last().unwrap().clone();
    assert_eq!(last.reason.as_deref(), Some("MPIJobFailed"));
    let message = last.message.unwrap_or_default();
    assert!(
        message
            .starts_with("MPIJob tensorflow-mnist is failed because 1 Launcher replica(s) failed."),
        "{message}"
    );
    let launcher = &failed.status().unwrap().replica_statuses["Launcher"];
    assert_eq!(launcher.failed, 1);
}

#[tokio::test]
async fn the_launchers_role_grants_exactly_exec_on_the_jobs_own_workers() {
    let ns = TestNamespace::new("mpi-role").await;
    let _operator = start_operator(&ns).await;
    submit(&ns, &driven_by_hand("tensorflow-mnist.yaml")).await;
    // Another pod in the namespace, which the launcher must not reach.
    let other: Pod = serde_json::from_value(json!({
        "metadata": { "name": "bystander" },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] }
    }))
    .unwrap();
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &other)
        .await
        .expect("a bystander pod");
    await_running(
        &ns,
        "tensorflow-mnist",
        &[
            "tensorflow-mnist-worker-0",
            "tensorflow-mnist-worker-1",
            "tensorflow-mnist-launcher",
        ],
    )
    .await;
    Api::<Role>::namespaced(ns.client.clone(), &ns.name)
        .get("tensorflow-mnist-launcher")
        .await
        .expect("the launcher's Role exists");

    let launcher =
        client_from(&token_kubeconfig(&ns.client, &ns.name, "tensorflow-mnist-launcher").await)
            .await;
    let nobody_account: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "nobody" } })).unwrap();
    Api::<ServiceAccount>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &nobody_account)
        .await
        .expect("a ServiceAccount without bindings");
    let nobody = client_from(&token_kubeconfig(&ns.client, &ns.name, "nobody").await).await;

    // What every authenticated user may do is not the Role's doing.
    let everyone = permissions(&nobody, &ns.name).await;
    let granted: BTreeSet<Permission> = eventually("the Role to be in force", TIMEOUT, || async {
        let granted: BTreeSet<Permission> = permissions(&launcher, &ns.name)
            .await
            .difference(&everyone)
            .cloned()
            .collect();
        (!granted.is_empty()).then_some(granted)
    })
    .await;
    let expected: BTreeSet<Permission> = [("pods", "get"), ("pods/exec", "create")]
        .into_iter()
        .flat_map(|(resource, verb)| {
            ["tensorflow-mnist-worker-0", "tensorflow-mnist-worker-1"].map(|pod| Permission {
                group: String::new(),
                resource: resource.to_owned(),
                verb: verb.to_owned(),
                name: Some(pod.to_owned()),
            })
        })
        .collect();
    assert_eq!(granted, expected);
    // And nothing in another namespace.
    let elsewhere: BTreeSet<Permission> = permissions(&launcher, "default")
        .await
        .difference(&permissions(&nobody, "default").await)
        .cloned()
        .collect();
    assert!(elsewhere.is_empty(), "{elsewhere:?}");
}

/// What upstream's validation refuses, the API server refuses on create, saying why.
#[tokio::test]
async fn the_crd_refuses_what_upstream_refuses() {
    let ns = TestNamespace::new("mpi-crd").await;
    crate::operator::install_crd(&ns.client).await;
    let jobs = Api::<MPIJob>::namespaced(ns.client.clone(), &ns.name);
    let valid = serde_json::to_value(example("tensorflow-mnist.yaml")).unwrap();
    let cases = [
        (
            "/spec/mpiReplicaSpecs/Launcher/replicas",
            json!(2),
            "there must be only 1 Launcher replica",
        ),
        (
            "/spec/cleanPodPolicy",
            json!("All"),
            "cleanPodPolicy and runPolicy.cleanPodPolicy differ",
        ),
        ("/spec/slotsPerWorker", json!(0), "spec.slotsPerWorker"),
    ];
    for (pointer, value, expected) in cases {
        let mut job = valid.clone();
        let (parent, field) = pointer.rsplit_once('/').unwrap();
        job.pointer_mut(parent).unwrap()[field] = value;
        let job: MPIJob = serde_json::from_value(job).unwrap();
        let error = jobs
            .create(&PostParams::default(), &job)
            .await
            .expect_err(pointer)
            .to_string();
        assert!(error.contains(expected), "{pointer}: {error}");
    }
    let mut with_a_master = valid.clone();
    let specs = with_a_master["spec"]["mpiReplicaSpecs"]
        .as_object_mut()
        .unwrap();
    let worker = specs.remove("Worker").unwrap();
    specs.insert("Master".into(), worker);
    let job: MPIJob = serde_json::from_value(with_a_master).unwrap();
    let error = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect_err("a Master")
        .to_string();
    assert!(
        error.contains("replica types are Launcher and Worker"),
        "{error}"
    );
    let mut without_launcher = valid.clone();
    without_launcher["spec"]["mpiReplicaSpecs"]
        .as_object_mut()
        .unwrap()
        .remove("Launcher");
    let job: MPIJob = serde_json::from_value(without_launcher).unwrap();
    let error = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect_err("no Launcher")
        .to_string();
    assert!(
        error.contains("a Launcher replica type is required"),
        "{error}"
    );
    // The examples themselves are accepted.
    jobs.create(&PostParams::default(), &example("tensorflow-mnist.yaml"))
        .await
        .expect("upstream's example is accepted");
}
