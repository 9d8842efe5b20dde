//! The decision table: a VolumeManager and its pods in, the status and the pods to create and
//! delete out.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::*;
use crate::operator::volumes::api::{CREDENTIALS_SECRET, is_directory_name};

fn placement() -> Placement {
    Placement {
        root: "/var/lib/mlkube/volumes".into(),
        image: "mlkube/mlkube:0.1.0".into(),
        secrets: None,
    }
}

/// A node `name` that may hold any volume's data.
fn node(name: &str) -> Node {
    serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap()
}

/// The plan for `vm` with `pods` on a cluster of `nodes`.
fn on_nodes(vm: &VolumeManager, pods: &[&Pod], nodes: &[Node]) -> Plan {
    let nodes: Vec<&Node> = nodes.iter().collect();
    plan(
        &placement(),
        vm,
        &Observed {
            pods,
            nodes: &nodes,
        },
    )
}

/// The plan for `vm` with `pods` on a cluster of two nodes, node-a and node-b.
fn planned(vm: &VolumeManager, pods: &[&Pod]) -> Plan {
    on_nodes(vm, pods, &[node("node-a"), node("node-b")])
}

/// A VolumeManager `data` with these volumeConfigs.
fn manager(configs: serde_json::Value) -> VolumeManager {
    serde_json::from_value(json!({
        "apiVersion": "kvc.kubeflow.org/v1",
        "kind": "VolumeManager",
        "metadata": { "name": "data", "namespace": "ml", "uid": "u-1", "finalizers": [FINALIZER] },
        "spec": { "volumeConfigs": configs },
    }))
    .unwrap()
}

fn s3(id: &str, replicas: i64) -> serde_json::Value {
    json!({
        "id": id, "replicas": replicas, "sourceType": "S3-Dev",
        "endpointURL": "http://store:9000", "sourceURL": "s3://datasets/digits",
        "options": { CREDENTIALS_SECRET: "store" },
    })
}

/// The fetcher the plan creates for replica `r` of `id`, in `phase` on `node`.
fn fetcher(vm: &VolumeManager, id: &str, r: i64, phase: &str, node: Option<&str>) -> Pod {
    let config = vm.spec.volume_configs.iter().find(|c| c.id == id).unwrap();
    let Ok(Source::S3(source)) = source::source(config) else {
        panic!()
    };
    let mut pod = pods::fetcher(&placement(), vm, config, &source, r).unwrap();
    pod.spec.as_mut().unwrap().node_name = node.map(str::to_owned);
    pod.status = Some(serde_json::from_value(json!({ "phase": phase })).unwrap());
    pod
}

fn failed_with(mut pod: Pod, message: &str) -> Pod {
    pod.status = Some(
        serde_json::from_value(json!({
            "phase": "Failed",
            "containerStatuses": [{ "name": "fetch", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": { "terminated": { "exitCode": 1, "message": message } } }],
        }))
        .unwrap(),
    );
    pod
}

fn state_of(plan: &Plan, id: &str) -> (Option<State>, String) {
    let v = plan.status.volumes.iter().find(|v| v.id == id).unwrap();
    (v.state, v.message.clone().unwrap_or_default())
}

fn nodes(plan: &Plan, id: &str) -> Vec<String> {
    let v = plan.status.volumes.iter().find(|v| v.id == id).unwrap();
    nodes_of(v.node_affinity.as_ref()).collect()
}

#[test]
fn a_new_manager_gets_its_finalizer_and_one_fetcher_per_replica() {
    let mut vm = manager(json!([s3("digits", 2)]));
    vm.metadata.finalizers = None;
    let plan = planned(&vm, &[]);
    assert_eq!(plan.finalizer, Finalizer::Add);
    let names: Vec<String> = plan.create.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["data-digits-0", "data-digits-1"]);
    assert_eq!(state_of(&plan, "digits").0, Some(State::Pending));
    assert_eq!(plan.status.state, Some(State::Pending));
    let spec = plan.create[0].spec.as_ref().unwrap();
    let anti = serde_json::to_value(&spec.affinity).unwrap();
    assert_eq!(
        anti["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
        "kubernetes.io/hostname"
    );
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(
        volume.host_path.as_ref().unwrap().path,
        "/var/lib/mlkube/volumes/u-1"
    );
}

#[test]
fn fetchers_that_succeeded_complete_the_volume_with_its_nodes() {
    let vm = manager(json!([s3("digits", 2)]));
    let a = fetcher(&vm, "digits", 0, "Succeeded", Some("node-a"));
    let b = fetcher(&vm, "digits", 1, "Running", Some("node-b"));
    let running = planned(&vm, &[&a, &b]);
    assert!(running.create.is_empty());
    assert_eq!(state_of(&running, "digits").0, Some(State::Running));
    let b = fetcher(&vm, "digits", 1, "Succeeded", Some("node-b"));
    let done = planned(&vm, &[&a, &b]);
    assert_eq!(
        state_of(&done, "digits"),
        (
            Some(State::Completed),
            "s3://datasets/digits placed on 2 nodes: node-a, node-b".into()
        )
    );
    assert_eq!(nodes(&done, "digits"), ["node-a", "node-b"]);
    let source = done.status.volumes[0].volume_source.as_ref().unwrap();
    let host_path = source.host_path.as_ref().unwrap();
    assert_eq!(host_path.path, "/var/lib/mlkube/volumes/u-1/digits");
    assert_eq!(done.status.state, Some(State::Completed));
    assert_eq!(done.finalizer, Finalizer::Keep);
}

/// The fetchers of replicas 0 and 1 of `digits`, succeeded on node-a and node-b.
fn succeeded_on_a_and_b(vm: &VolumeManager) -> [Pod; 2] {
    [
        fetcher(vm, "digits", 0, "Succeeded", Some("node-a")),
        fetcher(vm, "digits", 1, "Succeeded", Some("node-b")),
    ]
}

/// A node `name` with the node `spec`.
fn node_with(name: &str, spec: serde_json::Value) -> Node {
    serde_json::from_value(json!({ "metadata": { "name": name }, "spec": spec })).unwrap()
}

#[test]
fn too_few_eligible_nodes_fail_the_volume_saying_what_it_needs_and_place_nothing() {
    let vm = manager(json!([s3("digits", 4)]));
    let nodes = [
        node("mlkube-node-2"),
        node("mlkube-node-1"),
        node_with(
            "gpu-0",
            json!({ "taints": [{ "key": "gpu", "effect": "NoSchedule" }] }),
        ),
        node_with("old", json!({ "unschedulable": true })),
    ];
    let plan = on_nodes(&vm, &[], &nodes);
    assert!(plan.create.is_empty(), "no replica is placed");
    let wanted = "replicas 4 needs 4 nodes; 2 are eligible: mlkube-node-1, mlkube-node-2; \
                  not eligible: gpu-0 (taint gpu:NoSchedule not tolerated), old (cordoned)";
    assert_eq!(
        state_of(&plan, "digits"),
        (Some(State::Failed), wanted.to_owned())
    );
    assert!(plan.status.volumes[0].volume_source.is_none());
    assert_eq!(plan.too_few_nodes, [format!("volume digits: {wanted}")]);
    assert_eq!(plan.status.state, Some(State::Failed));
    assert_eq!(
        plan.status.message.as_deref(),
        Some(format!("volume digits: {wanted}").as_str())
    );

    // A node more, tolerated or added, and every replica is placed.
    let mut vm = vm;
    vm.spec.volume_configs[0].tolerations =
        serde_json::from_value(json!([{ "key": "gpu", "operator": "Exists" }])).unwrap();
    let nodes = [
        nodes[0].clone(),
        nodes[1].clone(),
        nodes[2].clone(),
        node("new"),
    ];
    let plan = on_nodes(&vm, &[], &nodes);
    assert_eq!(plan.create.len(), 4);
    assert!(plan.too_few_nodes.is_empty());
    assert_eq!(state_of(&plan, "digits").0, Some(State::Pending));
}

#[test]
fn no_node_at_all_is_said_so() {
    let plan = on_nodes(&manager(json!([s3("digits", 1)])), &[], &[]);
    assert_eq!(
        state_of(&plan, "digits").1,
        "replicas 1 needs 1 node; none is eligible"
    );
}

#[test]
fn the_volumes_node_affinity_limits_the_eligible_nodes() {
    let mut config = s3("digits", 2);
    config["nodeAffinity"] = json!({ "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchFields": [
            { "key": "metadata.name", "operator": "In", "values": ["node-a"] }] }] } });
    let plan = planned(&manager(json!([config])), &[]);
    assert!(plan.create.is_empty());
    assert_eq!(
        state_of(&plan, "digits").1,
        "replicas 2 needs 2 nodes; 1 is eligible: node-a; \
         not eligible: node-b (not selected by the volume's nodeAffinity)"
    );
}

#[test]
fn a_node_that_holds_a_replica_counts_even_when_no_longer_eligible() {
    let vm = manager(json!([s3("digits", 2)]));
    let a = fetcher(&vm, "digits", 0, "Succeeded", Some("node-a"));
    let nodes = [
        node_with("node-a", json!({ "unschedulable": true })),
        node("node-b"),
    ];
    let plan = on_nodes(&vm, &[&a], &nodes);
    let names: Vec<String> = plan.create.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["data-digits-1"]);
    assert!(plan.too_few_nodes.is_empty());
}

#[test]
fn replicas_raised_past_the_nodes_keep_what_is_placed_and_place_no_more() {
    let vm = manager(json!([s3("digits", 3)]));
    let [a, b] = succeeded_on_a_and_b(&vm);
    let plan = planned(&vm, &[&a, &b]);
    assert!(plan.create.is_empty());
    assert_eq!(
        state_of(&plan, "digits"),
        (
            Some(State::Failed),
            "replicas 3 needs 3 nodes; 2 are eligible: node-a, node-b".into()
        )
    );
    assert_eq!(
        nodes(&plan, "digits"),
        ["node-a", "node-b"],
        "still cleaned on deletion"
    );
}

#[test]
fn placed_replicas_are_not_counted_against_the_nodes_again() {
    // Every replica is on a node: nodes that went since do not matter.
    let vm = manager(json!([s3("digits", 2)]));
    let [a, b] = succeeded_on_a_and_b(&vm);
    let plan = on_nodes(&vm, &[&a, &b], &[]);
    assert_eq!(state_of(&plan, "digits").0, Some(State::Completed));
    assert!(plan.too_few_nodes.is_empty());
}

#[test]
fn a_long_list_of_nodes_is_cut_short() {
    let nodes: Vec<Node> = (0..12).map(|i| node(&format!("n-{i:02}"))).collect();
    let plan = on_nodes(&manager(json!([s3("digits", 13)])), &[], &nodes);
    assert_eq!(
        state_of(&plan, "digits").1,
        "replicas 13 needs 13 nodes; 12 are eligible: \
         n-00, n-01, n-02, n-03, n-04, n-05, n-06, n-07, n-08, n-09 and 2 more"
    );
}

#[test]
fn a_failed_fetcher_fails_the_volume_with_its_message_and_no_source() {
    let vm = manager(json!([s3("digits", 2)]));
    let a = failed_with(
        fetcher(&vm, "digits", 0, "Failed", Some("node-a")),
        "bad credentials: the endpoint refused the access key (InvalidAccessKeyId)",
    );
    let plan = planned(&vm, &[&a]);
    // The missing replica is not placed once the volume has failed.
    assert!(plan.create.is_empty());
    let (state, message) = state_of(&plan, "digits");
    assert_eq!(state, Some(State::Failed));
    assert_eq!(
        message,
        "replica 0 on node node-a: bad credentials: the endpoint refused the access key (InvalidAccessKeyId)"
    );
    assert!(plan.status.volumes[0].volume_source.is_none());
    assert_eq!(plan.status.state, Some(State::Failed));
    assert!(
        plan.status
            .message
            .as_deref()
            .unwrap()
            .starts_with("volume digits: replica 0")
    );
}

#[test]
fn a_fetcher_past_its_deadline_is_a_timeout() {
    let vm = manager(json!([s3("digits", 1)]));
    let mut pod = fetcher(&vm, "digits", 0, "Failed", Some("n"));
    pod.status.as_mut().unwrap().reason = Some("DeadlineExceeded".into());
    let plan = planned(&vm, &[&pod]);
    assert!(state_of(&plan, "digits").1.contains("timeout"));
}

#[test]
fn an_unschedulable_fetcher_says_why_it_waits() {
    let vm = manager(json!([s3("digits", 1)]));
    let mut pod = fetcher(&vm, "digits", 0, "Pending", None);
    pod.status = Some(
        serde_json::from_value(json!({ "phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules." }] }))
        .unwrap(),
    );
    let plan = planned(&vm, &[&pod]);
    let (state, message) = state_of(&plan, "digits");
    assert_eq!(state, Some(State::Pending));
    assert!(
        message.contains("replica 0: 0/1 nodes are available"),
        "{message}"
    );
}

#[test]
fn unsupported_and_unreadable_sources_fail_without_pods() {
    let vm = manager(json!([
        { "id": "pach", "replicas": 1, "sourceType": "Pachyderm", "options": { "repo": "r" } },
        { "id": "nosecret", "replicas": 1, "sourceType": "S3", "sourceURL": "s3://b/k" },
        s3("zero", 0),
        s3("twice", 1),
        s3("twice", 1),
    ]));
    let plan = planned(&vm, &[]);
    assert!(
        state_of(&plan, "pach")
            .1
            .contains("Pachyderm is not supported")
    );
    assert!(
        state_of(&plan, "nosecret")
            .1
            .contains("awsCredentialsSecretName is missing")
    );
    assert!(
        state_of(&plan, "zero")
            .1
            .contains("replicas must be at least 1")
    );
    assert!(
        plan.status.volumes[4]
            .message
            .as_deref()
            .unwrap()
            .contains("names two volumeConfigs")
    );
    // Only the first of the twice-named volume is placed.
    assert_eq!(plan.create.len(), 1);
    assert_eq!(plan.status.state, Some(State::Failed));
}

#[test]
fn an_id_that_cannot_name_a_directory_fails_its_volume_and_places_nothing() {
    for id in ["", ".", "..", "../etc", "a/b", "white space"] {
        let plan = planned(&manager(json!([s3(id, 1)])), &[]);
        assert!(plan.create.is_empty(), "{id:?}: nothing placed");
        let volume = &plan.status.volumes[0];
        assert_eq!(volume.state, Some(State::Failed), "{id:?}");
        let message = volume.message.as_deref().unwrap();
        assert!(
            message.contains("cannot name the directory jobs mount the volume at"),
            "{id:?}: {message}"
        );
    }
    for id in ["digits", "ames-dataset_2.1"] {
        assert!(is_directory_name(id), "{id}");
    }
}

#[test]
fn an_nfs_volume_is_its_server_and_path_at_once() {
    let mut vm = manager(json!([{ "id": "shared", "replicas": 1, "sourceType": "NFS",
        "options": { "server": "10.0.0.2", "path": "/exports/ml" } }]));
    vm.metadata.finalizers = None;
    let plan = planned(&vm, &[]);
    assert_eq!(
        plan.finalizer,
        Finalizer::Keep,
        "nothing placed, nothing to clean"
    );
    assert!(plan.create.is_empty());
    let v = &plan.status.volumes[0];
    assert_eq!(v.state, Some(State::Completed));
    let nfs = v.volume_source.as_ref().unwrap().nfs.as_ref().unwrap();
    assert_eq!(
        (nfs.server.as_str(), nfs.path.as_str()),
        ("10.0.0.2", "/exports/ml")
    );
    assert!(v.node_affinity.is_none());
}

fn deleting(mut vm: VolumeManager) -> VolumeManager {
    vm.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-11-27T04:00:00Z")).unwrap());
    vm
}

#[test]
fn a_deleted_manager_stops_its_fetchers_first_and_records_their_nodes() {
    let vm = deleting(manager(json!([s3("digits", 2)])));
    let a = fetcher(&vm, "digits", 0, "Succeeded", Some("node-a"));
    let b = fetcher(&vm, "digits", 1, "Running", Some("node-b"));
    let plan = planned(&vm, &[&a, &b]);
    assert_eq!(plan.delete, ["data-digits-1"]);
    assert!(
        plan.create.is_empty(),
        "no cleaner while a fetcher may still write"
    );
    assert_eq!(nodes(&plan, "digits"), ["node-a", "node-b"]);
    assert_eq!(plan.finalizer, Finalizer::Keep);
}

#[test]
fn a_deleted_manager_cleans_every_node_then_lets_go() {
    let mut vm = deleting(manager(json!([s3("digits", 2)])));
    let a = fetcher(&vm, "digits", 0, "Succeeded", Some("node-a"));
    // node-b's fetcher is gone; the status remembers it.
    vm.status = Some(VolumeManagerStatus {
        volumes: vec![VolumeStatus {
            id: "digits".into(),
            node_affinity: node_affinity(&["node-b".to_owned()].into()),
            ..VolumeStatus::default()
        }],
        ..VolumeManagerStatus::default()
    });
    let first = planned(&vm, &[&a]);
    let cleaners: Vec<String> = first.create.iter().map(|p| p.name_any()).collect();
    assert_eq!(
        cleaners,
        [
            pods::cleaner_name(&vm, "node-a"),
            pods::cleaner_name(&vm, "node-b")
        ]
    );
    let node_names: Vec<_> = first
        .create
        .iter()
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    assert_eq!(node_names, ["node-a", "node-b"]);
    assert_eq!(first.finalizer, Finalizer::Keep);

    let mut clean_a = first.create[0].clone();
    clean_a.status = Some(serde_json::from_value(json!({ "phase": "Succeeded" })).unwrap());
    let mut clean_b = first.create[1].clone();
    clean_b.status = Some(serde_json::from_value(json!({ "phase": "Failed" })).unwrap());
    let retry = planned(&vm, &[&a, &clean_a, &clean_b]);
    assert_eq!(
        retry.delete,
        [clean_b.name_any()],
        "a failed cleaner is tried again"
    );
    assert_eq!(retry.finalizer, Finalizer::Keep);

    clean_b.status = Some(serde_json::from_value(json!({ "phase": "Succeeded" })).unwrap());
    let done = planned(&vm, &[&a, &clean_a, &clean_b]);
    assert_eq!(done.finalizer, Finalizer::Remove);
    assert!(done.create.is_empty() && done.delete.is_empty());
}

#[test]
fn a_deleted_manager_without_placed_data_goes_at_once() {
    let vm = deleting(manager(json!([s3("digits", 1)])));
    let plan = planned(&vm, &[]);
    assert_eq!(plan.finalizer, Finalizer::Remove);
    assert!(plan.create.is_empty());
}

/// A fetcher evicted from a lost node: deleted, not ended, as Kubernetes leaves it until the
/// node confirms or is declared out of service.
fn evicted(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-11-28T15:00:00Z")).unwrap());
    pod.status = Some(
        serde_json::from_value(json!({
            "phase": "Running",
            "conditions": [{ "type": "DisruptionTarget", "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint" }],
        }))
        .unwrap(),
    );
    pod
}

#[test]
fn a_fetcher_lost_with_its_node_is_replaced_only_once_gone_and_its_node_is_still_cleaned() {
    let vm = manager(json!([s3("digits", 1)]));
    let lost = evicted(fetcher(&vm, "digits", 0, "Running", Some("node-b")));
    let waiting = planned(&vm, &[&lost]);
    assert!(
        waiting.create.is_empty(),
        "no second fetcher while the first may run"
    );
    assert_eq!(
        state_of(&waiting, "digits"),
        (
            Some(State::Running),
            "placing s3://datasets/digits: 0 of 1 replicas done; replica 0 on node-b: Taint \
             manager: deleting due to NoExecute taint, placed again once its pod is gone"
                .to_owned()
        )
    );
    assert_eq!(waiting.status.nodes_to_clean, ["node-b"]);

    // The pod is gone (its node declared out of service): placed again, node-b remembered.
    let mut vm = vm;
    vm.status = Some(waiting.status.clone());
    let again = planned(&vm, &[]);
    let names: Vec<String> = again.create.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["data-digits-0"]);
    assert_eq!(again.status.nodes_to_clean, ["node-b"]);

    // Placed on node-a; deleting cleans node-a and the lost copy on node-b.
    let placed = fetcher(&vm, "digits", 0, "Succeeded", Some("node-a"));
    vm.status = Some(planned(&vm, &[&placed]).status);
    assert_eq!(
        vm.status.as_ref().unwrap().nodes_to_clean,
        ["node-a", "node-b"]
    );
    assert_eq!(nodes(&planned(&vm, &[&placed]), "digits"), ["node-a"]);
    let deleting = planned(&deleting(vm.clone()), &[&placed]);
    let cleaned: Vec<_> = (deleting.create.iter())
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    assert_eq!(cleaned, ["node-a", "node-b"]);
}

#[test]
fn a_volume_that_cannot_be_placed_is_warned_of_once_beside_the_others() {
    let mut bad = s3("huge", 1_000_000_000_000);
    bad["tolerations"] = json!("all");
    let short = s3("wide", 3);
    let plan = planned(&manager(json!([s3("digits", 1), bad, short])), &[]);
    assert_eq!(plan.create.len(), 1, "only digits is placed");
    assert_eq!(
        plan.failed,
        [
            "volume huge: replicas must be at most 5000 (one copy per node, and a cluster has at most 5000 nodes), got 1000000000000"
        ]
    );
    assert_eq!(plan.too_few_nodes.len(), 1, "wide waits for nodes");
    assert!(!plan.failed.iter().any(|f| f.starts_with("volume wide")));
}

#[test]
fn a_secret_the_controller_was_not_granted_fails_its_volume_and_places_nothing() {
    let granted = Placement {
        secrets: Some(vec!["object-store-credentials".into()]),
        ..placement()
    };
    let vm = manager(json!([s3("digits", 1)]));
    let pods: Vec<&Pod> = Vec::new();
    let nodes = [node("node-a")];
    let nodes: Vec<&Node> = nodes.iter().collect();
    let observed = Observed {
        pods: &pods,
        nodes: &nodes,
    };
    let plan = super::plan(&granted, &vm, &observed);
    assert!(plan.create.is_empty(), "nothing is placed");
    assert_eq!(
        plan.failed,
        [
            "volume digits: options.awsCredentialsSecretName \"store\" is not one of the Secrets this volume controller may give fetchers (object-store-credentials); hint: name one of them, or have the volume-controller component's credentialSecrets grant it"
        ]
    );
    let allowed = Placement {
        secrets: Some(vec!["store".into()]),
        ..placement()
    };
    assert_eq!(super::plan(&allowed, &vm, &observed).create.len(), 1);
}
