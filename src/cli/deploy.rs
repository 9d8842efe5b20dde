//! The cluster verbs (`diff`, `apply`, `prune`, `delete`, `validate`) as the command line runs
//! them: resolve the settings, connect, hand the plan to the stage, print the outcome and choose
//! the exit code.
//!
//! stdout carries data (diffs, JSON, one line per applied object); messages, progress and the
//! diff summary go to stderr.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::Value;

use crate::app::App;
use crate::app::prototype;
use crate::deploy::apply::{self, ApplyOptions};
use crate::deploy::checks::preflight::{
    self, Blocker, Checked, Deferred, PreflightError, Refusal, Refused, Rejection, Validation,
};
use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{Cluster, ClusterError, KubeCluster};
use crate::deploy::delete::{self, DeleteOptions};
use crate::deploy::diff::{self, DiffError, DiffOptions};
use crate::deploy::inventory::applyset::ApplySet;
use crate::deploy::inventory::last_apply::{self, LastApply, LastApplyError};
use crate::deploy::inventory::plan::{self, Plan, PlanError};
use crate::deploy::prune::{self, PruneOptions};
use crate::deploy::report::{ApplyError, ApplyReport};
use crate::observe::status::StatusError;
use crate::render::jsonnet::Evaluator;

use super::exit::Exit;
use super::output::{self, Confirmation, Printer};
use super::param_source;
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
    LastApply(#[from] LastApplyError),
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// The apply's refusal of kinds the cluster does not serve, with the params that stop
    /// rendering them.
    #[error("the cluster does not serve these kinds: {kinds}\n  hint: {hint}")]
    Unserved { kinds: String, hint: String },
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
/// cluster it pins with the flags' overrides), and run `verb` on them.
fn on_deployment(
    global: &GlobalArgs,
    selection: Selection<'_>,
    cluster: &ClusterArgs,
    request: &RequestArgs,
    verb: impl FnOnce(&Deployment) -> Result<Exit, DeployError>,
) -> Result<Exit, DeployError> {
    settings::deployment(global, selection, cluster, request)
        .map_err(DeployError::from)
        .and_then(|d| verb(&d))
}

/// The exit code of an apply, prune or delete; a failure is printed on stderr, and with
/// `-o json` also as the one document on stdout, with what was done before it.
fn finish_printed(result: Result<Exit, DeployError>, printer: &Printer) -> Exit {
    if let Err(error) = &result
        && printer.json()
    {
        output::print_failure(printer, super::exit::error_json(error), refused_json(error));
    }
    finish(result)
}

/// The objects a failed apply names as refused, each with its outcome and message.
fn refused_json(error: &DeployError) -> Vec<Value> {
    let (refused, word): (&[(Key, Refusal)], &str) = match error {
        DeployError::Apply(ApplyError::Preflight(PreflightError::Rejected { refused, .. }))
        | DeployError::Preflight(PreflightError::Rejected { refused, .. }) => (refused, "rejected"),
        DeployError::Apply(ApplyError::Objects { refused, .. }) => (refused, "failed"),
        _ => (&[], ""),
    };
    refused
        .iter()
        .map(|(key, refusal)| {
            let mut object = serde_json::to_value(key).unwrap_or_default();
            object["outcome"] = match refusal.kind {
                Refused::Conflict => "conflict",
                Refused::Invalid => "invalid",
                Refused::Rejected => word,
            }
            .into();
            object["message"] = refusal.message.clone().into();
            object
        })
        .collect()
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
    finish(on_deployment(
        global,
        selection,
        &args.cluster,
        &args.request,
        |d| diff_deployment(d, args),
    ))
}

/// `mlkube diff` on an environment already rendered.
pub fn diff_deployment(deployment: &Deployment, args: &DiffArgs) -> Result<Exit, DeployError> {
    runtime()?.block_on(async {
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&args.components)?;
        let options = DiffOptions {
            show_secrets: args.show_secrets,
        };
        let mut changes = diff::diff(&cluster, &plan, options).await?;
        for failure in &mut changes.failures {
            let component = failure.component.as_deref().unwrap_or_default();
            if let Some(message) = unserved(deployment, &cluster, &plan, &failure.key, component) {
                failure.message = message;
            }
        }
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
    let printer = Printer::new(args.output == ListFormat::Json, args.dry_run);
    let result = on_deployment(global, selection, &args.cluster, &args.request, |d| {
        apply_deployment(d, args, &printer)
    });
    finish_printed(result, &printer)
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
pub fn apply_deployment(
    deployment: &Deployment,
    args: &ApplyArgs,
    printer: &Printer,
) -> Result<Exit, DeployError> {
    let consent = Confirmation::from_flag(args.yes);
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
        observer: printer,
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
        let report = match apply::apply(&cluster, &plan, &options).await {
            Err(ApplyError::UnknownKinds { kinds }) => {
                return Err(unserved_kinds(deployment, &cluster, &plan, kinds));
            }
            Err(error) => return Err(name_params_of_refused(deployment, &plan, error).into()),
            Ok(report) => report,
        };
        for line in unchecked_lines(&report.unchecked) {
            eprintln!("mlkube: {line}");
        }
        if !options.dry_run && !report.interrupted {
            let last = LastApply::now(deployment.dir.as_deref());
            last_apply::record(&cluster, &plan.applyset, &last).await?;
        }
        output::print_report("apply", &report, printer);
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
    let printer = Printer::new(args.output == ListFormat::Json, false);
    let result = on_deployment(global, selection, &args.cluster, &args.request, |d| {
        prune_deployment(d, args, &printer)
    });
    finish_printed(result, &printer)
}

/// `mlkube prune` on an environment already rendered.
pub fn prune_deployment(
    deployment: &Deployment,
    args: &PruneArgs,
    printer: &Printer,
) -> Result<Exit, DeployError> {
    let consent = Confirmation::from_flag(args.yes);
    let cancel = Cancel::new();
    let options = PruneOptions {
        dry_run: false,
        consent: &consent,
        allow_empty: args.allow_empty,
        observer: printer,
        cancel: &cancel,
    };
    runtime()?.block_on(async {
        cancel_on_ctrl_c(&cancel);
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&[])?;
        let report = prune::prune(&cluster, &plan, &options).await?;
        if let Some(note) = output::nothing_done_note("prune", &deployment.target.env, "", &report)
            && !printer.json()
        {
            eprintln!("mlkube: {note}");
        }
        output::print_report("prune", &report, printer);
        Ok(exit_of(&report))
    })
}

pub fn delete(global: &GlobalArgs, args: &DeleteArgs) -> Exit {
    // Delete works from the inventory on the cluster, not from the render: what was applied is
    // what gets deleted, even when the app changed since. It needs the app only for its name and
    // the environment's cluster, and never renders it: an environment that no longer renders
    // (a param edited by hand that its prototype refuses) can still be deleted.
    let selection = Selection {
        env: &args.env,
        components: &args.components,
        manifest: args.manifest.as_deref(),
    };
    let printer = Printer::new(args.output == ListFormat::Json, false);
    let result = settings::inventory(global, selection, &args.cluster, &args.request)
        .map_err(DeployError::from)
        .and_then(|d| delete_deployment(&d, args, &printer));
    finish_printed(result, &printer)
}

/// `mlkube delete` for an environment (only its app name and target are used).
pub fn delete_deployment(
    deployment: &Deployment,
    args: &DeleteArgs,
    printer: &Printer,
) -> Result<Exit, DeployError> {
    let consent = Confirmation::from_flag(args.yes);
    let cancel = Cancel::new();
    let options = DeleteOptions {
        components: args.components.clone(),
        delete_namespace: args.delete_namespace,
        consent: &consent,
        observer: printer,
        cancel: &cancel,
    };
    runtime()?.block_on(async {
        cancel_on_ctrl_c(&cancel);
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let report = delete::delete(&cluster, &deployment.applyset(), &options).await?;
        let env = &deployment.target.env;
        if let Some(note) = output::nothing_done_note("delete", env, &cluster.context, &report)
            && !printer.json()
        {
            eprintln!("mlkube: {note}");
        }
        output::print_report("delete", &report, printer);
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
    finish(on_deployment(
        global,
        selection,
        &args.cluster,
        &args.request,
        |d| validate_deployment(d, args),
    ))
}

/// `mlkube validate` on an environment already rendered.
pub fn validate_deployment(
    deployment: &Deployment,
    args: &ValidateArgs,
) -> Result<Exit, DeployError> {
    runtime()?.block_on(async {
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&args.components)?;
        let mut validation = preflight::validate(&cluster, &plan).await?;
        for rejected in &mut validation.rejected {
            let (key, component) = (&rejected.key, rejected.component.as_str());
            if let Some(message) = unserved(deployment, &cluster, &plan, key, component) {
                rejected.message = message;
            }
        }
        name_params(deployment, &mut validation.rejected);
        if args.output == ListFormat::Json {
            let json = serde_json::to_value(&validation).unwrap_or_default();
            let _ = writeln!(std::io::stdout().lock(), "{json:#}");
        } else {
            print_validation(&validation);
        }
        let checked =
            validation.valid + validation.schema_only.len() + validation.plan_crd_only.len();
        if checked == 0 && validation.rejected.is_empty() {
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

/// Add to each rejection the param of its component its rejected value came from, where the
/// app has one with exactly that value in the environment.
fn name_params(deployment: &Deployment, rejected: &mut [Rejection]) {
    if rejected.is_empty() {
        return;
    }
    let Some(hint) = param_source::param_hinter(deployment) else {
        return;
    };
    for rejection in rejected {
        if let Some(hint) = hint(&rejection.component, &rejection.message) {
            rejection.message = format!("{}\n  {hint}", rejection.message);
        }
    }
}

/// As `name_params`, for the objects an apply's checks refused (the plan knows their components).
fn name_params_of_refused(deployment: &Deployment, plan: &Plan, error: ApplyError) -> ApplyError {
    let ApplyError::Preflight(PreflightError::Rejected {
        count,
        written,
        mut refused,
        ..
    }) = error
    else {
        return error;
    };
    if let Some(hint) = param_source::param_hinter(deployment) {
        for (key, refusal) in &mut refused {
            let component = plan.objects.iter().find(|d| d.key == *key);
            if let Some(hint) = component.and_then(|d| hint(&d.component, &refusal.message)) {
                refusal.message = format!("{}\n  {hint}", refusal.message);
            }
        }
    }
    ApplyError::Preflight(PreflightError::Rejected {
        count,
        written,
        details: preflight::details(&refused),
        refused,
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
        "nothing was checked: all {} object(s) need something an apply creates first (the \
         line above says what)\n  hint: apply the environment first, or create what the reasons name (its \
         namespace, its CustomResourceDefinitions), then validate again",
        validation.skipped.len()
    )
}

fn print_validation(validation: &Validation) {
    for rejected in &validation.rejected {
        eprintln!(
            "mlkube: error: {} (component {}): {}",
            rejected.key, rejected.component, rejected.message
        );
    }
    let mut line = format!(
        "{} valid, {} rejected",
        validation.valid,
        validation.rejected.len()
    );
    let messages =
        |list: &'_ [Rejection]| -> Vec<String> { list.iter().map(|r| r.message.clone()).collect() };
    let schema_only = partly_checked(&messages(&validation.schema_only), SCHEMA_ONLY);
    let plan_crd_only = partly_checked(&messages(&validation.plan_crd_only), PLAN_CRD_ONLY);
    let skipped = partly_checked(&messages(&validation.skipped), "were not checked");
    for part in schema_only.into_iter().chain(plan_crd_only).chain(skipped) {
        line.push_str("; ");
        line.push_str(&part);
    }
    eprintln!("{line}");
}

/// How far `validate` and `apply --dry-run` checked the objects of a namespace that does not
/// exist yet.
const SCHEMA_ONLY: &str = "were checked against the server's schema only (fields, types, required \
                           fields); the server checks the rest once the namespace exists";

/// How far they checked the objects of a kind whose CRD comes with the apply.
const PLAN_CRD_ONLY: &str = "were checked against the CustomResourceDefinition in the plan only \
                             (fields, types, required fields, allowed values); the server checks \
                             them once it serves the CRD";

/// The objects whose reasons are `reasons`, grouped by reason, each group told in a few words:
/// `10 object(s) in namespace `ml`, which apply creates, <what>`, or `2 object(s) <what>: <why>`.
fn partly_checked(reasons: &[String], what: &str) -> Vec<String> {
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in reasons {
        *by_reason.entry(reason.as_str()).or_default() += 1;
    }
    by_reason
        .into_iter()
        .map(|(why, count)| match namespace_created(why) {
            Some(namespace) => {
                format!("{count} object(s) in namespace `{namespace}`, which apply creates, {what}")
            }
            None if why == Blocker::Kind.to_string() => format!(
                "{count} object(s) {what}: their CustomResourceDefinitions come with this apply"
            ),
            None => format!("{count} object(s) {what}: {why}"),
        })
        .collect()
}

/// The namespace a blocker's reason names, when it is a namespace the apply creates.
fn namespace_created(why: &str) -> Option<&str> {
    let rest = why.strip_prefix("namespace `")?;
    let (namespace, rest) = rest.split_once('`')?;
    rest.starts_with(" does not exist yet").then_some(namespace)
}

/// What `apply --dry-run` could not have the server judge, and how far it checked it, a line
/// per reason rather than per object.
fn unchecked_lines(unchecked: &[(Key, Deferred)]) -> Vec<String> {
    let reasons = |checked: Checked| -> Vec<String> {
        unchecked
            .iter()
            .filter(|(_, pending)| pending.checked == checked)
            .map(|(_, pending)| pending.blocker.to_string())
            .collect()
    };
    let mut lines = partly_checked(&reasons(Checked::ServerSchema), SCHEMA_ONLY);
    lines.extend(partly_checked(&reasons(Checked::PlanCrd), PLAN_CRD_ONLY));
    let mut by_reason: BTreeMap<String, Vec<&Key>> = BTreeMap::new();
    for (key, pending) in unchecked {
        if pending.checked == Checked::Not {
            let why = pending.blocker.to_string();
            by_reason.entry(why).or_default().push(key);
        }
    }
    let not_checked = by_reason
        .into_iter()
        .map(|(why, keys)| match keys.as_slice() {
            [key] => format!("not checked by the server: {key}: {why}"),
            keys => format!("{} object(s) not checked by the server: {why}", keys.len()),
        });
    lines.extend(not_checked);
    lines
}

/// For an object whose kind the cluster does not serve, what to say: the kind, and how to stop
/// rendering it (the component's param that turns it off) or to serve it.
fn unserved(
    deployment: &Deployment,
    cluster: &KubeCluster,
    plan: &Plan,
    key: &Key,
    component: &str,
) -> Option<String> {
    let served_soon = plan.defines(&key.group, &key.kind);
    if served_soon || cluster.resolve_group_kind(&key.group, &key.kind).is_some() {
        return None;
    }
    let desired = plan.objects.iter().find(|d| d.key == *key)?;
    let switch = deployment
        .dir
        .as_deref()
        .and_then(|dir| param_rendering(dir, component, &key.kind));
    let hint = match switch {
        Some(param) => format!(
            "`mlkube param set {component} {param} false --env {env}` stops rendering it, or \
             install the CustomResourceDefinition that serves it",
            env = deployment.target.env
        ),
        None => "install the CustomResourceDefinition that serves it, or check the apiVersion"
            .to_owned(),
    };
    Some(format!(
        "the cluster does not serve {} {}\n  hint: {hint}",
        desired.api_version, key.kind
    ))
}

/// The apply's refusal of the kinds the cluster does not serve, naming the params that stop
/// rendering them where the components have such params.
fn unserved_kinds(
    deployment: &Deployment,
    cluster: &KubeCluster,
    plan: &Plan,
    kinds: String,
) -> DeployError {
    let env = &deployment.target.env;
    let mut switches: Vec<String> = plan
        .objects
        .iter()
        .filter(|d| cluster.resolve(&d.api_version, &d.key.kind).is_none())
        .filter_map(|d| {
            let param = param_rendering(deployment.dir.as_deref()?, &d.component, &d.key.kind)?;
            Some(format!(
                "`mlkube param set {} {param} false --env {env}`",
                d.component
            ))
        })
        .collect();
    switches.sort();
    switches.dedup();
    if switches.is_empty() {
        return DeployError::Apply(ApplyError::UnknownKinds { kinds });
    }
    let hint = format!(
        "{} stops rendering them, or install their CustomResourceDefinitions",
        switches.join(" and ")
    );
    DeployError::Unserved { kinds, hint }
}

/// The boolean param of `component`'s prototype whose description says it renders `kind`.
fn param_rendering(app_dir: &std::path::Path, component: &str, kind: &str) -> Option<String> {
    let app = App::load(app_dir).ok()?;
    let prototype_name = app.component(component).ok()?.prototype?;
    let evaluator = Evaluator::new(app.root());
    let prototype = prototype::of_component(&evaluator, component, &prototype_name).ok()?;
    prototype
        .params
        .into_iter()
        .find(|p| {
            p.default.is_boolean()
                && p.description
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|word| word == kind)
        })
        .map(|p| p.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("ml".into()),
            name: name.into(),
        }
    }

    fn deferred(blocker: Blocker, checked: Checked) -> Deferred {
        Deferred { blocker, checked }
    }

    #[test]
    fn what_a_dry_run_could_not_check_is_one_line_per_reason() {
        let ml = Blocker::Namespace("ml".into());
        let unchecked = vec![
            (key("a"), deferred(ml.clone(), Checked::Not)),
            (key("b"), deferred(ml.clone(), Checked::Not)),
            (key("c"), deferred(Blocker::Kind, Checked::Not)),
        ];
        assert_eq!(
            unchecked_lines(&unchecked),
            [
                "not checked by the server: ConfigMap ml/c: its CustomResourceDefinition is \
                 created by this apply",
                "2 object(s) not checked by the server: namespace `ml` does not exist yet; apply \
                 creates it",
            ]
        );
    }

    #[test]
    fn what_a_dry_run_checked_without_the_server_says_against_which_schema() {
        let ml = Blocker::Namespace("ml".into());
        let unchecked = vec![
            (key("a"), deferred(ml.clone(), Checked::ServerSchema)),
            (key("b"), deferred(ml, Checked::ServerSchema)),
            (key("w"), deferred(Blocker::Kind, Checked::PlanCrd)),
        ];
        assert_eq!(
            unchecked_lines(&unchecked),
            [
                format!("2 object(s) in namespace `ml`, which apply creates, {SCHEMA_ONLY}"),
                format!(
                    "1 object(s) {PLAN_CRD_ONLY}: their CustomResourceDefinitions come with this \
                     apply"
                ),
            ]
        );
    }

    #[test]
    fn objects_checked_in_part_are_counted_by_reason() {
        let why = "namespace `ml` does not exist yet; apply creates it".to_owned();
        let list = [why.clone(), why];
        assert_eq!(
            partly_checked(&list, "were checked in part"),
            ["2 object(s) in namespace `ml`, which apply creates, were checked in part"]
        );
        let crd = ["its CustomResourceDefinition is created by this apply".to_owned()];
        assert_eq!(
            partly_checked(&crd, "were not checked"),
            ["1 object(s) were not checked: their CustomResourceDefinitions come with this apply"]
        );
    }
}
