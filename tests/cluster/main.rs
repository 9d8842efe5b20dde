//! Tests against the real local control plane (`cluster/local-cluster.sh up`).
//!
//! One test binary, one module per area, so the heavy Kubernetes client links once.

mod components;
mod deploy;
mod operator;
mod smoke;
mod status;
mod support;
