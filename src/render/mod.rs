//! Rendering: an app and an environment to a complete, ordered [`Manifest`].
//!
//! One Jsonnet evaluator serves the whole environment: the params files and every prototype are
//! evaluated once, however many components use them. Each component file is evaluated with its
//! own `mlkube/component.libsonnet` (its params and the environment), its output unwrapped into
//! objects, and the objects of all components completed and sorted by
//! [`Manifest::process`]. Nothing here touches the network or the clock.

pub mod jsonnet;
pub mod kinds;
pub mod library;
pub mod manifest;
pub mod yaml;

use std::io::Write as _;
use std::path::Path;

use crate::app::{App, AppError, params};
use crate::cli::ManifestFormat;
use jsonnet::{Evaluator, JsonnetError};
use manifest::{Manifest, ManifestError, Target};

/// Why an environment could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error("cannot render component `{component}` for environment `{environment}`")]
    Evaluate {
        component: String,
        environment: String,
        #[source]
        source: JsonnetError,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("cannot write the manifest to stdout")]
    Output(#[source] std::io::Error),
}

/// Render `env`, all components or only those named in `components`, into complete objects
/// (namespace defaulted, mlkube labels set) in apply order.
pub fn render(app: &App, env: &str, components: &[String]) -> Result<Manifest, RenderError> {
    let environment = app.environment(env)?;
    let evaluator = Evaluator::new(app.root());
    let resolved = params::resolve(app, &evaluator, Some(environment))?;
    for name in components {
        if !resolved.iter().any(|c| &c.component.name == name) {
            return Err(AppError::UnknownComponent {
                name: name.clone(),
                known: resolved.iter().map(|c| c.component.name.clone()).collect(),
            }
            .into());
        }
    }
    let mut objects = Vec::new();
    for component in resolved
        .iter()
        .filter(|c| components.is_empty() || components.contains(&c.component.name))
    {
        let name = &component.component.name;
        evaluator.set_component_context(name, &component.context(environment));
        let value = evaluator
            .evaluate(&component.component.file())
            .map_err(|source| RenderError::Evaluate {
                component: name.clone(),
                environment: environment.name.clone(),
                source,
            })?;
        objects.extend(manifest::extract(name, value)?);
    }
    let target = Target {
        app: app.name(),
        environment: &environment.name,
        namespace: &environment.namespace,
    };
    let manifest = Manifest::process(objects, target)?;
    // Freeing the evaluator's object graph is a cycle collection over every value Jsonnet
    // built: a fifth of the time of a large render. mlkube renders once per process, so the
    // memory goes back at exit instead.
    std::mem::forget(evaluator);
    Ok(manifest)
}

/// `mlkube show`: render and print; on any error nothing reaches stdout.
pub fn show(
    app_flag: Option<&Path>,
    env: &str,
    components: &[String],
    format: ManifestFormat,
) -> Result<(), RenderError> {
    let app = App::discover(app_flag)?;
    let manifest = render(&app, env, components)?;
    let text = match format {
        ManifestFormat::Yaml => manifest.to_yaml(),
        ManifestFormat::Json => manifest.to_json(),
    };
    // As with the evaluator: freeing thousands of objects just before exit is wasted time.
    std::mem::forget(manifest);
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(RenderError::Output(error))
        }
        _ => Ok(()),
    }
}
