//! The kinds mlkube knows by name and the apply tier of each: what others depend on goes first.
//!
//! Pure data: no cluster.

/// Apply tiers, in order. Deletion runs them in reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Tier {
    Namespaces,
    /// CRDs, waited for until `Established` before any later tier.
    Crds,
    /// Cluster-scoped RBAC and other cluster-wide settings (priority and storage classes).
    ClusterRbac,
    /// ServiceAccounts and namespaced RBAC.
    ServiceAccounts,
    /// ConfigMaps, Secrets, volume claims, limits and quotas.
    Config,
    Services,
    Workloads,
    /// Everything else, custom objects included: their CRDs and controllers are in place.
    Other,
    /// Admission webhooks last, so that their servers run before they intercept anything.
    Webhooks,
}

/// The tier of a kind.
pub fn tier(group: &str, kind: &str) -> Tier {
    match (group, kind) {
        ("", "Namespace") => Tier::Namespaces,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Tier::Crds,
        ("rbac.authorization.k8s.io", "ClusterRole" | "ClusterRoleBinding")
        | ("scheduling.k8s.io", "PriorityClass")
        | ("storage.k8s.io", "StorageClass")
        | ("", "PersistentVolume") => Tier::ClusterRbac,
        ("", "ServiceAccount") | ("rbac.authorization.k8s.io", "Role" | "RoleBinding") => {
            Tier::ServiceAccounts
        }
        ("", "ConfigMap" | "Secret" | "PersistentVolumeClaim" | "LimitRange" | "ResourceQuota") => {
            Tier::Config
        }
        ("", "Service") => Tier::Services,
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job" | "CronJob")
        | ("", "Pod" | "ReplicationController") => Tier::Workloads,
        ("admissionregistration.k8s.io", _) => Tier::Webhooks,
        _ => Tier::Other,
    }
}
