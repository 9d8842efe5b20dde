//! One module per framework: its job type (and so its CRD), replica types, container, port,
//! injected environment, condition messages and success rule. Everything else is the engine's.
//!
//! Adding a framework: a module here implementing `TrainingJob`, a line in [`ALL`], its CRD
//! file (`MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::training::crd`), and a test.

pub mod jax;
pub mod mpi;
pub mod mxnet;
pub mod paddle;
pub mod pytorch;
pub mod tensorflow;
#[cfg(test)]
mod test_support;
pub mod xgboost;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::controller;
use super::crd;
use super::framework::{CompanionKind, Framework, TrainingJob};

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

/// A framework the operator can run: its facts, its CRD and its controller.
#[derive(Debug)]
pub struct Registered {
    pub framework: &'static Framework,
    /// The framework's CustomResourceDefinition, generated from its types.
    pub crd: fn() -> CustomResourceDefinition,
    /// Run the framework's controller (see `controller::run`).
    pub(crate) run: controller::RunFramework,
    /// The kinds of its jobs' companions, which the controller watches.
    pub(crate) companion_kinds: &'static [CompanionKind],
}

impl Registered {
    const fn of<J: TrainingJob + CustomResourceExt>() -> Registered {
        Registered {
            framework: J::FRAMEWORK,
            crd: crd::definition_of::<J>,
            run: controller::run_framework::<J>,
            companion_kinds: J::COMPANION_KINDS,
        }
    }
}

/// The framework named `name` (`tensorflow`, `pytorch`, ...).
pub fn by_name(name: &str) -> Option<&'static Registered> {
    ALL.iter().find(|r| r.framework.name == name)
}

/// Every framework's name, in `--frameworks` order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|r| r.framework.name)
}
