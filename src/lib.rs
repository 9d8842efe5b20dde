//! mlkube deploys a Kubeflow-style ML platform to Kubernetes per environment and runs its TFJob
//! operator.
//!
//! The crate is one pipeline, and its folders are its layers:
//!
//! ```text
//! app on disk ──app──▶ environment + params ──render──▶ objects ──manifest──▶ ordered manifest
//!     ──diff──▶ change set ──apply──▶ cluster
//! cluster ──watch──▶ operator ──reconcile──▶ pods, services, status
//! ```
//!
//! - [`cli`]: arguments, settings, output and exit codes; it calls into the stages below.
//! - [`app`]: the app on disk (app.yaml, params, prototypes) and the edits of its files.
//! - [`render`]: Jsonnet, the embedded library, the manifest and the table of kinds and tiers.
//! - [`deploy`]: plan, inventory, cluster, diff, apply, wait.
//! - [`operator`]: the TFJob operator.
//! - [`error_text`]: an error and its causes as text, for messages and log lines alike.
//!
//! Everything before `diff` is pure: no network and no clock.

pub mod app;
pub mod cli;
pub mod deploy;
pub mod error_text;
pub mod operator;
pub mod random;
pub mod render;
