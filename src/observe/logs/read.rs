//! Reading logs once (no `--follow`): every chosen container's log, opened together and merged
//! by the kubelet's timestamps, so the lines of all replicas come in the order they were
//! written. Only one line per stream is held at a time.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use k8s_openapi::jiff::Timestamp;

use super::jobs::{self, Found};
use super::replicas::{self, Replica, State};
use super::source::{self, Refused, StreamOf};
use super::{LogSource, LogsError, Output, Printer, Request, split_timestamp};

type Lines = Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// Print the logs of the replicas `request` keeps, merged, and notes on those that have none.
pub async fn read(
    source: &impl LogSource,
    request: &Request,
    found: &[Found],
    out: &mut dyn Output,
) -> Result<(), LogsError> {
    let all = replicas::replicas(found);
    if all.is_empty() {
        return Err(jobs::none_has_pods(found));
    }
    for empty in found.iter().filter(|f| f.pods.is_empty()) {
        out.note(&jobs::no_pods(&empty.job, &empty.object).to_string());
    }
    let picked = replicas::pick(all, &request.replicas, found, false)?;
    replicas::check_container(&picked, &request.containers, found)?;
    let (readable, mut skipped) = readable(&picked, found, request);
    let opened = futures::future::join_all(
        readable
            .iter()
            .map(|of| source.open(of, request.first_params(&of.container))),
    )
    .await;
    let mut streams = Vec::new();
    let mut unserved = Vec::new();
    for (of, opened) in readable.into_iter().zip(opened) {
        match opened {
            Ok(log) => streams.push((of, Box::pin(source::lines(log)) as Lines)),
            Err(Refused::Gone) => skipped.push(format!("{}: pod {} is gone", of.label, of.pod)),
            Err(Refused::NotServed(words)) => {
                unserved.push(source::unserved_note(&of, words.as_deref()));
            }
            Err(Refused::NotYet(why)) => skipped.push(format!("{}: {why}", of.label)),
            Err(Refused::Failed(error)) => return Err(error),
        }
    }
    if streams.is_empty() && skipped.is_empty() && !unserved.is_empty() {
        return Err(LogsError::NotServed {
            reasons: unserved.join("; "),
        });
    }
    skipped.extend(unserved);
    if streams.is_empty() {
        return Err(LogsError::NothingToRead {
            reasons: skipped.join("; "),
            hint: nothing_to_read_hint(&picked, found, request),
        });
    }
    for note in &skipped {
        out.note(note);
    }
    merge(streams, request.timestamps, out).await
}

/// What to do when no container of `picked` has a log to read: a container that waiting will
/// not start (its image cannot be pulled) needs a change; one the scheduler or the kubelet holds
/// (no node with room, a missing Secret) starts once what holds it is fixed; else it is starting.
fn nothing_to_read_hint(picked: &[Replica], found: &[Found], request: &Request) -> &'static str {
    let targets = replicas::targets(picked, found, request);
    let blocked = || targets.iter().filter_map(|(_, c)| c.blocked.as_ref());
    if blocked().any(|b| b.lasting) {
        "waiting will not start it: fix what the message names, then apply again"
    } else if request.previous {
        "--previous reads the instance of a container before its last restart; without it, the \
         current one"
    } else if blocked().next().is_some() {
        "it starts only once what the message names is fixed (a node with room for its requests, \
         a Secret or ConfigMap it needs); -f then reads it as it starts"
    } else {
        "follow them with -f to read them once they start"
    }
}

/// The containers that have a log to read (for `--previous`: a previous instance), and why
/// each of the others has none.
fn readable(
    picked: &[Replica],
    found: &[Found],
    request: &Request,
) -> (Vec<StreamOf>, Vec<String>) {
    let mut readable = Vec::new();
    let mut skipped = Vec::new();
    for (of, container) in replicas::targets(picked, found, request) {
        match (&container.state, request.previous) {
            (_, true) if container.restarts == 0 => skipped.push(format!(
                "{}: container {} has not restarted, so it has no previous instance",
                of.label, of.container
            )),
            (State::Waiting(_), false) => skipped.push(format!(
                "{}: container {} has not started{}",
                of.label,
                of.container,
                container.waiting_for()
            )),
            _ => readable.push(of),
        }
    }
    (readable, skipped)
}

/// One stream being merged: its next line and the time it was written.
struct Head {
    time: Timestamp,
    line: String,
}

/// Print the lines of `streams` oldest first (a tie goes to the stream listed first).
async fn merge(
    streams: Vec<(StreamOf, Lines)>,
    timestamps: bool,
    out: &mut dyn Output,
) -> Result<(), LogsError> {
    let mut printer = Printer::new(timestamps);
    let mut readers = Vec::new();
    let mut heads = Vec::new();
    for (of, lines) in streams {
        printer.widen(&of.label);
        let mut reader = Reader {
            of,
            lines,
            last: Timestamp::MIN,
        };
        heads.push(reader.next().await?);
        readers.push(reader);
    }
    loop {
        let times: Vec<Option<Timestamp>> =
            heads.iter().map(|h| h.as_ref().map(|h| h.time)).collect();
        let Some(i) = earliest(&times) else {
            return Ok(());
        };
        if let Some(head) = heads[i].take()
            && !printer.print(out, &readers[i].of.label, &head.line)?
        {
            return Ok(());
        }
        heads[i] = readers[i].next().await?;
    }
}

struct Reader {
    of: StreamOf,
    lines: Lines,
    /// The time of the last line; a line without one (none should lack it) goes with it.
    last: Timestamp,
}

impl Reader {
    async fn next(&mut self) -> Result<Option<Head>, LogsError> {
        match self.lines.next().await {
            None => Ok(None),
            Some(Ok(line)) => {
                if let (Some(time), _) = split_timestamp(&line) {
                    self.last = time;
                }
                Ok(Some(Head {
                    time: self.last,
                    line,
                }))
            }
            Some(Err(source)) => Err(LogsError::Stream {
                replica: self.of.label.clone(),
                namespace: self.of.namespace.clone(),
                pod: self.of.pod.clone(),
                container: self.of.container.clone(),
                source,
            }),
        }
    }
}

/// Which stream's head to print next: the oldest; among equals, the first. `None` when every
/// stream has ended.
pub fn earliest(heads: &[Option<Timestamp>]) -> Option<usize> {
    heads
        .iter()
        .enumerate()
        .filter_map(|(i, time)| time.map(|t| (t, i)))
        .min()
        .map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_head_goes_first_and_a_tie_to_the_stream_listed_first() {
        let t = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        assert_eq!(
            earliest(&[t("2026-01-01T00:00:02Z"), t("2026-01-01T00:00:01.5Z"), None]),
            Some(1)
        );
        assert_eq!(
            earliest(&[None, t("2026-01-01T00:00:01Z"), t("2026-01-01T00:00:01Z")]),
            Some(1)
        );
        assert_eq!(earliest(&[None, None]), None);
    }
}
