//! The checks before a write: the server's dry run of every object an apply would send
//! ([`preflight`]), over how far an object the server cannot judge yet is checked
//! ([`deferred`]: along the server's OpenAPI v3 documents, [`openapi`], or the plan's CRD,
//! walked by [`schema`]); a Secret's value another manager changed ([`secret`]); one
//! training operator per job ([`operators`]); one Service per node port ([`node_ports`]); and
//! a Gateway for every route ([`gateways`]).
//!
//! Above the cluster seam and the inventory (the plan they check); beneath the verbs, which run
//! them. The wait after a write is [`super::health`]'s: neither room uses the other.

pub mod deferred;
pub mod gateways;
pub mod node_ports;
pub mod openapi;
pub mod operators;
pub mod preflight;
pub mod schema;
pub mod secret;
