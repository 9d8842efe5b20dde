//! Tests against the real local control plane (`cluster/local-cluster.sh up`).
//!
//! One test binary, one module per area, so the heavy Kubernetes client links once.

mod adopt;
mod components;
mod crd_deleted;
mod deploy;
mod disruption;
mod dry_run_truth;
mod events;
mod framework_controller;
mod framework_states;
mod identity;
mod image_pull;
mod inference_service;
mod job_prototypes;
mod local_cluster;
mod logs;
mod messages;
mod mpi;
mod mpi_companions;
mod mxnet_xgboost_jax_paddle;
mod operator;
mod operator_faults;
mod operator_identity;
mod parity;
mod permissions;
mod preflight;
mod pytorch;
mod shared_objects;
mod simulation;
mod smoke;
mod status;
mod support;
mod sweeps;
mod tenancy;
mod volume_bounds;
mod volumes;
