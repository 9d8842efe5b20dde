//! Following logs (`--follow`): lines printed as they arrive, the jobs and their pods read again
//! every second, and a stream opened for every container that has started and is not being
//! read yet.
//!
//! [`Follow`] decides, purely, which streams to open after each listing: a container seen for
//! the first time (the user's `--since`/`--tail` apply to those of the first listing; one that
//! starts later is read from its start), a container that restarted since its stream opened
//! (the new instance from its start), and a container still running whose stream ended (cut
//! short: opened again after its last line). It ends when every job has finished (or is gone)
//! and no stream is open, or at the caller's [`Cancel`].

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::jiff::Timestamp;
use kube::api::LogParams;

use super::jobs::{self, Found, JobRef};
use super::replicas::{self, Container, State};
use super::source::{self, Refused, StreamOf};
use super::{LogSource, LogsError, Output, Printer, Request, split_timestamp};
use crate::deploy::cluster::cancel::Cancel;

/// How often the jobs and their pods are read again.
const POLL: Duration = Duration::from_secs(1);

/// A container by its pod's uid and its name.
type Key = (String, String);

/// Where a container's stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// As the user asked: `--since`, `--tail`, or everything.
    Asked,
    /// The instance's first line.
    Start,
    /// After this line (of the same instance, whose stream was cut short).
    After(Timestamp),
}

/// A stream to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub of: StreamOf,
    pub from: From,
    /// The restart count of the instance it reads.
    pub restarts: i32,
}

impl Open {
    fn key(&self) -> Key {
        (self.of.uid.clone(), self.of.container.clone())
    }

    fn params(&self, request: &Request) -> LogParams {
        let since = |time: Timestamp| {
            // The server takes whole seconds: from the start of the last line's second, and
            // the lines of that second already printed are skipped.
            Timestamp::from_second(time.as_second()).unwrap_or(time)
        };
        match self.from {
            From::Asked => request.first_params(&self.of.container),
            From::Start | From::After(_) => LogParams {
                container: Some(self.of.container.clone()),
                follow: true,
                timestamps: true,
                since_time: match self.from {
                    From::After(time) => Some(since(time)),
                    _ => None,
                },
                ..LogParams::default()
            },
        }
    }
}

/// A container whose log was (or is being) read.
#[derive(Debug, Clone)]
struct Seen {
    restarts: i32,
    open: bool,
    from: From,
    /// The time of the last line printed.
    last: Option<Timestamp>,
    label: String,
    /// Its node serves no log of it: it is not asked again.
    unserved: bool,
}

/// The decisions of a follow: which streams to open, and when it is done.
#[derive(Debug, Default)]
pub struct Follow {
    seen: BTreeMap<Key, Seen>,
    /// The reason each container not started yet was last reported with.
    waiting: BTreeMap<Key, String>,
    listed: bool,
}

impl Follow {
    /// The streams to open for the containers as listed now, and notes on those that wait to
    /// start (each reason once).
    pub fn round(&mut self, containers: &[(StreamOf, Container)]) -> (Vec<Open>, Vec<String>) {
        let mut opens = Vec::new();
        let mut notes = Vec::new();
        let first = !self.listed;
        self.listed = true;
        for (of, container) in containers {
            let key = (of.uid.clone(), of.container.clone());
            if let State::Waiting(_) = &container.state {
                let why = container.waiting_for();
                if self.waiting.get(&key) != Some(&why) {
                    notes.push(format!(
                        "{}: waiting for container {} to start{why}",
                        of.label, of.container
                    ));
                    self.waiting.insert(key, why);
                }
                continue;
            }
            self.waiting.remove(&key);
            let from = match self.seen.get(&key) {
                None if first => From::Asked,
                None => From::Start,
                Some(seen) if seen.open || seen.unserved => continue,
                Some(seen) if container.restarts > seen.restarts => From::Start,
                Some(seen) if container.state == State::Running => match seen.last {
                    Some(last) => From::After(last),
                    None => seen.from,
                },
                Some(_) => continue,
            };
            opens.push(Open {
                of: of.clone(),
                from,
                restarts: container.restarts,
            });
        }
        (opens, notes)
    }

    /// A stream was opened.
    pub fn opened(&mut self, open: &Open) {
        let before = self.seen.get(&open.key());
        let last = before
            .filter(|seen| seen.restarts == open.restarts)
            .and_then(|seen| seen.last);
        self.seen.insert(
            open.key(),
            Seen {
                restarts: open.restarts,
                open: true,
                from: open.from,
                last,
                label: open.of.label.clone(),
                unserved: false,
            },
        );
    }

    /// A line of the stream of `key` was printed.
    fn printed(&mut self, key: &Key, time: Option<Timestamp>) {
        if let Some(seen) = self.seen.get_mut(key) {
            seen.last = time.or(seen.last);
        }
    }

    /// The stream of `key` ended.
    pub fn ended(&mut self, key: &Key) {
        if let Some(seen) = self.seen.get_mut(key) {
            seen.open = false;
        }
    }

    /// The node of `key`'s pod served no log of it: it is not opened again.
    pub fn unserved(&mut self, key: &Key) {
        if let Some(seen) = self.seen.get_mut(key) {
            seen.open = false;
            seen.unserved = true;
        }
    }

    /// The labels of the streams open now.
    pub fn open_labels(&self) -> Vec<&str> {
        self.seen
            .values()
            .filter(|s| s.open)
            .map(|s| s.label.as_str())
            .collect()
    }
}

/// What a stream tells the follow loop.
enum Event {
    Line {
        key: Key,
        label: String,
        line: String,
    },
    End {
        key: Key,
        /// Why, when it is worth a note.
        why: Option<String>,
    },
    /// The node served no log: said once, not asked again.
    Unserved {
        key: Key,
        why: String,
    },
    Failed(LogsError),
}

/// Follow the logs of `found` until every job has finished and every stream has ended, or
/// `cancel` comes; the jobs and pods as last read.
pub async fn follow(
    source: &impl LogSource,
    request: &Request,
    found: &[Found],
    out: &mut dyn Output,
    cancel: &Cancel,
) -> Result<Vec<Found>, LogsError> {
    follow_every(source, request, found, out, cancel, POLL).await
}

/// [`follow`], listing the jobs and pods again every `poll`.
pub async fn follow_every(
    source: &impl LogSource,
    request: &Request,
    found: &[Found],
    out: &mut dyn Output,
    cancel: &Cancel,
    poll: Duration,
) -> Result<Vec<Found>, LogsError> {
    check(request, found)?;
    for empty in found.iter().filter(|f| f.pods.is_empty()) {
        let why = jobs::no_pods(&empty.job, &empty.object).to_string();
        let first_line = why.lines().next().unwrap_or_default();
        out.note(&format!("{first_line}; waiting for them"));
    }
    let jobs: Vec<JobRef> = found.iter().map(|f| f.job.clone()).collect();
    let mut found = found.to_vec();
    let mut state = Follow::default();
    let mut streams: SelectAll<BoxStream<'_, Event>> = SelectAll::new();
    let mut printer = Printer::new(request.timestamps);
    // Rounds since every job finished: streams still open a round later are told about once.
    let mut finished_rounds = 0;
    let mut ticker = tokio::time::interval(poll);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        let containers = replicas::targets(&replicas::replicas(&found), &found, request);
        stuck(&containers)?;
        let (opens, notes) = state.round(&containers);
        for note in notes {
            out.note(&note);
        }
        for open in opens {
            state.opened(&open);
            printer.widen(&open.of.label);
            streams.push(events(source, open.clone(), open.params(request)));
        }
        if found.iter().all(|f| jobs::finished(&f.object)) {
            finished_rounds += 1;
        }
        let open = state.open_labels();
        match (finished_rounds, open.is_empty()) {
            (1.., true) => return Ok(found),
            (2, false) => out.note(&still_following(&found, &open)),
            _ => {}
        }
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Ok(found),
                _ = ticker.tick() => break,
                Some(event) = streams.next(), if !streams.is_empty() => {
                    if !handle(event, &mut state, &mut printer, out)? {
                        return Ok(found);
                    }
                }
            }
        }
        found = refresh(source, &jobs, &found, out).await?;
    }
}

/// Before following: jobs that finished without pods have nothing to follow, and a replica or
/// container asked for must exist (or, for a replica, be planned by its job's spec).
fn check(request: &Request, found: &[Found]) -> Result<(), LogsError> {
    let all = replicas::replicas(found);
    if all.is_empty() && found.iter().all(|f| jobs::finished(&f.object)) {
        return Err(jobs::none_has_pods(found));
    }
    let picked = replicas::pick(all, &request.replicas, found, true)?;
    replicas::check_container(&picked, &request.containers, found)
}

/// A container that waiting will not start (its image cannot be pulled) ends the follow: the
/// job cannot get past it, and a follow that waits would wait forever.
fn stuck(containers: &[(StreamOf, Container)]) -> Result<(), LogsError> {
    let reasons: Vec<String> = containers
        .iter()
        .filter(|(_, c)| !c.state.started())
        .filter_map(|(of, c)| {
            let blocked = c.blocked.as_ref().filter(|b| b.lasting)?;
            Some(format!(
                "{}: container {} cannot start: {}",
                of.label, of.container, blocked.text
            ))
        })
        .collect();
    if reasons.is_empty() {
        return Ok(());
    }
    Err(LogsError::Stuck {
        reasons: reasons.join("\n  "),
    })
}

/// Why a follow goes on after its jobs finished: containers that still run (a parameter server
/// under `cleanPodPolicy: None`).
fn still_following(found: &[Found], open: &[&str]) -> String {
    format!(
        "{} finished; still following {} until {} (Ctrl-C to stop)",
        replicas::describe(found),
        open.join(", "),
        if open.len() == 1 {
            "its container ends"
        } else {
            "their containers end"
        }
    )
}

/// Print a line, or note a stream's end; `false` when the reader went away.
fn handle(
    event: Event,
    state: &mut Follow,
    printer: &mut Printer,
    out: &mut dyn Output,
) -> Result<bool, LogsError> {
    match event {
        Event::Line { key, label, line } => {
            state.printed(&key, split_timestamp(&line).0);
            printer.print(out, &label, &line)
        }
        Event::End { key, why } => {
            if let Some(why) = why {
                out.note(&why);
            }
            state.ended(&key);
            Ok(true)
        }
        Event::Unserved { key, why } => {
            out.note(&why);
            state.unserved(&key);
            Ok(true)
        }
        Event::Failed(error) => Err(error),
    }
}

/// The jobs and their pods as they are now; a job that is gone is told once and dropped.
async fn refresh(
    source: &impl LogSource,
    jobs: &[JobRef],
    before: &[Found],
    out: &mut dyn Output,
) -> Result<Vec<Found>, LogsError> {
    let mut found = Vec::new();
    for job in jobs.iter().filter(|j| before.iter().any(|f| f.job == **j)) {
        match source.job(job).await? {
            Some(object) => {
                let pods = source.pods(job).await?;
                found.push(Found {
                    job: job.clone(),
                    object,
                    pods,
                });
            }
            None => out.note(&format!("{job} was deleted")),
        }
    }
    Ok(found)
}

/// The events of one container's stream: its lines (those after `After` only), then its end.
fn events<'a>(source: &'a impl LogSource, open: Open, params: LogParams) -> BoxStream<'a, Event> {
    let key = open.key();
    let skip_until = match open.from {
        From::After(time) => Some(time),
        _ => None,
    };
    let of = open.of;
    let opening = {
        let of = of.clone();
        async move { source.open(&of, params).await }
    };
    futures::stream::once(opening)
        .flat_map(move |opened| -> BoxStream<'a, Event> {
            let end = Event::End {
                key: key.clone(),
                why: None,
            };
            match opened {
                Ok(log) => lines(log, key.clone(), of.clone(), skip_until)
                    .chain(futures::stream::once(async { end }))
                    .boxed(),
                // The pod went away, or the container stopped before the stream began: the
                // next listing decides what follows.
                Err(Refused::Gone | Refused::NotYet(_)) => {
                    futures::stream::once(async { end }).boxed()
                }
                Err(Refused::NotServed(words)) => {
                    let why = source::unserved_note(&of, words.as_deref());
                    let key = key.clone();
                    futures::stream::once(async { Event::Unserved { key, why } }).boxed()
                }
                Err(Refused::Failed(error)) => {
                    futures::stream::once(async { Event::Failed(error) }).boxed()
                }
            }
        })
        .boxed()
}

/// A stream's lines as events; a read error ends it with a note.
fn lines<'a>(
    log: source::LogStream,
    key: Key,
    of: StreamOf,
    skip_until: Option<Timestamp>,
) -> BoxStream<'a, Event> {
    source::lines(log)
        .scan(false, move |broken, line| {
            let event = match line {
                _ if *broken => None,
                Ok(line) => Some(Event::Line {
                    key: key.clone(),
                    label: of.label.clone(),
                    line,
                }),
                Err(error) => {
                    *broken = true;
                    Some(Event::End {
                        key: key.clone(),
                        why: Some(format!("{}: the stream broke off ({error})", of.label)),
                    })
                }
            };
            std::future::ready(event)
        })
        .filter(move |event| {
            let keep = match (event, skip_until) {
                (Event::Line { line, .. }, Some(until)) => {
                    split_timestamp(line).0.is_none_or(|time| time > until)
                }
                _ => true,
            };
            std::future::ready(keep)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pod: &str) -> StreamOf {
        StreamOf {
            namespace: "ml".into(),
            pod: pod.into(),
            uid: format!("uid-{pod}"),
            node: "node-1".into(),
            container: "tensorflow".into(),
            label: pod.into(),
        }
    }

    fn container(state: State, restarts: i32) -> Container {
        Container {
            blocked: None,
            ended: None,
            name: "tensorflow".into(),
            init: false,
            state,
            restarts,
        }
    }

    /// The pods and `from` of the streams a round opens, each marked opened.
    fn round(follow: &mut Follow, listed: &[(StreamOf, Container)]) -> Vec<(String, From)> {
        let (opens, _) = follow.round(listed);
        for open in &opens {
            follow.opened(open);
        }
        opens.into_iter().map(|o| (o.of.pod, o.from)).collect()
    }

    #[test]
    fn each_instance_of_a_container_is_opened_once_and_again_only_when_cut_short() {
        let mut follow = Follow::default();
        let a = of("a");
        let key = (a.uid.clone(), a.container.clone());
        let running = |restarts| vec![(a.clone(), container(State::Running, restarts))];
        assert_eq!(round(&mut follow, &running(0)), [("a".into(), From::Asked)]);
        assert_eq!(round(&mut follow, &running(0)), [], "open already");
        let time: Timestamp = "2026-01-01T00:00:02Z".parse().unwrap();
        follow.printed(&key, Some(time));
        follow.ended(&key);
        assert_eq!(
            round(&mut follow, &running(0)),
            [("a".into(), From::After(time))],
            "still running: cut short"
        );
        follow.ended(&key);
        assert_eq!(
            round(&mut follow, &running(1)),
            [("a".into(), From::Start)],
            "restarted: the new instance from its start"
        );
        follow.ended(&key);
        let done = vec![(a.clone(), container(State::Terminated, 1))];
        assert_eq!(round(&mut follow, &done), [], "ended with its container");
        assert!(follow.open_labels().is_empty());
    }

    #[test]
    fn a_container_that_starts_later_is_read_from_its_start_and_its_wait_told_once() {
        let mut follow = Follow::default();
        let b = of("b");
        let waiting = vec![(
            b.clone(),
            container(State::Waiting("ContainerCreating".into()), 0),
        )];
        let (opens, notes) = follow.round(&waiting);
        assert!(opens.is_empty());
        assert_eq!(
            notes,
            ["b: waiting for container tensorflow to start (ContainerCreating)"]
        );
        assert_eq!(follow.round(&waiting).1, Vec::<String>::new());
        let running = vec![(b.clone(), container(State::Running, 0))];
        assert_eq!(round(&mut follow, &running), [("b".into(), From::Start)]);
        assert_eq!(follow.open_labels(), ["b"]);
    }

    #[test]
    fn a_stream_opened_after_a_line_asks_from_that_second() {
        let request = Request {
            tail: Some(5),
            ..Request::default()
        };
        let open = |from| Open {
            of: of("a"),
            from,
            restarts: 0,
        };
        let asked = open(From::Asked).params(&request);
        assert_eq!((asked.tail_lines, asked.since_time), (Some(5), None));
        let time: Timestamp = "2026-01-01T00:00:02.7Z".parse().unwrap();
        let after = open(From::After(time)).params(&request);
        assert_eq!(after.tail_lines, None);
        assert_eq!(
            after.since_time.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:00:02Z")
        );
        assert!(after.follow && after.timestamps);
    }
}
