//! The progress of an apply's wait for health, on stderr: how long it has waited, how many
//! objects are ready, and what holds up those that are not.
//!
//! On a terminal the progress is redrawn in place; otherwise a line is printed whenever
//! something changed, and every few seconds while nothing does, so a log shows the wait is
//! alive.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use crate::deploy::wait::{Health, Watched};

/// How often waiting prints a line without a terminal when nothing changed.
const QUIET_LINE_EVERY: Duration = Duration::from_secs(5);

/// Where the wait's progress goes: redrawn on a terminal, a line at a time otherwise.
pub struct WaitProgress {
    /// A terminal: the wait redraws one line; otherwise it prints a line when something
    /// changed and every few seconds.
    terminal: bool,
    lines: Lines,
}

impl WaitProgress {
    /// Progress on stderr, redrawn when it is a terminal.
    pub fn stderr() -> WaitProgress {
        WaitProgress {
            terminal: std::io::stderr().is_terminal(),
            lines: Lines::default(),
        }
    }

    /// Show where every object stands after `elapsed` of waiting.
    pub fn update(&self, elapsed: Duration, objects: &[Watched]) {
        let line = wait_line(elapsed, objects);
        let done = objects.iter().all(|w| w.health == Health::Ready);
        let mut stderr = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(stderr, "\r\x1b[2K{line}");
            if done {
                let _ = writeln!(stderr);
            }
            let _ = stderr.flush();
            return;
        }
        if self.lines.due(elapsed, objects) {
            let _ = writeln!(stderr, "{line}");
        }
    }
}

/// Without a terminal: the state of the last line printed, and when it was printed.
#[derive(Default)]
struct Lines {
    last: Mutex<Option<(String, Duration)>>,
}

impl Lines {
    /// Whether a line is due: when the state changed, and every few seconds while it does not.
    fn due(&self, elapsed: Duration, objects: &[Watched]) -> bool {
        let state = state_of(objects);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = match &*last {
            Some((previous, at)) => *previous != state || elapsed >= *at + QUIET_LINE_EVERY,
            None => true,
        };
        if due {
            *last = Some((state, elapsed));
        }
        due
    }
}

/// Each object's state and blockers, to tell whether anything changed since the last line.
fn state_of(objects: &[Watched]) -> String {
    objects
        .iter()
        .map(|w| format!("{} {:?} {:?}", w.key, w.health, w.blockers))
        .collect()
}

/// `waiting 12s: 6 of 7 ready; Deployment.apps ml/resnet (0/1 available, 0 updated): pod
/// resnet-x: not scheduled: Unschedulable 0/2 nodes are available: ...`
pub fn wait_line(elapsed: Duration, objects: &[Watched]) -> String {
    let ready = objects.iter().filter(|w| w.health == Health::Ready).count();
    let mut line = format!(
        "waiting {}s: {ready} of {} ready",
        elapsed.as_secs(),
        objects.len()
    );
    if let Some(first) = objects.iter().find(|w| w.health != Health::Ready) {
        let why = match &first.health {
            Health::Progressing(why) => why.clone(),
            Health::Failed(why) => format!("failed: {why}"),
            Health::Ready => String::new(),
        };
        let _ = write!(line, "; {} ({why})", first.key);
        if let Some(blocker) = first.blockers.first() {
            let _ = write!(line, ": {blocker}");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::key::Key;

    /// Deployment `ml/<name>` in the given state, held up by `blockers`.
    fn deployment(name: &str, health: Health, blockers: &[&str]) -> Watched {
        Watched {
            key: Key {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: Some("ml".into()),
                name: name.into(),
            },
            health,
            blockers: blockers.iter().map(|b| (*b).to_owned()).collect(),
        }
    }

    fn seconds(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_line_names_the_first_object_not_ready_and_its_first_blocker() {
        let objects = [
            deployment("web", Health::Ready, &[]),
            deployment(
                "resnet",
                Health::Progressing("0/1 available, 0 updated".into()),
                &[
                    "pod resnet-x: not scheduled: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu",
                    "pod resnet-y: not scheduled",
                ],
            ),
        ];
        assert_eq!(
            wait_line(seconds(12), &objects),
            "waiting 12s: 1 of 2 ready; Deployment.apps ml/resnet (0/1 available, 0 updated): \
             pod resnet-x: not scheduled: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu"
        );
        let failed = [deployment(
            "job",
            Health::Failed("BackoffLimitExceeded".into()),
            &[],
        )];
        assert_eq!(
            wait_line(seconds(3), &failed),
            "waiting 3s: 0 of 1 ready; Deployment.apps ml/job (failed: BackoffLimitExceeded)"
        );
    }

    #[test]
    fn without_a_terminal_a_line_is_due_on_each_change_and_every_five_seconds() {
        let lines = Lines::default();
        let progressing = [deployment(
            "web",
            Health::Progressing("0/1 available".into()),
            &[],
        )];
        let blocked = [deployment(
            "web",
            Health::Progressing("0/1 available".into()),
            &["pod web-x: ImagePullBackOff"],
        )];
        assert!(lines.due(seconds(0), &progressing), "the first poll");
        assert!(!lines.due(seconds(1), &progressing), "nothing changed");
        assert!(lines.due(seconds(2), &blocked), "a blocker appeared");
        assert!(!lines.due(seconds(6), &blocked), "4 s after the last line");
        assert!(lines.due(seconds(7), &blocked), "5 s after the last line");
        assert!(!lines.due(seconds(8), &blocked));
    }
}
