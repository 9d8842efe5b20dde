//! Deploying a rendered manifest to a cluster: the plan (keys, tiers, membership labels), the
//! inventory (ApplySet), the connection to the cluster, the diff, the server's verdict in a
//! dry run, the apply with its prune and delete, and the wait for health; and the logs of the
//! training jobs deployed.
//!
//! This layer sees rendering only through the manifest it is handed.

pub mod adopt;
pub mod apply;
pub mod applyset;
pub mod cancel;
pub mod cluster;
pub mod deferred;
pub mod diff;
pub mod key;
pub mod live;
pub mod logs;
#[cfg(test)]
pub mod memory;
pub mod openapi;
pub mod ownership;
pub mod plan;
pub mod preflight;
pub mod schema;
pub mod secret;
pub mod status;
pub mod sweep;
#[cfg(test)]
mod tests;
pub mod wait;
