//! The cluster verbs (`diff`, `apply`, `prune`, `delete`, `validate`) as the command line runs
//! them: resolve the settings, render the environment, connect, hand the plan to the stage, print
//! the outcome and choose the exit code.
//!
//! stdout carries data (diffs, JSON, one line per applied object); messages, progress and the
//! diff summary go to stderr.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use std::time::Duration;

use crate::cli::exit::Exit;
use crate::cli::{
    self, ApplyArgs, ClusterArgs, DeleteArgs, DiffArgs, GlobalArgs, ListFormat, PruneArgs,
    ValidateArgs,
};
use crate::deploy::apply::{self, ApplyError, ApplyOptions, Consent, DeleteOptions, PruneOptions};
use crate::deploy::applyset::ApplySet;
use crate::deploy::cluster::{Cluster, ClusterError, Target};
use crate::deploy::diff::{self, DiffError, DiffOptions};
use crate::deploy::plan::{self, PlanError};
use crate::deploy::status::{self, LastApply, StatusError};
use crate::deploy::wait::Progress;
use crate::render::manifest::{Manifest, Object};

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    App(#[from] crate::app::AppError),
    #[error(transparent)]
    Render(#[from] crate::render::RenderError),
    #[error("cannot read the manifest {path}: {message}")]
    ManifestFile { path: String, message: String },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Diff(#[from] DiffError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Status(#[from] StatusError),
    #[error("`{value}` is not a duration\n  hint: write it like 90s, 5m or 1h")]
    Duration { value: String },
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// An environment rendered and ready to deploy: where to, and what.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub app: String,
    /// The app's directory; `None` for objects read from `--manifest`.
    pub dir: Option<std::path::PathBuf>,
    pub target: Target,
    pub manifest: Manifest,
}

impl Rendered {
    /// The ApplySet of this app and environment.
    pub fn applyset(&self) -> ApplySet {
        ApplySet::new(&self.app, &self.target.env, &self.target.namespace)
    }
}

/// Render `env` of the app the command line names, or read pre-rendered objects from
/// `--manifest` (then the environment's name is its namespace, and the app is `manifest`).
pub fn render(
    global: &GlobalArgs,
    env: &str,
    components: &[String],
    manifest: Option<&Path>,
    cluster_args: &ClusterArgs,
) -> Result<Rendered, DeployError> {
    if let Some(path) = manifest {
        let target = Target {
            env: env.to_string(),
            namespace: env.to_string(),
            kubeconfig: cluster_args.kubeconfig.clone(),
            context_flag: cluster_args.context.clone(),
            ..Target::default()
        };
        let mut manifest = read_manifest(path)?;
        if !components.is_empty() {
            manifest
                .objects
                .retain(|o| components.contains(&o.component));
        }
        return Ok(Rendered {
            app: "manifest".into(),
            dir: None,
            target,
            manifest,
        });
    }
    let app = crate::app::App::discover(global.app.as_deref())?;
    let environment = app.environment(env)?;
    let target = Target {
        env: environment.name.clone(),
        namespace: environment.namespace.clone(),
        server: environment.server.clone(),
        context: environment.context.clone(),
        kubeconfig: cluster_args.kubeconfig.clone(),
        context_flag: cluster_args.context.clone(),
    };
    let manifest = crate::render::render(&app, env, components)?;
    Ok(Rendered {
        app: app.name().to_string(),
        dir: Some(app.root().to_path_buf()),
        target,
        manifest,
    })
}

/// Read YAML documents as objects; each object's component is its `mlkube.io/component` label.
pub fn read_manifest(path: &Path) -> Result<Manifest, DeployError> {
    let error = |message: String| DeployError::ManifestFile {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(document).map_err(|e| error(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let component = value["metadata"]["labels"]["mlkube.io/component"]
            .as_str()
            .unwrap_or("manifest")
            .to_string();
        objects.push(Object { component, value });
    }
    Ok(Manifest { objects })
}

pub fn runtime() -> Result<tokio::runtime::Runtime, DeployError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(DeployError::Runtime)
}

pub fn finish(result: Result<Exit, DeployError>) -> Exit {
    match result {
        Ok(exit) => exit,
        Err(error) => cli::report(&error),
    }
}

/// Parse `90s`, `5m`, `1h`, `500ms`, or plain seconds.
pub fn parse_duration(value: &str) -> Result<Duration, DeployError> {
    let bad = || DeployError::Duration {
        value: value.to_string(),
    };
    let value = value.trim();
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(number)),
        "ms" => Ok(Duration::from_millis(number)),
        "m" => Ok(Duration::from_secs(number * 60)),
        "h" => Ok(Duration::from_secs(number * 3600)),
        _ => Err(bad()),
    }
}

// ---------------------------------------------------------------------------------------------
// diff

pub fn diff(global: &GlobalArgs, args: &DiffArgs) -> Exit {
    finish(
        render(
            global,
            &args.env,
            &args.components,
            args.manifest.as_deref(),
            &args.cluster,
        )
        .and_then(|r| diff_rendered(&r, args)),
    )
}

/// `mlkube diff` on an environment already rendered.
pub fn diff_rendered(rendered: &Rendered, args: &DiffArgs) -> Result<Exit, DeployError> {
    runtime()?.block_on(async {
        let cluster = Cluster::connect(&rendered.target).await?;
        let set = ApplySet::new(
            &rendered.app,
            &rendered.target.env,
            &rendered.target.namespace,
        );
        let plan = plan::plan(&rendered.manifest, &set, &args.components)?;
        let changes = diff::diff(
            &cluster,
            &plan,
            DiffOptions {
                show_secrets: args.show_secrets,
            },
        )
        .await?;
        let mut stdout = std::io::stdout().lock();
        match args.output {
            ListFormat::Json => {
                let _ = writeln!(stdout, "{:#}", diff::render_json(&changes));
            }
            ListFormat::Text => {
                let _ = write!(stdout, "{}", diff::render_text(&changes, diff::use_color()));
            }
        }
        drop(stdout);
        eprint!("{}", diff::render_failures(&changes));
        eprintln!("{}", changes.summary());
        Ok(changes.exit())
    })
}

// ---------------------------------------------------------------------------------------------
// apply

pub fn apply(global: &GlobalArgs, args: &ApplyArgs) -> Exit {
    finish(
        render(
            global,
            &args.env,
            &args.components,
            args.manifest.as_deref(),
            &args.cluster,
        )
        .and_then(|r| apply_rendered(&r, args)),
    )
}

/// `mlkube apply` on an environment already rendered.
pub fn apply_rendered(rendered: &Rendered, args: &ApplyArgs) -> Result<Exit, DeployError> {
    let options = ApplyOptions {
        dry_run: args.dry_run,
        prune: args.prune,
        consent: Consent::from_flag(args.yes),
        force_conflicts: args.force_conflicts,
        wait: !args.no_wait,
        timeout: parse_duration(&args.timeout)?,
        allow_empty: args.allow_empty,
        progress: Progress::for_stderr(),
    };
    runtime()?.block_on(async {
        let cluster = Cluster::connect(&rendered.target).await?;
        eprintln!(
            "mlkube: applying environment `{}` to context `{}` ({})",
            rendered.target.env, cluster.context, cluster.server
        );
        let set = ApplySet::new(
            &rendered.app,
            &rendered.target.env,
            &rendered.target.namespace,
        );
        let plan = plan::plan(&rendered.manifest, &set, &args.components)?;
        let report = apply::apply(&cluster, &plan, &options).await?;
        if !options.dry_run {
            let last = LastApply::now(rendered.dir.as_deref());
            status::record_last_apply(&cluster, &set, &last).await?;
        }
        apply::print_report(&report, options.dry_run);
        Ok(if report.not_ready.is_empty() {
            Exit::Done
        } else {
            Exit::NotReady
        })
    })
}

// ---------------------------------------------------------------------------------------------
// prune, delete

pub fn prune(global: &GlobalArgs, args: &PruneArgs) -> Exit {
    finish(
        render(global, &args.env, &[], None, &args.cluster).and_then(|r| prune_rendered(&r, args)),
    )
}

/// `mlkube prune` on an environment already rendered.
pub fn prune_rendered(rendered: &Rendered, args: &PruneArgs) -> Result<Exit, DeployError> {
    let options = PruneOptions {
        dry_run: false,
        consent: Consent::from_flag(args.yes),
        allow_empty: args.allow_empty,
    };
    runtime()?.block_on(async {
        let cluster = Cluster::connect(&rendered.target).await?;
        let set = ApplySet::new(
            &rendered.app,
            &rendered.target.env,
            &rendered.target.namespace,
        );
        let plan = plan::plan(&rendered.manifest, &set, &[])?;
        let report = apply::prune(&cluster, &plan, &options).await?;
        if report.pruned.is_empty() {
            eprintln!(
                "mlkube: nothing to prune in environment `{}`",
                rendered.target.env
            );
        }
        apply::print_report(&report, false);
        Ok(Exit::Done)
    })
}

pub fn delete(global: &GlobalArgs, args: &DeleteArgs) -> Exit {
    // Delete works from the inventory on the cluster, not from the render: what was applied is
    // what gets deleted, even when the app changed since. It needs the app only for its name and
    // the environment's cluster.
    finish(
        render(
            global,
            &args.env,
            &args.components,
            args.manifest.as_deref(),
            &args.cluster,
        )
        .and_then(|r| delete_rendered(&r, args)),
    )
}

/// `mlkube delete` for an environment (only its app name and target are used).
pub fn delete_rendered(rendered: &Rendered, args: &DeleteArgs) -> Result<Exit, DeployError> {
    let options = DeleteOptions {
        components: args.components.clone(),
        delete_namespace: args.delete_namespace,
        consent: Consent::from_flag(args.yes),
    };
    runtime()?.block_on(async {
        let cluster = Cluster::connect(&rendered.target).await?;
        let set = ApplySet::new(
            &rendered.app,
            &rendered.target.env,
            &rendered.target.namespace,
        );
        let report = apply::delete(&cluster, &set, &options).await?;
        if report.pruned.is_empty() {
            eprintln!(
                "mlkube: environment `{}` has nothing applied on context `{}`",
                rendered.target.env, cluster.context
            );
        }
        apply::print_report(&report, false);
        Ok(Exit::Done)
    })
}

// ---------------------------------------------------------------------------------------------
// validate

pub fn validate(global: &GlobalArgs, args: &ValidateArgs) -> Exit {
    finish(
        render(global, &args.env, &args.components, None, &args.cluster)
            .and_then(|r| validate_rendered(&r, args)),
    )
}

/// `mlkube validate` on an environment already rendered.
pub fn validate_rendered(rendered: &Rendered, args: &ValidateArgs) -> Result<Exit, DeployError> {
    runtime()?.block_on(async {
        let cluster = Cluster::connect(&rendered.target).await?;
        let set = ApplySet::new(
            &rendered.app,
            &rendered.target.env,
            &rendered.target.namespace,
        );
        let plan = plan::plan(&rendered.manifest, &set, &args.components)?;
        let validation = apply::validate(&cluster, &plan).await;
        for skipped in &validation.skipped {
            eprintln!("mlkube: not checked: {}: {}", skipped.key, skipped.message);
        }
        for rejected in &validation.rejected {
            eprintln!(
                "mlkube: error: {} (component {}): {}",
                rejected.key, rejected.component, rejected.message
            );
        }
        eprintln!(
            "{} valid, {} rejected, {} not checked",
            validation.valid,
            validation.rejected.len(),
            validation.skipped.len()
        );
        Ok(if validation.rejected.is_empty() {
            Exit::Done
        } else {
            Exit::Error
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl_timeouts() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("12").unwrap(), Duration::from_secs(12));
        assert!(parse_duration("5 minutes").is_err());
    }
}
