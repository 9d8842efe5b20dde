//! What became of a pod a test waited on in vain, for its panic message: on a loaded machine a
//! bare "timed out" leaves nothing to go on.

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::{Api, Client};

/// What became of the pod `name`, for a test that waited on it in vain: its node and phase,
/// each container's state, the namespace's events about it, and its logs so far.
pub async fn pod_story(pods: &Api<Pod>, name: &str) -> String {
    let pod = match pods.get(name).await {
        Ok(pod) => pod,
        Err(e) => return format!("the pod {name} cannot be read: {e}"),
    };
    let namespace = pod.metadata.namespace.unwrap_or_default();
    let events = Api::<Event>::namespaced(pods.clone().into_client(), &namespace);
    let spec = pod.spec.unwrap_or_default();
    let status = pod.status.unwrap_or_default();
    let mut story = format!(
        "pod {name} on node {:?}, phase {:?}, pod IP {:?}\n",
        spec.node_name, status.phase, status.pod_ip
    );
    if let Some(node) = &spec.node_name {
        story += &node_readiness(pods.clone().into_client(), node).await;
    }
    let containers = status.init_container_statuses.into_iter().flatten();
    for c in containers.chain(status.container_statuses.into_iter().flatten()) {
        let state = serde_json::to_string(&c.state).unwrap_or_default();
        story += &format!("  container {}: ready {}, state {state}\n", c.name, c.ready);
    }
    let about = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    for e in events
        .list(&about)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let (reason, message) = (e.reason.unwrap_or_default(), e.message.unwrap_or_default());
        story += &format!("  event {reason}: {message}\n");
    }
    match pods.logs(name, &Default::default()).await {
        Ok(logs) => story + "  logs:\n" + &logs,
        Err(e) => story + &format!("  no logs: {e}"),
    }
}

/// A line with the Ready condition of the node `name`: its status, reason and last change.
async fn node_readiness(client: Client, name: &str) -> String {
    let node = match Api::<Node>::all(client).get(name).await {
        Ok(node) => node,
        Err(e) => return format!("  node {name} cannot be read: {e}\n"),
    };
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    match conditions.into_iter().find(|c| c.type_ == "Ready") {
        Some(c) => format!(
            "  node {name} Ready {} ({:?}) since {:?}\n",
            c.status, c.reason, c.last_transition_time
        ),
        None => format!("  node {name} reports no Ready condition\n"),
    }
}
