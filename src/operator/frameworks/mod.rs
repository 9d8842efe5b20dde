//! One module per framework: its job type (and so its CRD), replica types, container, port,
//! injected environment and success rule. Everything else is the engine's.
//!
//! Adding a framework: a module here implementing `TrainingJob`, a line in [`Kind`], and a test.

pub mod tensorflow;

/// The frameworks the operator can run, as `--frameworks` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    TensorFlow,
}

impl Kind {
    pub const ALL: [Kind; 1] = [Kind::TensorFlow];
}
