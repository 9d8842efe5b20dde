//! Data a job's pods read from a VolumeManager (the volume controller's `kvc.kubeflow.org/v1`).
//!
//! KVC leaves it to the user to copy a VolumeManager's `status.volumes` (a volume source and
//! the nodes that hold the data) into a pod. A job annotated
//! `data.mlkube.io/volume-manager: NAME` has the operator do it: once the VolumeManager NAME
//! in the job's namespace is Completed, every pod of the job mounts each of its volumes
//! read-only at `/data/<volume id>` in every container, and is placed only on nodes that hold
//! all of them. Until then the job's pods wait, and an event says why.
//!
//! This module decides (pure); the controller reads the VolumeManager.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorTerm, PodSpec, Volume, VolumeMount,
};

use crate::operator::training::framework::TrainingJob;
use crate::operator::volumes::api::{State, VolumeManager, VolumeStatus, is_directory_name};

/// The annotation that names the VolumeManager a job reads from.
pub const VOLUME_MANAGER: &str = "data.mlkube.io/volume-manager";
/// Where each volume is mounted: `<MOUNT_ROOT>/<volume id>`.
pub const MOUNT_ROOT: &str = "/data";

/// Whether a job's pods may start reading their data.
#[derive(Debug, PartialEq)]
pub enum Readiness {
    /// The data is in place: mount these.
    Ready(Vec<VolumeStatus>),
    /// Not yet (or never, when `failed`): the message says why.
    Waiting { message: String, failed: bool },
}

/// The VolumeManager `job` reads from, if it names one.
pub fn volume_manager<J: TrainingJob>(job: &J) -> Option<&str> {
    job.meta()
        .annotations
        .as_ref()?
        .get(VOLUME_MANAGER)
        .map(String::as_str)
        .filter(|name| !name.is_empty())
}

/// Whether the VolumeManager `name` (`None`: there is none) lets the job's pods start.
pub fn readiness(name: &str, manager: Option<&VolumeManager>) -> Readiness {
    let waiting = |message: String, failed: bool| Readiness::Waiting { message, failed };
    let Some(manager) = manager else {
        return waiting(
            format!(
                "waiting for VolumeManager {name}, which does not exist; create it, or correct the {VOLUME_MANAGER} annotation"
            ),
            false,
        );
    };
    let status = manager.status.clone().unwrap_or_default();
    let why = status
        .message
        .as_deref()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    match status.state {
        Some(State::Completed) => match status.volumes.iter().find(|v| !is_directory_name(&v.id)) {
            Some(bad) => waiting(
                format!(
                    "VolumeManager {name} reports a volume id {:?} that cannot name a directory under {MOUNT_ROOT}; the job cannot mount it",
                    bad.id
                ),
                true,
            ),
            None => Readiness::Ready(status.volumes),
        },
        Some(State::Failed) => waiting(
            format!(
                "VolumeManager {name} failed to place the data{why}; fix it, and the job starts once it is Completed"
            ),
            true,
        ),
        state => {
            let state = state.map_or("not yet placed by the volume controller", State::as_str);
            waiting(
                format!("waiting for VolumeManager {name} to place the data ({state}{why})"),
                false,
            )
        }
    }
}

/// Mount `volumes` in every replica's pod template of `job` and require their nodes.
pub fn attach<J: TrainingJob>(job: &mut J, volumes: &[VolumeStatus]) {
    for spec in job.replica_specs_mut().values_mut() {
        let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
        attach_to_pod(pod, volumes);
    }
}

fn attach_to_pod(pod: &mut PodSpec, volumes: &[VolumeStatus]) {
    for (index, volume) in volumes.iter().enumerate() {
        let Some(source) = &volume.volume_source else {
            continue;
        };
        let name = format!("mlkube-data-{index}");
        pod.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: name.clone(),
            host_path: source.host_path.clone(),
            nfs: source.nfs.clone(),
            ..Volume::default()
        });
        let mount = VolumeMount {
            name,
            mount_path: format!("{MOUNT_ROOT}/{}", volume.id),
            read_only: Some(true),
            ..VolumeMount::default()
        };
        for container in &mut pod.containers {
            container
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(mount.clone());
        }
        if let Some(nodes) = &volume.node_affinity {
            require(pod, nodes);
        }
    }
}

/// Narrow the pod's required node affinity to nodes that `nodes` also requires: every term of
/// one joined with every term of the other (terms are alternatives, their requirements all
/// hold).
fn require(pod: &mut PodSpec, nodes: &NodeAffinity) {
    let Some(wanted) = &nodes.required_during_scheduling_ignored_during_execution else {
        return;
    };
    let affinity = pod
        .affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let terms = match &affinity.required_during_scheduling_ignored_during_execution {
        None => wanted.node_selector_terms.clone(),
        Some(own) => own
            .node_selector_terms
            .iter()
            .flat_map(|mine| {
                wanted
                    .node_selector_terms
                    .iter()
                    .map(move |w| joined(mine, w))
            })
            .collect(),
    };
    affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: terms,
    });
}

fn joined(a: &NodeSelectorTerm, b: &NodeSelectorTerm) -> NodeSelectorTerm {
    let both = |x: &Option<Vec<_>>, y: &Option<Vec<_>>| {
        let all: Vec<_> = x.iter().chain(y.iter()).flatten().cloned().collect();
        (!all.is_empty()).then_some(all)
    };
    NodeSelectorTerm {
        match_expressions: both(&a.match_expressions, &b.match_expressions),
        match_fields: both(&a.match_fields, &b.match_fields),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{HostPathVolumeSource, NodeSelectorRequirement};
    use serde_json::json;

    use super::*;
    use crate::operator::training::frameworks::tensorflow::TFJob;
    use crate::operator::volumes::api::{VolumeManagerStatus, VolumeSource};

    fn on_node(node: &str) -> NodeAffinity {
        serde_json::from_value(json!({
            "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
                { "matchFields": [
                    { "key": "metadata.name", "operator": "In", "values": [node] }
                ] }
            ] }
        }))
        .unwrap()
    }

    fn placed(id: &str, path: &str, node: &str) -> VolumeStatus {
        VolumeStatus {
            id: id.to_owned(),
            volume_source: Some(VolumeSource {
                host_path: Some(HostPathVolumeSource {
                    path: path.to_owned(),
                    type_: Some("Directory".to_owned()),
                }),
                nfs: None,
            }),
            node_affinity: Some(on_node(node)),
            state: Some(State::Completed),
            message: None,
        }
    }

    fn manager(state: Option<State>, message: Option<&str>) -> VolumeManager {
        let mut vm = VolumeManager::new("digits", Default::default());
        vm.status = Some(VolumeManagerStatus {
            volumes: vec![placed("digits", "/var/lib/kvc/u/digits", "node-a")],
            state,
            message: message.map(str::to_owned),
            ..VolumeManagerStatus::default()
        });
        vm
    }

    fn job(annotation: Option<&str>) -> TFJob {
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": { "name": "t", "namespace": "ns",
                "annotations": annotation.map(|a| json!({ VOLUME_MANAGER: a })) },
            "spec": { "tfReplicaSpecs": {
                "Worker": { "replicas": 2, "template": { "spec": {
                    "containers": [{ "name": "tensorflow", "image": "i" }],
                    "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            { "matchExpressions": [{ "key": "zone", "operator": "In", "values": ["a"] }] },
                            { "matchExpressions": [{ "key": "zone", "operator": "In", "values": ["b"] }] }
                        ] } } }
                } } },
                "PS": { "replicas": 1, "template": { "spec": {
                    "containers": [{ "name": "tensorflow", "image": "i" }, { "name": "side", "image": "s" }]
                } } }
            } }
        }))
        .unwrap()
    }

    #[test]
    fn the_annotation_names_the_volume_manager() {
        assert_eq!(volume_manager(&job(Some("digits"))), Some("digits"));
        assert_eq!(volume_manager(&job(None)), None);
        assert_eq!(volume_manager(&job(Some(""))), None);
    }

    #[test]
    fn pods_start_only_once_the_data_is_in_place() {
        let completed = manager(Some(State::Completed), None);
        assert_eq!(
            readiness("digits", Some(&completed)),
            Readiness::Ready(completed.status.clone().unwrap().volumes)
        );
        let Readiness::Waiting { message, failed } = readiness(
            "digits",
            Some(&manager(Some(State::Running), Some("1 of 1 fetching"))),
        ) else {
            panic!("a running VolumeManager holds the pods back");
        };
        assert!(!failed);
        assert!(message.contains("(Running: 1 of 1 fetching)"), "{message}");
        let Readiness::Waiting { message, failed } = readiness(
            "digits",
            Some(&manager(Some(State::Failed), Some("no such bucket data"))),
        ) else {
            panic!("a failed VolumeManager holds the pods back");
        };
        assert!(failed);
        assert!(
            message.contains("failed to place the data: no such bucket data"),
            "{message}"
        );
        let Readiness::Waiting { message, failed } = readiness("digits", None) else {
            panic!("a missing VolumeManager holds the pods back");
        };
        assert!(!failed);
        assert!(
            message.contains(
                "does not exist; create it, or correct the data.mlkube.io/volume-manager annotation"
            ),
            "{message}"
        );
        let mut escaping = manager(Some(State::Completed), None);
        escaping.status.as_mut().unwrap().volumes[0].id = "../etc".into();
        assert!(matches!(
            readiness("digits", Some(&escaping)),
            Readiness::Waiting { message, failed: true } if message.contains("volume id \"../etc\" that cannot name a directory under /data")
        ));
        let unplaced = manager(None, None);
        assert!(matches!(
            readiness("digits", Some(&unplaced)),
            Readiness::Waiting { message, .. } if message.contains("not yet placed by the volume controller")
        ));
    }

    #[test]
    fn every_container_mounts_every_volume_read_only_on_the_nodes_that_hold_them() {
        let mut job = job(Some("digits"));
        attach(
            &mut job,
            &[
                placed("digits", "/kvc/u/digits", "node-a"),
                placed("labels", "/kvc/u/labels", "node-a"),
            ],
        );
        let specs = &job.spec.tf_replica_specs;
        let ps = specs["PS"].template.spec.as_ref().unwrap();
        let volumes = ps.volumes.as_ref().unwrap();
        assert_eq!(volumes.len(), 2);
        assert_eq!(volumes[1].name, "mlkube-data-1");
        assert_eq!(volumes[1].host_path.as_ref().unwrap().path, "/kvc/u/labels");
        for container in &ps.containers {
            let mounts = container.volume_mounts.as_ref().unwrap();
            let paths: Vec<_> = mounts.iter().map(|m| m.mount_path.as_str()).collect();
            assert_eq!(paths, ["/data/digits", "/data/labels"]);
            assert!(mounts.iter().all(|m| m.read_only == Some(true)));
        }
        let required = |spec: &PodSpec| {
            spec.affinity
                .as_ref()
                .unwrap()
                .node_affinity
                .as_ref()
                .unwrap()
                .required_during_scheduling_ignored_during_execution
                .clone()
                .unwrap()
        };
        // No affinity of its own: the data's nodes.
        let ps_terms = required(ps).node_selector_terms;
        assert_eq!(ps_terms.len(), 1);
        assert_eq!(ps_terms[0].match_fields.as_ref().unwrap().len(), 2);
        // Its own alternatives each narrowed to the data's nodes.
        let worker = specs["Worker"].template.spec.as_ref().unwrap();
        let terms = required(worker).node_selector_terms;
        assert_eq!(terms.len(), 2);
        for (term, zone) in terms.iter().zip(["a", "b"]) {
            let expressions: &Vec<NodeSelectorRequirement> =
                term.match_expressions.as_ref().unwrap();
            assert_eq!(expressions[0].values.as_ref().unwrap(), &[zone.to_owned()]);
            let fields = term.match_fields.as_ref().unwrap();
            assert_eq!(fields.len(), 2, "both volumes' nodes: {term:?}");
            assert_eq!(fields[0].values.as_ref().unwrap(), &["node-a".to_owned()]);
        }
    }
}
