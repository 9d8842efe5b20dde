//! `init`: a new app on disk, with the local, dev and prod environments and, unless asked for
//! an empty one, one component of each deployable prototype.
//!
//! Everything is checked before the first file is written; a directory that is not empty is
//! refused, so init never overwrites anything.

use std::path::{Path, PathBuf};

use super::{
    App, AppError, Environment, PARAMS_FILE, check_name, check_server, component_file, edit,
    template,
};
use crate::render::jsonnet::Evaluator;
use crate::render::library;

/// The components `init` adds (name, prototype), each from one prototype of the library.
const DEFAULT_COMPONENTS: &[(&str, &str)] = &[
    ("mnist", "tf-serving"),
    ("notebook-hub", "notebook-hub"),
    ("tf-job-operator", "tf-job-operator"),
    ("volume-controller", "volume-controller"),
];

const DEFAULT_NAMESPACE: &str = "kubeflow";

/// What `init` is asked to create.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// Where to create the app; its name is the directory's.
    pub dir: PathBuf,
    /// The `local` environment's namespace; dev and prod get `-dev` and `-prod` after it.
    pub namespace: Option<String>,
    pub server: Option<String>,
    pub context: Option<String>,
    /// No components.
    pub empty: bool,
}

/// Create the app `options` describe, and give it back as saved.
pub fn init(options: &InitOptions) -> Result<App, AppError> {
    let dir = &options.dir;
    if let Ok(mut entries) = std::fs::read_dir(dir)
        && entries.next().is_some()
    {
        return Err(AppError::Invalid(format!(
            "{} exists and is not empty\nhint: pick a new directory; init never overwrites files",
            dir.display()
        )));
    }
    let name = app_name(dir)?;
    let namespace = options.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    check_name("namespace", namespace)?;
    if let Some(server) = &options.server {
        check_server(server)?;
    }
    if options.server.is_some() && options.context.is_some() {
        return Err(AppError::Invalid(
            "pass --server or --context, not both".into(),
        ));
    }
    let mut app = App::new(dir, &name);
    for (env, suffix) in [("local", ""), ("dev", "-dev"), ("prod", "-prod")] {
        app.environments_mut().push(Environment {
            name: env.to_owned(),
            namespace: format!("{namespace}{suffix}"),
            server: options.server.clone(),
            context: options.context.clone(),
        });
    }
    let params = app_params(&app, options.empty)?;
    write_files(&mut app, &params, options.empty)?;
    Ok(app)
}

/// `components/params.libsonnet`, with an empty entry per default component.
fn app_params(app: &App, empty: bool) -> Result<String, AppError> {
    let mut params = template::APP_PARAMS.to_owned();
    if empty {
        return Ok(params);
    }
    let evaluator = Evaluator::new(app.root());
    for (component, prototype) in DEFAULT_COMPONENTS {
        super::prototype::find(&evaluator, prototype)?;
        params = edit::set_field(&params, &["components", component], "{}").map_err(|source| {
            AppError::Edit {
                file: PARAMS_FILE.into(),
                source,
            }
        })?;
    }
    Ok(params)
}

fn write_files(app: &mut App, params: &str, empty: bool) -> Result<(), AppError> {
    if !empty {
        for (component, prototype) in DEFAULT_COMPONENTS {
            app.record_component(component, prototype);
        }
    }
    app.write(PARAMS_FILE, params)?;
    for env in app.environments() {
        let text = match library::default_environment_params(&env.name) {
            Some(shipped) if !empty => shipped.to_owned(),
            _ => template::env_params(&env.name),
        };
        app.write(&env.params_file(), &text)?;
    }
    if !empty {
        for (component, prototype) in DEFAULT_COMPONENTS {
            app.write(
                &component_file(component),
                &template::component(component, prototype),
            )?;
        }
    }
    app.save()
}

/// The app's name, from its directory; it becomes the `app.kubernetes.io/part-of` label.
fn app_name(dir: &Path) -> Result<String, AppError> {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let name = absolute
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    check_name("app", &name).map_err(|_| {
        AppError::Invalid(format!(
            "the directory name `{name}` cannot name the app: the name is used in object names \
             and labels, so it must be a DNS-1123 label\nhint: use lowercase letters, digits \
             and `-` (at most 63, starting and ending with a letter or digit), e.g. `mlkube \
             init ml-platform`"
        ))
    })?;
    Ok(name)
}
