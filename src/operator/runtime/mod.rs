//! The runtime every controller of `mlkube operator` shares, whatever API it serves: what
//! controller-runtime's Manager gives each of its controllers.
//!
//! `manager` is the contract: every controller is added the same way, gets the same shared
//! parts, and has one readiness gate, and `/readyz` is ready only once every enabled
//! controller's caches synced. `leader` takes and holds the leader Lease, `http` serves
//! `/metrics` (from `metrics`) and the `/healthz` and `/readyz` probes, `shutdown` turns SIGTERM
//! and SIGINT into a stop every controller waits on, `installed` asks discovery whether a CRD is
//! served before a controller watches its kind (and again when the watch is answered 404),
//! `writes` makes the writes every controller makes (create once, delete exactly this UID,
//! replace the status) with the answers that are outcomes named, `expectations` remembers the
//! objects a controller created until its caches show them, and `events` records what it did as
//! Kubernetes Events. Nothing here knows a controller's API: each controller room uses this one,
//! and this one uses nothing of theirs.

pub mod events;
pub mod expectations;
pub mod http;
pub mod installed;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod shutdown;
pub mod writes;

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "mlkube-operator";

/// The API of `K` in the namespace a controller watches, or in every namespace (`None`).
pub fn watched<K>(client: &kube::Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    }
}

/// Lock one of the operator's shared maps or counters. Each is changed by single inserts,
/// removes and additions, so its data stays valid even if an earlier holder panicked.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
