//! Tests against the real local control plane (`cluster/local-cluster.sh up`).
//!
//! One test binary, one module per area, so the heavy Kubernetes client links once.

mod adopt;
mod components;
mod crd_deleted;
mod deploy;
mod dry_run_truth;
mod events;
mod framework_controller;
mod frameworks;
mod frameworks_more;
mod identity;
mod image_pull;
mod job_prototypes;
mod local_cluster;
mod logs;
mod messages;
mod mpi;
mod mpi_companions;
mod operator;
mod operator_faults;
mod operator_identity;
mod parity;
mod preflight;
mod shared_objects;
mod simulation;
mod smoke;
mod status;
mod support;
mod sweeps;
mod volumes;
