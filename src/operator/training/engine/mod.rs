//! The job engine every framework shares, and pure: from a defaulted job, the pods and
//! services observed and the current time it computes the status and the actions to take.
//!
//! `defaults` fills in what upstream defaults; `observe` sorts the pods and services into
//! replica indexes; `plan` decides (with `conditions`, and `autoscaling` for the autoscaler's
//! policy); `build` makes the pods, services and
//! PodGroups (with `quantity`); `adopt` says which orphans to adopt and which children to
//! release. A framework only answers the questions of `framework::TrainingJob`.

pub mod adopt;
pub mod autoscaling;
pub mod build;
pub mod conditions;
pub mod data;
pub mod defaults;
pub mod observe;
pub mod plan;
pub mod quantity;
