//! Replicas pinned to different nodes, and where they ran: what makes a distributed job cross a
//! node boundary on the multi-node local cluster, and the proof that it did.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use mlkube::operator::training::framework::TrainingJob;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::TestNamespace;

/// `job` with its `replica_type` pods (e.g. `Worker`) kept on different nodes: a required pod
/// anti-affinity among that type's pods of this job, on the hostname.
pub fn spread_apart<J: Serialize + DeserializeOwned>(job: J, replica_type: &str) -> J {
    let mut value = serde_json::to_value(job).expect("a job serializes");
    let name = value["metadata"]["name"].clone();
    let specs = value["spec"]
        .as_object_mut()
        .expect("a job has a spec")
        .iter_mut()
        .find(|(key, _)| key.ends_with("ReplicaSpecs"))
        .map(|(_, specs)| specs)
        .expect("a job has replica specs");
    let template = &mut specs[replica_type]["template"];
    assert!(template.is_object(), "no {replica_type} replicas to spread");
    template["spec"]["affinity"] = json!({
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {
                    "training.kubeflow.org/job-name": name,
                    "training.kubeflow.org/replica-type": replica_type.to_lowercase(),
                }},
                "topologyKey": "kubernetes.io/hostname",
            }],
        },
    });
    serde_json::from_value(value).expect("the spread job deserializes")
}

/// The node each pod of the test's namespace was scheduled to, from the scheduler's `Scheduled`
/// events (they outlive pods the operator cleaned up).
pub async fn scheduled_nodes(ns: &TestNamespace) -> BTreeMap<String, String> {
    let events = Api::<Event>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default().fields("reason=Scheduled"))
        .await
        .expect("list the events");
    events
        .items
        .iter()
        .filter_map(|e| {
            let pod = e.involved_object.name.clone()?;
            let message = e.message.as_deref()?;
            let node = message.rsplit(" to ").next()?.trim().to_string();
            Some((pod, node))
        })
        .collect()
}

/// `<job>-<replica>-0` and `-1` ran on two different nodes; returns them.
pub async fn assert_ran_apart<J: TrainingJob>(
    ns: &TestNamespace,
    name: &str,
    replica: &str,
) -> [String; 2] {
    let nodes = scheduled_nodes(ns).await;
    let on = |i: u32| {
        let pod = format!("{name}-{replica}-{i}");
        nodes
            .get(&pod)
            .cloned()
            .unwrap_or_else(|| panic!("no Scheduled event for {pod}: {nodes:?}"))
    };
    let (first, second) = (on(0), on(1));
    assert_ne!(
        first,
        second,
        "the {} {name}'s {replica}s ran on two nodes: {nodes:?}",
        J::FRAMEWORK.kind
    );
    [first, second]
}

#[test]
fn spreading_pins_only_the_named_replica_type_apart() {
    let job = json!({
        "metadata": {"name": "j"},
        "spec": {"mpiReplicaSpecs": {
            "Launcher": {"template": {"spec": {"containers": []}}},
            "Worker": {"template": {"spec": {"containers": []}}},
        }},
    });
    let spread: Value = spread_apart(job, "Worker");
    let specs = &spread["spec"]["mpiReplicaSpecs"];
    assert!(specs["Launcher"]["template"]["spec"]["affinity"].is_null());
    let term = &specs["Worker"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        [0];
    assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        term["labelSelector"]["matchLabels"]["training.kubeflow.org/replica-type"],
        "worker"
    );
    assert_eq!(
        term["labelSelector"]["matchLabels"]["training.kubeflow.org/job-name"],
        "j"
    );
}
