//! The progress of an apply's wait for health, on stderr: how long it has waited, how many
//! objects are ready, and what holds up those that are not.
//!
//! On a terminal the progress is redrawn in place with `indicatif`: a spinner with the elapsed
//! time and the count, and under it a line per object that is not ready, with its state and
//! what holds it up. Otherwise a line is printed whenever something changed, and every few
//! seconds while nothing does, so a log shows the wait is alive.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::deploy::cluster::key::Key;
use crate::deploy::health::wait::{Health, Watched};

use super::color;

/// How often waiting prints a line without a terminal when nothing changed.
const QUIET_LINE_EVERY: Duration = Duration::from_secs(5);

/// How often the spinner turns on a terminal.
const SPINNER_TICK: Duration = Duration::from_millis(120);

/// Where the wait's progress goes: redrawn on a terminal, a line at a time otherwise.
pub struct WaitProgress(Shown);

enum Shown {
    Bars(Bars),
    Lines(Lines),
}

impl WaitProgress {
    /// Progress on stderr: redrawn when it is a terminal, coloured as `--color` says.
    pub fn stderr() -> WaitProgress {
        WaitProgress(if std::io::stderr().is_terminal() {
            Shown::Bars(Bars::new(
                ProgressDrawTarget::stderr(),
                color::stderr(),
                Some(SPINNER_TICK),
            ))
        } else {
            Shown::Lines(Lines::default())
        })
    }

    /// Show where every object stands after `elapsed` of waiting.
    pub fn update(&self, elapsed: Duration, objects: &[Watched]) {
        match &self.0 {
            Shown::Bars(bars) => bars.update(elapsed, objects),
            Shown::Lines(lines) => {
                if lines.due(elapsed, objects) {
                    let _ = writeln!(std::io::stderr().lock(), "{}", wait_line(elapsed, objects));
                }
            }
        }
    }

    /// The wait is over (timed out or interrupted): stop redrawing before the report prints.
    pub fn finish(&self) {
        if let Shown::Bars(bars) = &self.0 {
            bars.finish();
        }
    }
}

/// On a terminal: a spinner line with the elapsed time and how many objects are ready, and a
/// line under it for each object that is not ready yet.
struct Bars {
    multi: MultiProgress,
    color: bool,
    tick: Option<Duration>,
    drawn: Mutex<Drawn>,
}

/// The lines on screen.
#[derive(Default)]
struct Drawn {
    header: Option<ProgressBar>,
    objects: BTreeMap<Key, ProgressBar>,
}

impl Bars {
    /// Bars drawn on `target`; the spinner turns every `tick` (`None`: only when redrawn).
    fn new(target: ProgressDrawTarget, color: bool, tick: Option<Duration>) -> Bars {
        Bars {
            multi: MultiProgress::with_draw_target(target),
            color,
            tick,
            drawn: Mutex::default(),
        }
    }

    fn update(&self, elapsed: Duration, objects: &[Watched]) {
        let mut drawn = self.drawn.lock().unwrap_or_else(|e| e.into_inner());
        let header = drawn.header.get_or_insert_with(|| {
            let template = if self.color {
                "{spinner:.cyan} {wide_msg}"
            } else {
                "{spinner} {wide_msg}"
            };
            let bar = self
                .multi
                .add(ProgressBar::new_spinner().with_style(style(template)));
            if let Some(tick) = self.tick {
                bar.enable_steady_tick(tick);
            }
            bar
        });
        header.set_message(count_line(elapsed, objects));
        for watched in objects {
            if watched.health == Health::Ready {
                if let Some(bar) = drawn.objects.remove(&watched.key) {
                    self.erase(&bar);
                }
                continue;
            }
            let bar = drawn.objects.entry(watched.key.clone()).or_insert_with(|| {
                self.multi
                    .add(ProgressBar::new_spinner().with_style(style("  {wide_msg}")))
            });
            bar.set_message(describe(watched, self.color));
        }
        if objects.iter().all(|w| w.health == Health::Ready) {
            drop(drawn);
            self.finish();
        }
    }

    /// Stop the spinner and leave its last line; the report lists what is still not ready.
    fn finish(&self) {
        let mut drawn = self.drawn.lock().unwrap_or_else(|e| e.into_inner());
        for (_, bar) in std::mem::take(&mut drawn.objects) {
            self.erase(&bar);
        }
        if let Some(header) = drawn.header.take() {
            header.finish();
        }
    }

    /// Take an object's line off the screen.
    fn erase(&self, bar: &ProgressBar) {
        bar.finish_and_clear();
        self.multi.remove(bar);
    }
}

fn style(template: &str) -> ProgressStyle {
    // The templates are constants of this module; a broken one falls back to the message.
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner())
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

/// `waiting 12s: 6 of 7 ready`
fn count_line(elapsed: Duration, objects: &[Watched]) -> String {
    let ready = objects.iter().filter(|w| w.health == Health::Ready).count();
    format!(
        "waiting {}s: {ready} of {} ready",
        elapsed.as_secs(),
        objects.len()
    )
}

/// `Deployment.apps ml/resnet (0/1 available, 0 updated): pod resnet-x: not scheduled: ...`:
/// an object, its state and the first thing that holds it up. `failed` is red when `color`.
fn describe(watched: &Watched, color: bool) -> String {
    let why = match &watched.health {
        Health::Progressing(why) => why.clone(),
        Health::Failed(why) => format!("{}: {why}", color::red("failed", color)),
        Health::Ready => "ready".to_owned(),
    };
    let mut line = format!("{} ({why})", watched.key);
    if let Some(blocker) = watched.blockers.first() {
        let _ = write!(line, ": {blocker}");
    }
    line
}

/// `waiting 12s: 6 of 7 ready; Deployment.apps ml/resnet (0/1 available, 0 updated): pod
/// resnet-x: not scheduled: Unschedulable 0/2 nodes are available: ...`
pub fn wait_line(elapsed: Duration, objects: &[Watched]) -> String {
    let mut line = count_line(elapsed, objects);
    if let Some(first) = objects.iter().find(|w| w.health != Health::Ready) {
        let _ = write!(line, "; {}", describe(first, false));
    }
    line
}

#[cfg(test)]
mod tests {
    use indicatif::InMemoryTerm;

    use super::*;

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

    /// Bars on an in-memory terminal 200 columns wide, without colour; the spinner turns only
    /// when something is redrawn, so the screen depends on the updates alone.
    fn bars_on(term: &InMemoryTerm) -> Bars {
        Bars::new(
            ProgressDrawTarget::term_like(Box::new(term.clone())),
            false,
            None,
        )
    }

    fn screen(term: &InMemoryTerm) -> Vec<String> {
        term.contents().lines().map(str::to_owned).collect()
    }

    #[test]
    fn on_a_terminal_each_object_not_ready_has_a_line_under_the_count_until_it_is_ready() {
        let term = InMemoryTerm::new(10, 200);
        let bars = bars_on(&term);
        let web = deployment("web", Health::Ready, &[]);
        let resnet = deployment(
            "resnet",
            Health::Progressing("0/1 available, 0 updated".into()),
            &[
                "pod resnet-x: not scheduled: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu",
            ],
        );
        let hub = |health| deployment("hub", health, &[]);
        let progressing = || Health::Progressing("0/1 available".into());

        bars.update(
            seconds(12),
            &[web.clone(), resnet.clone(), hub(progressing())],
        );
        let lines = screen(&term);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].ends_with(" waiting 12s: 1 of 3 ready"),
            "{lines:#?}"
        );
        assert_eq!(
            lines[1],
            "  Deployment.apps ml/resnet (0/1 available, 0 updated): pod resnet-x: not \
             scheduled: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu"
        );
        assert_eq!(lines[2], "  Deployment.apps ml/hub (0/1 available)");

        bars.update(seconds(14), &[web.clone(), resnet, hub(Health::Ready)]);
        let lines = screen(&term);
        assert_eq!(lines.len(), 2, "hub's line went: {lines:#?}");
        assert!(
            lines[0].ends_with(" waiting 14s: 2 of 3 ready"),
            "{lines:#?}"
        );
        assert!(
            lines[1].starts_with("  Deployment.apps ml/resnet "),
            "{lines:#?}"
        );

        let all_ready = [
            web,
            deployment("resnet", Health::Ready, &[]),
            hub(Health::Ready),
        ];
        bars.update(seconds(15), &all_ready);
        let lines = screen(&term);
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].ends_with(" waiting 15s: 3 of 3 ready"),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_wait_that_ends_with_objects_not_ready_leaves_only_the_count() {
        let term = InMemoryTerm::new(10, 200);
        let bars = bars_on(&term);
        let failed = [deployment(
            "job",
            Health::Failed("BackoffLimitExceeded".into()),
            &[],
        )];
        bars.update(seconds(300), &failed);
        assert_eq!(
            screen(&term)[1],
            "  Deployment.apps ml/job (failed: BackoffLimitExceeded)"
        );
        bars.finish();
        let lines = screen(&term);
        assert_eq!(
            lines.len(),
            1,
            "the report lists what is not ready: {lines:#?}"
        );
        assert!(
            lines[0].ends_with(" waiting 300s: 0 of 1 ready"),
            "{lines:#?}"
        );
    }

    #[test]
    fn failed_is_red_only_in_colour() {
        let failed = deployment("job", Health::Failed("BackoffLimitExceeded".into()), &[]);
        assert_eq!(
            describe(&failed, true),
            "Deployment.apps ml/job (\x1b[1;31mfailed\x1b[0m: BackoffLimitExceeded)"
        );
        assert_eq!(
            describe(&failed, false),
            "Deployment.apps ml/job (failed: BackoffLimitExceeded)"
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
