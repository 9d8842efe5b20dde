//! Stopping on SIGTERM or SIGINT.
//!
//! # Expected flow
//! The first signal asks for a graceful stop: no new reconcile starts, the ones in flight
//! finish, the leader lease is handed back, and `serve` returns. If that has not happened
//! within `--shutdown-timeout`, the process exits anyway: a reconcile stuck on an API server
//! that stopped answering must not keep a terminating pod alive until the kubelet kills it
//! (Kubernetes gives a pod 30 s by default, so the default here is 20 s). A second signal
//! exits at once.
//!
//! Nothing is lost by exiting early: every reconcile is idempotent, and the next leader redoes
//! whatever was cut short.

use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// The exit status when the shutdown deadline or a second signal forces the process out: the
/// command line's error status (`cli::exit::Exit::Error`, which a test there keeps equal).
pub const FORCED_EXIT_CODE: i32 = 2;

/// The stop signal every controller waits on.
pub type Stop = Shared<BoxFuture<'static, ()>>;

/// A stop asked for by a signal; cheap to clone.
#[derive(Clone)]
pub struct Shutdown {
    requested: watch::Receiver<bool>,
}

impl Shutdown {
    /// Listen for SIGTERM and SIGINT from now on, exiting the process `timeout` after the first
    /// if it is still running then. Needs a Tokio runtime.
    pub fn on_signals(timeout: Duration) -> std::io::Result<Shutdown> {
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let (tx, requested) = watch::channel(false);
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            };
            tracing::info!(
                timeout_seconds = timeout.as_secs_f64(),
                "{name}: finishing the reconciles in flight, then stopping"
            );
            let _ = tx.send(true);
            tokio::select! {
                () = tokio::time::sleep(timeout) => {
                    tracing::error!(
                        timeout_seconds = timeout.as_secs_f64(),
                        "reconciles still running after the shutdown timeout; exiting without them"
                    );
                }
                _ = terminate.recv() => tracing::warn!("second signal: exiting now"),
                _ = interrupt.recv() => tracing::warn!("second signal: exiting now"),
            }
            std::process::exit(FORCED_EXIT_CODE);
        });
        Ok(Shutdown { requested })
    }

    /// A shutdown that only `trigger` starts: for running the controller inside tests.
    pub fn manual() -> (watch::Sender<bool>, Shutdown) {
        let (tx, requested) = watch::channel(false);
        (tx, Shutdown { requested })
    }

    /// Resolves once a stop was asked for (at once if it already was).
    pub async fn requested(mut self) {
        // An error means the sender is gone without asking: then no stop ever comes.
        if self.requested.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requested_resolves_once_triggered_and_for_every_clone() {
        let (trigger, shutdown) = Shutdown::manual();
        let waiting = tokio::spawn(shutdown.clone().requested());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        trigger.send(true).expect("someone listens");
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("resolved after the trigger")
            .expect("did not panic");
        // Asked for before anyone waits: resolves at once.
        tokio::time::timeout(Duration::from_secs(5), shutdown.requested())
            .await
            .expect("resolved at once");
    }

    #[tokio::test]
    async fn a_dropped_trigger_is_no_stop() {
        let (trigger, shutdown) = Shutdown::manual();
        drop(trigger);
        let waited = tokio::time::timeout(Duration::from_millis(50), shutdown.requested()).await;
        assert!(
            waited.is_err(),
            "a shutdown nobody asked for must not resolve"
        );
    }
}
