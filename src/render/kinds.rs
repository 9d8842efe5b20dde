//! The one table of kinds mlkube knows by name, in apply order, each with its apply tier: what
//! others depend on goes first. `show` sorts a manifest by it ([`rank`]), `apply` applies tier
//! by tier ([`tier`]) keeping that order within a tier, and `delete` runs the tiers in reverse,
//! so all three agree.
//!
//! Pure data: no cluster.

/// Apply tiers, in order. Deletion runs them in reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Tier {
    Namespaces,
    /// CRDs, waited for until `Established` before any later tier.
    Crds,
    /// Cluster-scoped RBAC and other cluster-wide settings (priority, storage, runtime and
    /// ingress classes, persistent volumes).
    ClusterRbac,
    /// ServiceAccounts and namespaced RBAC.
    ServiceAccounts,
    /// Quotas, limits, network and disruption policies, ConfigMaps, Secrets and volume claims.
    Config,
    Services,
    Workloads,
    /// Traffic routes (Gateway API routes, Istio VirtualServices): `apply` writes them only once
    /// the workloads before them are ready, so weight never moves to a backend that cannot
    /// answer yet.
    Routes,
    /// Everything else, custom objects included: their CRDs and controllers are in place.
    Other,
    /// Admission webhooks and aggregated APIs last, so that their servers run before they
    /// intercept or serve anything.
    Webhooks,
}

/// Known kinds in apply order, as (group, kind, tier). The tiers never go down along the table
/// (a test checks), so sorting by position and then applying by tier agree.
const KINDS: &[(&str, &str, Tier)] = &[
    ("", "Namespace", Tier::Namespaces),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        Tier::Crds,
    ),
    ("scheduling.k8s.io", "PriorityClass", Tier::ClusterRbac),
    ("storage.k8s.io", "StorageClass", Tier::ClusterRbac),
    ("node.k8s.io", "RuntimeClass", Tier::ClusterRbac),
    ("networking.k8s.io", "IngressClass", Tier::ClusterRbac),
    (
        "gateway.networking.k8s.io",
        "GatewayClass",
        Tier::ClusterRbac,
    ),
    ("", "PersistentVolume", Tier::ClusterRbac),
    (
        "rbac.authorization.k8s.io",
        "ClusterRole",
        Tier::ClusterRbac,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        Tier::ClusterRbac,
    ),
    ("", "ServiceAccount", Tier::ServiceAccounts),
    ("rbac.authorization.k8s.io", "Role", Tier::ServiceAccounts),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        Tier::ServiceAccounts,
    ),
    ("", "ResourceQuota", Tier::Config),
    ("", "LimitRange", Tier::Config),
    ("networking.k8s.io", "NetworkPolicy", Tier::Config),
    // A workload's disruption budget is there before its pods: a drain that starts during the
    // apply already keeps to it, and a workload that never gets ready still has it (Helm, too,
    // installs budgets before workloads). Deletion runs the tiers in reverse: it goes after them.
    ("policy", "PodDisruptionBudget", Tier::Config),
    ("", "Secret", Tier::Config),
    ("", "ConfigMap", Tier::Config),
    ("", "PersistentVolumeClaim", Tier::Config),
    ("", "Service", Tier::Services),
    // A Gateway is a listener, like a Service: there before the routes that attach to it.
    ("gateway.networking.k8s.io", "Gateway", Tier::Services),
    ("apps", "DaemonSet", Tier::Workloads),
    ("apps", "Deployment", Tier::Workloads),
    ("apps", "StatefulSet", Tier::Workloads),
    ("apps", "ReplicaSet", Tier::Workloads),
    ("", "ReplicationController", Tier::Workloads),
    ("batch", "Job", Tier::Workloads),
    ("batch", "CronJob", Tier::Workloads),
    ("", "Pod", Tier::Workloads),
    ("gateway.networking.k8s.io", "HTTPRoute", Tier::Routes),
    ("gateway.networking.k8s.io", "GRPCRoute", Tier::Routes),
    ("networking.istio.io", "VirtualService", Tier::Routes),
    // Kinds not listed rank here, in tier Other.
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        Tier::Webhooks,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        Tier::Webhooks,
    ),
    ("apiregistration.k8s.io", "APIService", Tier::Webhooks),
];

/// The position of kinds the table does not list: after the workloads, before the webhooks.
const UNLISTED: usize = 33;

/// The tier of a kind.
pub fn tier(group: &str, kind: &str) -> Tier {
    match position(group, kind) {
        Some(position) => KINDS[position].2,
        None if group == "admissionregistration.k8s.io" => Tier::Webhooks,
        None => Tier::Other,
    }
}

/// Where a kind sorts in apply order: its place in the table, unlisted kinds between the
/// routes and the webhooks (other admission kinds with the webhooks).
pub fn rank(group: &str, kind: &str) -> usize {
    match position(group, kind) {
        Some(position) if position >= UNLISTED => position + 1,
        Some(position) => position,
        None if group == "admissionregistration.k8s.io" => KINDS.len() + 1,
        None => UNLISTED,
    }
}

fn position(group: &str, kind: &str) -> Option<usize> {
    KINDS.iter().position(|(g, k, _)| *g == group && *k == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorting_by_rank_and_applying_by_tier_agree() {
        let mut kinds: Vec<(&str, &str)> = KINDS.iter().map(|(g, k, _)| (*g, *k)).collect();
        kinds.push(("example.com", "Widget"));
        kinds.push(("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"));
        kinds.sort_by_key(|(g, k)| rank(g, k));
        let tiers: Vec<Tier> = kinds.iter().map(|(g, k)| tier(g, k)).collect();
        assert!(tiers.is_sorted(), "{kinds:?} give {tiers:?}");
        assert_eq!(KINDS[UNLISTED].2, Tier::Webhooks);
        assert_eq!(KINDS[UNLISTED - 1].2, Tier::Routes);
    }

    #[test]
    fn the_kinds_the_two_tables_used_to_disagree_on_have_one_place() {
        assert_eq!(tier("networking.k8s.io", "NetworkPolicy"), Tier::Config);
        assert_eq!(tier("node.k8s.io", "RuntimeClass"), Tier::ClusterRbac);
        assert_eq!(tier("networking.k8s.io", "IngressClass"), Tier::ClusterRbac);
        assert_eq!(tier("apiregistration.k8s.io", "APIService"), Tier::Webhooks);
    }

    #[test]
    fn routes_come_after_the_workloads_they_send_to_and_gateways_before_them() {
        assert_eq!(tier("gateway.networking.k8s.io", "HTTPRoute"), Tier::Routes);
        assert_eq!(tier("networking.istio.io", "VirtualService"), Tier::Routes);
        assert!(tier("gateway.networking.k8s.io", "Gateway") < Tier::Workloads);
        assert!(tier("gateway.networking.k8s.io", "GatewayClass") < Tier::Workloads);
        assert!(rank("kubeflow.org", "TFJob") > rank("gateway.networking.k8s.io", "HTTPRoute"));
    }

    #[test]
    fn a_disruption_budget_comes_before_the_workloads_it_guards() {
        assert_eq!(tier("policy", "PodDisruptionBudget"), Tier::Config);
        assert!(rank("policy", "PodDisruptionBudget") < rank("apps", "Deployment"));
        assert!(rank("policy", "PodDisruptionBudget") < rank("apps", "StatefulSet"));
    }
}
