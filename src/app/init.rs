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

/// The components `init` adds (name, prototype), each from one prototype of the library. In
/// apps made before the operator's prototype was renamed, its component is `tf-job-operator`,
/// and stays so: a component's name is that of every object it renders.
const DEFAULT_COMPONENTS: &[(&str, &str)] = &[
    ("gateway", "gateway"),
    ("mnist", "inference-service"),
    ("notebook-hub", "notebook-hub"),
    ("object-store", "object-store"),
    ("training-operator", "training-operator"),
    ("volume-controller", "volume-controller"),
];

/// What the default app sets for every environment (component, param, Jsonnet value): `mnist`
/// serves the TensorFlow model the quickstart's TFJob saves, through the operator's
/// InferenceService controller, whose routes hang on the app's gateway.
const DEFAULT_PARAMS: &[(&str, &str, &str)] = &[
    ("mnist", "modelFormat", "'tensorflow'"),
    ("mnist", "storageUri", "'s3://models/tf-digits/{version}/'"),
    ("training-operator", "servingGateway", "'gateway'"),
];

/// A training job `init --with-jobs` adds, and what `local` and `prod` set for it.
struct JobComponent {
    name: &'static str,
    prototype: &'static str,
    local: &'static [(&'static str, &'static str)],
    prod: &'static [(&'static str, &'static str)],
}

/// The jobs of `init --with-jobs`, one per framework most users start with: `local` runs one
/// replica on CPU, `prod` four workers with a GPU each.
const JOB_COMPONENTS: &[JobComponent] = &[
    JobComponent {
        name: "train-tf",
        prototype: "tf-job",
        local: &[],
        prod: &[("workerReplicas", "4"), ("gpus", "1")],
    },
    JobComponent {
        name: "train-pytorch",
        prototype: "pytorch-job",
        // The Master alone: rank 0 of one.
        local: &[("workerReplicas", "0")],
        prod: &[("workerReplicas", "4"), ("gpus", "1")],
    },
    JobComponent {
        name: "train-jax",
        prototype: "jax-job",
        local: &[],
        prod: &[("workerReplicas", "4"), ("gpus", "1")],
    },
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
    /// No platform components.
    pub empty: bool,
    /// Also a TensorFlow, a PyTorch and a JAX training job.
    pub with_jobs: bool,
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
    let server = options.server.as_deref().map(check_server).transpose()?;
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
            server: server.clone(),
            context: options.context.clone(),
        });
    }
    let components = components(options);
    let defaults = if options.empty {
        &[][..]
    } else {
        DEFAULT_PARAMS
    };
    let params = app_params(&app, &components, defaults)?;
    write_files(&mut app, &params, &components, options)?;
    Ok(app)
}

/// The components `options` ask for, (name, prototype): the platform's unless empty, then the
/// training jobs when asked for.
fn components(options: &InitOptions) -> Vec<(&'static str, &'static str)> {
    let platform = if options.empty {
        &[][..]
    } else {
        DEFAULT_COMPONENTS
    };
    let jobs = JOB_COMPONENTS
        .iter()
        .filter(|_| options.with_jobs)
        .map(|job| (job.name, job.prototype));
    platform.iter().copied().chain(jobs).collect()
}

/// `components/params.libsonnet`, with an entry per component holding what `defaults` set.
fn app_params(
    app: &App,
    components: &[(&str, &str)],
    defaults: &[(&str, &str, &str)],
) -> Result<String, AppError> {
    let mut params = template::APP_PARAMS.to_owned();
    let evaluator = Evaluator::new(app.root());
    let edit_error = |source| AppError::Edit {
        file: PARAMS_FILE.into(),
        source,
    };
    for (component, prototype) in components {
        super::prototype::find(&evaluator, prototype)?;
        params = edit::set_field(&params, &["components", component], "{}").map_err(edit_error)?;
    }
    for (component, param, value) in defaults {
        params = edit::set_field(&params, &["components", component, param], value)
            .map_err(edit_error)?;
    }
    Ok(params)
}

fn write_files(
    app: &mut App,
    params: &str,
    components: &[(&str, &str)],
    options: &InitOptions,
) -> Result<(), AppError> {
    for (component, prototype) in components {
        app.record_component(component, prototype);
    }
    app.write(PARAMS_FILE, params)?;
    for env in app.environments() {
        let text = match library::default_environment_params(&env.name) {
            Some(shipped) if !options.empty => shipped.to_owned(),
            _ => template::env_params(&env.name),
        };
        let text = if options.with_jobs {
            with_job_overrides(&text, &env.name).map_err(|source| AppError::Edit {
                file: env.params_file(),
                source,
            })?
        } else {
            text
        };
        app.write(&env.params_file(), &text)?;
    }
    for (component, prototype) in components {
        app.write(
            &component_file(component),
            &template::component(component, prototype),
        )?;
    }
    app.save()
}

/// An environment's params with what it sets for the training jobs of `--with-jobs`.
fn with_job_overrides(text: &str, env: &str) -> Result<String, edit::EditError> {
    let mut text = text.to_owned();
    for job in JOB_COMPONENTS {
        let overrides = match env {
            "local" => job.local,
            "prod" => job.prod,
            _ => &[],
        };
        for (key, value) in overrides {
            text = edit::set_field(&text, &["components", job.name, key], value)?;
        }
    }
    Ok(text)
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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// The replica types of the one job `component` renders in `env`, each with its count and
    /// its main container's GPU limit.
    fn replicas(app: &App, env: &str, component: &str) -> Vec<(String, u64, Value)> {
        let manifest = app
            .render(env, &[component.to_string()])
            .unwrap_or_else(|e| panic!("{env}/{component}: {e:?}"));
        assert_eq!(manifest.objects.len(), 1, "{env}/{component}");
        let job = &manifest.objects[0].value;
        let (_, specs) = job["spec"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(field, _)| field.ends_with("ReplicaSpecs"))
            .expect("a job has replica specs");
        specs
            .as_object()
            .unwrap()
            .iter()
            .map(|(replica_type, spec)| {
                let container = &spec["template"]["spec"]["containers"][0];
                (
                    replica_type.clone(),
                    spec["replicas"].as_u64().unwrap(),
                    container["resources"]["limits"]["nvidia.com/gpu"].clone(),
                )
            })
            .collect()
    }

    #[test]
    fn with_jobs_adds_a_tensorflow_a_pytorch_and_a_jax_job_small_locally_on_gpus_in_prod() {
        let dir = tempfile::tempdir().unwrap();
        let options = InitOptions {
            dir: dir.path().join("platform"),
            with_jobs: true,
            ..InitOptions::default()
        };
        init(&options).unwrap();
        let app = App::load(&options.dir).unwrap();
        let names: Vec<String> = app
            .components()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        for component in [
            "mnist",
            "training-operator",
            "train-tf",
            "train-pytorch",
            "train-jax",
        ] {
            assert!(
                names.iter().any(|n| n == component),
                "{component} in {names:?}"
            );
        }
        let one_cpu = |replica_type: &str| vec![(replica_type.to_string(), 1, Value::Null)];
        assert_eq!(replicas(&app, "local", "train-tf"), one_cpu("Worker"));
        assert_eq!(replicas(&app, "local", "train-pytorch"), one_cpu("Master"));
        assert_eq!(replicas(&app, "local", "train-jax"), one_cpu("Worker"));
        for component in ["train-tf", "train-pytorch", "train-jax"] {
            let prod = replicas(&app, "prod", component);
            let workers = prod.iter().find(|(t, ..)| t == "Worker").expect("workers");
            assert_eq!(workers.1, 4, "{component}: {prod:?}");
            assert!(
                prod.iter().all(|(.., gpus)| gpus == 1),
                "{component}: a GPU each: {prod:?}"
            );
        }

        let bare = InitOptions {
            dir: dir.path().join("jobs-only"),
            empty: true,
            with_jobs: true,
            ..InitOptions::default()
        };
        init(&bare).unwrap();
        let app = App::load(&bare.dir).unwrap();
        let names: Vec<String> = app
            .components()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(replicas(&app, "local", "train-pytorch"), one_cpu("Master"));
    }
}
