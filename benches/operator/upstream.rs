//! Microsoft's FrameworkController as the bench's second controller (PEER, with
//! `FRAMEWORK=frameworkcontroller`): its binary, built by `benches/frameworkcontroller.sh`, run as
//! a child of the bench on the same Frameworks as mlkube's controller, after mlkube's phase.
//!
//! Upstream takes no flags: it reads `frameworkcontroller.yaml` from its working directory, so
//! each run gets a directory of its own with that file (the values of upstream's default file,
//! which mlkube embeds, plus the kubeconfig the bench uses). It watches every namespace, so it
//! starts only when no Framework exists anywhere (it would take them over); and at start it PUTs
//! its own CRD over mlkube's of the same name (no status subresource: it writes whole
//! Frameworks), so the bench submits nothing before the API server serves that CRD, and
//! `install_crd` puts mlkube's back at the end. Its log (info level, as upstream sets it) goes to
//! a file in its directory, whose end a failed phase reports.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::{Api, Client, Resource};
use mlkube::operator::fc::api::Framework;
use mlkube::operator::fc::config;
use mlkube::operator::fc::controller::FLAG_NAME;

use super::{Controller, Error, Subject, kubeconfig, say};

/// Where upstream's stderr goes, in its working directory.
const LOG: &str = "frameworkcontroller.log";

/// The most `kubeClientQps` (and `kubeClientBurst`) upstream accepts.
const MAX_QPS: u32 = 10_000;

/// How upstream's controller is run: PEER, PEER_QPS and the bench's kubeconfig, read before the
/// run so that a wrong path fails in a second rather than after mlkube's phase.
pub struct Peer {
    binary: PathBuf,
    kubeconfig: PathBuf,
    /// Its client's requests a second (`kubeClientQps`, and as many in a burst); upstream's own
    /// default, 80 with bursts of 120, when not given.
    qps: Option<u32>,
}

impl Peer {
    /// PEER=/path/to/frameworkcontroller, if set: refused unless the bench runs Frameworks.
    pub fn from_env(subject: Subject) -> Result<Option<Peer>, Error> {
        let Some(binary) = std::env::var_os("PEER").filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        if !matches!(subject, Subject::Frameworks) {
            return Err(format!(
                "PEER runs FrameworkController, which runs Frameworks only\n\
                 hint: set FRAMEWORK={FLAG_NAME} too"
            )
            .into());
        }
        let binary = std::fs::canonicalize(&binary).map_err(|e| {
            format!(
                "PEER {}: {e}\nhint: build it with benches/frameworkcontroller.sh /path/to/checkout",
                PathBuf::from(&binary).display()
            )
        })?;
        let qps = match std::env::var("PEER_QPS") {
            Err(_) => None,
            Ok(n) => Some(
                n.parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_QPS).contains(n))
                    .ok_or_else(|| format!("PEER_QPS {n}: a whole number from 1 to {MAX_QPS}"))?,
            ),
        };
        Ok(Some(Peer {
            binary,
            kubeconfig: kubeconfig()?,
            qps,
        }))
    }

    /// Its `frameworkcontroller.yaml`. The address is set, empty, so that a
    /// KUBE_APISERVER_ADDRESS in the environment cannot point it at another cluster.
    fn config(&self) -> String {
        let path = serde_json::Value::from(self.kubeconfig.to_string_lossy());
        let mut file = format!(
            "{}\nkubeApiServerAddress: \"\"\nkubeConfigFilePath: {path}\n",
            config::DEFAULT.trim_end()
        );
        if let Some(qps) = self.qps {
            file += &format!("kubeClientQps: {qps}\nkubeClientBurst: {qps}\n");
        }
        file
    }

    /// What the tables call it, with its client's rate when not upstream's default.
    pub fn name(&self) -> String {
        match self.qps {
            None => "FrameworkController".to_owned(),
            Some(qps) => format!("FrameworkController (kubeClientQps {qps})"),
        }
    }

    /// Start it in a working directory of its own once no Framework exists, and wait until the
    /// API server serves its CRD.
    pub async fn start(&self, client: &Client, limit: Duration) -> Result<Controller, Error> {
        no_framework_anywhere(client).await?;
        let dir = tempfile::Builder::new()
            .prefix("mlkube-bench-frameworkcontroller-")
            .tempdir()?;
        std::fs::write(dir.path().join(config::FILE_NAME), self.config())?;
        let log = std::fs::File::create(dir.path().join(LOG))?;
        say(&format!(
            "{} starting in {}",
            self.name(),
            dir.path().display()
        ));
        let child = std::process::Command::new(&self.binary)
            .current_dir(dir.path())
            .env_remove("KUBE_APISERVER_ADDRESS")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.binary.display()))?;
        let mut controller = Controller {
            child,
            workdir: Some(dir),
        };
        until_its_crd(client, &mut controller, limit).await?;
        Ok(controller)
    }
}

/// Refuse to start upstream while any Framework exists: it watches every namespace and would
/// reconcile another's Frameworks (or an earlier phase's) as its own.
async fn no_framework_anywhere(client: &Client) -> Result<(), Error> {
    let frameworks = Api::<Framework>::all(client.clone());
    let found = frameworks
        .list_metadata(&ListParams::default().limit(1))
        .await?;
    if let Some(f) = found.items.first() {
        return Err(format!(
            "Framework {}/{} exists, and FrameworkController would take it over: it watches \
             every namespace\nhint: run the comparison on a cluster of its own",
            f.metadata.namespace.as_deref().unwrap_or_default(),
            f.metadata.name.as_deref().unwrap_or_default()
        )
        .into());
    }
    Ok(())
}

/// Wait until the API server serves upstream's CRD, which it PUTs at start: Frameworks without
/// the status subresource that mlkube's CRD has. Until then a Framework's status written whole,
/// as upstream writes it, would be dropped.
async fn until_its_crd(
    client: &Client,
    controller: &mut Controller,
    limit: Duration,
) -> Result<(), Error> {
    let since = Instant::now();
    let group_version = Framework::api_version(&());
    let status = format!("{}/status", Framework::plural(&()));
    loop {
        if let Some(exit) = controller.child.try_wait()? {
            return Err(format!(
                "FrameworkController exited ({exit}){}",
                log_tail(controller)
            )
            .into());
        }
        // The group is briefly not served while the API server swaps the CRD's handler.
        if let Ok(served) = client.list_api_group_resources(&group_version).await
            && !served.resources.iter().any(|r| r.name == status)
        {
            say(&format!(
                "FrameworkController's CRD served after {:.1}s",
                since.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        if since.elapsed() > limit.min(Duration::from_secs(120)) {
            return Err(format!(
                "FrameworkController's CRD not served after {:.0}s{}",
                since.elapsed().as_secs_f64(),
                log_tail(controller)
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The last lines of upstream's log (from its last 8 kB: the whole log of 1,000 Frameworks is
/// over 100 MB), to follow an error about it.
pub fn log_tail(controller: &Controller) -> String {
    let Some(dir) = &controller.workdir else {
        return String::new();
    };
    let Ok(mut log) = std::fs::File::open(dir.path().join(LOG)) else {
        return String::new();
    };
    let from = log.metadata().map_or(0, |m| m.len().saturating_sub(8192));
    let mut tail = Vec::new();
    if log.seek(SeekFrom::Start(from)).is_err() || log.read_to_end(&mut tail).is_err() {
        return String::new();
    }
    let tail = String::from_utf8_lossy(&tail);
    // Past the start, the first line is likely cut short.
    let lines: Vec<&str> = tail.lines().skip(usize::from(from > 0)).collect();
    if lines.is_empty() {
        return String::new();
    }
    let shown = lines[lines.len().saturating_sub(20)..].join("\n");
    format!("; the end of its log:\n{shown}")
}
