//! Kubernetes events (`events.k8s.io/v1`) about the objects a controller runs (a training job,
//! a Framework, a VolumeManager), recorded in the background.
//!
//! # Expected flow
//! A reconcile calls [`Events::publish`], which queues the event and returns at once; a writer
//! task creates the Event objects, a few at a time. An event that repeats one recorded for the
//! same object (by UID) with the same type, reason, action and note within [`SERIES_WINDOW`] is
//! not created again: the first one's `series` is patched with the new count and time, so
//! `kubectl describe` shows one line with a count, as for client-go's recorders.
//!
//! An event that reports a state rather than an act ([`Events::publish_state`]: a pod the
//! scheduler cannot place) comes with the occurrence of the state it reports. Every reconcile
//! sees the state again, and writes nothing: only another occurrence (the pod created again)
//! counts into the series.
//!
//! # Guarantees
//! - Memory is bounded: at most [`QUEUE`] events wait, and the series cache keeps at most
//!   `SeriesCache::CAPACITY` entries of a few dozen bytes each. kube-runtime's `Recorder`
//!   keeps every event it published for 6 minutes, in full, and scans them all on every
//!   publish (at 1,000 jobs, 7 MB of a 69 MB peak heap, and growing with the event rate). Its
//!   key also holds the object's `resourceVersion`, which every status write changes, so its
//!   series rarely formed.
//! - A reconcile never waits for an event and never fails because of one.
//! - Occurrences of one series are written one after the other, so a burst of the same event
//!   makes one Event with a count, never two Events.
//!
//! # Caveats
//! Events are best-effort, as everywhere in Kubernetes: when the queue is full (the API server
//! is far behind) new events are dropped and counted in `mlkube_operator_events_dropped_total`,
//! and a failed write is logged at debug level and not retried. A state seen for longer than
//! the API server keeps events (an hour by default) is not written again while it lasts.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::lock;
use super::metrics::Metrics;
use super::writes::is_gone;
use crate::error_text::OneLine;

/// Events waiting to be written, at most; more are dropped, as client-go's event broadcaster
/// drops them when its queue of 1,000 is full.
pub const QUEUE: usize = 1000;
/// Events being written at once.
const WRITERS: usize = 8;
/// A repeat within this long after the last occurrence extends the series.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// `note` is limited to 1 kB by the API server's validation.
const NOTE_LIMIT: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One event, as a reconcile reports it.
struct Pending {
    type_: EventType,
    reason: String,
    note: String,
    action: String,
    regarding: ObjectReference,
    /// For a state: which occurrence of it this is (a hash).
    occurrence: Option<u64>,
}

impl Pending {
    /// What makes two events the same occurrence: the object by UID (not by resourceVersion, which
    /// changes on every status write), type, reason, action and note.
    fn series_key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        (
            &self.regarding.namespace,
            &self.regarding.uid,
            self.type_,
            &self.reason,
            &self.action,
            &self.note,
        )
            .hash(&mut hasher);
        hasher.finish()
    }
}

/// The handle reconciles publish through; cheap to share.
pub struct Events {
    queue: tokio::sync::mpsc::Sender<Pending>,
    metrics: Arc<Metrics>,
}

impl Events {
    /// Start the writer task (it ends once the last handle is dropped). Events are reported by
    /// `controller`, upstream's name for the framework's controller (`tfjob-controller`);
    /// `instance` names this replica in `reportingInstance`, e.g. the pod name.
    pub fn start(
        client: Client,
        controller: &'static str,
        instance: Option<String>,
        metrics: Arc<Metrics>,
    ) -> Events {
        let (queue, pending) = tokio::sync::mpsc::channel(QUEUE);
        let writer = Writer {
            client,
            controller,
            instance: instance.unwrap_or_else(|| controller.to_owned()),
            series: Mutex::new(SeriesCache::default()),
            turns: Mutex::new(HashMap::new()),
        };
        tokio::spawn(writer.run(pending));
        Events { queue, metrics }
    }

    /// Queue an event about `job`; see the module's caveats.
    pub fn publish<J: kube::Resource<DynamicType = ()>>(
        &self,
        job: &J,
        type_: EventType,
        reason: String,
        note: String,
        action: &str,
    ) {
        self.queue(job, type_, reason, note, action, None);
    }

    /// Queue an event about a state `job` is in, of which this is `occurrence`: written only
    /// if that occurrence was not recorded yet.
    pub fn publish_state<J: kube::Resource<DynamicType = ()>>(
        &self,
        job: &J,
        type_: EventType,
        reason: String,
        note: String,
        action: &str,
        occurrence: &str,
    ) {
        let mut hasher = DefaultHasher::new();
        occurrence.hash(&mut hasher);
        self.queue(job, type_, reason, note, action, Some(hasher.finish()));
    }

    fn queue<J: kube::Resource<DynamicType = ()>>(
        &self,
        job: &J,
        type_: EventType,
        reason: String,
        mut note: String,
        action: &str,
        occurrence: Option<u64>,
    ) {
        if note.len() > NOTE_LIMIT {
            let mut cut = NOTE_LIMIT;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let pending = Pending {
            type_,
            reason,
            note,
            action: action.to_owned(),
            regarding: job.object_ref(&()),
            occurrence,
        };
        if let Err(e) = self.queue.try_send(pending) {
            self.metrics.object("mlkube_operator_events_dropped");
            tracing::debug!(error = %e, "event not recorded: too many waiting");
        }
    }
}

struct Writer {
    client: Client,
    controller: &'static str,
    instance: String,
    series: Mutex<SeriesCache>,
    /// One turn per series key being written: a repeat waits until the first occurrence's
    /// Event exists, then counts into it. Holds only the keys being written.
    turns: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<()>>>>,
}

impl Writer {
    async fn run(self, pending: tokio::sync::mpsc::Receiver<Pending>) {
        let pending = futures::stream::unfold(pending, |mut pending| async move {
            pending.recv().await.map(|event| (event, pending))
        });
        let writer = &self;
        pending
            .for_each_concurrent(WRITERS, |event| async move {
                if let Err(e) = writer.write(&event).await {
                    tracing::warn!(error = %OneLine(&e), reason = %event.reason, "cannot record event");
                }
            })
            .await;
    }

    /// Write one event, after any other occurrence of its series being written: two writers
    /// creating the same event at once would make two Events instead of one with a count.
    async fn write(&self, event: &Pending) -> Result<(), kube::Error> {
        let key = event.series_key();
        let turn = lock(&self.turns).entry(key).or_default().clone();
        let result = {
            let _mine = turn.lock().await;
            self.write_in_turn(event, key).await
        };
        let mut turns = lock(&self.turns);
        // Only this writer and the map hold it: nobody waits, so the key goes.
        if Arc::strong_count(&turn) == 2 {
            turns.remove(&key);
        }
        result
    }

    async fn write_in_turn(&self, event: &Pending, key: u64) -> Result<(), kube::Error> {
        let namespace = event.regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let repeat = lock(&self.series).repeat(key, Instant::now(), event.occurrence);
        if let Some(Repeat { name, count }) = repeat {
            if count == 0 {
                return Ok(());
            }
            let series = EventSeries {
                count,
                last_observed_time: MicroTime(Timestamp::now()),
            };
            let patch = serde_json::json!({ "series": series });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                // The API server let it expire: start a new series below.
                Err(e) if is_gone(&e) => lock(&self.series).forget(key),
                Err(e) => return Err(e),
            }
        }
        let created = api
            .create(&PostParams::default(), &self.event(event))
            .await?;
        lock(&self.series).remember(key, created.name_any(), Instant::now(), event.occurrence);
        Ok(())
    }

    fn event(&self, event: &Pending) -> Event {
        let now = Timestamp::now();
        let regarding = event.regarding.name.as_deref().unwrap_or("tfjob");
        Event {
            metadata: ObjectMeta {
                // Unique per occurrence, as client-go names events.
                name: Some(format!("{regarding}.{:x}", now.as_nanosecond())),
                namespace: event.regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(event.type_.as_str().to_owned()),
            reason: Some(event.reason.clone()),
            note: Some(event.note.clone()),
            action: Some(event.action.clone()),
            regarding: Some(event.regarding.clone()),
            reporting_controller: Some(self.controller.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }
}

/// An event to patch rather than create: its name and the series count to write; a count of
/// 0 when the occurrence was recorded already, and nothing is to be written.
#[derive(Debug, PartialEq, Eq)]
struct Repeat {
    name: String,
    count: i32,
}

/// The events recorded lately, by series key: enough to turn a repeat into a series patch.
#[derive(Default)]
struct SeriesCache {
    entries: HashMap<u64, Entry>,
}

struct Entry {
    name: String,
    count: i32,
    last: Instant,
    /// The last occurrence counted, for a state's series.
    occurrence: Option<u64>,
}

impl SeriesCache {
    /// Series remembered at most; client-go's event correlator keeps as many.
    const CAPACITY: usize = 4096;

    /// If `key` was recorded within the window, count this occurrence and say what to patch.
    /// An occurrence of a state counted already is seen again: it keeps the series alive
    /// and counts nothing (a count of 0).
    fn repeat(&mut self, key: u64, now: Instant, occurrence: Option<u64>) -> Option<Repeat> {
        let entry = self.entries.get_mut(&key)?;
        if now.saturating_duration_since(entry.last) > SERIES_WINDOW {
            self.entries.remove(&key);
            return None;
        }
        entry.last = now;
        if occurrence.is_some() && entry.occurrence == occurrence {
            return Some(Repeat {
                name: entry.name.clone(),
                count: 0,
            });
        }
        entry.count = entry.count.saturating_add(1);
        entry.occurrence = occurrence;
        Some(Repeat {
            name: entry.name.clone(),
            count: entry.count,
        })
    }

    /// An event was created for `key` (for `occurrence` of a state): later repeats extend it.
    fn remember(&mut self, key: u64, name: String, now: Instant, occurrence: Option<u64>) {
        if self.entries.len() >= Self::CAPACITY && !self.entries.contains_key(&key) {
            self.make_room(now);
        }
        self.entries.insert(
            key,
            Entry {
                name,
                count: 1,
                last: now,
                occurrence,
            },
        );
    }

    fn forget(&mut self, key: u64) {
        self.entries.remove(&key);
    }

    /// Drop the series whose window has passed; if that frees nothing, the older half.
    fn make_room(&mut self, now: Instant) {
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.last) <= SERIES_WINDOW);
        if self.entries.len() < Self::CAPACITY {
            return;
        }
        let mut times: Vec<Instant> = self.entries.values().map(|e| e.last).collect();
        let middle = times.len() / 2;
        let (_, median, _) = times.select_nth_unstable(middle);
        let median = *median;
        self.entries.retain(|_, e| e.last > median);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::job;
    use crate::operator::training::frameworks::tensorflow::TFJob;
    use kube::Resource;

    fn pending(job: &TFJob, reason: &str, note: &str) -> Pending {
        Pending {
            type_: EventType::Normal,
            reason: reason.into(),
            note: note.into(),
            action: "Create".into(),
            regarding: job.object_ref(&()),
            occurrence: None,
        }
    }

    #[test]
    fn the_series_key_ignores_the_resource_version_and_tells_other_notes_apart() {
        let mut job = job("mnist").replica("Worker", 2).build();
        job.metadata.resource_version = Some("1".into());
        let first = pending(&job, "SuccessfulCreatePod", "Created pod: mnist-worker-0");
        job.metadata.resource_version = Some("2".into());
        let later = pending(&job, "SuccessfulCreatePod", "Created pod: mnist-worker-0");
        assert_eq!(first.series_key(), later.series_key());
        let other_note = pending(&job, "SuccessfulCreatePod", "Created pod: mnist-worker-1");
        assert_ne!(first.series_key(), other_note.series_key());
        let other_reason = pending(&job, "FailedCreatePod", "Created pod: mnist-worker-0");
        assert_ne!(first.series_key(), other_reason.series_key());
        job.metadata.uid = Some("another-job-of-the-same-name".into());
        let other_job = pending(&job, "SuccessfulCreatePod", "Created pod: mnist-worker-0");
        assert_ne!(first.series_key(), other_job.series_key());
    }

    #[test]
    fn a_repeat_within_the_window_extends_the_series() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        assert_eq!(cache.repeat(7, t0, None), None, "never seen: create");
        cache.remember(7, "mnist.1".into(), t0, None);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(
            cache.repeat(7, later, None),
            Some(Repeat {
                name: "mnist.1".into(),
                count: 2
            })
        );
        // The window runs from the last occurrence.
        let much_later = later + SERIES_WINDOW;
        assert_eq!(cache.repeat(7, much_later, None).map(|r| r.count), Some(3));
        assert_eq!(cache.repeat(7, much_later + SERIES_WINDOW * 2, None), None);
        assert!(cache.entries.is_empty(), "an expired series is dropped");
    }

    #[test]
    fn a_state_counts_once_per_occurrence() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        let (first, second) = (Some(1), Some(2));
        cache.remember(7, "mnist.1".into(), t0, first);
        for minute in 1..=3 {
            let seen_again = cache.repeat(7, t0 + Duration::from_secs(60 * minute), first);
            assert_eq!(seen_again.map(|r| r.count), Some(0), "nothing to write");
        }
        let another = t0 + Duration::from_secs(60 * 4);
        assert_eq!(cache.repeat(7, another, second).map(|r| r.count), Some(2));
        assert_eq!(
            cache.repeat(7, another, second).map(|r| r.count),
            Some(0),
            "the second occurrence is counted once too"
        );
        // Seeing the state keeps the series: its window runs from the last time it was seen.
        let later = t0 + Duration::from_secs(60 * 4) + SERIES_WINDOW;
        assert_eq!(cache.repeat(7, later, first).map(|r| r.count), Some(3));
    }

    #[test]
    fn a_forgotten_series_starts_again() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        cache.remember(7, "mnist.1".into(), t0, None);
        cache.forget(7);
        assert_eq!(cache.repeat(7, t0, None), None);
    }

    #[test]
    fn the_cache_never_grows_past_its_capacity_and_keeps_the_newest() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        let total = SeriesCache::CAPACITY as u64 * 3;
        for key in 0..total {
            cache.remember(
                key,
                format!("e{key}"),
                t0 + Duration::from_millis(key),
                None,
            );
            assert!(cache.entries.len() <= SeriesCache::CAPACITY);
        }
        let now = t0 + Duration::from_millis(total);
        assert!(
            cache.repeat(total - 1, now, None).is_some(),
            "the newest is kept"
        );
        assert!(cache.repeat(0, now, None).is_none(), "the oldest made room");
    }

    #[test]
    fn series_past_the_window_make_room_first() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        for key in 0..SeriesCache::CAPACITY as u64 {
            cache.remember(key, format!("e{key}"), t0, None);
        }
        let later = t0 + SERIES_WINDOW + Duration::from_secs(1);
        cache.remember(u64::MAX, "new".into(), later, None);
        assert_eq!(cache.entries.len(), 1, "every expired series was dropped");
    }
}
