//! Deploying a rendered manifest to a cluster: the plan (keys, tiers, membership labels), the
//! inventory (ApplySet), the connection to the cluster (the `Cluster` seam, with the API
//! server's implementation and an in-memory one for tests), the diff, the server's verdict in a
//! dry run, the apply with its prune and delete, the wait for health, and the status of what
//! was deployed.
//!
//! This layer sees rendering only through the manifest it is handed. What the deployed jobs
//! do and report once they run (their logs, a sweep's results) is [`crate::observe`]'s, which
//! uses this layer's connection to the cluster; nothing here uses it.

pub mod adopt;
pub mod apply;
pub mod applyset;
pub mod blocked;
pub mod cancel;
pub mod cluster;
pub mod deferred;
pub mod diff;
pub mod key;
pub mod live;
pub mod managed_fields;
#[cfg(test)]
pub mod memory;
pub mod openapi;
pub mod operators;
pub mod ownership;
pub mod plan;
pub mod preflight;
pub mod schema;
pub mod secret;
pub mod serving;
pub mod status;
#[cfg(test)]
mod tests;
pub mod wait;
