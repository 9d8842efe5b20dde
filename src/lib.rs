//! mlkube deploys a Kubeflow-style ML platform to Kubernetes per environment and runs its TFJob
//! operator.
//!
//! The crate is one pipeline, one module per stage:
//!
//! ```text
//! app on disk ──app──▶ environment + params ──render──▶ objects ──manifest──▶ ordered manifest
//!     ──diff──▶ change set ──apply──▶ cluster
//! cluster ──watch──▶ operator ──reconcile──▶ pods, services, status
//! ```
//!
//! Everything before `diff` is pure: no network and no clock. `cli` only parses arguments and
//! calls into the stages.

pub mod app;
pub mod apply;
pub mod applyset;
pub mod cli;
pub mod cluster;
pub mod deploy;
pub mod diff;
pub mod exit;
pub mod jsonnet;
pub mod library;
pub mod manifest;
pub mod operator;
pub mod plan;
pub mod render;
pub mod wait;
pub mod yaml;
