//! Which nodes may hold a volume's data: those its fetchers could be scheduled on, as far as
//! the node itself decides it. A node is eligible when it is not cordoned, every taint that
//! keeps pods off (`NoSchedule`, `NoExecute`) is tolerated by the volume's `tolerations`, and
//! the volume's `nodeAffinity` (its required terms) selects it. Room on the node (CPU, memory,
//! pods) is left to the scheduler, whose message the status reports when a fetcher waits.
//!
//! Pure: the controller hands in the nodes of its cache; `plan` counts the eligible ones
//! against `replicas`.

use k8s_openapi::api::core::v1::{
    Node, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration,
};
use kube::ResourceExt;

use super::api::VolumeConfig;

/// The nodes of a cluster, split by whether a volume's fetchers may run there.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Eligibility {
    /// The eligible nodes' names, sorted.
    pub eligible: Vec<String>,
    /// The other nodes, sorted, each with why it is not eligible.
    pub ruled_out: Vec<(String, String)>,
}

/// Which of `nodes` may hold `config`'s data.
pub fn eligibility(config: &VolumeConfig, nodes: &[&Node]) -> Eligibility {
    let mut split = Eligibility::default();
    for node in nodes {
        match why_not(config, node) {
            None => split.eligible.push(node.name_any()),
            Some(why) => split.ruled_out.push((node.name_any(), why)),
        }
    }
    split.eligible.sort();
    split.ruled_out.sort();
    split
}

/// Why `node` may not hold `config`'s data, if it may not.
fn why_not(config: &VolumeConfig, node: &Node) -> Option<String> {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        return Some("cordoned".to_owned());
    }
    let repelling = spec
        .taints
        .iter()
        .flatten()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .find(|t| {
            !config
                .tolerations
                .entries()
                .iter()
                .any(|tol| tolerates(tol, t))
        });
    if let Some(taint) = repelling {
        return Some(format!("taint {} not tolerated", taint_text(taint)));
    }
    (!selects(config.valid_node_affinity(), node))
        .then(|| "not selected by the volume's nodeAffinity".to_owned())
}

/// A taint as kubectl writes it: `key=value:Effect`, or `key:Effect`.
fn taint_text(taint: &Taint) -> String {
    match taint.value.as_deref().filter(|v| !v.is_empty()) {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// Whether `toleration` tolerates `taint`, by the API's rules: an empty effect matches every
/// effect, an empty key with `Exists` every key, and `Equal` (the default) compares values.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" if !key.is_empty() => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Whether the required terms of `affinity` select `node`; no affinity selects every node.
fn selects(affinity: Option<&NodeAffinity>, node: &Node) -> bool {
    let Some(required) = affinity.and_then(|a| {
        a.required_during_scheduling_ignored_during_execution
            .as_ref()
    }) else {
        return true;
    };
    required
        .node_selector_terms
        .iter()
        .any(|term| term_selects(term, node))
}

/// A term selects a node when all its requirements hold; an empty term selects none.
fn term_selects(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.labels();
    expressions
        .iter()
        .all(|r| holds(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && holds(r, Some(&node.name_any()))
        })
}

/// Whether `requirement` holds for a node whose value of its key is `value` (none: unset).
fn holds(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let listed = value.is_some_and(|v| values.iter().any(|w| w == v));
    let compared = |wanted: std::cmp::Ordering| {
        let number = |text: &str| text.parse::<i64>().ok();
        match (
            value.and_then(number),
            values.first().and_then(|w| number(w)),
        ) {
            (Some(have), Some(bound)) => have.cmp(&bound) == wanted,
            _ => false,
        }
    };
    match requirement.operator.as_str() {
        "In" => listed,
        "NotIn" => !listed,
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compared(std::cmp::Ordering::Greater),
        "Lt" => compared(std::cmp::Ordering::Less),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A node `name` with `labels` and `spec`.
    fn node(name: &str, labels: Value, spec: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels }, "spec": spec,
        }))
        .unwrap()
    }

    /// A node `name` with one taint.
    fn tainted(name: &str, taint: Value) -> Node {
        node(name, json!({}), json!({ "taints": [taint] }))
    }

    fn config(extra: Value) -> VolumeConfig {
        let mut config = json!({ "id": "digits", "replicas": 2 });
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        serde_json::from_value(config).unwrap()
    }

    fn required(terms: Value) -> Value {
        json!({ "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": terms },
        }})
    }

    fn split(config: &VolumeConfig, nodes: &[Node]) -> Eligibility {
        eligibility(config, &nodes.iter().collect::<Vec<_>>())
    }

    #[test]
    fn every_schedulable_node_is_eligible_for_a_volume_without_constraints() {
        let nodes = [
            node("node-b", json!({}), json!({})),
            tainted(
                "node-a",
                json!({ "key": "slow", "effect": "PreferNoSchedule" }),
            ),
        ];
        let split = split(&config(json!({})), &nodes);
        assert_eq!(split.eligible, ["node-a", "node-b"], "sorted");
        assert!(split.ruled_out.is_empty());
    }

    #[test]
    fn cordoned_and_untolerated_nodes_are_ruled_out_with_the_reason() {
        let nodes = [
            node("cordoned", json!({}), json!({ "unschedulable": true })),
            tainted(
                "gpu",
                json!({ "key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule" }),
            ),
            tainted(
                "not-ready",
                json!({ "key": "node.kubernetes.io/not-ready", "effect": "NoExecute" }),
            ),
        ];
        let split = split(&config(json!({})), &nodes);
        assert!(split.eligible.is_empty());
        assert_eq!(
            split.ruled_out,
            [
                ("cordoned".to_owned(), "cordoned".to_owned()),
                (
                    "gpu".to_owned(),
                    "taint nvidia.com/gpu=true:NoSchedule not tolerated".to_owned()
                ),
                (
                    "not-ready".to_owned(),
                    "taint node.kubernetes.io/not-ready:NoExecute not tolerated".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn tolerations_match_as_the_api_defines() {
        let taint = |key: &str, value: Option<&str>, effect: &str| Taint {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            effect: effect.to_owned(),
            time_added: None,
        };
        let toleration = |t: Value| -> Toleration { serde_json::from_value(t).unwrap() };
        let gpu = taint("gpu", Some("true"), "NoSchedule");
        for (tol, expected) in [
            (
                json!({ "key": "gpu", "value": "true", "effect": "NoSchedule" }),
                true,
            ),
            (
                json!({ "key": "gpu", "operator": "Equal", "value": "true" }),
                true,
            ),
            (json!({ "key": "gpu", "value": "false" }), false),
            (json!({ "key": "gpu", "operator": "Exists" }), true),
            (
                json!({ "key": "gpu", "operator": "Exists", "effect": "NoExecute" }),
                false,
            ),
            (json!({ "operator": "Exists" }), true),
            (json!({ "key": "other", "operator": "Exists" }), false),
            (json!({ "value": "true" }), false),
        ] {
            assert_eq!(tolerates(&toleration(tol.clone()), &gpu), expected, "{tol}");
        }
        let bare = taint("dedicated", None, "NoSchedule");
        assert!(tolerates(&toleration(json!({ "key": "dedicated" })), &bare));
    }

    #[test]
    fn the_volumes_node_affinity_selects_by_label_or_name() {
        let nodes = [
            node(
                "node-1",
                json!({ "type": "real", "disk": "500" }),
                json!({}),
            ),
            node("node-2", json!({ "type": "real", "disk": "50" }), json!({})),
            node("kwok-0", json!({ "type": "kwok" }), json!({})),
        ];
        let eligible = |affinity: Value| split(&config(affinity), &nodes).eligible;
        let real = json!([{ "matchExpressions": [
            { "key": "type", "operator": "In", "values": ["real"] }] }]);
        assert_eq!(eligible(required(real)), ["node-1", "node-2"]);
        let big = json!([{ "matchExpressions": [
            { "key": "type", "operator": "In", "values": ["real"] },
            { "key": "disk", "operator": "Gt", "values": ["100"] }] }]);
        assert_eq!(eligible(required(big)), ["node-1"]);
        let either = json!([
            { "matchExpressions": [{ "key": "disk", "operator": "Lt", "values": ["100"] }] },
            { "matchFields": [{ "key": "metadata.name", "operator": "In", "values": ["kwok-0"] }] },
        ]);
        assert_eq!(eligible(required(either)), ["kwok-0", "node-2"]);
        let unlabelled = json!([{ "matchExpressions": [
            { "key": "disk", "operator": "DoesNotExist" }] }]);
        assert_eq!(eligible(required(unlabelled)), ["kwok-0"]);
        let not_kwok = json!([{ "matchExpressions": [
            { "key": "type", "operator": "NotIn", "values": ["kwok"] },
            { "key": "type", "operator": "Exists" }] }]);
        assert_eq!(eligible(required(not_kwok)), ["node-1", "node-2"]);
        // An empty term selects nothing, as in the scheduler.
        assert!(eligible(required(json!([{}]))).is_empty());
        let ruled_out = split(&config(required(json!([{}]))), &nodes).ruled_out;
        assert_eq!(ruled_out[0].1, "not selected by the volume's nodeAffinity");
    }
}
