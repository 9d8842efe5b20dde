//! The operator's identity (`operator_identity.rs`) is exactly what the operator needs: the
//! token may do what the operator does, and nothing more. What only a cluster-wide operator
//! does, list and watch across namespaces, is proved here by doing it.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ListParams, PostParams, WatchParams};
use kube::{Api, Client, Resource};
use mlkube::operator::runtime::leader::LEASE_NAME;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::registry;
use serde_json::json;

use crate::operator::install_crd;
use crate::operator_identity::*;
use crate::support::{TestNamespace, client_from};

// ---------------------------------------------------------------------------------------------
// The identity is exactly what the operator needs.

/// Rules of the expected tables: a resource, the verbs the operator uses on it, and the one
/// object name they are limited to, if any.
pub(crate) struct Uses {
    pub(crate) group: &'static str,
    pub(crate) resource: &'static str,
    pub(crate) verbs: &'static [&'static str],
    pub(crate) name: Option<&'static str>,
}

pub(crate) const fn uses(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
) -> Uses {
    Uses {
        group,
        resource,
        verbs,
        name: None,
    }
}

/// In a table, every framework's job resource (`tfjobs`, `pytorchjobs`, ...), with the same
/// subresource suffix; the component runs all frameworks by default.
pub(crate) const JOBS: &str = "<jobs>";

/// The resources a table's entry stands for.
fn resources(resource: &str) -> Vec<String> {
    match resource.strip_prefix(JOBS) {
        Some(subresource) => registry::ALL
            .iter()
            .map(|registered| format!("{}{subresource}", registered.framework.plural))
            .collect(),
        None => vec![resource.to_owned()],
    }
}

/// What the operator does in a namespace whose jobs it runs; each verb is a call in
/// `src/operator/`.
pub(crate) const RUNS_JOBS: &[Uses] = &[
    // The job cache (list, watch), the re-read before adopting orphans (get), TTL (delete).
    uses("kubeflow.org", JOBS, &["delete", "get", "list", "watch"]),
    // The status is written whole, with a replace.
    uses("kubeflow.org", concat!("<jobs>", "/status"), &["update"]),
    // Pods and services carry blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
    // admission plugin allows only to who may update the owner's finalizers.
    uses(
        "kubeflow.org",
        concat!("<jobs>", "/finalizers"),
        &["update"],
    ),
    // The caches (list, watch), creates and deletes, adoption and release (patch).
    uses("", "pods", &["create", "delete", "list", "patch", "watch"]),
    uses(
        "",
        "services",
        &["create", "delete", "list", "patch", "watch"],
    ),
    // The VolumeManager a job reads its data from, read before its pods are created.
    uses("kvc.kubeflow.org", "volumemanagers", &["get"]),
    // events.k8s.io/v1 only: one event per occurrence, a patch of its series on a repeat.
    uses("events.k8s.io", "events", &["create", "patch"]),
    // An MPIJob's ConfigMap and its launcher's ServiceAccount, Role and RoleBinding: watched
    // (list, watch) so that one deleted or changed is written again, read before the first
    // write, server-side applied (which creates them the first time).
    uses(
        "",
        "configmaps",
        &["create", "get", "list", "patch", "watch"],
    ),
    uses(
        "",
        "serviceaccounts",
        &["create", "get", "list", "patch", "watch"],
    ),
    uses(
        "rbac.authorization.k8s.io",
        "roles",
        &["create", "get", "list", "patch", "watch"],
    ),
    uses(
        "rbac.authorization.k8s.io",
        "rolebindings",
        &["create", "get", "list", "patch", "watch"],
    ),
    // What the launcher's Role grants, which the operator must hold to grant it.
    uses("", "pods", &["get"]),
    uses("", "pods/exec", &["create"]),
    // A PyTorchJob's HorizontalPodAutoscaler: read, server-side applied (which creates it the
    // first time), deleted when its policy's metrics go; never watched.
    uses(
        "autoscaling",
        "horizontalpodautoscalers",
        &["create", "delete", "get", "patch"],
    ),
    // FrameworkController's Framework: its cache, its status written whole, and the
    // blockOwnerDeletion of the ConfigMap it owns; each attempt's ConfigMap is created and
    // deleted, and owns the attempt's pods with blockOwnerDeletion (src/operator/fc/).
    uses(
        "frameworkcontroller.microsoft.com",
        "frameworks",
        &["list", "watch"],
    ),
    uses(
        "frameworkcontroller.microsoft.com",
        "frameworks/status",
        &["update"],
    ),
    uses(
        "frameworkcontroller.microsoft.com",
        "frameworks/finalizers",
        &["update"],
    ),
    uses("", "configmaps", &["delete"]),
    uses("", "configmaps/finalizers", &["update"]),
];

/// What the volume controller does in its namespace; each verb is a call in
/// `src/operator/volumes/controller.rs`.
pub(crate) const PLACES_VOLUMES: &[Uses] = &[
    // The VolumeManager cache (list, watch); its status and finalizer by merge patch.
    uses(
        "kvc.kubeflow.org",
        "volumemanagers",
        &["list", "patch", "watch"],
    ),
    // Its pods carry blockOwnerDeletion (see RUNS_JOBS).
    uses("kvc.kubeflow.org", "volumemanagers/finalizers", &["update"]),
    // Fetchers and cleaners: cached, created, deleted.
    uses("", "pods", &["create", "delete", "list", "watch"]),
    // A volume short of nodes; a patch of its series on a repeat.
    uses("events.k8s.io", "events", &["create", "patch"]),
];

/// The volume controller's node cache (list, watch), which counts the nodes that may hold a
/// volume: cluster-scoped, so granted by a ClusterRole and seen from every namespace.
pub(crate) const SEES_NODES: &[Uses] = &[uses("", "nodes", &["list", "watch"])];

/// With `leaderElect`, in the operator's own namespace: its one Lease.
const ELECTS_A_LEADER: &[Uses] = &[
    uses("coordination.k8s.io", "leases", &["create"]),
    Uses {
        name: Some(LEASE_NAME),
        ..uses("coordination.k8s.io", "leases", &["get", "update"])
    },
];

/// With `gangScheduling`: a job's PodGroup is read, written by server-side apply (which
/// creates it the first time), and deleted when the job finishes; it is never watched.
const GANG_SCHEDULES: &[Uses] = &[
    uses(
        "scheduling.volcano.sh",
        "podgroups",
        &["create", "delete", "get", "patch"],
    ),
    uses(
        "scheduling.x-k8s.io",
        "podgroups",
        &["create", "delete", "get", "patch"],
    ),
];

pub(crate) fn expected(tables: &[&[Uses]]) -> BTreeSet<Permission> {
    let mut permissions = BTreeSet::new();
    for uses in tables.iter().flat_map(|table| table.iter()) {
        for resource in resources(uses.resource) {
            for verb in uses.verbs {
                permissions.insert(Permission {
                    group: uses.group.to_owned(),
                    resource: resource.clone(),
                    verb: (*verb).to_owned(),
                    name: uses.name.map(str::to_owned),
                });
            }
        }
    }
    permissions
}

/// A client for a ServiceAccount without any binding of its own: what it may do, every
/// authenticated user may (create access reviews, ...), and is not the component's doing.
pub(crate) async fn nobody(ns: &TestNamespace) -> Client {
    const NOBODY: &str = "nobody";
    let account: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": NOBODY } }))
        .expect("a valid ServiceAccount");
    Api::<ServiceAccount>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("creating the ServiceAccount {NOBODY}: {e}"));
    client_from(&token_kubeconfig(&ns.client, &ns.name, NOBODY).await).await
}

/// Fail naming what is granted but not used, and what is used but not granted.
pub(crate) fn assert_exactly(
    granted: &BTreeSet<Permission>,
    used: &BTreeSet<Permission>,
    context: &str,
) {
    let list = |set: Vec<&Permission>| set.iter().map(|p| format!("\n  {p}")).collect::<String>();
    let unused: Vec<&Permission> = granted.difference(used).collect();
    let missing: Vec<&Permission> = used.difference(granted).collect();
    assert!(
        unused.is_empty() && missing.is_empty(),
        "{context}:\ngranted but not used by the operator:{}\nused by the operator but not granted:{}",
        list(unused),
        list(missing)
    );
}

/// The component's token may do exactly `own` in its namespace and exactly `elsewhere` in
/// another one.
async fn assert_permissions(
    access: Access,
    own: &[&[Uses]],
    elsewhere: &[&[Uses]],
) -> (TestNamespace, OperatorIdentity) {
    let ns = TestNamespace::new("identity").await;
    // TFJobs exist to be listed.
    install_crd(&ns.client).await;
    let identity = OperatorIdentity::new(&ns, access).await;
    let nobody = nobody(&ns).await;
    for (namespace, tables) in [(ns.name.as_str(), own), ("default", elsewhere)] {
        let everyone = permissions(&nobody, namespace).await;
        let granted: BTreeSet<Permission> = permissions(&identity.client, namespace)
            .await
            .difference(&everyone)
            .cloned()
            .collect();
        assert_exactly(
            &granted,
            &expected(tables),
            &format!("{access:?}, in namespace {namespace}"),
        );
    }
    (ns, identity)
}

/// List and watch `K` in every namespace, as a cluster-wide operator's caches do.
async fn list_and_watch_everywhere<K>(client: &Client) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let list = api.list_metadata(&ListParams::default().limit(1)).await?;
    let version = list.metadata.resource_version.unwrap_or_default();
    api.watch(&WatchParams::default().timeout(1), &version)
        .await
        .map(drop)
}

/// What the caches hold: jobs, pods, services, and MPIJobs' companions.
async fn list_and_watch_cached_kinds_everywhere(client: &Client) -> Result<(), kube::Error> {
    list_and_watch_everywhere::<TFJob>(client).await?;
    list_and_watch_everywhere::<Pod>(client).await?;
    list_and_watch_everywhere::<Service>(client).await?;
    list_and_watch_everywhere::<ConfigMap>(client).await?;
    list_and_watch_everywhere::<ServiceAccount>(client).await?;
    list_and_watch_everywhere::<Role>(client).await?;
    list_and_watch_everywhere::<RoleBinding>(client).await
}

/// What the token may do in its own namespace and in another one, for each way of rendering
/// the component.
type Expected = (
    Access,
    &'static [&'static [Uses]],
    &'static [&'static [Uses]],
);

#[tokio::test]
async fn namespace_scope_lets_the_operator_do_exactly_its_calls_in_its_namespace_and_nothing_elsewhere()
 {
    let namespaced = Access::scoped(Scope::Namespace);
    let cases: [Expected; 2] = [
        (namespaced, &[RUNS_JOBS], &[]),
        (
            namespaced.with_leader_election().with_gang_scheduling(),
            &[RUNS_JOBS, ELECTS_A_LEADER, GANG_SCHEDULES],
            &[],
        ),
    ];
    for (access, own, elsewhere) in cases {
        let (_ns, identity) = assert_permissions(access, own, elsewhere).await;
        match list_and_watch_cached_kinds_everywhere(&identity.client).await {
            Err(kube::Error::Api(e)) if e.code == 403 => {}
            other => panic!("{access:?} must not list across namespaces: {other:?}"),
        }
    }
}

#[tokio::test]
async fn cluster_scope_lets_the_operator_do_exactly_its_calls_in_every_namespace() {
    let cluster_wide = Access::scoped(Scope::Cluster);
    let cases: [Expected; 2] = [
        (cluster_wide, &[RUNS_JOBS], &[RUNS_JOBS]),
        (
            cluster_wide.with_leader_election().with_gang_scheduling(),
            // The Lease Role is only in the operator's own namespace.
            &[RUNS_JOBS, ELECTS_A_LEADER, GANG_SCHEDULES],
            &[RUNS_JOBS, GANG_SCHEDULES],
        ),
    ];
    for (access, own, elsewhere) in cases {
        let (_ns, identity) = assert_permissions(access, own, elsewhere).await;
        list_and_watch_cached_kinds_everywhere(&identity.client)
            .await
            .unwrap_or_else(|e| panic!("{access:?} lists and watches every namespace: {e}"));
    }
}

#[tokio::test]
async fn the_volume_controller_may_do_exactly_its_calls_in_its_namespace_and_only_read_nodes_beyond()
 {
    let access = Access::volume_controller();
    let (_ns, identity) =
        assert_permissions(access, &[PLACES_VOLUMES, SEES_NODES], &[SEES_NODES]).await;
    match list_and_watch_everywhere::<Pod>(&identity.client).await {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("the volume controller must not list pods across namespaces: {other:?}"),
    }
    list_and_watch_everywhere::<Node>(&identity.client)
        .await
        .unwrap_or_else(|e| panic!("the volume controller lists and watches nodes: {e}"));
}
