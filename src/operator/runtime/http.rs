//! The operator's two small HTTP endpoints: `/metrics` (Prometheus) and `/healthz` + `/readyz`.
//!
//! Plain HTTP/1.1 on a tokio listener, one request per connection: probes and scrapes need
//! nothing more, and it keeps a web framework out of the binary.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::lock;
use super::metrics::Metrics;

/// What the probes report.
#[derive(Default)]
pub struct Health {
    /// Each enabled controller's readiness gate, by the controller's name: open once its
    /// caches have synced (see [`super::manager`]).
    gates: Mutex<BTreeMap<&'static str, bool>>,
    /// A standby replica (leader election, not leading) is ready: it is waiting to take over.
    standby: AtomicBool,
    /// The kinds the operator was asked to run whose CRD is not installed, with the CRD's
    /// name: the operator is not ready while it cannot run them.
    missing_crds: Mutex<BTreeMap<&'static str, String>>,
}

impl Health {
    /// The closed readiness gate of the controller `name`: `/readyz` fails until it opens.
    pub fn gate(self: &Arc<Self>, name: &'static str) -> Gate {
        lock(&self.gates).insert(name, false);
        Gate {
            health: self.clone(),
            name,
        }
    }

    /// This replica waits for the leader Lease: ready, whatever its gates say.
    pub fn standing_by(&self) {
        self.standby.store(true, Ordering::Relaxed);
    }

    /// The CRD `crd` of `kind` is not installed.
    pub fn crd_missing(&self, kind: &'static str, crd: String) {
        lock(&self.missing_crds).insert(kind, crd);
    }

    /// The CRD of `kind` is installed (now).
    pub fn crd_installed(&self, kind: &'static str) {
        lock(&self.missing_crds).remove(kind);
    }

    /// Whether every gate opened: none registered is not ready either.
    fn synced(&self) -> bool {
        let gates = lock(&self.gates);
        !gates.is_empty() && gates.values().all(|open| *open)
    }

    /// Ready, or why not.
    fn readiness(&self) -> Result<(), String> {
        if !self.standby.load(Ordering::Relaxed) && !self.synced() {
            return Err("caches not synced yet\n".to_owned());
        }
        let missing = lock(&self.missing_crds);
        if missing.is_empty() {
            return Ok(());
        }
        Err(missing
            .iter()
            .map(|(kind, crd)| format!("{kind}s are not run: the CRD {crd} is not installed\n"))
            .collect())
    }
}

/// One controller's part of `/readyz`: closed until the controller's caches have synced.
#[derive(Clone)]
pub struct Gate {
    health: Arc<Health>,
    name: &'static str,
}

impl Gate {
    /// The controller's caches have synced: its part of `/readyz` is ready from now on.
    pub fn open(&self) {
        lock(&self.health.gates).insert(self.name, true);
        tracing::info!(controller = self.name, "caches synced");
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("`{addr}` is not a listen address; hint: write it as `:8080` or `127.0.0.1:8080`")]
    Address { addr: String },
    #[error("cannot listen on {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// Parse `:8080` (every interface) or `host:port`.
pub fn parse_addr(addr: &str) -> Result<SocketAddr, HttpError> {
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_owned()
    };
    full.parse().map_err(|_| HttpError::Address {
        addr: addr.to_owned(),
    })
}

pub async fn bind(addr: &str) -> Result<TcpListener, HttpError> {
    let socket = parse_addr(addr)?;
    TcpListener::bind(socket)
        .await
        .map_err(|source| HttpError::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Which endpoints a listener serves.
#[derive(Clone)]
pub enum Endpoints {
    Metrics(Arc<Metrics>),
    Health(Arc<Health>),
}

/// Serve requests until the task is dropped.
pub async fn serve(listener: TcpListener, endpoints: Endpoints) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let Ok(n) = stream.read(&mut buf).await else {
                return;
            };
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, body) = respond(&endpoints, path);
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

fn respond(endpoints: &Endpoints, path: &str) -> (&'static str, String) {
    let path = path.split('?').next().unwrap_or(path);
    match (endpoints, path) {
        (Endpoints::Metrics(metrics), "/metrics") => ("200 OK", metrics.render()),
        (Endpoints::Health(_), "/healthz") => ("200 OK", "ok\n".to_owned()),
        (Endpoints::Health(health), "/readyz") => match health.readiness() {
            Ok(()) => ("200 OK", "ok\n".to_owned()),
            Err(why) => ("503 Service Unavailable", why),
        },
        _ => ("404 Not Found", "not found\n".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::runtime::metrics::Transition;

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_addr(":8080").unwrap().to_string(), "0.0.0.0:8080");
        assert_eq!(
            parse_addr("127.0.0.1:9").unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert!(parse_addr("8080").is_err());
    }

    /// The families that `# HELP` and `# TYPE` lines name, and every family a sample belongs
    /// to (a histogram's `_bucket`, `_sum` and `_count` samples belong to the histogram).
    fn families(exposition: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
        let (mut helped, mut typed, mut sampled) = (Vec::new(), Vec::new(), Vec::new());
        for line in exposition.lines() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("#"), Some("HELP"), Some(name)) => helped.push(name.to_owned()),
                (Some("#"), Some("TYPE"), Some(name)) => typed.push(name.to_owned()),
                (Some(sample), _, _) => {
                    let name = sample.split('{').next().unwrap_or(sample);
                    let family = ["_bucket", "_sum", "_count"]
                        .iter()
                        .find_map(|suffix| name.strip_suffix(suffix))
                        .filter(|base| typed.iter().any(|t| t == base))
                        .unwrap_or(name);
                    sampled.push(family.to_owned());
                }
                _ => {}
            }
        }
        (helped, typed, sampled)
    }

    #[tokio::test]
    async fn every_scraped_metric_has_help_and_type() {
        let metrics = Arc::new(Metrics::default());
        metrics.job(Transition::Created, "tensorflow", "team-a");
        metrics.job_deleted("pytorch", "team-b");
        for operation in [
            "created_pods",
            "deleted_pods",
            "succeeded_service_creation",
            "failed_service_creation",
            "created_pod_groups",
            "updated_pod_groups",
            "deleted_pod_groups",
            "mlkube_operator_events_dropped",
        ] {
            metrics.object(operation);
        }
        metrics.error("create_pod");
        metrics.reconciled(std::time::Duration::from_millis(3));
        let listener = bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, Endpoints::Metrics(metrics)));

        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");

        let (helped, typed, sampled) = families(body);
        assert!(sampled.len() > 20, "{body}");
        for family in &sampled {
            assert!(helped.contains(family), "{family} has no # HELP in\n{body}");
            assert!(typed.contains(family), "{family} has no # TYPE in\n{body}");
        }
        for family in ["created_pods_total", "succeeded_service_creation_total"] {
            assert!(
                sampled.iter().any(|s| s == family),
                "no {family} in\n{body}"
            );
        }
    }

    #[tokio::test]
    async fn readyz_turns_ready_and_metrics_render() {
        let health = Arc::new(Health::default());
        let listener = bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, Endpoints::Health(health.clone())));
        let get = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            stream.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        let (training, volumes) = (health.gate("training"), health.gate("volumes"));
        training.open();
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        volumes.open();
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/nope").await.starts_with("HTTP/1.1 404"));

        health.crd_missing("MXJob", "mxjobs.kubeflow.org".to_owned());
        let not_ready = get("/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(
            not_ready
                .ends_with("MXJobs are not run: the CRD mxjobs.kubeflow.org is not installed\n"),
            "{not_ready}"
        );
        health.crd_installed("MXJob");
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
    }
}
