//! The contract between `mlkube operator` and each of its controllers, after controller-runtime's
//! Manager: every controller is added the same way, gets the same shared parts, and has one
//! readiness gate; the operator is ready only once every enabled controller's gate has opened.
//!
//! # Expected flow
//! The operator adds each enabled controller with [`Manager::add`]: its name (as `--controllers`
//! spells it) and a function from the shared parts ([`Shared`]) to the future that runs it until
//! the stop. [`Manager::run`] first registers a closed gate per controller (so `/readyz` cannot
//! turn ready while one of them has not even started), then runs them all at once and returns
//! when every one has returned.
//!
//! # Guarantees
//! - `/readyz` answers 200 only when every added controller opened its gate (and no CRD it was
//!   asked to run is missing, see [`super::installed`]); a standby replica that waits for the
//!   leader Lease is ready too, as it is in controller-runtime.
//! - One controller that returns early (its CRD went away and the stop came) does not stop the
//!   others.
//!
//! # Assumptions
//! A controller opens its gate once the caches it reads have synced, never before: a readiness
//! that runs ahead of the caches routes traffic (and a rollout) to a replica that cannot yet
//! act.

use std::sync::Arc;

use futures::future::{BoxFuture, join_all};
use kube::Client;

use super::http::{Gate, Health};
use super::metrics::Metrics;
use super::shutdown::Stop;

/// What every controller gets from the operator when it starts.
#[derive(Clone)]
pub struct Shared {
    /// The client of the operator's identity.
    pub client: Client,
    pub metrics: Arc<Metrics>,
    /// The probes: where a controller says which CRD it waits for.
    pub health: Arc<Health>,
    /// The controller's own readiness gate: open it once its caches have synced.
    pub ready: Gate,
    /// Resolves when the operator is asked to stop; reconciles in flight may finish.
    pub stop: Stop,
}

impl Shared {
    /// The parts of the controller `name`, with a closed gate of its own in `health`.
    pub fn new(
        name: &'static str,
        client: Client,
        metrics: Arc<Metrics>,
        health: &Arc<Health>,
        stop: Stop,
    ) -> Shared {
        Shared {
            client,
            metrics,
            health: health.clone(),
            ready: health.gate(name),
            stop,
        }
    }
}

/// How a controller is started: from the shared parts, the future that runs it until the stop.
type Start = Box<dyn FnOnce(Shared) -> BoxFuture<'static, ()> + Send>;

/// The controllers the operator runs, in the order they were added.
#[derive(Default)]
pub struct Manager {
    controllers: Vec<(&'static str, Start)>,
}

impl Manager {
    /// Add the controller `name`, started by `start`.
    pub fn add(
        &mut self,
        name: &'static str,
        start: impl FnOnce(Shared) -> BoxFuture<'static, ()> + Send + 'static,
    ) {
        self.controllers.push((name, Box::new(start)));
    }

    /// The names of the added controllers, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.controllers.iter().map(|(name, _)| *name).collect()
    }

    /// Run every controller until `stop` and the reconciles in flight have finished.
    pub async fn run(self, client: Client, metrics: Arc<Metrics>, health: Arc<Health>, stop: Stop) {
        // Every gate is closed before any controller runs: readiness waits for all of them.
        let started: Vec<(Shared, Start)> = (self.controllers.into_iter())
            .map(|(name, start)| {
                let shared =
                    Shared::new(name, client.clone(), metrics.clone(), &health, stop.clone());
                (shared, start)
            })
            .collect();
        join_all(started.into_iter().map(|(shared, start)| start(shared))).await;
    }
}
