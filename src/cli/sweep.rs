//! `mlkube status <env> -c <component>`: the training jobs a component renders (a sweep's), each
//! with its hyperparameters, state and final metrics, best first, as [`crate::observe::sweep`]
//! ranks them; printed as a table or JSON.
//!
//! Exit codes: 0 every job succeeded; 3 some job failed, is still running or is missing; 2
//! errors (a component that renders no training job among them).

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::{Value, json};

use crate::observe::logs::LogsError;
use crate::observe::logs::source::KubeSource;
use crate::observe::sweep::{self, Goal, Sweep, SweepError};

use super::exit::{Exit, report};
use super::settings::{self, Selection, SettingsError};
use super::{GlobalArgs, ListFormat, StatusArgs};

#[derive(Debug, thiserror::Error)]
enum SweepCliError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error(transparent)]
    Logs(#[from] LogsError),
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// `mlkube status <env> -c <component>`.
pub fn status(global: &GlobalArgs, args: &StatusArgs, component: &str) -> Exit {
    match run(global, args, component) {
        Ok(exit) => exit,
        Err(error) => report(&error),
    }
}

fn run(global: &GlobalArgs, args: &StatusArgs, component: &str) -> Result<Exit, SweepCliError> {
    let components = [component.to_string()];
    let selection = Selection {
        env: &args.env,
        components: &components,
        manifest: None,
    };
    let deployment = settings::deployment(global, selection, &args.cluster, &args.request)?;
    let app = deployment.app;
    let target = deployment.target;
    let rendered: Vec<Value> = deployment
        .manifest
        .objects
        .into_iter()
        .map(|o| o.value)
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(SweepCliError::Runtime)?;
    let found = runtime.block_on(async {
        let source = KubeSource::connect(&target, args.request.request_timeout).await?;
        let found = sweep::sweep(
            &source,
            component,
            &target.env,
            &target.namespace,
            &rendered,
        )
        .await?;
        Ok::<_, SweepCliError>((found, source.context))
    })?;
    let (found, context) = found;
    let mut stdout = std::io::stdout().lock();
    let _ = match args.output {
        ListFormat::Json => writeln!(
            stdout,
            "{:#}",
            to_json(&found, &app, &target.env, &target.namespace)
        ),
        ListFormat::Text => write!(
            stdout,
            "{}",
            render_text(&found, &target.env, &target.namespace, &context)
        ),
    };
    Ok(if found.all_succeeded() {
        Exit::Done
    } else {
        Exit::NotReady
    })
}

fn to_json(found: &Sweep, app: &str, env: &str, namespace: &str) -> Value {
    let states: serde_json::Map<String, Value> = found
        .states()
        .into_iter()
        .map(|(state, n)| (state, json!(n)))
        .collect();
    json!({
        "app": app,
        "env": env,
        "namespace": namespace,
        "component": found.component,
        "objective": found.objective,
        "jobs": found.jobs,
        "summary": { "jobs": found.jobs.len(), "states": states },
    })
}

/// The jobs as a table, best first: a line above with the counts and the ranking, then a
/// column per metric (the ranked one first) and per hyperparameter.
pub fn render_text(found: &Sweep, env: &str, namespace: &str, context: &str) -> String {
    let mut out = String::new();
    let states: Vec<String> = found
        .states()
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    let _ = writeln!(
        out,
        "component {} of environment {env} (namespace {namespace}, context {context}): {} \
         job(s), {}",
        found.component,
        found.jobs.len(),
        states.join(", ")
    );
    let _ = writeln!(out, "{}", ranking_line(found));
    let mut metrics: Vec<String> = found
        .jobs
        .iter()
        .flat_map(|j| j.metrics.keys().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if let Some(objective) = &found.objective {
        metrics.retain(|m| *m != objective.metric);
        metrics.insert(0, objective.metric.clone());
    }
    let hyperparameters: BTreeSet<&String> = found
        .jobs
        .iter()
        .flat_map(|j| j.hyperparameters.keys())
        .collect();
    let mut header = vec!["JOB".to_string(), "STATE".to_string()];
    header.extend(metrics.iter().cloned());
    header.extend(hyperparameters.iter().map(|h| h.to_string()));
    header.push("NOTE".into());
    let rows: Vec<Vec<String>> = found
        .jobs
        .iter()
        .map(|job| {
            let mut row = vec![job.name.clone(), job.state.clone()];
            row.extend(metrics.iter().map(|m| {
                job.metrics
                    .get(m)
                    .map_or_else(|| "-".to_string(), f64::to_string)
            }));
            row.extend(
                hyperparameters
                    .iter()
                    .map(|h| match job.hyperparameters.get(*h) {
                        Some(Value::String(text)) => text.clone(),
                        Some(other) => other.to_string(),
                        None => "-".into(),
                    }),
            );
            row.push(job.note.clone().unwrap_or_default());
            row
        })
        .collect();
    out.push_str(&super::output::table(&header, &rows));
    out
}

/// How the jobs are ordered, and where the metrics come from.
fn ranking_line(found: &Sweep) -> String {
    match &found.objective {
        None => "no job reported a metric yet (a line `metric <name>=<value>` in its lead \
                 replica's log, or an annotation metric.mlkube.io/<name>); by name"
            .to_string(),
        Some(objective) => {
            let order = match objective.goal {
                Goal::Maximize => "highest",
                Goal::Minimize => "lowest",
            };
            let why = if objective.declared {
                "the sweep's objective"
            } else {
                "the first metric reported; the sweep's objective param names another"
            };
            format!("best first: {order} {} first ({why})", objective.metric)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::observe::sweep::{MetricSource, Objective, SweepJob};

    fn job(name: &str, state: &str, accuracy: Option<f64>, rate: f64) -> SweepJob {
        SweepJob {
            kind: "XGBoostJob".into(),
            name: name.into(),
            hyperparameters: BTreeMap::from([
                ("learningRate".to_string(), json!(rate)),
                ("booster".to_string(), json!("gbtree")),
            ]),
            state: state.into(),
            metrics: accuracy
                .map(|a| BTreeMap::from([("accuracy".to_string(), a)]))
                .unwrap_or_default(),
            metrics_from: accuracy.map(|_| MetricSource::Log),
            note: None,
        }
    }

    #[test]
    fn the_table_has_the_ranked_metric_then_the_hyperparameters_and_lines_up() {
        let found = Sweep {
            component: "sweep".into(),
            objective: Some(Objective {
                metric: "accuracy".into(),
                goal: Goal::Maximize,
                declared: false,
            }),
            jobs: vec![
                job("sweep-b", "Succeeded", Some(0.97), 0.3),
                job("sweep-a", "Succeeded", Some(0.9), 0.01),
                job("sweep-c", "Running", None, 1.0),
            ],
        };
        let text = render_text(&found, "local", "ml", "ctx");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "component sweep of environment local (namespace ml, context ctx): 3 job(s), 2 \
             Succeeded, 1 Running"
        );
        assert_eq!(
            lines[1],
            "best first: highest accuracy first (the first metric reported; the sweep's \
             objective param names another)"
        );
        assert_eq!(
            lines[2],
            "JOB      STATE      accuracy  booster  learningRate  NOTE"
        );
        assert_eq!(lines[3], "sweep-b  Succeeded  0.97      gbtree   0.3");
        assert_eq!(lines[5], "sweep-c  Running    -         gbtree   1.0");
        let json = to_json(&found, "a", "local", "ml");
        assert_eq!(json["app"], "a");
        assert_eq!(json["summary"]["states"]["Succeeded"], 2);
        assert_eq!(json["jobs"][0]["metrics"]["accuracy"], 0.97);
        assert_eq!(json["jobs"][0]["metrics_from"], "log");
        assert_eq!(json["objective"]["goal"], "maximize");
    }
}
