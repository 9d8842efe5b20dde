//! mlkube deploys a Kubeflow-style ML platform to Kubernetes per environment and runs its
//! operator.
//!
//! The crate is one pipeline, and its folders are its layers:
//!
//! ```text
//! app on disk ──app──▶ environment + params ──render──▶ objects ──manifest──▶ ordered manifest
//!     ──diff──▶ change set ──apply──▶ cluster ──observe──▶ status, logs, a sweep's results
//! cluster ──watch──▶ operator ──reconcile──▶ pods, services, status
//! ```
//!
//! - [`cli`]: arguments, settings, output and exit codes; it calls into the layers below, and
//!   nothing below calls it.
//! - [`app`]: the app on disk (app.yaml, params, prototypes) and the edits of its files; it
//!   renders through [`render`].
//! - [`render`]: Jsonnet, the embedded library, the manifest and the table of kinds and tiers.
//! - [`deploy`]: plan, inventory, the `Cluster` seam, the checks, diff, apply, prune, delete,
//!   wait.
//! - [`observe`]: what runs once deployed and what it reports (an environment's status with its
//!   served models' versions, logs, a sweep's ranked results), read through the deploy layer.
//! - [`images`]: `mlkube images`, the platform's images as the checkout builds them and their
//!   push into a registry of the user's, by skopeo.
//! - [`gateway`]: the gateway component's own processes beside Traefik: `mlkube
//!   gateway-routes`, its Gateway's HTTPRoutes as Traefik's configuration (and their statuses),
//!   and `mlkube gateway-fallback`, the 404 for a path no route takes.
//! - [`operator`]: `mlkube operator`, its shared controller runtime and one room per API it
//!   serves (today `training`, the `kubeflow.org/v1` jobs).
//! - [`error_text`] and [`random`]: an error and its causes as text, for messages and log
//!   lines alike; the random ids of new apps.
//!
//! Everything before `diff` is pure: no network and no clock.

pub mod app;
pub mod cli;
pub mod deploy;
pub mod error_text;
pub mod gateway;
pub mod images;
pub mod observe;
pub mod operator;
pub mod random;
pub mod render;
