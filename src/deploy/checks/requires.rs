//! Every kind a workload needs is served: an object annotated [`REQUIRES_KINDS`] runs
//! controllers of those kinds (the operator with `servingGateway` runs InferenceServices and
//! writes HTTPRoutes), and its pods are not ready until the API server serves them. An apply
//! that neither installs such a kind's CRD nor finds the kind on the cluster used to write
//! everything and wait its whole timeout on `0/1 available`, while only the pod's `/readyz` said
//! why. Before an apply writes anything, a dry run too, each such kind is looked for in the
//! plan's CRDs, then in the cluster's discovery; a missing one is refused naming the object, the
//! kind and the fix the object's [`REQUIRES_HINT`] gives. Nothing is written.

use crate::deploy::cluster::Cluster;
use crate::deploy::cluster::key::Key;
use crate::deploy::inventory::plan::{Desired, Plan};

/// The kinds an object needs served, `Kind.group` comma-separated (e.g.
/// `HTTPRoute.gateway.networking.k8s.io`).
pub const REQUIRES_KINDS: &str = "mlkube.io/requires-kinds";
/// What to do when one of them is not served, for the refusal's hint.
pub const REQUIRES_HINT: &str = "mlkube.io/requires-hint";

#[derive(Debug, thiserror::Error)]
#[error(
    "{object} runs controllers of {kind}, which the cluster does not serve and this apply does \
     not install, so it would never be ready; nothing was written\n  hint: {hint}"
)]
pub struct Unserved {
    pub object: Key,
    pub kind: String,
    pub hint: String,
}

/// Refuse a plan with an object that needs a kind nothing serves.
pub fn check(cluster: &impl Cluster, plan: &Plan) -> Result<(), Box<Unserved>> {
    for desired in &plan.objects {
        for (kind, group) in required(desired) {
            if plan.crd_of(&group, &kind).is_none()
                && cluster.resolve_group_kind(&group, &kind).is_none()
            {
                return Err(Box::new(unserved(desired, &kind, &group)));
            }
        }
    }
    Ok(())
}

/// The (kind, group) pairs `desired`'s annotation names.
fn required(desired: &Desired) -> Vec<(String, String)> {
    let annotation = desired.value["metadata"]["annotations"][REQUIRES_KINDS].as_str();
    (annotation.unwrap_or_default().split(','))
        .filter_map(|item| item.trim().split_once('.'))
        .map(|(kind, group)| (kind.to_owned(), group.to_owned()))
        .collect()
}

fn unserved(desired: &Desired, kind: &str, group: &str) -> Unserved {
    let hint = desired.value["metadata"]["annotations"][REQUIRES_HINT].as_str();
    Unserved {
        object: desired.key.clone(),
        kind: format!("{kind}.{group}"),
        hint: hint.map_or_else(
            || format!("install the CustomResourceDefinition of {kind}.{group} first"),
            str::to_owned,
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::deploy::checks::fixtures::{object, plan_of};
    use crate::deploy::cluster::memory::MemoryCluster;

    fn operator() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "training-operator", "namespace": "ml", "annotations": {
                   REQUIRES_KINDS: "Widget.example.com",
                   REQUIRES_HINT: "apply the widgets component with it"}},
               "spec": {}})
    }

    fn widgets_crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}})
    }

    #[tokio::test]
    async fn a_kind_neither_the_plan_installs_nor_the_cluster_serves_is_refused_with_the_hint() {
        let cluster = MemoryCluster::new();
        let alone = plan_of(vec![object("training-operator", operator())]);
        let error = check(&cluster, &alone).expect_err("no Widgets").to_string();
        assert_eq!(
            error,
            "Deployment.apps ml/training-operator runs controllers of Widget.example.com, which \
             the cluster does not serve and this apply does not install, so it would never be \
             ready; nothing was written\n  hint: apply the widgets component with it"
        );
        let with_crd = plan_of(vec![
            object("training-operator", operator()),
            object("widgets", widgets_crd()),
        ]);
        check(&cluster, &with_crd).expect("the plan installs Widgets");
        cluster.create_as("kubectl-create", widgets_crd());
        cluster.refresh().await.expect("discovery again");
        check(&cluster, &alone).expect("the cluster serves Widgets");
    }

    #[test]
    fn an_object_without_the_annotation_needs_nothing() {
        let plan = plan_of(vec![object(
            "app",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "c", "namespace": "ml"}}),
        )]);
        check(&MemoryCluster::new(), &plan).expect("nothing required");
    }
}
