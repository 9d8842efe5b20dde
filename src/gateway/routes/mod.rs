//! `mlkube gateway-routes`: the Gateway API half of the gateway component. It watches the
//! component's Gateway and the HTTPRoutes attached to it, turns them into Traefik's dynamic
//! configuration, serves that on the pod's loopback to Traefik's HTTP provider, and writes the
//! routes', Gateway's and GatewayClass's statuses.
//!
//! Traefik's own Gateway API provider caches every Secret of the namespaces it watches (for
//! TLS listeners, whether there are any or not), and RBAC cannot narrow a watch by label: run
//! that way, the gateway could read the object store's keys. Split this way, Traefik holds no
//! Kubernetes credentials at all, and this process reads Gateway API objects, Services and
//! EndpointSlices, never a Secret.
//!
//! - [`world`]: what is read, and what is served.
//! - [`attach`], [`rules`], [`backends`], [`translate`]: which routes a listener takes, their
//!   matches as router rules, their backends as servers; together, the configuration.
//! - [`status`]: the statuses, from the translation.
//! - [`watch`], [`controller`], [`serve`]: the caches, the loop, the loopback endpoint.

pub mod attach;
pub mod backends;
pub mod controller;
pub mod rules;
pub mod serve;
pub mod status;
pub mod translate;
pub mod watch;
pub mod world;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::operator::runtime::http::{HttpError, bind};

/// What to serve, from the command line.
pub struct Settings {
    pub served: world::Served,
    pub class: String,
    pub all_namespaces: bool,
    pub hostname: String,
    pub listen: String,
    /// Where the kubelet's probes ask.
    pub probes: String,
}

/// Why the process stopped.
#[derive(Debug, thiserror::Error)]
pub enum RoutesError {
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Listen(#[from] HttpError),
    #[error("cannot reach the Kubernetes API (in a pod, it reads its ServiceAccount's token)")]
    Client(#[source] kube::Error),
}

/// Serve the routes until the process ends.
pub fn run(settings: Settings) -> Result<(), RoutesError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = (tracing_subscriber::fmt().with_env_filter(filter))
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(RoutesError::Runtime)?;
    runtime.block_on(serve_routes(settings))
}

async fn serve_routes(settings: Settings) -> Result<(), RoutesError> {
    let listener = bind(&settings.listen).await?;
    let probes = bind(&settings.probes).await?;
    let client = kube::Client::try_default()
        .await
        .map_err(RoutesError::Client)?;
    let published = Arc::new(serve::Published::default());
    tokio::spawn(serve::serve(listener, published.clone(), true));
    tokio::spawn(serve::serve(probes, published.clone(), false));
    let scope = watch::Scope {
        gateway_namespace: settings.served.namespace.clone(),
        gateway: settings.served.name.clone(),
        class: settings.class,
        all_namespaces: settings.all_namespaces,
    };
    let changed = Arc::new(Notify::new());
    let caches = watch::Caches::start(&client, &scope, &changed);
    eprintln!("mlkube gateway-routes: listening on {}", settings.listen);
    let looping = controller::Looping {
        client,
        served: settings.served,
        hostname: settings.hostname,
        published,
    };
    controller::run(looping, caches, changed).await;
    Ok(())
}
