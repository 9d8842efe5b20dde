//! The cluster verbs (`diff`, `apply`, `prune`, `delete`, `validate`) as the command line runs
//! them: resolve the settings, connect, hand the plan to the stage, print the outcome and choose
//! the exit code.
//!
//! stdout carries data (diffs, JSON, one line per applied object); messages, progress and the
//! diff summary go to stderr.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::io::Write;

use crate::deploy::apply::{
    self, ApplyError, ApplyOptions, ApplyReport, DeleteOptions, PruneOptions,
};
use crate::deploy::applyset::ApplySet;
use crate::deploy::cancel::Cancel;
use crate::deploy::cluster::{ClusterError, KubeCluster};
use crate::deploy::diff::{self, DiffError, DiffOptions};
use crate::deploy::plan::{self, Plan, PlanError};
use crate::deploy::preflight::{self, PreflightError, Validation};
use crate::deploy::status::{self, LastApply, StatusError};

use super::exit::Exit;
use super::output::{self, Confirmation, Printer};
use super::settings::{self, Deployment, Selection, SettingsError};
use super::{
    ApplyArgs, ClusterArgs, DeleteArgs, DiffArgs, GlobalArgs, ListFormat, PruneArgs, RequestArgs,
    ValidateArgs,
};

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
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
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, DeployError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(DeployError::Runtime)
}

pub(super) fn finish(result: Result<Exit, DeployError>) -> Exit {
    match result {
        Ok(exit) => exit,
        Err(error) => super::exit::report(&error),
    }
}

/// Resolve a cluster verb's settings (the environment rendered, or `--manifest` read, and the
/// cluster it pins with the flags' overrides), run `verb` on them, and turn the outcome into
/// the exit code, printing the error when there is one.
fn on_deployment(
    global: &GlobalArgs,
    selection: Selection<'_>,
    cluster: &ClusterArgs,
    request: &RequestArgs,
    verb: impl FnOnce(&Deployment) -> Result<Exit, DeployError>,
) -> Exit {
    finish(
        settings::deployment(global, selection, cluster, request)
            .map_err(DeployError::from)
            .and_then(|d| verb(&d)),
    )
}

impl Deployment {
    pub(super) fn applyset(&self) -> ApplySet {
        ApplySet::new(&self.app, &self.target.env, &self.target.namespace)
            .with_app_id(self.app_id.as_deref())
    }

    pub(super) fn plan(&self, components: &[String]) -> Result<Plan, PlanError> {
        plan::plan(&self.manifest, &self.applyset(), components)
    }
}

// ---------------------------------------------------------------------------------------------
// diff

pub fn diff(global: &GlobalArgs, args: &DiffArgs) -> Exit {
    let selection = Selection {
        env: &args.env,
        components: &args.components,
        manifest: args.manifest.as_deref(),
    };
    on_deployment(global, selection, &args.cluster, &args.request, |d| {
        diff_deployment(d, args)
    })
}

/// `mlkube diff` on an environment already rendered.
pub fn diff_deployment(deployment: &Deployment, args: &DiffArgs) -> Result<Exit, DeployError> {
    runtime()?.block_on(async {
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&args.components)?;
        let options = DiffOptions {
            show_secrets: args.show_secrets,
        };
        let changes = diff::diff(&cluster, &plan, options).await?;
        let mut stdout = std::io::stdout().lock();
        if args.output == ListFormat::Json {
            let _ = writeln!(stdout, "{:#}", diff::render_json(&changes));
        } else if args.summary {
            let _ = write!(stdout, "{}", diff::render_summary(&changes));
        } else {
            let text = diff::render_text(&changes, output::use_color());
            let _ = write!(stdout, "{text}");
        }
        drop(stdout);
        eprint!("{}", diff::render_failures(&changes));
        eprintln!("{}", changes.summary());
        Ok(Exit::of_diff(&changes))
    })
}

// ---------------------------------------------------------------------------------------------
// apply

pub fn apply(global: &GlobalArgs, args: &ApplyArgs) -> Exit {
    let selection = Selection {
        env: &args.env,
        components: &args.components,
        manifest: args.manifest.as_deref(),
    };
    on_deployment(global, selection, &args.cluster, &args.request, |d| {
        apply_deployment(d, args)
    })
}

/// Ctrl-C cancels the verb: no request is started any more, those in flight finish, and the
/// verb prints what it did. A second Ctrl-C ends the process at once.
fn cancel_on_ctrl_c(cancel: &Cancel) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!(
            "mlkube: interrupted: finishing the requests in flight (Ctrl-C again to stop at once)"
        );
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(Exit::Interrupted as i32);
        }
    });
}

/// The exit code of an apply, prune or delete that returned its report.
fn exit_of(report: &ApplyReport) -> Exit {
    if report.interrupted {
        Exit::Interrupted
    } else if report.not_ready.is_empty() {
        Exit::Done
    } else {
        Exit::NotReady
    }
}

/// `mlkube apply` on an environment already rendered.
pub fn apply_deployment(deployment: &Deployment, args: &ApplyArgs) -> Result<Exit, DeployError> {
    let consent = Confirmation::from_flag(args.yes);
    let printer = Printer::new(args.output == ListFormat::Json, args.dry_run);
    let cancel = Cancel::new();
    let options = ApplyOptions {
        dry_run: args.dry_run,
        prune: args.prune,
        consent: &consent,
        force_conflicts: args.force_conflicts,
        wait: !args.no_wait,
        timeout: args.timeout,
        allow_empty: args.allow_empty,
        adopt: args.adopt,
        observer: &printer,
        cancel: &cancel,
    };
    runtime()?.block_on(async {
        cancel_on_ctrl_c(&cancel);
        let cluster = KubeCluster::connect(&deployment.target).await?;
        eprintln!(
            "mlkube: applying environment `{}` to context `{}` ({})",
            deployment.target.env, cluster.context, cluster.server
        );
        let plan = deployment.plan(&args.components)?;
        let report = apply::apply(&cluster, &plan, &options).await?;
        for (key, why) in &report.unchecked {
            eprintln!("mlkube: not checked by the server: {key}: {why}");
        }
        if !options.dry_run && !report.interrupted {
            let last = LastApply::now(deployment.dir.as_deref());
            status::record_last_apply(&cluster, &plan.applyset, &last).await?;
        }
        output::print_report("apply", &report, &printer);
        Ok(exit_of(&report))
    })
}

// ---------------------------------------------------------------------------------------------
// prune, delete

pub fn prune(global: &GlobalArgs, args: &PruneArgs) -> Exit {
    let selection = Selection {
        env: &args.env,
        components: &[],
        manifest: None,
    };
    on_deployment(global, selection, &args.cluster, &args.request, |d| {
        prune_deployment(d, args)
    })
}

/// `mlkube prune` on an environment already rendered.
pub fn prune_deployment(deployment: &Deployment, args: &PruneArgs) -> Result<Exit, DeployError> {
    let consent = Confirmation::from_flag(args.yes);
    let printer = Printer::new(args.output == ListFormat::Json, false);
    let cancel = Cancel::new();
    let options = PruneOptions {
        dry_run: false,
        consent: &consent,
        allow_empty: args.allow_empty,
        observer: &printer,
        cancel: &cancel,
    };
    runtime()?.block_on(async {
        cancel_on_ctrl_c(&cancel);
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&[])?;
        let report = apply::prune(&cluster, &plan, &options).await?;
        if report.pruned.is_empty() && !printer.json() {
            eprintln!(
                "mlkube: nothing to prune in environment `{}`",
                deployment.target.env
            );
        }
        output::print_report("prune", &report, &printer);
        Ok(exit_of(&report))
    })
}

pub fn delete(global: &GlobalArgs, args: &DeleteArgs) -> Exit {
    // Delete works from the inventory on the cluster, not from the render: what was applied is
    // what gets deleted, even when the app changed since. It needs the app only for its name and
    // the environment's cluster.
    let selection = Selection {
        env: &args.env,
        components: &args.components,
        manifest: args.manifest.as_deref(),
    };
    on_deployment(global, selection, &args.cluster, &args.request, |d| {
        delete_deployment(d, args)
    })
}

/// `mlkube delete` for an environment (only its app name and target are used).
pub fn delete_deployment(deployment: &Deployment, args: &DeleteArgs) -> Result<Exit, DeployError> {
    let consent = Confirmation::from_flag(args.yes);
    let printer = Printer::new(args.output == ListFormat::Json, false);
    let cancel = Cancel::new();
    let options = DeleteOptions {
        components: args.components.clone(),
        delete_namespace: args.delete_namespace,
        consent: &consent,
        observer: &printer,
        cancel: &cancel,
    };
    runtime()?.block_on(async {
        cancel_on_ctrl_c(&cancel);
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let report = apply::delete(&cluster, &deployment.applyset(), &options).await?;
        if report.pruned.is_empty() && !printer.json() {
            eprintln!(
                "mlkube: environment `{}` has nothing applied on context `{}`",
                deployment.target.env, cluster.context
            );
        }
        output::print_report("delete", &report, &printer);
        Ok(exit_of(&report))
    })
}

// ---------------------------------------------------------------------------------------------
// validate

pub fn validate(global: &GlobalArgs, args: &ValidateArgs) -> Exit {
    let selection = Selection {
        env: &args.env,
        components: &args.components,
        manifest: None,
    };
    on_deployment(global, selection, &args.cluster, &args.request, |d| {
        validate_deployment(d, args)
    })
}

/// `mlkube validate` on an environment already rendered.
pub fn validate_deployment(
    deployment: &Deployment,
    args: &ValidateArgs,
) -> Result<Exit, DeployError> {
    runtime()?.block_on(async {
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&args.components)?;
        let validation = preflight::validate(&cluster, &plan).await?;
        if args.output == ListFormat::Json {
            let json = serde_json::to_value(&validation).unwrap_or_default();
            let _ = writeln!(std::io::stdout().lock(), "{json:#}");
        } else {
            print_validation(&validation);
        }
        if validation.valid == 0 && validation.rejected.is_empty() {
            eprintln!("mlkube: error: {}", nothing_checked(&validation));
            return Ok(Exit::Error);
        }
        Ok(if validation.rejected.is_empty() {
            Exit::Done
        } else {
            Exit::Error
        })
    })
}

/// Why `validate` checked nothing, and what to do.
fn nothing_checked(validation: &Validation) -> String {
    if validation.skipped.is_empty() {
        return "nothing to validate: the environment (or the components named) renders no \
                objects"
            .into();
    }
    format!(
        "nothing was checked: all {} object(s) need something an apply creates first (listed \
         above)\n  hint: apply the environment first, or create what the reasons name (its \
         namespace, its CustomResourceDefinitions), then validate again",
        validation.skipped.len()
    )
}

fn print_validation(validation: &Validation) {
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
}
