//! Tests against the real local control plane (`cluster/local-cluster.sh up`).
//!
//! One test binary, one module per area, so the heavy Kubernetes client links once.

mod components;
mod deploy;
mod frameworks;
mod frameworks_more;
mod identity;
mod image_pull;
mod logs;
mod operator;
mod operator_faults;
mod operator_identity;
mod preflight;
mod simulation;
mod smoke;
mod status;
mod support;
