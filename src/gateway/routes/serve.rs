//! What this process serves to Traefik (on the pod's loopback) and the kubelet (on the probes'
//! port, which never serves the routes):
//! - `GET /config`: Traefik's dynamic configuration (its HTTP provider polls it); 503 until
//!   the caches have synced, so Traefik never takes an empty configuration for the truth.
//! - `GET /synced`: 200 once the caches have synced (the startup probe: Traefik starts then).
//! - `GET /ready`: 200 once Traefik has fetched the configuration a few times since, so it
//!   has applied one: the pod takes requests only with its routes in place.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Fetches after which Traefik has surely applied one (it applies a new configuration a
/// throttle's time, a second, after it read it; it polls every second).
const FETCHES_BEFORE_READY: u64 = 3;

/// The configuration served, and how often Traefik has fetched it.
#[derive(Default)]
pub struct Published {
    config: Mutex<Option<Bytes>>,
    fetched: AtomicU64,
}

impl Published {
    /// Serve `config` from now on.
    pub fn publish(&self, config: String) {
        let mut held = self
            .config
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *held = Some(Bytes::from(config));
    }

    fn current(&self) -> Option<Bytes> {
        let held = self
            .config
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.clone()
    }

    /// The answer to `path`; on the probes' listener (`config` false), never the routes.
    fn answer(&self, path: &str, config_served: bool) -> Response<Full<Bytes>> {
        let config = self.current();
        let (status, body) = match (path, config) {
            ("/config", _) if !config_served => {
                (StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n"))
            }
            ("/config", Some(config)) => {
                self.fetched.fetch_add(1, Ordering::Relaxed);
                (StatusCode::OK, config)
            }
            ("/synced", Some(_)) => (StatusCode::OK, Bytes::from_static(b"synced\n")),
            ("/ready", Some(_)) if self.fetched.load(Ordering::Relaxed) >= FETCHES_BEFORE_READY => {
                (StatusCode::OK, Bytes::from_static(b"ready\n"))
            }
            ("/config" | "/synced" | "/ready", _) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"the routes are not there yet\n"),
            ),
            _ => (StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n")),
        };
        Response::builder()
            .status(status)
            .body(Full::new(body))
            .unwrap_or_default()
    }
}

/// Answer on `listener` until the process ends: the routes too if `config_served`.
pub async fn serve(listener: TcpListener, published: Arc<Published>, config_served: bool) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let published = published.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let answer = published.answer(request.uri().path(), config_served);
                async move { Ok::<_, Infallible>(answer) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_served_before_the_caches_synced_and_ready_waits_for_traefiks_fetches() {
        let published = Published::default();
        assert_eq!(
            published.answer("/config", true).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            published.answer("/synced", false).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        published.publish("{}".to_owned());
        assert_eq!(published.answer("/synced", false).status(), StatusCode::OK);
        assert_eq!(
            published.answer("/ready", false).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        for _ in 0..FETCHES_BEFORE_READY {
            assert_eq!(published.answer("/config", true).status(), StatusCode::OK);
        }
        assert_eq!(published.answer("/ready", false).status(), StatusCode::OK);
        assert_eq!(
            published.answer("/other", true).status(),
            StatusCode::NOT_FOUND
        );
        // The probes' listener, which any pod may reach, never gives the routes away.
        assert_eq!(
            published.answer("/config", false).status(),
            StatusCode::NOT_FOUND
        );
    }
}
