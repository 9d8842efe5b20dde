//! What the cluster verbs print, and the one question they ask.
//!
//! stdout carries data (one line per applied or deleted object, diffs, JSON); notes, progress,
//! the diff summary and the confirmation prompt go to stderr. Colour follows `--color`
//! ([`super::color`]), and it never carries meaning on its own.

use std::io::{BufRead, IsTerminal, Write};

use crate::deploy::apply::{ApplyError, ApplyReport, Consent, Outcome};
use crate::deploy::key::Key;
use crate::deploy::wait::Progress;

/// Whether destructive steps may go ahead: `--yes`, a question on the terminal, or a refusal
/// when there is no terminal to ask on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// `--yes`.
    Given,
    /// Ask on the terminal.
    Ask,
    /// No terminal and no `--yes`: refuse.
    Absent,
}

impl Confirmation {
    pub fn from_flag(yes: bool) -> Confirmation {
        if yes {
            Confirmation::Given
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            Confirmation::Ask
        } else {
            Confirmation::Absent
        }
    }
}

impl Consent for Confirmation {
    /// List what will be deleted on stderr, then decide.
    fn confirm(&self, verb: &'static str, doomed: &[Key]) -> Result<(), ApplyError> {
        if doomed.is_empty() {
            return Ok(());
        }
        let mut stderr = std::io::stderr();
        let _ = writeln!(stderr, "{verb} will delete {} object(s):", doomed.len());
        for key in doomed {
            let _ = writeln!(stderr, "  - {key}");
        }
        match self {
            Confirmation::Given => Ok(()),
            Confirmation::Absent => Err(ApplyError::NoConsent {
                verb,
                count: doomed.len(),
            }),
            Confirmation::Ask => {
                let _ = write!(stderr, "Delete these {} object(s)? [y/N] ", doomed.len());
                let _ = stderr.flush();
                let mut answer = String::new();
                std::io::stdin()
                    .lock()
                    .read_line(&mut answer)
                    .map_err(ApplyError::Prompt)?;
                if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
                    Ok(())
                } else {
                    Err(ApplyError::Declined { verb })
                }
            }
        }
    }
}

/// Whether diffs are coloured: as `--color` says ([`super::color`]).
pub fn use_color() -> bool {
    super::color::stdout()
}

/// How waiting shows progress on stderr: one redrawn line on a terminal, a line per change
/// otherwise.
pub fn progress() -> Progress {
    if std::io::stderr().is_terminal() {
        Progress::Line
    } else {
        Progress::Plain
    }
}

/// Print an apply report: one line per object on stdout, kept members and unready ones on stderr.
pub fn print_report(report: &ApplyReport, dry_run: bool) {
    let suffix = if dry_run { " (dry run)" } else { "" };
    let mut stdout = std::io::stdout().lock();
    for (key, outcome) in &report.applied {
        let word = match outcome {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Unchanged => "unchanged",
        };
        let _ = writeln!(stdout, "{key} {word}{suffix}");
    }
    for key in &report.pruned {
        let _ = writeln!(stdout, "{key} deleted{suffix}");
    }
    for key in &report.released {
        let _ = writeln!(stdout, "{key} released{suffix}");
    }
    drop(stdout);
    for (key, owner) in &report.adopted {
        eprintln!("mlkube: adopted {key} (it was {owner})");
    }
    for key in &report.released {
        eprintln!(
            "mlkube: kept {key}: other environments still use it; only this one's claim was removed"
        );
    }
    for (key, reason) in &report.kept {
        eprintln!("mlkube: kept {key}: no longer rendered, but {reason}");
    }
    if !report.not_ready.is_empty() {
        eprintln!(
            "mlkube: {} object(s) not ready before the timeout:",
            report.not_ready.len()
        );
        for not_ready in &report.not_ready {
            eprintln!("  {}: {}", not_ready.key, not_ready.reason);
            for pod in &not_ready.pods {
                eprintln!("    {pod}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_terminal_or_yes_deletion_is_refused_and_an_empty_list_needs_nothing() {
        let key = Key {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("n".into()),
            name: "c".into(),
        };
        assert!(matches!(
            Confirmation::Absent.confirm("prune", std::slice::from_ref(&key)),
            Err(ApplyError::NoConsent { .. })
        ));
        assert!(Confirmation::Given.confirm("prune", &[key]).is_ok());
        assert!(Confirmation::Absent.confirm("prune", &[]).is_ok());
    }
}
