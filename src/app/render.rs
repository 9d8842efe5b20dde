//! Rendering one environment of the app: its resolved parameters and component files, through
//! the Jsonnet evaluator of [`crate::render`], to a complete, ordered [`Manifest`].
//!
//! One Jsonnet evaluator serves the whole environment: the params files and every prototype are
//! evaluated once, however many components use them. Each component file is evaluated with its
//! own `mlkube/component.libsonnet` (its params and the environment), its output unwrapped into
//! objects, and the objects of all components completed and sorted by
//! [`Manifest::process`]. With an `imageRegistry` ([`params::image_registry`]), every platform
//! image the objects name is pointed at it first ([`images::rewrite`]). Nothing here touches the
//! network or the clock.

use super::{App, AppError, params};
use crate::render::images;
use crate::render::jsonnet::JsonnetError;
use crate::render::manifest::{self, Manifest, ManifestError, Target};

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
        source: Box<JsonnetError>,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl App {
    /// Render `env`, all components or only those named in `components`, into complete objects
    /// (namespace defaulted, mlkube labels set) in apply order.
    pub fn render(&self, env: &str, components: &[String]) -> Result<Manifest, RenderError> {
        let environment = self.environment(env)?;
        let evaluator = self.evaluator();
        let resolved = params::resolve(self, &evaluator, Some(environment))?;
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
                    source: Box::new(source),
                })?;
            objects.extend(manifest::extract(name, value)?);
        }
        if let Some(registry) = params::image_registry(self, &evaluator, environment)? {
            for object in &mut objects {
                images::rewrite(&mut object.value, &registry);
            }
        }
        let target = Target {
            app: self.name(),
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
}
