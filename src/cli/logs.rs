//! `mlkube logs` as the command line runs it: tell a job named `KIND/NAME` from an environment
//! (whose training jobs are found by rendering it, as `show` and `status` do), connect as the
//! other cluster verbs do, hand the request to [`crate::observe::logs`], and print its lines to
//! stdout and its notes to stderr.
//!
//! Exit codes: 0 the logs were read to their end (following: the jobs finished), 130 Ctrl-C,
//! 2 errors (a job, replica or container that does not exist, a job without pods, a kubelet
//! that serves no logs, an API server that does not answer).

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::io::Write as _;

use clap::Args;

use crate::app::render::RenderError;
use crate::app::{App, AppError};
use crate::deploy::cluster::Target;
use crate::deploy::cluster::cancel::Cancel;
use crate::observe::logs::source::KubeSource;
use crate::observe::logs::{self, Containers, JobRef, LogsError, Outcome, Output, Request, jobs};

use super::exit::{Exit, report};
use super::param_source;
use super::settings::{self, Deployment, Selection, SettingsError};
use super::{ClusterArgs, GlobalArgs, RequestArgs};

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// A training job as KIND/NAME (tfjob/mnist; KIND is tfjob, pytorchjob, mxjob, xgboostjob,
    /// jaxjob, paddlejob, mpijob or framework, FrameworkController's, or its plural), or an
    /// environment of the app, whose training jobs are read.
    #[arg(value_name = "KIND/NAME|ENV")]
    pub target: String,
    /// The namespace of a KIND/NAME job (default: the kubeconfig context's).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// With an environment: only the jobs these components render; repeat for more.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// Only this replica: worker-0 (of a Framework: TASKROLE-INDEX), a replica type (worker, a
    /// TaskRole) for all of that type, or JOB/worker-0 when several jobs are read; repeat for
    /// more.
    #[arg(long, value_name = "REPLICA")]
    pub replica: Vec<String>,
    /// The container to read (default: the framework's own, e.g. tensorflow, pytorch; a
    /// Framework's first).
    #[arg(long, value_name = "NAME")]
    pub container: Option<String>,
    /// Read every container of each pod, init containers first.
    #[arg(long, conflicts_with = "container")]
    pub all_containers: bool,
    /// Keep printing new lines, and the pods that start later, until the jobs finish (or
    /// Ctrl-C).
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The logs of each container's previous instance, before its last restart.
    #[arg(short = 'p', long, conflicts_with = "follow")]
    pub previous: bool,
    /// Only lines newer than this, e.g. 30s, 5m, 1h.
    #[arg(long, value_name = "D", value_parser = settings::duration)]
    pub since: Option<std::time::Duration>,
    /// Only the last N lines of each container.
    #[arg(long, value_name = "N")]
    pub tail: Option<u32>,
    /// Print the kubelet's timestamp of each line after its replica.
    #[arg(long)]
    pub timestamps: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, thiserror::Error)]
enum LogsCliError {
    #[error(transparent)]
    Logs(#[from] LogsError),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(
        "`{target}` is not KIND/NAME, and there is no app here for it to be an environment of\n  \
         hint: name a training job as KIND/NAME (e.g. tfjob/{target}, with -n NAMESPACE), or \
         run in an app's directory (or pass --app DIR)"
    )]
    NoApp { target: String },
    #[error(
        "`{target}` is not KIND/NAME, nor an environment of the app (it has: {})\n  hint: {hint}",
        known.join(", ")
    )]
    NotAnEnvironment {
        target: String,
        known: Vec<String>,
        hint: String,
    },
    #[error(
        "-c picks components of an environment, and `{target}` names a job\n  hint: drop -c, \
         or name an environment"
    )]
    ComponentsOfJob { target: String },
    #[error(
        "-n is for a job named KIND/NAME; environment `{env}` has its own namespace, {namespace}\n  \
         hint: drop -n, or name the job as KIND/NAME"
    )]
    NamespaceOfEnv { env: String, namespace: String },
    #[error(
        "environment `{env}` renders no training job{which}\n  hint: `mlkube logs` reads the \
         pods of {kinds}; `mlkube component list` shows the components"
    )]
    NoJobs {
        env: String,
        which: String,
        kinds: String,
    },
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("{error}\n  {hint}")]
    Hinted { error: LogsError, hint: String },
}

/// `mlkube logs`.
pub fn logs(global: &GlobalArgs, args: &LogsArgs) -> Exit {
    match run(global, args) {
        Ok(exit) => exit,
        Err(error) => report(&error),
    }
}

/// What the target names: a job, not yet in a namespace, or the jobs an environment renders
/// with the hints that name the params of their components an error's message points at.
enum Named {
    Job(JobRef),
    Rendered(Vec<JobRef>, ParamHints),
}

/// The `hint:` lines naming the param of a component an error's message points at (a
/// ConfigMap not found that a param is named after), if any.
type ParamHints = Box<dyn Fn(&str) -> Option<String>>;

fn run(global: &GlobalArgs, args: &LogsArgs) -> Result<Exit, LogsCliError> {
    let (target, named) = resolve(global, args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(LogsCliError::Runtime)?;
    runtime.block_on(async {
        let source = KubeSource::connect(&target, args.request.request_timeout).await?;
        let (jobs, hints) = match named {
            Named::Job(job) => {
                let namespace = args.namespace.clone().unwrap_or(source.namespace.clone());
                (vec![JobRef { namespace, ..job }], None)
            }
            Named::Rendered(jobs, hints) => (jobs, Some(hints)),
        };
        let request = Request {
            env: (!args.target.contains('/')).then(|| args.target.clone()),
            jobs,
            replicas: args.replica.clone(),
            containers: match (&args.container, args.all_containers) {
                (Some(name), _) => Containers::Named(name.clone()),
                (None, true) => Containers::All,
                (None, false) => Containers::Main,
            },
            follow: args.follow,
            previous: args.previous,
            since: args.since,
            tail: args.tail.map(i64::from),
            timestamps: args.timestamps,
        };
        let cancel = Cancel::new();
        cancel_on_ctrl_c(&cancel);
        let mut out = Terminal;
        let outcome = tokio::select! {
            result = logs::logs(&source, &request, &mut out, &cancel) => {
                result.map_err(|error| with_param_hint(error, hints.as_ref()))?
            }
            () = cancel.cancelled() => Outcome::default(),
        };
        Ok(if cancel.is_cancelled() {
            Exit::Interrupted
        } else if outcome.any_failed() {
            Exit::NotReady
        } else {
            Exit::Done
        })
    })
}

/// The error, with the hint naming a param its message points at when there is one.
fn with_param_hint(error: LogsError, hints: Option<&ParamHints>) -> LogsCliError {
    match hints.and_then(|hints| hints(&error.to_string())) {
        Some(hint) => LogsCliError::Hinted { error, hint },
        None => LogsCliError::Logs(error),
    }
}

/// `name`, neither a job nor one of the environments `known`: a component's name (read it with
/// -c), or a job's without its kind.
fn not_an_environment(global: &GlobalArgs, name: String, known: Vec<String>) -> LogsCliError {
    let is_component = App::discover(global.app.as_deref())
        .and_then(|app| app.components())
        .is_ok_and(|components| components.iter().any(|c| c.name == name));
    let first = known.first().map_or("ENV", String::as_str);
    let hint = if is_component {
        format!(
            "`{name}` is a component: read its jobs in an environment, `mlkube logs {first} -c {name}`"
        )
    } else {
        format!(
            "for a job, name it as KIND/NAME, e.g. tfjob/{name} (-n NAMESPACE for its namespace)"
        )
    };
    LogsCliError::NotAnEnvironment {
        target: name,
        known,
        hint,
    }
}

/// Where the target leads: the cluster to connect to, and the jobs (or job) it names.
fn resolve(global: &GlobalArgs, args: &LogsArgs) -> Result<(Target, Named), LogsCliError> {
    if args.target.contains('/') {
        if !args.components.is_empty() {
            return Err(LogsCliError::ComponentsOfJob {
                target: args.target.clone(),
            });
        }
        let job = jobs::parse(&args.target, "")?;
        let target = Target {
            kubeconfig: args.cluster.kubeconfig.clone(),
            context_flag: args.cluster.context.clone(),
            request_timeout: Some(args.request.request_timeout),
            ..Target::default()
        };
        return Ok((target, Named::Job(job)));
    }
    let selection = Selection {
        env: &args.target,
        components: &args.components,
        manifest: None,
    };
    let deployment = settings::deployment(global, selection, &args.cluster, &args.request)
        .map_err(|error| match error {
            SettingsError::App(AppError::NotFound { .. }) => LogsCliError::NoApp {
                target: args.target.clone(),
            },
            SettingsError::App(AppError::UnknownEnvironment { name, known })
            | SettingsError::Render(RenderError::App(AppError::UnknownEnvironment {
                name,
                known,
            })) => not_an_environment(global, name, known),
            other => other.into(),
        })?;
    let hints = job_param_hints(&deployment);
    let target = deployment.target;
    if args.namespace.is_some() {
        return Err(LogsCliError::NamespaceOfEnv {
            env: target.env,
            namespace: target.namespace,
        });
    }
    let found: Vec<JobRef> = deployment
        .manifest
        .objects
        .iter()
        .filter_map(|o| jobs::rendered(&o.value, &target.namespace))
        .collect();
    if found.is_empty() {
        return Err(LogsCliError::NoJobs {
            env: target.env,
            which: match args.components.as_slice() {
                [] => String::new(),
                [one] => format!(" in component `{one}`"),
                several => format!(" in components {}", several.join(", ")),
            },
            kinds: jobs::kinds(),
        });
    }
    Ok((target, Named::Rendered(found, hints)))
}

/// The param hints of the components that render the deployment's training jobs.
fn job_param_hints(deployment: &Deployment) -> ParamHints {
    let components: Vec<String> = deployment
        .manifest
        .objects
        .iter()
        .filter(|o| jobs::rendered(&o.value, &deployment.target.namespace).is_some())
        .map(|o| o.component.clone())
        .collect();
    let Some(hinter) = param_source::param_hinter(deployment) else {
        return Box::new(|_| None);
    };
    Box::new(move |message| components.iter().find_map(|c| hinter(c, message)))
}

/// Ctrl-C stops the reading; a second one ends the process at once.
fn cancel_on_ctrl_c(cancel: &Cancel) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(Exit::Interrupted as i32);
        }
    });
}

/// Lines to stdout, notes to stderr.
struct Terminal;

impl Output for Terminal {
    fn line(&mut self, line: &str) -> std::io::Result<()> {
        writeln!(std::io::stdout().lock(), "{line}")
    }

    fn note(&mut self, note: &str) {
        eprintln!("mlkube: {note}");
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<LogsArgs, clap::Error> {
        let cli = Cli::try_parse_from(["mlkube", "logs"].iter().chain(args))?;
        match cli.command {
            Command::Logs(args) => Ok(args),
            other => panic!("not logs: {other:?}"),
        }
    }

    #[test]
    fn the_flags_read_as_kubectl_logs_and_conflicting_ones_are_refused() {
        let args = parse(&[
            "tfjob/mnist",
            "-n",
            "ml",
            "-f",
            "--since",
            "5m",
            "--tail",
            "20",
            "--replica",
            "worker-0",
            "--timestamps",
        ])
        .expect("valid flags");
        assert_eq!(args.namespace.as_deref(), Some("ml"));
        assert!(args.follow && args.timestamps);
        assert_eq!(args.since, Some(std::time::Duration::from_secs(300)));
        assert_eq!(
            (args.tail, args.replica),
            (Some(20), vec!["worker-0".into()])
        );
        assert!(parse(&["tfjob/mnist", "-f", "--previous"]).is_err());
        assert!(parse(&["tfjob/mnist", "--container", "x", "--all-containers"]).is_err());
    }

    #[test]
    fn a_job_takes_no_components_and_an_unknown_kind_is_refused_before_any_request() {
        let global = GlobalArgs {
            app: None,
            color: crate::cli::color::ColorChoice::Never,
        };
        let args = parse(&["tfjob/mnist", "-c", "train"]).expect("parses");
        let error = resolve(&global, &args).err().expect("refused").to_string();
        assert!(
            error.starts_with("-c picks components of an environment"),
            "{error}"
        );
        let args = parse(&["job/mnist"]).expect("parses");
        let error = resolve(&global, &args).err().expect("refused").to_string();
        assert!(
            error.starts_with("`job` is not a kind of training job"),
            "{error}"
        );
    }
}
