//! The checks before a write: the server's dry run of every object an apply would send
//! ([`preflight`]), over how far an object the server cannot judge yet is checked
//! ([`deferred`]: along the server's OpenAPI v3 documents, [`openapi`], or the plan's CRD,
//! walked by [`schema`]); a Secret's value another manager changed ([`secret`]); one
//! training operator per job ([`operators`]); one Service per node port ([`node_ports`]); a
//! Gateway for every route ([`gateways`]); and every kind a workload needs, served
//! ([`requires`]).
//!
//! Above the cluster seam and the inventory (the plan they check); beneath the verbs, which run
//! them. The wait after a write is [`super::health`]'s: neither room uses the other.

pub mod deferred;
pub mod gateways;
pub mod node_ports;
pub mod openapi;
pub mod operators;
pub mod preflight;
pub mod requires;
pub mod schema;
pub mod secret;

/// Plans of rendered objects, for the checks' tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{Value, json};

    use crate::deploy::inventory::applyset::ApplySet;
    use crate::deploy::inventory::plan::{self, Plan};
    use crate::render::manifest::{Manifest, Object};

    /// `value` as `component`'s.
    pub fn object(component: &str, value: Value) -> Object {
        let mut value = value;
        value["metadata"]["labels"] = json!({"mlkube.io/component": component});
        Object {
            component: component.into(),
            value,
        }
    }

    /// The plan of `objects` for environment `local` (namespace `ml`) of the app `app`.
    pub fn plan_of(objects: Vec<Object>) -> Plan {
        let set = ApplySet::new("app", "local", "ml");
        plan::plan(&Manifest { objects }, &set, &[]).expect("a valid plan")
    }
}
