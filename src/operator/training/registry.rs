//! The frameworks the operator runs, each with its facts, its CRD and its controller: the one
//! list that `--frameworks`, the CRD files and the log reader's kinds all come from.
//!
//! It sits above both `frameworks` (what each kind is) and `controller` (how any kind is run),
//! so neither needs the other's names.

use super::frameworks::{jax, mpi, mxnet, paddle, pytorch, tensorflow, xgboost};

pub use super::controller::Registered;

/// The frameworks the operator runs, in `--frameworks` order.
pub static ALL: [Registered; 7] = [
    Registered::of::<tensorflow::TFJob>(),
    Registered::of::<pytorch::PyTorchJob>(),
    Registered::of::<mxnet::MXJob>(),
    Registered::of::<xgboost::XGBoostJob>(),
    Registered::of::<jax::JAXJob>(),
    Registered::of::<paddle::PaddleJob>(),
    Registered::of::<mpi::MPIJob>(),
];

/// The framework named `name` (`tensorflow`, `pytorch`, ...).
pub fn by_name(name: &str) -> Option<&'static Registered> {
    ALL.iter().find(|r| r.framework.name == name)
}

/// Every framework's name, in `--frameworks` order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|r| r.framework.name)
}
