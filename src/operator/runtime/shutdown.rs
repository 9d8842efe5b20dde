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

use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use kube::runtime::reflector::{Lookup, Store};
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

/// Drive `controller` (a kube-runtime `Controller` shut down gracefully on `stop`) to its end,
/// or end it at once if `stop` comes before its `store` was first listed.
///
/// kube-runtime holds a controller's reconciles until its store has been listed, and its
/// graceful shutdown stops the watch that would list it: a stop in that window would wait for
/// ever (until the shutdown timeout forces the process out). No reconcile has started then, so
/// ending at once cuts nothing short.
pub async fn drive<K>(controller: impl Future<Output = ()>, store: &Store<K>, stop: Stop)
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let stopped_unlisted = async {
        tokio::select! {
            biased;
            // Listed first (or never to be): the graceful shutdown finishes what runs.
            _ = store.wait_until_ready() => std::future::pending::<()>().await,
            () = stop => {}
        }
    };
    tokio::select! {
        () = controller => {}
        () = stopped_unlisted => tracing::debug!("stopped before the first list; no reconcile ran"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::controller::Action;
    use kube::runtime::{Controller, reflector, watcher};

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

    /// A controller of ConfigMaps fed by `trigger`, shut down gracefully on `stop`, whose
    /// reconcile is `reconcile`.
    fn config_map_controller<F>(
        trigger: impl futures::Stream<Item = Result<ConfigMap, watcher::Error>> + Send + 'static,
        store: Store<ConfigMap>,
        stop: Stop,
        reconcile: impl FnMut(Arc<ConfigMap>, Arc<()>) -> F,
    ) -> impl Future<Output = ()>
    where
        F: Future<Output = Result<Action, std::io::Error>> + Send + 'static,
    {
        Controller::for_stream(trigger, store)
            .graceful_shutdown_on(stop)
            .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()))
            .for_each(|_| async {})
    }

    fn stop_of(shutdown: Shutdown) -> Stop {
        shutdown.requested().boxed().shared()
    }

    #[tokio::test]
    async fn a_stop_before_the_first_list_ends_the_controller_at_once() {
        let (store, _never_listed) = reflector::store::<ConfigMap>();
        let (trigger, shutdown) = Shutdown::manual();
        let stop = stop_of(shutdown);
        let controller = config_map_controller(
            futures::stream::pending(),
            store.clone(),
            stop.clone(),
            |_, _| async { Ok(Action::await_change()) },
        );
        trigger.send(true).expect("someone listens");
        tokio::time::timeout(Duration::from_secs(10), drive(controller, &store, stop))
            .await
            .expect("ended without waiting for a list that no longer comes");
    }

    #[tokio::test]
    async fn once_listed_a_stop_waits_for_the_reconciles_in_flight() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let object = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("a".to_owned()),
                namespace: Some("ns".to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(object.clone()),
            watcher::Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
        }
        let started = Arc::new(tokio::sync::Notify::new());
        let release = Arc::new(tokio::sync::Notify::new());
        let finished = Arc::new(AtomicBool::new(false));
        let (trigger, shutdown) = Shutdown::manual();
        let stop = stop_of(shutdown);
        let reconcile = {
            let (started, release, finished) = (started.clone(), release.clone(), finished.clone());
            move |_, _| {
                let (started, release, finished) =
                    (started.clone(), release.clone(), finished.clone());
                async move {
                    started.notify_one();
                    release.notified().await;
                    finished.store(true, Ordering::SeqCst);
                    Ok(Action::await_change())
                }
            }
        };
        let objects = futures::stream::iter([Ok(object)]).chain(futures::stream::pending());
        let controller = config_map_controller(objects, store.clone(), stop.clone(), reconcile);
        let driven = tokio::spawn(async move { drive(controller, &store, stop).await });
        tokio::time::timeout(Duration::from_secs(10), started.notified())
            .await
            .expect("the reconcile started");
        trigger.send(true).expect("someone listens");
        tokio::task::yield_now().await;
        assert!(
            !driven.is_finished(),
            "a reconcile in flight holds the stop"
        );
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), driven)
            .await
            .expect("ended once the reconcile finished")
            .expect("did not panic");
        assert!(
            finished.load(Ordering::SeqCst),
            "the reconcile ran to its end"
        );
    }
}
