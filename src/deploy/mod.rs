//! Deploying a rendered manifest to a cluster: the plan (keys, tiers, membership labels), the
//! inventory (ApplySet), the connection to the cluster (the `Cluster` seam, with the API
//! server's implementation and an in-memory one for tests), the diff, the server's verdict in a
//! dry run, the apply with its prune and delete, the wait for health, and the record of the
//! last apply.
//!
//! Rooms, lowest first, and arrows only down: [`cluster`] (the seam, object keys, field
//! managers, the cancel), [`inventory`] (the ApplySet, ownership, adopt, the live objects, the
//! plan, the last apply's record), then [`checks`] (before a write) beside [`health`] (the wait
//! after it), neither using the other. This folder's own files are the verbs above them all:
//! [`diff`], [`apply`], [`prune`] and [`delete`], which share [`removal`] (the removing of
//! members) and [`report`] (what they report and ask for). `tests/layout.rs` checks that no room
//! uses one above it or beside it, nor the verbs.
//!
//! This layer sees rendering only through the manifest it is handed. What the deployed objects
//! do and report once they run (an environment's status and its served models' versions, the
//! jobs' logs, a sweep's results) is [`crate::observe`]'s, which reads the cluster through this
//! layer; nothing here uses it.

pub mod apply;
pub mod checks;
pub mod cluster;
pub mod delete;
pub mod diff;
pub mod health;
pub mod inventory;
pub mod prune;
pub mod removal;
pub mod report;
#[cfg(test)]
mod tests;
