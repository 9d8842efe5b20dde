//! `mlkube status <env>` as the command line runs it: resolve the settings (the environment
//! rendered, its cluster) as the other cluster verbs do, read its status from the cluster, print
//! it as a table or JSON (with a hint for a member whose reason points at a param: a ConfigMap
//! not found that a param is named after), and choose the exit code. With `-c COMPONENT`, the training jobs of
//! that component instead, ranked by their metrics ([`super::sweep`]).
//!
//! Exit codes: 0 every member healthy and none drifted; 1 all healthy but some drifted (as
//! `diff` gives 1 for differences); 3 some member failed, missing or not ready yet, drifted or
//! not; 4 the environment is not applied (never, deleted, or its namespace gone); 2 errors.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::fmt::Write as _;
use std::io::Write as _;

use crate::deploy::cluster::KubeCluster;
use crate::observe::serving::ServedVersion;
use crate::observe::status::{self, Drift, MemberStatus, State, Status, StatusError};

use super::deploy::{self, DeployError};
use super::exit::Exit;
use super::param_source;
use super::settings::{self, Deployment, Selection};
use super::{GlobalArgs, ListFormat, StatusArgs};

pub fn status(global: &GlobalArgs, args: &StatusArgs) -> Exit {
    if let Some(component) = &args.component {
        return super::sweep::status(global, args, component);
    }
    let selection = Selection {
        env: &args.env,
        components: &[],
        manifest: None,
    };
    deploy::finish(
        settings::deployment(global, selection, &args.cluster, &args.request)
            .map_err(DeployError::from)
            .and_then(|d| status_deployment(&d, args)),
    )
}

/// `mlkube status` on an environment already rendered.
pub fn status_deployment(deployment: &Deployment, args: &StatusArgs) -> Result<Exit, DeployError> {
    deploy::runtime()?.block_on(async {
        let cluster = KubeCluster::connect(&deployment.target).await?;
        let plan = deployment.plan(&[])?;
        let status = match status::status(&cluster, &plan).await {
            Ok(status) => status,
            Err(
                never @ (StatusError::NeverApplied { .. }
                | StatusError::Deleted { .. }
                | StatusError::NamespaceGone { .. }
                | StatusError::NamespaceDeleting { .. }),
            ) => {
                eprintln!("mlkube: {never}");
                return Ok(Exit::NeverApplied);
            }
            Err(error) => return Err(error.into()),
        };
        let hints = param_hints(deployment, &status);
        let mut stdout = std::io::stdout().lock();
        let _ = match args.output {
            ListFormat::Json => writeln!(stdout, "{:#}", with_hints(&status, &hints)),
            ListFormat::Text => write!(
                stdout,
                "{}{}",
                render_text(&status, &cluster.context),
                render_hints(&status, &hints)
            ),
        };
        Ok(exit(&status))
    })
}

/// For each member, in order, the params its reason points at (a ConfigMap not found that a
/// param is named after), as `hint:` lines; `None` where there are none.
fn param_hints(deployment: &Deployment, status: &Status) -> Vec<Option<String>> {
    // The app's params are read again only when some member says why it is not well.
    if status.members.iter().all(|m| m.reason.is_none()) {
        return vec![None; status.members.len()];
    }
    let hinter = param_source::param_hinter(deployment);
    let hint = |m: &MemberStatus| hinter.as_ref()?(m.component.as_deref()?, m.reason.as_deref()?);
    status.members.iter().map(hint).collect()
}

/// The status as JSON, each member with hints carrying them as `hint`.
fn with_hints(status: &Status, hints: &[Option<String>]) -> serde_json::Value {
    let mut json = serde_json::json!(status);
    let members = json["members"].as_array_mut().into_iter().flatten();
    for (member, hint) in members.zip(hints) {
        if let Some(hint) = hint {
            member["hint"] = serde_json::json!(hint);
        }
    }
    json
}

/// Below the table: each member with hints, and its hints indented under it.
fn render_hints(status: &Status, hints: &[Option<String>]) -> String {
    let mut out = String::new();
    for (member, hint) in status.members.iter().zip(hints) {
        if let Some(hint) = hint {
            let _ = writeln!(out, "{}\n  {}", member.key, hint.replace('\n', "\n  "));
        }
    }
    out
}

/// The exit code of a status: unhealthy before drifted, as the more urgent.
pub fn exit(status: &Status) -> Exit {
    if status.unhealthy() {
        Exit::NotReady
    } else if !status.all_well() {
        Exit::Differences
    } else {
        Exit::Done
    }
}

/// The status as a table, one member a line, with the last apply above and counts below.
pub fn render_text(status: &Status, context: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "environment {} of app {} (namespace {}, context {context})",
        status.env, status.app, status.namespace
    );
    let _ = writeln!(out, "last apply: {}", last_apply_line(status));
    let rows: Vec<Vec<String>> = status
        .members
        .iter()
        .map(|m| {
            let health = match m.state {
                State::Healthy => "healthy",
                State::Progressing => "progressing",
                State::Failed => "failed",
                State::Missing => "missing",
            };
            let drift = match m.drift {
                Drift::None => "no",
                Drift::Unknown => "unknown",
                _ => "yes",
            };
            let detail = [
                m.condition.as_deref(),
                m.reason.as_deref(),
                m.drift_reason.as_deref(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ");
            vec![
                m.key.to_string(),
                m.component.clone().unwrap_or_else(|| "-".into()),
                health.to_string(),
                drift.to_string(),
                detail,
            ]
        })
        .collect();
    let header = ["OBJECT", "COMPONENT", "HEALTH", "DRIFT", "DETAIL"].map(String::from);
    out.push_str(&super::output::table(&header, &rows));
    out.push_str(&served_versions(&status.serving));
    let s = status.summary;
    let _ = writeln!(
        out,
        "{} members: {} healthy, {} progressing, {} failed, {} missing; {} drifted",
        s.members, s.healthy, s.progressing, s.failed, s.missing, s.drifted
    );
    out
}

/// The versions of served models as a table: nothing when the environment serves none.
fn served_versions(versions: &[ServedVersion]) -> String {
    if versions.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            vec![
                v.component.clone().unwrap_or_else(|| "-".into()),
                v.version.clone(),
                format!("{}/{}", v.ready, v.replicas),
                v.weight
                    .map_or_else(|| "not routed".into(), |w| format!("{w}%")),
                v.model_path.clone(),
            ]
        })
        .collect();
    let header = ["SERVING", "VERSION", "READY", "WEIGHT", "MODEL PATH"].map(String::from);
    let mut out = super::output::table(&header, &rows);
    for v in versions
        .iter()
        .filter(|v| v.weight.unwrap_or(0) > 0 && v.ready == 0)
    {
        let _ = writeln!(
            out,
            "warning: {} {} gets {}% of the traffic with no ready replica: those requests fail \
             until it is ready again or the route moves off it (`mlkube param set {} trafficRule ...` and apply)",
            v.component.as_deref().unwrap_or("-"),
            v.version,
            v.weight.unwrap_or(0),
            v.component.as_deref().unwrap_or("<component>"),
        );
    }
    out
}

fn last_apply_line(status: &Status) -> String {
    let Some(last) = &status.last_apply else {
        return "not recorded (applied by an mlkube without `status`)".into();
    };
    // As `git log --oneline` abbreviates; `-o json` has the whole hash.
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    let commit = match &last.commit {
        Some(c) if c.dirty => format!(", commit {} with uncommitted changes", short(&c.sha)),
        Some(c) => format!(", commit {}", short(&c.sha)),
        None => String::new(),
    };
    format!("{} by {}{commit}", last.time, last.tooling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::cluster::key::Key;
    use crate::deploy::inventory::last_apply::{Commit, LastApply};
    use crate::observe::status::{MemberStatus, Summary};

    fn member(name: &str, state: State, drift: Drift) -> MemberStatus {
        MemberStatus {
            key: Key {
                group: "kubeflow.org".into(),
                kind: "TFJob".into(),
                namespace: Some("ns".into()),
                name: name.into(),
            },
            component: Some("sweep".into()),
            state,
            condition: Some("Succeeded".into()),
            reason: None,
            drift,
            drifted: drift.drifted(),
            drift_reason: None,
        }
    }

    fn status_of(members: Vec<MemberStatus>) -> Status {
        let summary = Summary::of(&members);
        Status {
            app: "a".into(),
            env: "local".into(),
            namespace: "ns".into(),
            last_apply: Some(LastApply {
                time: "2026-11-23T13:00:00Z".into(),
                tooling: "mlkube/v0.1.0".into(),
                commit: Some(Commit {
                    sha: "786527a7dc4906442b685278620819501cebe4ca".into(),
                    dirty: true,
                }),
            }),
            members,
            serving: Vec::new(),
            summary,
        }
    }

    fn version(version: &str, ready: i64, weight: Option<u32>) -> ServedVersion {
        ServedVersion {
            component: Some("digits".into()),
            namespace: Some("ml".into()),
            deployment: format!("digits-{version}"),
            version: version.into(),
            ready,
            replicas: 1,
            weight,
            model_path: format!("s3://models/digits/{version}/"),
        }
    }

    #[test]
    fn a_routed_version_without_a_ready_replica_is_called_out() {
        let text = served_versions(&[
            version("v1", 1, Some(90)),
            version("v2", 0, Some(10)),
            version("v3", 0, None),
        ]);
        let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning:")).collect();
        assert_eq!(warnings.len(), 1, "{text}");
        assert!(
            warnings[0]
                .starts_with("warning: digits v2 gets 10% of the traffic with no ready replica"),
            "{text}"
        );
    }

    #[test]
    fn unhealthy_wins_over_drift_and_drift_alone_exits_like_a_diff() {
        let well = status_of(vec![member("a", State::Healthy, Drift::None)]);
        assert_eq!(exit(&well), Exit::Done);
        let drifted = status_of(vec![member("a", State::Healthy, Drift::Changed)]);
        assert_eq!(exit(&drifted), Exit::Differences);
        let both = status_of(vec![
            member("a", State::Healthy, Drift::Changed),
            member("b", State::Failed, Drift::None),
        ]);
        assert_eq!(exit(&both), Exit::NotReady);
        let running = status_of(vec![member("a", State::Progressing, Drift::None)]);
        assert_eq!(exit(&running), Exit::NotReady);
    }

    #[test]
    fn the_table_lines_up_and_counts_below() {
        let text = render_text(
            &status_of(vec![
                member("sweep-1", State::Healthy, Drift::None),
                member("sweep-22", State::Failed, Drift::Changed),
            ]),
            "ctx",
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "environment local of app a (namespace ns, context ctx)"
        );
        assert_eq!(
            lines[1],
            "last apply: 2026-11-23T13:00:00Z by mlkube/v0.1.0, commit 786527a7dc49 with \
             uncommitted changes"
        );
        assert!(lines[2].starts_with("OBJECT"), "{text}");
        let health_column = lines[2].find("HEALTH").unwrap();
        assert_eq!(lines[3].find("healthy"), Some(health_column), "{text}");
        assert_eq!(lines[4].find("failed"), Some(health_column), "{text}");
        assert!(lines[4].contains(" yes "), "{text}");
        assert_eq!(
            lines[5],
            "2 members: 1 healthy, 0 progressing, 1 failed, 0 missing; 1 drifted"
        );
    }
}
