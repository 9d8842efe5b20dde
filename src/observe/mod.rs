//! What runs once deployed, and what it reported: the logs of training jobs' replicas
//! ([`logs`], `mlkube logs`) and a sweep's jobs ranked by the metric they reported ([`sweep`],
//! `mlkube status -c`).
//!
//! It reads the cluster through the deploy layer's connection ([`crate::deploy::cluster`]) and
//! knows the job kinds from the operator's registry of frameworks; neither uses it. Nothing here
//! writes to the cluster or prints: results go to the command line through the types of each
//! module.

pub mod logs;
pub mod serving;
pub mod status;
pub mod sweep;
