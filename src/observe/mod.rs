//! What runs once deployed, and what it reported: an environment's status, every member's
//! health and drift and the last apply's record ([`status`], `mlkube status`), with the versions
//! of its served models, their readiness, weights and model paths ([`serving`]); the logs of
//! training jobs' replicas ([`logs`], `mlkube logs`); and a sweep's jobs ranked by the metric
//! they reported ([`sweep`], `mlkube status -c`); and the last event a controller recorded on
//! an object, for a job that has no condition yet ([`events`]).
//!
//! It reads the cluster through the deploy layer: its connection ([`crate::deploy::cluster`]),
//! and for `status` the inventory, the diff that tells drift, and the wait's health rules. It
//! knows the job kinds from the operator's registry of frameworks. Neither uses it. Nothing here
//! writes to the cluster or prints: results go to the command line through the types of each
//! module (the record of the last apply, which `status` reads, is written by the apply, in
//! [`crate::deploy::inventory::last_apply`]).

pub mod events;
pub mod logs;
pub mod serving;
pub mod status;
pub mod sweep;
