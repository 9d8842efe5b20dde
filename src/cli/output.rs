//! What the cluster verbs print, and the one question they ask.
//!
//! stdout carries data (one line per applied or deleted object, diffs, JSON); notes, progress,
//! the diff summary and the confirmation prompt go to stderr ([`super::progress`] shows the
//! wait). Colour follows `--color` ([`super::color`]), and it never carries meaning on its own.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::deploy::cluster::key::Key;
use crate::deploy::health::wait::Watched;
use crate::deploy::inventory::ownership::Verdict;
use crate::deploy::report::{ApplyError, ApplyReport, Consent, Observer, Outcome, Removal};

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
/// until the one document at the end, which a failed verb prints too. It remembers what it
/// was told, for that document and to say at which stage an interrupted verb stopped.
pub struct Printer {
    json: bool,
    dry_run: bool,
    started: Instant,
    progress: WaitProgress,
    told: Mutex<Told>,
}

/// What the verb told the printer so far.
#[derive(Default)]
struct Told {
    /// Objects applied, deleted and released, as the report of a verb that failed holds them.
    report: ApplyReport,
    /// The wait for health began.
    waited: bool,
}

impl Printer {
    pub fn new(json: bool, dry_run: bool) -> Printer {
        Printer {
            json,
            dry_run,
            started: Instant::now(),
            progress: WaitProgress::stderr(),
            told: Mutex::default(),
        }
    }

    fn told(&self) -> std::sync::MutexGuard<'_, Told> {
        self.told.lock().unwrap_or_else(|e| e.into_inner())
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
        self.told().report.applied.push((key.clone(), outcome));
        self.object_line(key, outcome_word(outcome));
    }

    fn namespace_created(&self, key: &Key) {
        self.told().report.namespace_created = Some(key.clone());
        self.object_line(key, "created (the environment's namespace)");
    }

    fn removed(&self, key: &Key, removal: Removal) {
        let word = match removal {
            Removal::Deleted => "deleted",
            Removal::Released | Removal::Unused => "released",
        };
        let mut told = self.told();
        match removal {
            Removal::Deleted => told.report.pruned.push(key.clone()),
            Removal::Released => told.report.released.push(key.clone()),
            Removal::Unused => {
                told.report.released.push(key.clone());
                told.report.unused.push(key.clone());
            }
        }
        drop(told);
        self.object_line(key, word);
    }

    fn waiting(&self, elapsed: Duration, objects: &[Watched]) {
        self.told().waited = true;
        if self.json {
            return;
        }
        self.progress.update(elapsed, objects);
    }
}

fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Created => "created",
        Outcome::Adopted => "adopted",
        Outcome::Configured => "configured",
        Outcome::Unchanged => "unchanged",
    }
}

/// The counts after an apply, prune or delete.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub created: usize,
    pub adopted: usize,
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
            adopted: count(Outcome::Adopted),
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
        let adopted = match c.adopted {
            0 => String::new(),
            n => format!(", {n} adopted"),
        };
        format!(
            "{verb}: {} created{adopted}, {} configured, {} unchanged, {} pruned",
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
        "error": null,
        "interrupted": report.interrupted,
        "namespace_created": report.namespace_created.as_ref().map(|key| key.name.clone()),
        "objects": objects,
        "adopted": report.adopted.iter().map(|(k, owner)| with(k, "owner", &owner.to_string())).collect::<Vec<_>>(),
        "finished_jobs": report.finished_jobs.iter().map(|(k, ended)| with(k, "finished", ended)).collect::<Vec<_>>(),
        "removed_fields": report.removed_fields.iter().map(|(k, removed)| {
            let mut object = with(k, "field", &removed.field);
            object["managers"] = serde_json::json!(removed.managers);
            object
        }).collect::<Vec<_>>(),
        "kept": report.kept.iter().map(|(k, reason)| with(k, "reason", reason)).collect::<Vec<_>>(),
        "not_ready": report.not_ready,
        "held_routes": report.held_routes,
        "gated_routes": report.gated_routes,
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
        eprintln!("mlkube: {}", adopted_line(key, owner));
    }
    for (key, ended) in &report.finished_jobs {
        eprintln!("mlkube: {}", finished_job_line(key, ended));
    }
    for (key, removed) in &report.removed_fields {
        let verb = if printer.dry_run {
            "would remove"
        } else {
            "removed"
        };
        eprintln!("mlkube: adopting {key} {verb} {removed}");
    }
    print_released_and_kept(verb, report);
    let waited = printer.told().waited;
    if !report.not_ready.is_empty() || (report.interrupted && waited) {
        eprintln!("mlkube: {}", not_ready_headline(report, waited));
        for not_ready in &report.not_ready {
            eprintln!("  {}: {}", not_ready.key, not_ready.reason);
            for pod in &not_ready.pods {
                eprintln!("    {pod}");
            }
        }
    }
    for key in &report.held_routes {
        eprintln!(
            "mlkube: {key} not written: it keeps its live weights while what it sends to is not \
             ready (above); nothing after it was applied and nothing was pruned"
        );
    }
    for key in &report.gated_routes {
        eprintln!(
            "mlkube: {key} would be written only once what it sends to is ready; if that is \
             not, the apply keeps its live weights, applies nothing after it, prunes nothing"
        );
    }
    if report.interrupted && !waited {
        eprintln!(
            "mlkube: {}",
            interrupted_note(verb, report, printer.dry_run)
        );
    }
    eprintln!("{}", summary_line(verb, report, printer.dry_run, elapsed));
}

/// What an apply says of a training job it adopted or changed after it had finished.
fn finished_job_line(key: &Key, ended: &str) -> String {
    let namespace = key.namespace.as_deref().unwrap_or("default");
    format!(
        "{key} had already finished ({ended}): its operator does not run a finished job again; \
         to run it again, delete it (`kubectl delete {} {} -n {namespace}`), then apply",
        key.kind.to_lowercase(),
        key.name
    )
}

/// What `apply --adopt` says of an object it took over.
fn adopted_line(key: &Key, owner: &Verdict) -> String {
    format!("adopted {key}: {}", owner.was())
}

/// What happened to the objects a prune or delete did not delete, and what a plain apply left.
fn print_released_and_kept(verb: &str, report: &ApplyReport) {
    for key in &report.released {
        if report.unused.contains(key) {
            eprintln!(
                "mlkube: released {key}: no environment uses it any more, but a \
                 CustomResourceDefinition is never deleted (that would delete every object of its \
                 kind); delete it with kubectl once nothing uses it"
            );
        } else {
            eprintln!(
                "mlkube: released {key}: other environments still use it; only this \
                 environment's claim was removed"
            );
        }
    }
    for (key, reason) in &report.kept {
        if verb == "delete" {
            eprintln!("mlkube: kept {key}: {reason}");
        } else {
            eprintln!("mlkube: kept {key}: no longer rendered, but {reason}");
        }
    }
    if !report.not_rendered.is_empty() {
        eprintln!(
            "mlkube: {} object(s) no longer rendered were left on the cluster; `apply --prune` \
             removes them",
            report.not_rendered.len()
        );
    }
}

/// What heads the list of objects not ready: the timeout ran out, or Ctrl-C stopped the wait.
fn not_ready_headline(report: &ApplyReport, waited: bool) -> String {
    let count = report.not_ready.len();
    match (report.interrupted && waited, count) {
        (true, 0) => "interrupted during the wait: everything was applied and is ready".into(),
        (true, _) => format!(
            "interrupted during the wait: everything was applied; {count} object(s) not ready yet:"
        ),
        // The wait ends early when all that are not ready failed.
        (false, _) if report.not_ready.iter().all(|n| n.failed) => {
            format!("{count} object(s) failed:")
        }
        (false, _) => format!("{count} object(s) not ready before the timeout:"),
    }
}

/// What a prune or delete that touched nothing says before its report: there was nothing to
/// prune, or the environment has nothing applied on `context`. Nothing when it was interrupted:
/// it stopped before it reached anything, which its report says, and the inventory still lists
/// what is there.
pub fn nothing_done_note(
    verb: &str,
    env: &str,
    context: &str,
    report: &ApplyReport,
) -> Option<String> {
    if report.interrupted {
        return None;
    }
    match verb {
        "prune" if report.pruned.is_empty() => {
            Some(format!("nothing to prune in environment `{env}`"))
        }
        "delete" if report.pruned.len() + report.released.len() + report.kept.len() == 0 => Some(
            format!("environment `{env}` has nothing applied on context `{context}`"),
        ),
        _ => None,
    }
}

/// What an apply, prune or delete that Ctrl-C stopped before its wait had done, and what to do.
fn interrupted_note(verb: &str, report: &ApplyReport, dry_run: bool) -> String {
    let removed = !report.pruned.is_empty() || !report.released.is_empty();
    let written = removed
        || report.namespace_created.is_some()
        || report.applied.iter().any(|(_, o)| *o != Outcome::Unchanged);
    if dry_run {
        return "interrupted: a dry run writes nothing".into();
    }
    if verb == "apply" && written {
        return "interrupted: the objects above were written and the inventory covers them; run \
                the same command again to finish"
            .into();
    }
    if verb == "apply" {
        return "interrupted before anything was written: nothing changed on the cluster; run the \
                same command again to apply"
            .into();
    }
    if !removed {
        return "interrupted before anything was deleted: nothing changed on the cluster".into();
    }
    let what = if report.released.is_empty() {
        "deleted"
    } else {
        "deleted or released"
    };
    format!(
        "interrupted: the objects above were {what}; the inventory still lists the others; run \
         the same command again to finish"
    )
}

/// Print the `-o json` document of a verb that failed: what it did before (as its report
/// would have said), each object refused with why, and the error.
pub fn print_failure(printer: &Printer, error: serde_json::Value, refused: Vec<serde_json::Value>) {
    printer.progress.finish();
    let told = printer.told();
    let mut json = report_json(&told.report, printer.dry_run, printer.elapsed());
    drop(told);
    json["error"] = error;
    if let Some(objects) = json["objects"].as_array_mut() {
        objects.extend(refused);
    }
    let _ = writeln!(std::io::stdout().lock(), "{json:#}");
}

/// Rows under a header in columns two spaces apart; the last column is not padded.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let last = header.len() - 1;
    let widths: Vec<usize> = (0..last)
        .map(|i| {
            std::iter::once(header)
                .chain(rows.iter().map(Vec::as_slice))
                .map(|r| r[i].len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:width$}  ");
        }
        line.push_str(&row[last]);
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
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

    use crate::deploy::health::wait::NotReady;

    fn key(name: &str) -> Key {
        Key {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("n".into()),
            name: name.into(),
        }
    }

    fn interrupted() -> ApplyReport {
        ApplyReport {
            interrupted: true,
            ..ApplyReport::default()
        }
    }

    #[test]
    fn an_interrupted_verb_says_what_it_had_done_at_the_stage_it_stopped() {
        let mut report = interrupted();
        assert_eq!(
            interrupted_note("apply", &report, false),
            "interrupted before anything was written: nothing changed on the cluster; run the \
             same command again to apply"
        );
        report.applied.push((key("a"), Outcome::Unchanged));
        assert!(interrupted_note("apply", &report, false).starts_with("interrupted before"));
        report.applied.push((key("b"), Outcome::Created));
        assert!(
            interrupted_note("apply", &report, false)
                .starts_with("interrupted: the objects above were written")
        );
        assert_eq!(
            interrupted_note("apply", &report, true),
            "interrupted: a dry run writes nothing"
        );

        let mut report = interrupted();
        assert_eq!(
            interrupted_note("delete", &report, false),
            "interrupted before anything was deleted: nothing changed on the cluster"
        );
        report.pruned.push(key("a"));
        let note = interrupted_note("delete", &report, false);
        assert!(
            note.starts_with("interrupted: the objects above were deleted;")
                && !note.contains("written"),
            "{note}"
        );
    }

    #[test]
    fn a_finished_job_is_told_how_to_run_it_again() {
        let job = Key {
            group: "kubeflow.org".into(),
            kind: "TFJob".into(),
            namespace: Some("ml".into()),
            name: "mnist".into(),
        };
        assert_eq!(
            finished_job_line(&job, "Succeeded"),
            "TFJob.kubeflow.org ml/mnist had already finished (Succeeded): its operator does not \
             run a finished job again; to run it again, delete it (`kubectl delete tfjob mnist -n \
             ml`), then apply"
        );
    }

    #[test]
    fn an_adopted_object_is_told_whose_it_was_in_words_and_counted_apart() {
        let written = Verdict::NotOurs {
            managers: vec!["kubectl-create".into()],
        };
        assert_eq!(
            adopted_line(&key("a"), &written),
            "adopted ConfigMap n/a: it existed, written by kubectl-create, and no environment \
             owned it"
        );
        let nobody = Verdict::NotOurs { managers: vec![] };
        assert_eq!(
            adopted_line(&key("a"), &nobody),
            "adopted ConfigMap n/a: it existed, and no environment owned it"
        );
        let owned = Verdict::OwnedBy {
            owner: "app/dev (ApplySet x)".into(),
        };
        assert_eq!(
            adopted_line(&key("a"), &owned),
            "adopted ConfigMap n/a: it was owned by app/dev (ApplySet x)"
        );

        let mut report = ApplyReport::default();
        report.applied.push((key("a"), Outcome::Adopted));
        report.applied.push((key("b"), Outcome::Unchanged));
        assert_eq!(
            summary_line("apply", &report, false, Duration::from_millis(1500)),
            "apply: 0 created, 1 adopted, 0 configured, 1 unchanged, 0 pruned in 1.5s"
        );
        report.applied.remove(0);
        assert_eq!(
            summary_line("apply", &report, false, Duration::from_millis(1500)),
            "apply: 0 created, 0 configured, 1 unchanged, 0 pruned in 1.5s",
            "no adopted count when nothing was adopted"
        );
        let json = report_json(&report, false, Duration::ZERO);
        assert_eq!(json["summary"]["adopted"], 0);
    }

    #[test]
    fn an_interrupted_delete_or_prune_never_says_there_was_nothing_to_do() {
        let nothing = ApplyReport::default();
        assert_eq!(
            nothing_done_note("delete", "dev", "kind-ml", &nothing).as_deref(),
            Some("environment `dev` has nothing applied on context `kind-ml`")
        );
        assert_eq!(
            nothing_done_note("prune", "dev", "", &nothing).as_deref(),
            Some("nothing to prune in environment `dev`")
        );
        let stopped = interrupted();
        for verb in ["delete", "prune"] {
            assert_eq!(
                nothing_done_note(verb, "dev", "kind-ml", &stopped),
                None,
                "{verb}"
            );
        }
        let mut deleted = ApplyReport::default();
        deleted.pruned.push(key("a"));
        assert_eq!(
            nothing_done_note("delete", "dev", "kind-ml", &deleted),
            None
        );
        assert_eq!(nothing_done_note("prune", "dev", "", &deleted), None);
    }

    #[test]
    fn an_interrupted_wait_is_not_a_timeout() {
        let mut report = interrupted();
        assert_eq!(
            not_ready_headline(&report, true),
            "interrupted during the wait: everything was applied and is ready"
        );
        report.not_ready.push(NotReady {
            key: key("a"),
            reason: "0/1 available".into(),
            pods: Vec::new(),
            failed: false,
        });
        assert_eq!(
            not_ready_headline(&report, true),
            "interrupted during the wait: everything was applied; 1 object(s) not ready yet:"
        );
        report.interrupted = false;
        assert_eq!(
            not_ready_headline(&report, true),
            "1 object(s) not ready before the timeout:"
        );
    }

    #[test]
    fn a_wait_that_ended_as_everything_left_failed_says_so_not_timeout() {
        let mut report = ApplyReport::default();
        let not_ready = |name: &str, failed: bool| NotReady {
            key: key(name),
            reason: "no keys for the request".into(),
            pods: Vec::new(),
            failed,
        };
        report.not_ready.push(not_ready("a", true));
        assert_eq!(not_ready_headline(&report, true), "1 object(s) failed:");
        report.not_ready.push(not_ready("b", false));
        assert_eq!(
            not_ready_headline(&report, true),
            "2 object(s) not ready before the timeout:"
        );
    }
}
