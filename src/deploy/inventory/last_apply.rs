//! The record of the last apply on the environment's ApplySet parent: when, by which mlkube,
//! and of which git commit of the app (the [`LastApply`]). `apply` leaves it once it finished
//! ([`record`]); `mlkube status` reads it back ([`LastApply::of_parent`]).
//!
//! It is a server-side apply of its own field manager ([`LAST_APPLY_MANAGER`]), not part of the
//! inventory's apply, so the inventory writes of `prune` and `delete` (manager `mlkube`) leave it
//! alone.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::deploy::cluster::{ApplyMode, Cluster};
use crate::deploy::inventory::applyset::{self, ApplySet, TOOLING_ANNOTATION};

pub const APPLIED_AT_ANNOTATION: &str = "mlkube.io/last-applied-at";
pub const APPLIED_COMMIT_ANNOTATION: &str = "mlkube.io/last-applied-commit";
pub const APPLIED_DIRTY_ANNOTATION: &str = "mlkube.io/last-applied-dirty";

/// The field manager of the last-apply record on the ApplySet parent: its own, so that the
/// inventory's writes (manager `mlkube`) neither own nor drop these annotations.
pub const LAST_APPLY_MANAGER: &str = "mlkube-last-apply";

/// The app's git commit at an apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Commit {
    pub sha: String,
    /// The work tree had changes not committed.
    pub dirty: bool,
}

/// When and with what the environment was last applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastApply {
    /// RFC 3339, UTC, to the second.
    pub time: String,
    /// The ApplySet tooling of the apply, `mlkube/v<version>`.
    pub tooling: String,
    /// `None` when the app is not in a git repository (or git is not installed).
    pub commit: Option<Commit>,
}

impl LastApply {
    /// The record of an apply finishing now, of the app in `dir` (`None`: pre-rendered objects,
    /// no app and so no commit).
    pub fn now(dir: Option<&Path>) -> LastApply {
        let time = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        LastApply {
            time,
            tooling: applyset::tooling(),
            commit: dir.and_then(git_commit),
        }
    }

    /// The annotations that record it on the ApplySet parent. Without a commit there is no
    /// commit annotation: applied by [`LAST_APPLY_MANAGER`], which alone sends them, a stale
    /// commit goes away when the manager stops sending it.
    pub fn annotations(&self) -> Value {
        let mut annotations = Map::new();
        annotations.insert(APPLIED_AT_ANNOTATION.into(), json!(self.time));
        if let Some(commit) = &self.commit {
            annotations.insert(APPLIED_COMMIT_ANNOTATION.into(), json!(commit.sha));
            annotations.insert(
                APPLIED_DIRTY_ANNOTATION.into(),
                json!(commit.dirty.to_string()),
            );
        }
        Value::Object(annotations)
    }

    /// The record on a parent, `None` when no apply recorded one.
    pub fn of_parent(parent: &Value) -> Option<LastApply> {
        let annotations = &parent["metadata"]["annotations"];
        let text = |name: &str| annotations[name].as_str().map(str::to_string);
        Some(LastApply {
            time: text(APPLIED_AT_ANNOTATION)?,
            tooling: text(TOOLING_ANNOTATION).unwrap_or_default(),
            commit: text(APPLIED_COMMIT_ANNOTATION).map(|sha| Commit {
                sha,
                dirty: text(APPLIED_DIRTY_ANNOTATION).as_deref() == Some("true"),
            }),
        })
    }
}

/// `git rev-parse HEAD` and whether `git status` shows changes, in `dir`; `None` without git or
/// outside a repository.
pub fn git_commit(dir: &Path) -> Option<Commit> {
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    let sha = git(&["rev-parse", "HEAD"])?;
    let changes = git(&["status", "--porcelain", "--", "."])?;
    Some(Commit {
        sha,
        dirty: !changes.is_empty(),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum LastApplyError {
    #[error("cannot record the last apply on the inventory of environment `{env}`")]
    Record {
        env: String,
        #[source]
        source: kube::Error,
    },
}

/// Record `last` on the environment's ApplySet parent: a server-side apply of its annotations
/// alone, as [`LAST_APPLY_MANAGER`].
pub async fn record(
    cluster: &impl Cluster,
    set: &ApplySet,
    last: &LastApply,
) -> Result<(), LastApplyError> {
    let record = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": set.name,
            "namespace": set.namespace,
            "annotations": last.annotations(),
        },
    });
    let mode = ApplyMode {
        dry_run: false,
        // Only this manager writes these annotations; a hand edit of them is not worth a refusal.
        force: true,
        manager: LAST_APPLY_MANAGER,
    };
    cluster
        .apply(
            &ApplySet::parent_resource(),
            Some(&set.namespace),
            &set.name,
            &record,
            mode,
        )
        .await
        .map_err(|source| LastApplyError::Record {
            env: set.env.clone(),
            source,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_apply_reads_back_from_the_annotations_it_writes() {
        let last = LastApply {
            time: "2026-11-23T13:00:00Z".into(),
            tooling: "mlkube/v0.1.0".into(),
            commit: Some(Commit {
                sha: "abc123".into(),
                dirty: true,
            }),
        };
        let mut annotations = last.annotations();
        annotations[TOOLING_ANNOTATION] = json!("mlkube/v0.1.0");
        let parent = json!({"metadata": {"annotations": annotations}});
        assert_eq!(LastApply::of_parent(&parent), Some(last));
        let without_git = LastApply {
            commit: None,
            ..LastApply::now(None)
        };
        assert_eq!(
            without_git.annotations()[APPLIED_COMMIT_ANNOTATION],
            Value::Null
        );
        assert_eq!(LastApply::of_parent(&json!({"metadata": {}})), None);
    }

    #[test]
    fn the_commit_of_a_git_app_names_head_and_whether_it_is_dirty() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
                .args(args)
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("app.yaml"), "name: a\n").unwrap();
        git(&["add", "app.yaml"]);
        git(&["commit", "-q", "-m", "app"]);
        let clean = git_commit(dir.path()).expect("a commit in a repository");
        assert_eq!(clean.sha.len(), 40, "{}", clean.sha);
        assert!(!clean.dirty);
        std::fs::write(dir.path().join("app.yaml"), "name: b\n").unwrap();
        assert_eq!(
            git_commit(dir.path()),
            Some(Commit {
                sha: clean.sha,
                dirty: true
            })
        );
    }
}
