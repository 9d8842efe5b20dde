//! Exit codes of the `mlkube` binary, the same for every verb.
//!
//! They follow `kubectl diff`: 0 means done (or no differences), 1 means differences were found,
//! and 2 and up are errors. `status` uses the same codes for the same meanings: 1 for drift,
//! 3 for objects not healthy, and 4 for an environment never applied. 130 is an apply, prune
//! or delete stopped by Ctrl-C.
//!
//! An error ends with code 2, printed to stderr with the chain of its causes.

use std::process::ExitCode;

use crate::deploy::diff::ChangeSet;

use super::color;

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
    /// `status`, some object is failed, missing or not ready yet (with or without drift).
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
///
/// Messages never repeat their source; this walks the chain instead. A message may carry
/// `hint:` lines of its own, which print as they are.
pub fn report(error: &(dyn std::error::Error + 'static)) -> Exit {
    eprintln!("mlkube: {}: {error}", color::red("error", color::stderr()));
    let mut source = error.source();
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
    Exit::Error
}

/// The error and its causes, a line each; an API server's answer is shown as its message,
/// reason and code (never the client's debug dump of it), with a hint for refused credentials
/// (401) and missing RBAC permissions (403).
pub(super) fn error_lines(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut lines = vec![format!("mlkube: error: {error}")];
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(kube::Error::Api(status)) = cause.downcast_ref::<kube::Error>() {
            lines.push(format!(
                "  caused by: {} ({}, HTTP {})",
                status.message, status.reason, status.code
            ));
            lines.extend(status_hint(status.code).map(|h| format!("  hint: {h}")));
            break;
        }
        lines.push(format!("  caused by: {cause}"));
        source = cause.source();
    }
    lines
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
    use crate::deploy::apply::ApplyError;

    #[test]
    fn an_operator_forced_out_by_its_shutdown_deadline_exits_with_the_error_status() {
        assert_eq!(
            crate::operator::shutdown::FORCED_EXIT_CODE,
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
        let lines = error_lines(&error);
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
