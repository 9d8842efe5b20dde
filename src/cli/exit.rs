//! Exit codes of the `mlkube` binary, the same for every verb.
//!
//! They follow `kubectl diff`: 0 means done (or no differences), 1 means differences were found,
//! and 2 and up are errors. `status` uses the same codes for the same meanings: 1 for drift,
//! 3 for objects not healthy, and 4 for an environment never applied. 130 is an apply, prune
//! or delete stopped by Ctrl-C.

use std::process::ExitCode;

use crate::deploy::diff::ChangeSet;

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

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn an_operator_forced_out_by_its_shutdown_deadline_exits_with_the_error_status() {
        assert_eq!(
            crate::operator::shutdown::FORCED_EXIT_CODE,
            Exit::Error as i32
        );
    }
}
