//! The volume controller (`mlkube operator --controllers volumes`) on the kwok cluster, run as
//! the binary with the `volume-controller` component's ServiceAccount token: VolumeManagers
//! placed on distinct nodes with the status a pod copies, refused while too few nodes are
//! eligible and placed once enough are, deleted only once every node is clean, and bad input
//! failed with its message and no pods. kwok runs no container: the
//! fetchers and cleaners end as `cluster/kwok-stages.yaml` says (Succeeded after 1s, Failed with
//! the label `mlkube.io/simulate-exit-code`). What the fetcher really does against an object
//! store is proved on the real node (`tests/real_node/volumes.rs`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::conditions;
use kube::runtime::wait::await_condition;
use kube::{Api, ResourceExt};
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::volumes::api::{State, VolumeManager};
use serde_json::{Value, json};

use crate::events::job_events;
use crate::operator::{await_running, driven_by_hand, start_operator};
use crate::operator_identity::{Access, OperatorIdentity, OperatorProcess, spawn_operator_binary};
use crate::support::{
    TestNamespace, clean_up, empty_app, eventually, lock_shared_cluster_objects, mlkube, mlkube_ok,
    submit,
};

const TIMEOUT: Duration = Duration::from_secs(60);
const ROOT: &str = "/var/lib/mlkube/volumes";

/// The VolumeManager CRD from `crds/`.
pub(crate) fn crd() -> Value {
    serde_yaml::from_str(include_str!(
        "../../crds/volumemanagers.kvc.kubeflow.org.yaml"
    ))
    .expect("the CRD is YAML")
}

/// Apply the VolumeManager CRD from `crds/` (as the components tests do, with their manager).
async fn install_crd(ns: &TestNamespace) {
    apply_crd(ns, crd()).await;
}

/// Apply `crd` (with mlkube's field manager, so `mlkube apply` may share it), and wait until
/// it is Established.
pub(crate) async fn apply_crd(ns: &TestNamespace, crd: Value) {
    let api = Api::<CustomResourceDefinition>::all(ns.client.clone());
    let name = crd["metadata"]["name"]
        .as_str()
        .expect("a CRD has a name")
        .to_owned();
    api.patch(
        &name,
        &PatchParams::apply("mlkube").force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("installing CRD {name}: {e}"));
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .expect("the CRD is Established in time")
    .expect("watching the CRD");
}

/// The volume controller for the test's namespace, as its component's ServiceAccount.
pub(crate) struct Controller {
    pub(crate) process: OperatorProcess,
    _identity: OperatorIdentity,
}

pub(crate) async fn start(ns: &TestNamespace) -> Controller {
    install_crd(ns).await;
    let identity = OperatorIdentity::new(ns, Access::volume_controller()).await;
    let process = spawn_operator_binary(
        &ns.name,
        &identity,
        &[
            "--controllers",
            "volumes",
            "--volume-image",
            "mlkube/mlkube:test",
        ],
    );
    Controller {
        process,
        _identity: identity,
    }
}

/// An S3-Dev volume `id` of `replicas` from the bucket `datasets`, with `labels` on its pods.
pub(crate) fn s3_volume(id: &str, replicas: i64, labels: Value) -> Value {
    json!({
        "id": id, "replicas": replicas, "sourceType": "S3-Dev",
        "endpointURL": "http://object-store:9000", "sourceURL": "s3://datasets/digits",
        "labels": labels,
        "options": { "awsCredentialsSecretName": "object-store", "timeoutForDataDownload": "5m" },
    })
}

pub(crate) async fn create(
    ns: &TestNamespace,
    name: &str,
    configs: Value,
) -> (Api<VolumeManager>, VolumeManager) {
    let api = Api::<VolumeManager>::namespaced(ns.client.clone(), &ns.name);
    let vm: VolumeManager = serde_json::from_value(json!({
        "apiVersion": "kvc.kubeflow.org/v1", "kind": "VolumeManager",
        "metadata": { "name": name }, "spec": { "volumeConfigs": configs },
    }))
    .expect("a valid VolumeManager");
    let created = api
        .create(&PostParams::default(), &vm)
        .await
        .unwrap_or_else(|e| panic!("creating VolumeManager {name}: {e}"));
    (api, created)
}

/// The VolumeManager once its state is `state`.
pub(crate) async fn reaches(api: &Api<VolumeManager>, name: &str, state: State) -> VolumeManager {
    eventually(
        &format!("VolumeManager {name} to be {state:?}"),
        TIMEOUT,
        || async {
            let vm = api.get(name).await.ok()?;
            (vm.status.as_ref()?.state == Some(state)).then_some(vm)
        },
    )
    .await
}

pub(crate) async fn pods(ns: &TestNamespace, role: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().labels(&format!("kvc.kubeflow.org/role={role}")))
        .await
        .expect("listing pods")
        .items
}

#[tokio::test]
async fn a_volume_manager_is_placed_on_distinct_nodes_and_says_how_a_pod_reads_it() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes").await;
    let _controller = start(&ns).await;
    let (api, created) = create(&ns, "data", json!([s3_volume("digits", 2, json!({}))])).await;
    let uid = created.uid().expect("a uid");

    let vm = reaches(&api, "data", State::Completed).await;
    assert!(
        vm.finalizers()
            .contains(&"kvc.kubeflow.org/data".to_owned())
    );
    let status = serde_json::to_value(vm.status.as_ref().unwrap()).unwrap();
    let volume = &status["volumes"][0];
    assert_eq!(volume["id"], "digits");
    assert_eq!(volume["state"], "Completed");
    assert_eq!(
        volume["volumeSource"],
        json!({ "hostPath": { "path": format!("{ROOT}/{uid}/digits"), "type": "Directory" } })
    );
    let fetchers = pods(&ns, "fetch").await;
    let mut nodes: Vec<String> = fetchers
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .node_name
                .clone()
                .expect("scheduled")
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(
        nodes.len(),
        2,
        "the two replicas are on two nodes: {nodes:?}"
    );
    assert_eq!(
        volume["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"],
        json!([{ "key": "metadata.name", "operator": "In", "values": nodes }])
    );
    assert_eq!(
        volume["message"],
        format!(
            "s3://datasets/digits placed on 2 nodes: {}",
            nodes.join(", ")
        )
    );
    let spec = serde_json::to_value(fetchers[0].spec.as_ref().unwrap()).unwrap();
    let container = &spec["containers"][0];
    assert_eq!(container["image"], "mlkube/mlkube:test");
    assert_eq!(
        container["command"],
        json!(["/usr/local/bin/mlkube", "volume-fetch"])
    );
    assert_eq!(
        spec["volumes"][0]["hostPath"]["path"],
        format!("{ROOT}/{uid}")
    );
    let secret_keys: Vec<&Value> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["valueFrom"]["secretKeyRef"]["name"])
        .collect();
    assert!(
        secret_keys.iter().all(|n| *n == "object-store"),
        "{secret_keys:?}"
    );
    assert_eq!(status["state"], "Completed");
}

/// A label on some of the cluster's nodes, removed when dropped (also on a panic).
struct NodeLabel {
    key: String,
    nodes: Vec<String>,
}

impl NodeLabel {
    async fn put_on(&mut self, client: &kube::Client, node: &str) {
        let patch = json!({ "metadata": { "labels": { self.key.as_str(): "data" } } });
        Api::<Node>::all(client.clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("labelling node {node}: {e}"));
        self.nodes.push(node.to_owned());
    }
}

impl Drop for NodeLabel {
    fn drop(&mut self) {
        for node in std::mem::take(&mut self.nodes) {
            let patch = json!({ "metadata": { "labels": { self.key.as_str(): null } } });
            clean_up(
                &format!("the label {} of node {node}", self.key),
                |client| async move {
                    Api::<Node>::all(client)
                        .patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(drop)
                },
            );
        }
    }
}

/// The message of the VolumeManager `name`'s volume `id` once `check` holds for it.
async fn volume_message(
    api: &Api<VolumeManager>,
    name: &str,
    id: &str,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    eventually(what, TIMEOUT, || async {
        let status = api.get(name).await.ok()?.status?;
        let volume = status.volumes.iter().find(|v| v.id == id)?;
        let message = volume.message.clone()?;
        (volume.state == Some(State::Failed) && check(&message)).then_some(message)
    })
    .await
}

/// `replicas` counts distinct nodes: with fewer eligible (here: selected by the volume's
/// nodeAffinity, a label of this test's own), nothing is placed and the status and a
/// TooFewNodes event say what is needed and what there is; each node that becomes eligible is
/// seen (the controller watches nodes), and once there are enough the replicas are placed, one
/// a node, and the message lists them. Works with kwok's default two nodes.
#[tokio::test]
async fn too_few_eligible_nodes_place_nothing_until_enough_are_eligible() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-nodes").await;
    let mut label = NodeLabel {
        key: format!("volumes.mlkube.io/{}", ns.name),
        nodes: Vec::new(),
    };
    let mut names: Vec<String> = Api::<Node>::all(ns.client.clone())
        .list(&ListParams::default())
        .await
        .expect("listing nodes")
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    names.sort();
    assert!(
        names.len() >= 2,
        "the kwok cluster has two nodes: {names:?}"
    );
    let _controller = start(&ns).await;
    let mut config = s3_volume("digits", 2, json!({}));
    config["nodeAffinity"] = json!({ "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [
            { "key": label.key, "operator": "Exists" }] }] } });
    let (api, _) = create(&ns, "data", json!([config])).await;

    let none = volume_message(&api, "data", "digits", "no eligible node", |m| {
        m.starts_with("replicas 2 needs 2 nodes; none is eligible; not eligible: ")
    })
    .await;
    assert!(
        none.contains(&format!(
            "{} (not selected by the volume's nodeAffinity)",
            names[0]
        )),
        "{none}"
    );
    let event = eventually("a TooFewNodes event", TIMEOUT, || async {
        job_events(&ns, "data", "TooFewNodes").await.pop()
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.note, Some(format!("volume digits: {none}")));
    assert!(pods(&ns, "fetch").await.is_empty(), "nothing is placed");

    label.put_on(&ns.client, &names[0]).await;
    let one = format!("replicas 2 needs 2 nodes; 1 is eligible: {}; ", names[0]);
    volume_message(&api, "data", "digits", "one eligible node", |m| {
        m.starts_with(&one)
    })
    .await;
    assert!(pods(&ns, "fetch").await.is_empty(), "still nothing placed");

    label.put_on(&ns.client, &names[1]).await;
    let vm = reaches(&api, "data", State::Completed).await;
    let volume = &vm.status.as_ref().expect("a status").volumes[0];
    assert_eq!(
        volume.message.as_deref(),
        Some(
            format!(
                "s3://datasets/digits placed on 2 nodes: {}, {}",
                names[0], names[1]
            )
            .as_str()
        )
    );
    let mut placed: Vec<String> = pods(&ns, "fetch")
        .await
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    placed.sort();
    assert_eq!(placed, names[..2], "one replica on each eligible node");
}

#[tokio::test]
async fn deleting_a_volume_manager_cleans_every_node_before_it_goes() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-delete").await;
    let _controller = start(&ns).await;
    let (api, created) = create(&ns, "data", json!([s3_volume("digits", 2, json!({}))])).await;
    let uid = created.uid().expect("a uid");
    reaches(&api, "data", State::Completed).await;
    let placed: Vec<String> = pods(&ns, "fetch")
        .await
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();

    api.delete("data", &DeleteParams::default())
        .await
        .expect("deleting");
    // Cleaners run for a second (kwok) before they succeed and the VolumeManager may go; the
    // nodes they were bound to are gathered until it is gone.
    let mut cleaned = std::collections::BTreeSet::new();
    let mut args = None;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        for pod in pods(&ns, "clean").await {
            let spec = pod.spec.unwrap_or_default();
            cleaned.extend(spec.node_name);
            args = spec.containers[0].args.clone();
        }
        if matches!(api.get_opt("data").await, Ok(None)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the VolumeManager is still there after {TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let placed: std::collections::BTreeSet<String> = placed.into_iter().collect();
    assert_eq!(
        cleaned, placed,
        "a cleaner ran on every node that held data"
    );
    assert_eq!(args, Some(vec![format!("/kvc/{uid}")]));
}

#[tokio::test]
async fn a_volume_manager_is_held_until_its_cleaners_succeed() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-held").await;
    let _controller = start(&ns).await;
    let (api, _) = create(&ns, "data", json!([s3_volume("digits", 1, json!({}))])).await;
    reaches(&api, "data", State::Completed).await;
    api.delete("data", &DeleteParams::default())
        .await
        .expect("deleting");
    // Between the delete and the cleaner's success, the VolumeManager is still there, saying so.
    let held = eventually("a cleaner pod to be created", TIMEOUT, || async {
        let cleaners = pods(&ns, "clean").await;
        let vm = api.get("data").await.ok()?;
        (!cleaners.is_empty()).then_some(vm)
    })
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    let message = held.status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.starts_with("deleting:"), "{message}");
}

#[tokio::test]
async fn bad_sources_fail_with_their_message_and_place_nothing() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-bad").await;
    let _controller = start(&ns).await;
    let configs = json!([
        { "id": "pach", "replicas": 1, "sourceType": "Pachyderm",
          "options": { "repo": "images", "branch": "master" } },
        { "id": "nosecret", "replicas": 1, "sourceType": "S3-Dev",
          "endpointURL": "http://object-store:9000", "sourceURL": "s3://datasets/digits" },
        { "id": "noendpoint", "replicas": 1, "sourceType": "S3-Dev", "sourceURL": "s3://datasets",
          "options": { "awsCredentialsSecretName": "object-store" } },
    ]);
    let (api, created) = create(&ns, "bad", configs).await;
    let vm = reaches(&api, "bad", State::Failed).await;
    let status = vm.status.expect("a status");
    let message = |id: &str| {
        status
            .volumes
            .iter()
            .find(|v| v.id == id)
            .and_then(|v| v.message.clone())
            .unwrap_or_default()
    };
    assert!(
        message("pach").contains("Pachyderm is not supported"),
        "{}",
        message("pach")
    );
    assert!(message("nosecret").contains("awsCredentialsSecretName is missing"));
    assert!(message("noendpoint").contains("needs endpointURL"));
    assert!(status.volumes.iter().all(|v| v.volume_source.is_none()));
    assert!(
        status
            .message
            .unwrap_or_default()
            .contains("volume pach: sourceType Pachyderm")
    );
    assert!(pods(&ns, "fetch").await.is_empty(), "nothing is placed");
    assert!(vm.metadata.finalizers.unwrap_or_default().is_empty());
    // Nothing placed: the delete is immediate.
    api.delete("bad", &DeleteParams::default())
        .await
        .expect("deleting");
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, "bad", conditions::is_deleted(&created.uid().unwrap())),
    )
    .await
    .expect("deleted at once")
    .expect("watching");
}

#[tokio::test]
async fn a_failed_fetcher_fails_its_volume_and_is_not_replaced() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-fail").await;
    let _controller = start(&ns).await;
    let labels = json!({ "mlkube.io/simulate-exit-code": "1" });
    let (api, _) = create(&ns, "data", json!([s3_volume("digits", 1, labels)])).await;
    let vm = reaches(&api, "data", State::Failed).await;
    let volume = &vm.status.as_ref().unwrap().volumes[0];
    let message = volume.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("replica 0 on node ") && message.ends_with(": simulated failure"),
        "{message}"
    );
    assert!(volume.volume_source.is_none());
    let fetchers = pods(&ns, "fetch").await;
    assert_eq!(
        fetchers.len(),
        1,
        "the failed fetcher is kept as the record, not replaced"
    );
}

/// `mlkube status` of an app whose job names a VolumeManager that does not exist says what the
/// operator's WaitingForData event says (the job has no condition while it waits), not that the
/// operator may not be running.
#[tokio::test]
async fn status_of_a_job_waiting_for_its_data_says_what_it_waits_for() {
    let ns = TestNamespace::new("volumes-status").await;
    install_crd(&ns).await;
    let _operator = start_operator(&ns).await;
    let (_tmp, app) = empty_app(&ns);
    let params = ["image=example.invalid/train:1", "dataVolumeManager=nosuch"];
    let mut add = vec!["component", "add", "tf-job", "train"];
    add.extend(params.iter().flat_map(|p| ["--param", p]));
    mlkube_ok(&app, &add);
    mlkube_ok(&app, &["apply", "local", "--no-wait"]);
    let reason = eventually("status to tell the job's last event", TIMEOUT, || async {
        let output = mlkube(&app, &["status", "local", "-o", "json"]);
        let report: Value = serde_json::from_slice(&output.stdout).ok()?;
        let members = report["members"].as_array()?;
        let job = members.iter().find(|m| m["kind"] == "TFJob")?;
        let reason = job["reason"].as_str()?;
        reason.contains("WaitingForData").then(|| reason.to_owned())
    })
    .await;
    assert!(
        reason.starts_with("no condition yet; the last event on it: WaitingForData (from ")
            && reason.contains("VolumeManager nosuch, which does not exist; create it"),
        "{reason}"
    );
}

/// A job annotated `data.mlkube.io/volume-manager` waits, with an event, for a VolumeManager
/// that does not exist yet; once the volume controller has placed it, every pod of the job
/// mounts the volume it reports, read-only at /data/<id>, on the nodes that hold it.
#[tokio::test]
async fn a_job_reading_a_volume_managers_data_starts_once_it_is_placed_and_mounts_it() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("volumes-job").await;
    let _controller = start(&ns).await;
    let _operator = start_operator(&ns).await;
    let job: TFJob = serde_json::from_value(driven_by_hand(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": "reader",
            "annotations": { "data.mlkube.io/volume-manager": "digits-data" } },
        "spec": { "tfReplicaSpecs": { "Worker": { "replicas": 2, "restartPolicy": "Never",
            "template": { "spec": { "containers": [{ "name": "tensorflow", "image": "t" }] } } } } }
    })))
    .expect("a valid TFJob");
    submit(&ns, &job).await;
    let waiting = eventually("a WaitingForData event on the job", TIMEOUT, || async {
        job_events(&ns, "reader", "WaitingForData").await.pop()
    })
    .await;
    let note = waiting.note.unwrap_or_default();
    assert!(
        note.contains("VolumeManager digits-data, which does not exist"),
        "{note}"
    );
    assert!(
        workers(&ns).await.is_empty(),
        "no pod before the data is placed"
    );

    let (api, _) = create(
        &ns,
        "digits-data",
        json!([s3_volume("digits", 1, json!({}))]),
    )
    .await;
    let vm = reaches(&api, "digits-data", State::Completed).await;
    let placed = &vm.status.as_ref().expect("a status").volumes[0];
    // The nodes the status selects are exactly those a fetcher succeeded on.
    let holders: Vec<String> = pods(&ns, "fetch")
        .await
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
        .filter_map(|p| p.spec?.node_name)
        .collect();
    assert_eq!(
        serde_json::to_value(&placed.node_affinity).unwrap()["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"],
        json!([{ "matchFields": [{ "key": "metadata.name", "operator": "In", "values": holders }] }])
    );
    let running = await_running(&ns, "reader", &["reader-worker-0", "reader-worker-1"]).await;
    for pod in running.values() {
        let spec = pod.spec.as_ref().expect("a pod spec");
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.host_path.is_some())
            .expect("the data's volume");
        let source = placed.volume_source.as_ref().expect("a volume source");
        assert_eq!(volume.host_path, source.host_path);
        let mount = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == volume.name)
            .expect("the container mounts it");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            ("/data/digits", Some(true))
        );
        let affinity = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref());
        assert_eq!(
            affinity,
            placed.node_affinity.as_ref(),
            "on the data's nodes"
        );
        let node = spec.node_name.as_deref().expect("scheduled");
        assert!(
            serde_json::to_string(affinity.unwrap())
                .unwrap()
                .contains(node),
            "{node} holds the data"
        );
    }
}

async fn workers(ns: &TestNamespace) -> Vec<Pod> {
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().labels("training.kubeflow.org/job-name=reader"))
        .await
        .expect("listing pods")
        .items
}
