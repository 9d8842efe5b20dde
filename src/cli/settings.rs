//! Arguments plus the environment's pins, resolved once into typed settings: where a cluster verb
//! goes (the kubeconfig, the context, the pinned server, how long one request may take), what it
//! deploys (the rendered manifest, or pre-rendered objects from `--manifest`), and the options
//! of each verb.
//!
//! The stages below `cli` take these values and never see a flag.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::app::render::RenderError;
use crate::app::{App, AppError};
use crate::deploy::cluster::Target;
use crate::render::manifest::{Manifest, ManifestFileError};

use super::{ClusterArgs, GlobalArgs, RequestArgs};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    ManifestFile(#[from] ManifestFileError),
}

/// An environment rendered and ready to deploy: where to, and what.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub app: String,
    /// The app's id from `app.yaml`, when it has one.
    pub app_id: Option<String>,
    /// The app's directory, for the git commit `status` records; `None` for `--manifest`.
    pub dir: Option<PathBuf>,
    pub target: Target,
    pub manifest: Manifest,
}

/// What a cluster verb names: the environment, the components, and where its objects come from.
pub struct Selection<'a> {
    pub env: &'a str,
    pub components: &'a [String],
    pub manifest: Option<&'a Path>,
}

/// Render the selected environment of the app the command line names, or read pre-rendered
/// objects from `--manifest` (then the environment's name is its namespace, and the app is
/// `manifest`), with the cluster the environment pins and the flags override.
pub fn deployment(
    global: &GlobalArgs,
    selection: Selection<'_>,
    cluster: &ClusterArgs,
    request: &RequestArgs,
) -> Result<Deployment, SettingsError> {
    if let Some(path) = selection.manifest {
        let mut manifest = Manifest::read(path)?;
        if !selection.components.is_empty() {
            manifest
                .objects
                .retain(|o| selection.components.contains(&o.component));
        }
        return Ok(Deployment {
            app: "manifest".into(),
            app_id: None,
            dir: None,
            target: Target {
                env: selection.env.to_string(),
                namespace: selection.env.to_string(),
                kubeconfig: cluster.kubeconfig.clone(),
                context_flag: cluster.context.clone(),
                request_timeout: Some(request.request_timeout),
                ..Target::default()
            },
            manifest,
        });
    }
    let app = App::discover(global.app.as_deref())?;
    let manifest = app.render(selection.env, selection.components)?;
    of_app(&app, selection.env, manifest, cluster, request)
}

/// The selected environment as `delete` needs it: where it is and whose inventory to read,
/// without rendering it, so an environment that no longer renders can still be deleted (its
/// manifest is left empty). `--manifest` is read as [`deployment`] reads it.
pub fn inventory(
    global: &GlobalArgs,
    selection: Selection<'_>,
    cluster: &ClusterArgs,
    request: &RequestArgs,
) -> Result<Deployment, SettingsError> {
    if selection.manifest.is_some() {
        return deployment(global, selection, cluster, request);
    }
    let app = App::discover(global.app.as_deref())?;
    app.environment(selection.env)?;
    let known = app.components()?;
    if let Some(name) = selection
        .components
        .iter()
        .find(|name| !known.iter().any(|c| &c.name == *name))
    {
        return Err(AppError::UnknownComponent {
            name: name.clone(),
            known: known.into_iter().map(|c| c.name).collect(),
        }
        .into());
    }
    of_app(&app, selection.env, Manifest::default(), cluster, request)
}

/// A deployment of the app's environment `env`, to the cluster it pins with the flags'
/// overrides.
fn of_app(
    app: &App,
    env: &str,
    manifest: Manifest,
    cluster: &ClusterArgs,
    request: &RequestArgs,
) -> Result<Deployment, SettingsError> {
    let environment = app.environment(env)?;
    let target = Target {
        env: environment.name.clone(),
        namespace: environment.namespace.clone(),
        server: environment.server.clone(),
        context: environment.context.clone(),
        kubeconfig: cluster.kubeconfig.clone(),
        context_flag: cluster.context.clone(),
        request_timeout: Some(request.request_timeout),
    };
    Ok(Deployment {
        app: app.name().to_string(),
        app_id: app.id().map(str::to_string),
        dir: Some(app.root().to_path_buf()),
        target,
        manifest,
    })
}

/// A duration flag: `90s`, `5m`, `1h`, `500ms`, or plain seconds.
pub fn duration(value: &str) -> Result<Duration, String> {
    let bad = || format!("`{value}` is not a duration; write it like 90s, 5m or 1h");
    let trimmed = value.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(number)),
        "ms" => Ok(Duration::from_millis(number)),
        "m" => Ok(Duration::from_secs(number * 60)),
        "h" => Ok(Duration::from_secs(number * 3600)),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl_timeouts() {
        assert_eq!(duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("12").unwrap(), Duration::from_secs(12));
        assert!(duration("5 minutes").is_err());
    }
}
