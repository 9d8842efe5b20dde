//! Exit codes of the `mlkube` binary, the same for every verb.
//!
//! They follow `kubectl diff`: 0 means done (or no differences), 1 means differences were found,
//! and 2 and up are errors. `status` uses the same codes for the same meanings: 1 for drift,
//! 3 for objects not healthy, and 4 for an environment never applied; `logs` exits 3 when a
//! job it read failed (after its lines and how it ended). 130 is an apply, prune or delete
//! stopped by Ctrl-C.
//!
//! An error ends with code 2, printed to stderr with the chain of its causes.

use std::process::ExitCode;

use crate::deploy::diff::ChangeSet;

use super::color;
use crate::error_text;

/// How a verb ended, as the process exit code a script sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The verb did what it was asked; for `diff`, there are no differences.
    Done = 0,
    /// `diff` found differences between the rendered environment and the cluster; for
    /// `status`, every object is healthy but some drifted since the last apply.
    Differences = 1,
    /// Bad input, a failed operation, or a verb that is not available yet.
    Error = 2,
    /// `apply` applied everything but not all of it became healthy before the timeout; for
    /// `status`, some object is failed, missing or not ready yet (with or without drift); for
    /// `logs`, a job it read failed.
    NotReady = 3,
    /// `status`: the environment has no inventory on the cluster, it was never applied.
    NeverApplied = 4,
    /// Ctrl-C stopped `apply`, `prune` or `delete` part way (128 + SIGINT, as a shell reports
    /// it); what was done is printed and a re-run finishes.
    Interrupted = 130,
}

impl Exit {
    /// The exit code `kubectl diff` would give for a change set.
    pub fn of_diff(changes: &ChangeSet) -> Exit {
        if changes.summary().failed > 0 {
            Exit::Error
        } else if changes.has_differences() {
            Exit::Differences
        } else {
            Exit::Done
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// Print a failure and the chain of its causes to stderr, and give the error exit code.
pub fn report(error: &(dyn std::error::Error + 'static)) -> Exit {
    for line in error_lines(error, color::stderr()) {
        eprintln!("{line}");
    }
    Exit::Error
}

/// The error and its causes, a line each, then the hints: as [`crate::error_text::chain`]
/// tells them, with a hint for refused credentials (401) and missing RBAC permissions (403).
/// A message may carry `hint:` lines of its own; they come after the causes.
pub(super) fn error_lines(error: &(dyn std::error::Error + 'static), color: bool) -> Vec<String> {
    let mut hints = Vec::new();
    let mut lines = Vec::new();
    for (i, link) in error_text::chain(error).into_iter().enumerate() {
        let text = without_hints(&link.text, &mut hints);
        lines.push(if i == 0 {
            format!("mlkube: {}: {text}", color::red("error", color))
        } else {
            format!("  caused by: {text}")
        });
        let hint = link.http_status.and_then(status_hint);
        hints.extend(hint.map(|h| format!("  hint: {h}")));
    }
    lines.extend(hints);
    lines
}

/// The error as data, for the `-o json` document of a verb that failed: `message` (the error
/// without its `hint:` lines), `causes` and `hints`, as [`error_lines`] tells them.
pub fn error_json(error: &(dyn std::error::Error + 'static)) -> serde_json::Value {
    let mut hints = Vec::new();
    let mut texts = Vec::new();
    for link in error_text::chain(error) {
        texts.push(without_hints(&link.text, &mut hints));
        hints.extend(link.http_status.and_then(status_hint).map(str::to_owned));
    }
    let hints: Vec<String> = hints
        .iter()
        .map(|h| h.trim_start().trim_start_matches("hint:").trim().to_owned())
        .collect();
    let message = if texts.is_empty() {
        String::new()
    } else {
        texts.remove(0)
    };
    serde_json::json!({"message": message, "causes": texts, "hints": hints})
}

/// `message` without its `hint:` lines, which go to `hints`.
fn without_hints(message: &str, hints: &mut Vec<String>) -> String {
    let (hint_lines, rest): (Vec<&str>, Vec<&str>) = message
        .lines()
        .partition(|line| line.trim_start().starts_with("hint:"));
    hints.extend(hint_lines.into_iter().map(str::to_owned));
    rest.join("\n")
}

fn status_hint(code: u16) -> Option<&'static str> {
    match code {
        401 => Some(
            "the API server did not accept the credentials of this kubeconfig context: log in \
             again or renew its token",
        ),
        403 => Some(
            "the account of this kubeconfig context lacks an RBAC permission: the message above \
             names the verb and the resource; ask for a Role or ClusterRole that grants it",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Exit, error_lines};
    use crate::cli::deploy::DeployError;
    use crate::deploy::report::ApplyError;

    /// An error of ours around a library's error that repeats its own source, as kube's
    /// `ServiceError: {0}` does.
    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot read the config\nhint: pass --config FILE")]
        Read(#[source] Repeating),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("ServiceError: {0}")]
    struct Repeating(#[source] std::io::Error);

    #[test]
    fn a_cause_the_line_before_already_says_is_left_out_and_hints_come_last() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Outer::Read(Repeating(refused));
        assert_eq!(
            error_lines(&error, false),
            [
                "mlkube: error: cannot read the config",
                "  caused by: ServiceError: refused",
                "hint: pass --config FILE",
            ]
        );
    }

    #[test]
    fn the_json_of_an_error_has_its_message_causes_and_hints_apart() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Outer::Read(Repeating(refused));
        assert_eq!(
            super::error_json(&error),
            serde_json::json!({
                "message": "cannot read the config",
                "causes": ["ServiceError: refused"],
                "hints": ["pass --config FILE"],
            })
        );
    }

    #[test]
    fn the_word_error_is_red_only_in_colour() {
        let error = std::io::Error::other("disk full");
        assert_eq!(
            error_lines(&error, true),
            ["mlkube: \x1b[1;31merror\x1b[0m: disk full"]
        );
        assert_eq!(error_lines(&error, false), ["mlkube: error: disk full"]);
    }

    #[test]
    fn an_operator_forced_out_by_its_shutdown_deadline_exits_with_the_error_status() {
        assert_eq!(
            crate::operator::runtime::shutdown::FORCED_EXIT_CODE,
            Exit::Error as i32
        );
    }

    #[test]
    fn a_forbidden_request_shows_the_message_and_an_rbac_hint_without_the_status_dump() {
        let status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "secrets is forbidden: User \"dev\" cannot create resource \"secrets\" in API group \"\" in the namespace \"ml\""
        }))
        .expect("a Status");
        let error = DeployError::Apply(ApplyError::Namespace {
            namespace: "ml".into(),
            source: kube::Error::Api(Box::new(status)),
        });
        let lines = error_lines(&error, false);
        assert_eq!(lines[0], "mlkube: error: cannot create namespace `ml`");
        assert!(
            lines[1].starts_with("  caused by: secrets is forbidden: User \"dev\" cannot create")
                && lines[1].ends_with("(Forbidden, HTTP 403)"),
            "{lines:?}"
        );
        assert!(lines[2].contains("RBAC"), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("Status {")), "{lines:?}");
    }
}
