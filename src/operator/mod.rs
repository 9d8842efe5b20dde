//! `mlkube operator`: the controllers that run in the cluster, on one shared runtime.
//!
//! Four rooms, and this file above them. `runtime` is what every controller shares, whatever
//! API it serves: the contract by which a controller is added and says it is ready (`manager`),
//! the leader Lease, metrics and the health probes over HTTP, the shutdown on a signal, the
//! writes every controller makes (`writes`), the expectations of creations not yet cached, the
//! event recorder, and the discovery of installed CRDs. `training` is the controller of
//! Kubeflow's `kubeflow.org/v1` jobs (TFJob, PyTorchJob, MXJob, XGBoostJob, JAXJob, PaddleJob,
//! MPIJob): their types and CRDs, the pure engine that decides, one small module per framework,
//! and the controller that talks to the cluster. `fc` is FrameworkController's Framework, and
//! `volumes` the volume controller of KVC's `kvc.kubeflow.org/v1` VolumeManagers (its types,
//! the pure plan, the pods that place data and the fetcher they run): rooms of their own on the
//! same runtime. Each uses `runtime`; `runtime` uses nothing here, and no room uses another but
//! for one floor: `training` reads `volumes`' VolumeManager types (a job's data annotation names a
//! VolumeManager), so `volumes` sits below it (`tests/layout.rs` checks the floors). This file reads the flags, starts the runtime's parts
//! (metrics, probes, lease) and adds the controllers `--controllers` enables
//! (`training`, `fc`, `volumes`) to the manager, one line each.

pub mod fc;
pub mod runtime;
pub mod serving;
pub mod training;
pub mod volumes;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use runtime::manager::Manager;
use runtime::{http, leader, metrics, shutdown};
use training::{controller, engine, registry};

/// What `mlkube operator` runs with, resolved from its flags by the caller.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The kubeconfig file; `None`: `$KUBECONFIG`, ~/.kube/config, else in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context; `None`: the file's current context.
    pub context: Option<String>,
    /// Watch only this namespace; `None`: all namespaces.
    pub namespace: Option<String>,
    /// Take the leader Lease before reconciling.
    pub leader_elect: bool,
    /// Where `/metrics` listens, e.g. `:8080`.
    pub metrics_addr: String,
    /// Where `/healthz` and `/readyz` listen, e.g. `:8081`.
    pub health_addr: String,
    /// How many jobs are reconciled at once.
    pub concurrency: u16,
    /// Create a PodGroup per job for this gang scheduler.
    pub gang_scheduler: Option<String>,
    /// The image of PyTorch workers' `init-pytorch` container.
    pub pytorch_init_image: String,
    /// The image of MPIJob launchers' `kubectl-delivery` container.
    pub mpi_kubectl_delivery_image: String,
    /// After SIGTERM, how long reconciles in flight may take.
    pub shutdown_timeout: Duration,
    /// The frameworks whose jobs to run (`registry::ALL` for all).
    pub frameworks: Vec<&'static registry::Registered>,
    /// How log lines are written; `None`: text on a terminal, else JSON.
    pub log_format: Option<LogFormat>,
    /// The controllers to run.
    pub controllers: Controllers,
    /// Where the volume controller places data on nodes, and the image of its pods.
    pub placement: volumes::pods::Placement,
    /// What the flags spelt the old way, said as warnings once logging starts.
    pub deprecated: Vec<&'static str>,
    /// FrameworkController's configuration file (`--fc-config`); `None`:
    /// ./frameworkcontroller.yaml if there is one, else FrameworkController's defaults.
    pub fc_config: Option<PathBuf>,
    /// The Gateway (`namespace/name`) InferenceServices' HTTPRoutes hang on, KServe's ingress
    /// domain, and the storage initializer's image.
    pub serving: ServingSettings,
}

/// What the InferenceService controller's flags say.
#[derive(Clone, Debug)]
pub struct ServingSettings {
    /// `--serving-gateway`: the Gateway's `namespace/name`; required with `serving`.
    pub gateway: Option<String>,
    /// `--serving-domain`: hosts are `<name>-<namespace>.<domain>`.
    pub domain: String,
    /// `--storage-initializer-image`.
    pub storage_image: String,
}

/// Which of the operator's controllers run (`--controllers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controllers {
    /// The kubeflow.org/v1 training jobs of `--frameworks`.
    pub training: bool,
    /// FrameworkController's frameworkcontroller.microsoft.com/v1 Frameworks.
    pub framework_controller: bool,
    /// The kvc.kubeflow.org/v1 VolumeManagers.
    pub volumes: bool,
    /// KServe's serving.kserve.io/v1beta1 InferenceServices.
    pub serving: bool,
}

/// How the operator writes its log lines on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Readable lines: time, level, the job's span, the message and its fields.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `message`, `target` and the event's
    /// own fields at top level (as controller-runtime's structured logs) and, inside a
    /// reconcile, `span` (with the job as `namespace/name`).
    Json,
}

/// Why the operator stopped.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("cannot read kubeconfig {path}")]
    ReadKubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "cannot configure a client from {source_name}\nhint: pass --kubeconfig FILE, set KUBECONFIG, or run in a cluster"
    )]
    Configure {
        source_name: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot create a Kubernetes client")]
    Client {
        #[source]
        source: kube::Error,
    },
    #[error(
        "--pytorch-init-container-image {image:?} is not an image\nhint: give it as the cluster's nodes pull it, e.g. alpine:3.10 or mirror.internal/library/alpine:3.10"
    )]
    InitImage { image: String },
    #[error(
        "--mpi-kubectl-delivery-image {image:?} is not an image\nhint: give it as the cluster's nodes pull it, e.g. mlkube/kubectl-delivery:0.1.0 or mirror.internal/mlkube/kubectl-delivery:0.1.0"
    )]
    KubectlDeliveryImage { image: String },
    #[error(
        "--volume-image {image:?} is not an image\nhint: give the image with the mlkube binary as the cluster's nodes pull it, e.g. mlkube/mlkube:0.1.0"
    )]
    VolumeImage { image: String },
    #[error(
        "--volume-root {root:?} is not an absolute directory other than /\nhint: e.g. /var/lib/mlkube/volumes"
    )]
    VolumeRoot { root: String },
    #[error(
        "cannot use FrameworkController's configuration {path}: {detail}\nhint: correct the \
         field it names (FrameworkController's own file works as it is), or give no file for \
         FrameworkController's defaults"
    )]
    FcConfig { path: String, detail: String },
    #[error(
        "--controllers serving needs --serving-gateway NAMESPACE/NAME, the Gateway its \
         HTTPRoutes hang on{}\nhint: e.g. --serving-gateway mlkube/gateway (the gateway \
         component's namespace and name)", given.as_deref().map(|g| format!(", not {g:?}")).unwrap_or_default()
    )]
    ServingGateway { given: Option<String> },
    #[error(
        "--serving-domain {domain:?} is not a domain\nhint: e.g. example.com (KServe's default)"
    )]
    ServingDomain { domain: String },
    #[error(
        "--storage-initializer-image {image:?} is not an image\nhint: give the serving image as \
         the nodes pull it, e.g. mlkube/serving:0.1.0"
    )]
    StorageImage { image: String },
    #[error("cannot serve {what}")]
    Serve {
        what: &'static str,
        #[source]
        source: http::HttpError,
    },
    #[error("stopped leading")]
    Leader {
        #[source]
        source: leader::LeaderError,
    },
    #[error("cannot start the async runtime")]
    Runtime {
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen for SIGTERM and SIGINT")]
    Signals {
        #[source]
        source: std::io::Error,
    },
}

/// Turn transparent huge pages off for this process. The operator holds thousands of small
/// cached objects for as long as it runs, and the allocator asks the kernel for huge pages on
/// its arenas: then each 4 KiB touched can keep 2 MiB resident. At 1,000 jobs that was a third
/// of the operator's RSS (127 MB against 86 MB without). The kernel checks the flag at every
/// page fault, so it covers memory mapped before this call too. Best effort: where the kernel
/// refuses, only memory use differs.
fn keep_the_heap_in_small_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
        if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `mlkube operator`: run until interrupted.
pub fn run(settings: Settings) -> Result<(), OperatorError> {
    init_logging(settings.log_format.unwrap_or_else(|| {
        if std::io::stderr().is_terminal() {
            LogFormat::Text
        } else {
            LogFormat::Json
        }
    }));
    for note in &settings.deprecated {
        tracing::warn!("{note}");
    }
    if let Err(e) = keep_the_heap_in_small_pages() {
        tracing::debug!(error = %e, "transparent huge pages stay enabled");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| OperatorError::Runtime { source })?;
    let result = runtime.block_on(serve(settings));
    // Background tasks (probes, metrics, events still being recorded) must not hold up the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    if result.is_ok() {
        tracing::info!("stopped");
    }
    result
}

/// Log lines on stderr in `format`, filtered by `RUST_LOG` (default `info`). Each line inside
/// a reconcile carries the job as `namespace/name` (the span's `job` field).
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// A client from `kubeconfig`/`context`, else `$KUBECONFIG`/~/.kube/config, else the
/// in-cluster service account.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, OperatorError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| OperatorError::ReadKubeconfig {
                    path: path.display().to_string(),
                    source,
                })?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| OperatorError::Configure {
                    source_name: path.display().to_string(),
                    source: Box::new(e),
                })?
        }
        None if context.is_some() => {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|e| OperatorError::Configure {
                    source_name: "the kubeconfig".into(),
                    source: Box::new(e),
                })?
        }
        None => Config::infer()
            .await
            .map_err(|e| OperatorError::Configure {
                source_name: "the environment".into(),
                source: Box::new(e),
            })?,
    };
    Client::try_from(config).map_err(|source| OperatorError::Client { source })
}

/// FrameworkController's configuration: the file `path` names, else ./frameworkcontroller.yaml
/// in the working directory as FrameworkController reads it, else its defaults.
fn fc_config(path: Option<&Path>) -> Result<fc::config::FcConfig, OperatorError> {
    let local = Path::new(fc::config::FILE_NAME);
    let Some(path) = path.or(local.is_file().then_some(local)) else {
        return Ok(fc::config::BUILTIN.clone());
    };
    let refused = |detail: String| OperatorError::FcConfig {
        path: path.display().to_string(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| refused(e.to_string()))?;
    let config = fc::config::FcConfig::parse(&text).map_err(|e| refused(e.to_string()))?;
    tracing::info!(path = %path.display(), "FrameworkController's configuration read");
    Ok(config)
}

/// Whether `image` can name an image: not empty, and no spaces or control characters (the API
/// server refuses them around it, and the kubelet inside, but only once a pod is created).
fn is_image(image: &str) -> bool {
    !image.is_empty() && !image.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The namespace of the leader Lease: the pod's own, else `--namespace`, else `default`.
fn lease_namespace(settings: &Settings) -> String {
    if let Ok(ns) = std::env::var("POD_NAMESPACE")
        && !ns.is_empty()
    {
        return ns;
    }
    if let Some(ns) = &settings.namespace {
        return ns.clone();
    }
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// Serve metrics and probes, take the lease if asked, and run the controller.
pub async fn serve(settings: Settings) -> Result<(), OperatorError> {
    // Bad flags are reported before anything touches the network.
    check_flags(&settings)?;
    let fc_config = Arc::new(fc_config(settings.fc_config.as_deref())?);
    let shutdown = shutdown::Shutdown::on_signals(settings.shutdown_timeout)
        .map_err(|source| OperatorError::Signals { source })?;
    let client = client(settings.kubeconfig.as_deref(), settings.context.as_deref()).await?;
    let metrics = Arc::new(metrics::Metrics::default());
    let health = Arc::new(http::Health::default());
    serve_http(&settings, &metrics, &health).await?;

    let controllers = running(&settings, controller_settings(&settings), fc_config);
    tracing::info!(
        namespace = settings.namespace.as_deref().unwrap_or("(all)"),
        concurrency = settings.concurrency,
        leader_elect = settings.leader_elect,
        frameworks = %settings
            .frameworks
            .iter()
            .map(|r| r.framework.name)
            .collect::<Vec<_>>()
            .join(","),
        controllers = %controllers.names().join(","),
        "starting the training-job operator"
    );

    if !settings.leader_elect {
        run_without_election(client, controllers, metrics, health, shutdown).await;
        return Ok(());
    }
    run_when_elected(&settings, client, controllers, metrics, health, shutdown).await
}

/// The controllers `--controllers` enables, each added with its settings: the training jobs of
/// `--frameworks`, FrameworkController's Framework, the volume controller.
fn running(
    settings: &Settings,
    training: controller::Settings,
    fc_config: Arc<fc::config::FcConfig>,
) -> Manager {
    let mut manager = Manager::default();
    let enabled = settings.controllers;
    if enabled.training && !settings.frameworks.is_empty() {
        manager.add("training", |shared| {
            controller::run(shared, training).boxed()
        });
    }
    if enabled.framework_controller {
        let fc = fc::controller::Settings {
            namespace: settings.namespace.clone(),
            concurrency: settings.concurrency,
            config: fc_config,
        };
        manager.add("fc", |shared| fc::controller::run(shared, fc).boxed());
    }
    if enabled.volumes {
        let volumes = volumes::controller::Settings {
            namespace: settings.namespace.clone(),
            placement: settings.placement.clone(),
            concurrency: settings.concurrency,
        };
        manager.add("volumes", |shared| {
            volumes::controller::run(shared, volumes).boxed()
        });
    }
    if let Some(ingress) = enabled
        .serving
        .then(|| serving_ingress(&settings.serving))
        .flatten()
    {
        let serving = serving::context::Settings {
            namespace: settings.namespace.clone(),
            concurrency: settings.concurrency,
            ingress,
            storage_image: settings.serving.storage_image.clone(),
        };
        manager.add("serving", |shared| {
            serving::controller::run(shared, serving).boxed()
        });
    }
    manager
}

/// The flags that can be wrong without the network: the listen addresses and the images.
fn check_flags(settings: &Settings) -> Result<(), OperatorError> {
    http::parse_addr(&settings.metrics_addr).map_err(|source| OperatorError::Serve {
        what: "metrics",
        source,
    })?;
    http::parse_addr(&settings.health_addr).map_err(|source| OperatorError::Serve {
        what: "health probes",
        source,
    })?;
    if !is_image(&settings.pytorch_init_image) {
        return Err(OperatorError::InitImage {
            image: settings.pytorch_init_image.clone(),
        });
    }
    if !is_image(&settings.mpi_kubectl_delivery_image) {
        return Err(OperatorError::KubectlDeliveryImage {
            image: settings.mpi_kubectl_delivery_image.clone(),
        });
    }
    if !is_image(&settings.placement.image) {
        return Err(OperatorError::VolumeImage {
            image: settings.placement.image.clone(),
        });
    }
    if !settings.placement.root.starts_with('/')
        || settings.placement.root.trim_end_matches('/').is_empty()
    {
        return Err(OperatorError::VolumeRoot {
            root: settings.placement.root.clone(),
        });
    }
    check_serving(settings)
}

/// The InferenceService controller's flags: a Gateway given as `namespace/name` when it runs,
/// a domain, and an image.
fn check_serving(settings: &Settings) -> Result<(), OperatorError> {
    let serving = &settings.serving;
    if settings.controllers.serving && serving_ingress(serving).is_none() {
        return Err(OperatorError::ServingGateway {
            given: serving.gateway.clone(),
        });
    }
    if !is_image(&serving.storage_image) {
        return Err(OperatorError::StorageImage {
            image: serving.storage_image.clone(),
        });
    }
    let label = |l: &str| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !serving.domain.split('.').all(label) {
        return Err(OperatorError::ServingDomain {
            domain: serving.domain.clone(),
        });
    }
    Ok(())
}

/// The Gateway and domain of `--serving-gateway` and `--serving-domain`, when the gateway is
/// `namespace/name`.
fn serving_ingress(serving: &ServingSettings) -> Option<serving::objects::Ingress> {
    let (namespace, name) = serving.gateway.as_deref()?.split_once('/')?;
    let dns = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    (dns(namespace) && dns(name)).then(|| serving::objects::Ingress {
        gateway: (namespace.to_owned(), name.to_owned()),
        domain: serving.domain.clone(),
    })
}

/// Serve `/metrics` and the health probes in the background, once both addresses listen.
async fn serve_http(
    settings: &Settings,
    metrics: &Arc<metrics::Metrics>,
    health: &Arc<http::Health>,
) -> Result<(), OperatorError> {
    let metrics_listener =
        http::bind(&settings.metrics_addr)
            .await
            .map_err(|source| OperatorError::Serve {
                what: "metrics",
                source,
            })?;
    let health_listener =
        http::bind(&settings.health_addr)
            .await
            .map_err(|source| OperatorError::Serve {
                what: "health probes",
                source,
            })?;
    tokio::spawn(http::serve(
        metrics_listener,
        http::Endpoints::Metrics(metrics.clone()),
    ));
    tokio::spawn(http::serve(
        health_listener,
        http::Endpoints::Health(health.clone()),
    ));
    Ok(())
}

/// What the controllers run with, from the operator's flags (and `CUSTOM_CLUSTER_DOMAIN`).
fn controller_settings(settings: &Settings) -> controller::Settings {
    controller::Settings {
        namespace: settings.namespace.clone(),
        concurrency: settings.concurrency,
        options: engine::build::Options {
            cluster_domain: std::env::var("CUSTOM_CLUSTER_DOMAIN")
                .ok()
                .filter(|d| !d.is_empty()),
            gang_scheduler: settings.gang_scheduler.clone(),
            pytorch_init_image: Some(settings.pytorch_init_image.clone()),
            mpi_kubectl_delivery_image: Some(settings.mpi_kubectl_delivery_image.clone()),
        },
        frameworks: settings.frameworks.clone(),
    }
}

/// Without leader election this replica leads: run the controllers until asked to stop.
async fn run_without_election(
    client: Client,
    controllers: Manager,
    metrics: Arc<metrics::Metrics>,
    health: Arc<http::Health>,
    shutdown: shutdown::Shutdown,
) {
    metrics.set_leader(true);
    let stop = shutdown.requested().boxed().shared();
    controllers.run(client, metrics, health, stop).await;
}

/// With leader election: wait as a ready standby until this replica holds the lease, then run
/// the controllers until asked to stop (and hand the lease over) or until the lease is lost.
async fn run_when_elected(
    settings: &Settings,
    client: Client,
    controllers: Manager,
    metrics: Arc<metrics::Metrics>,
    health: Arc<http::Health>,
    shutdown: shutdown::Shutdown,
) -> Result<(), OperatorError> {
    // A standby replica is healthy and ready: it is waiting to take over.
    health.standing_by();
    let lease = leader::LeaseConfig::new(lease_namespace(settings));
    tokio::select! {
        () = leader::acquire(client.clone(), &lease) => {}
        () = shutdown.clone().requested() => return Ok(()),
    }
    metrics.set_leader(true);
    let stop = shutdown.requested().boxed().shared();
    tokio::select! {
        () = controllers.run(client.clone(), metrics.clone(), health, stop) => {
            // Hand the lease over now rather than make a standby wait for it to run out.
            leader::release(client, &lease).await;
            metrics.set_leader(false);
            Ok(())
        }
        lost = leader::hold(client.clone(), lease.clone()) => {
            metrics.set_leader(false);
            Err(OperatorError::Leader { source: lost })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_image;

    #[test]
    fn an_image_is_a_name_without_spaces() {
        for image in [
            "alpine:3.10",
            "mirror.internal:5000/library/alpine:3.19",
            "alpine@sha256:0123abcd",
        ] {
            assert!(is_image(image), "{image}");
        }
        for image in ["", " alpine:3.10", "alpine 3.10", "alpine:3.10\n"] {
            assert!(!is_image(image), "{image:?}");
        }
    }
}
