//! One module per framework: its job type (and so its CRD), replica types, container, port,
//! injected environment, condition messages and success rule. Everything else is the engine's.
//!
//! Adding a framework: a module here implementing `TrainingJob`, a line in
//! [`super::registry::ALL`], its CRD file
//! (`MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::training::crd`), and a test.

pub mod jax;
pub mod mpi;
pub mod mxnet;
pub mod paddle;
pub mod pytorch;
pub mod tensorflow;
#[cfg(test)]
mod test_support;
pub mod xgboost;
