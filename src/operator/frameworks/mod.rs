//! One module per framework: its job type (and so its CRD), replica types, container, port,
//! injected environment and success rule. Everything else is the engine's.
//!
//! Adding a framework: a module here implementing `TrainingJob`, a line in [`Kind`], and a test.

pub mod jax;
pub mod mxnet;
pub mod paddle;
pub mod tensorflow;
#[cfg(test)]
mod test_support;
pub mod xgboost;

/// The frameworks the operator can run, as `--frameworks` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    TensorFlow,
    MXNet,
    XGBoost,
    JAX,
    Paddle,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::TensorFlow,
        Kind::MXNet,
        Kind::XGBoost,
        Kind::JAX,
        Kind::Paddle,
    ];
}
