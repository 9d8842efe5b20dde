//! What the cluster verbs print, and the one question they ask.
//!
//! stdout carries data (one line per applied or deleted object, diffs, JSON); notes, progress,
//! the diff summary and the confirmation prompt go to stderr ([`super::progress`] shows the
//! wait). Colour follows `--color` ([`super::color`]), and it never carries meaning on its own.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::deploy::apply::{ApplyError, ApplyReport, Consent, Observer, Outcome, Removal};
use crate::deploy::key::Key;
use crate::deploy::wait::Watched;

use super::progress::WaitProgress;

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

/// How the cluster verbs print: in text, a line per object on stdout as soon as it is applied
/// or removed, progress while waiting on stderr, and a summary at the end; in JSON, nothing
/// until the one document at the end.
pub struct Printer {
    json: bool,
    dry_run: bool,
    started: Instant,
    progress: WaitProgress,
}

impl Printer {
    pub fn new(json: bool, dry_run: bool) -> Printer {
        Printer {
            json,
            dry_run,
            started: Instant::now(),
            progress: WaitProgress::stderr(),
        }
    }

    fn suffix(&self) -> &'static str {
        if self.dry_run { " (dry run)" } else { "" }
    }

    fn object_line(&self, key: &Key, word: &str) {
        if !self.json {
            let _ = writeln!(std::io::stdout().lock(), "{key} {word}{}", self.suffix());
        }
    }

    pub fn json(&self) -> bool {
        self.json
    }

    /// Seconds since the verb started, for the summary.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Observer for Printer {
    fn applied(&self, key: &Key, outcome: Outcome) {
        self.object_line(key, outcome_word(outcome));
    }

    fn removed(&self, key: &Key, removal: Removal) {
        let word = match removal {
            Removal::Deleted => "deleted",
            Removal::Released => "released",
        };
        self.object_line(key, word);
    }

    fn waiting(&self, elapsed: Duration, objects: &[Watched]) {
        if self.json {
            return;
        }
        self.progress.update(elapsed, objects);
    }
}

fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Created => "created",
        Outcome::Configured => "configured",
        Outcome::Unchanged => "unchanged",
    }
}

/// The counts after an apply, prune or delete.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub created: usize,
    pub configured: usize,
    pub unchanged: usize,
    pub deleted: usize,
    pub released: usize,
    pub not_ready: usize,
}

impl Counts {
    pub fn of(report: &ApplyReport) -> Counts {
        let count = |o| report.applied.iter().filter(|(_, x)| *x == o).count();
        Counts {
            created: count(Outcome::Created),
            configured: count(Outcome::Configured),
            unchanged: count(Outcome::Unchanged),
            deleted: report.pruned.len(),
            released: report.released.len(),
            not_ready: report.not_ready.len(),
        }
    }
}

/// The summary line: `apply: 3 created, 1 configured, 27 unchanged, 2 pruned in 4.2s`.
pub fn summary_line(verb: &str, report: &ApplyReport, dry_run: bool, elapsed: Duration) -> String {
    let c = Counts::of(report);
    let mut line = if verb == "apply" {
        format!(
            "{verb}: {} created, {} configured, {} unchanged, {} pruned",
            c.created, c.configured, c.unchanged, c.deleted
        )
    } else {
        format!("{verb}: {} deleted", c.deleted)
    };
    if c.released > 0 {
        let _ = write!(line, ", {} released", c.released);
    }
    if c.not_ready > 0 {
        let _ = write!(line, ", {} not ready", c.not_ready);
    }
    let _ = write!(line, " in {:.1}s", elapsed.as_secs_f64());
    if dry_run {
        line.push_str(" (dry run)");
    }
    if report.interrupted {
        line.push_str(" (interrupted)");
    }
    line
}

/// The `-o json` document of `apply`, `prune` and `delete`.
pub fn report_json(report: &ApplyReport, dry_run: bool, elapsed: Duration) -> serde_json::Value {
    let objects: Vec<serde_json::Value> = report
        .applied
        .iter()
        .map(|(key, outcome)| (key, outcome_word(*outcome)))
        .chain(report.pruned.iter().map(|key| (key, "deleted")))
        .chain(report.released.iter().map(|key| (key, "released")))
        .map(|(key, outcome)| {
            let mut object = serde_json::to_value(key).unwrap_or_default();
            object["outcome"] = outcome.into();
            object
        })
        .collect();
    let with = |key: &Key, field: &str, value: &str| {
        let mut object = serde_json::to_value(key).unwrap_or_default();
        object[field] = value.into();
        object
    };
    serde_json::json!({
        "dry_run": dry_run,
        "interrupted": report.interrupted,
        "objects": objects,
        "adopted": report.adopted.iter().map(|(k, owner)| with(k, "owner", owner)).collect::<Vec<_>>(),
        "kept": report.kept.iter().map(|(k, reason)| with(k, "reason", reason)).collect::<Vec<_>>(),
        "not_ready": report.not_ready,
        "summary": Counts::of(report),
        "elapsed_seconds": elapsed.as_secs_f64(),
    })
}

/// Print the end of an apply, prune or delete: in text, the notes (adopted, kept, released, not
/// ready) and the summary line on stderr; in JSON, the one document on stdout.
pub fn print_report(verb: &str, report: &ApplyReport, printer: &Printer) {
    printer.progress.finish();
    let elapsed = printer.elapsed();
    if printer.json {
        let json = report_json(report, printer.dry_run, elapsed);
        let _ = writeln!(std::io::stdout().lock(), "{json:#}");
        return;
    }
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
    if report.interrupted {
        eprintln!(
            "mlkube: interrupted: the objects above were written and the inventory covers them; \
             run the same command again to finish"
        );
    }
    eprintln!("{}", summary_line(verb, report, printer.dry_run, elapsed));
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
