//! Creations this operator asked for that its watch caches have not shown yet.
//!
//! A reconcile reads a job's pods and services from watch caches, which lag the API server,
//! the more so the busier it is. Without a memory of what it just created, the reconcile after
//! a creation would not see the new objects and create them again. That is harmless, since
//! names are deterministic and the API server answers AlreadyExists, but each repeat is work
//! for an API server that is already the bottleneck: at 1,000 jobs, 4 in 10 pod creations were
//! repeats.
//!
//! # Expected flow
//! `expect` is called just before a create is sent, so the watch event that shows the object
//! always comes after it; the watch streams call `observe` for every object they deliver; a
//! failed create calls `forget`. A reconcile skips a creation while `awaiting` says the object
//! is on its way, and requeues for when the expectation runs out.
//!
//! # Guarantees
//! An expectation never blocks a creation for longer than `TIMEOUT` (upstream's expectations
//! last 5 minutes, which made recreating a pod wait that long, kubeflow/trainer#1306). The
//! watch delivers every object it sees, including ones deleted right after being created, so
//! in practice expectations end on `observe` long before that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;

/// How long a creation is taken on trust without the cache showing it.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The kinds of object the operator creates for a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Pod,
    Service,
}

type Key = (Kind, String, String);

/// Objects created, by kind, namespace and name, with when they were asked for.
#[derive(Default)]
pub struct Expectations {
    created: Mutex<HashMap<Key, Instant>>,
}

impl Expectations {
    /// A create of this object is about to be sent.
    pub fn expect(&self, kind: Kind, namespace: &str, name: &str, now: Instant) {
        lock(&self.created).insert((kind, namespace.to_owned(), name.to_owned()), now);
    }

    /// The create failed: the object is not coming.
    pub fn forget(&self, kind: Kind, namespace: &str, name: &str) {
        lock(&self.created).remove(&(kind, namespace.to_owned(), name.to_owned()));
    }

    /// The watch delivered this object: the cache has it now.
    pub fn observe(&self, kind: Kind, namespace: &str, name: &str) {
        let mut created = lock(&self.created);
        if !created.is_empty() {
            created.remove(&(kind, namespace.to_owned(), name.to_owned()));
        }
    }

    /// How much longer the object is taken to be on its way, if it was created recently and
    /// the cache has not shown it yet. An expectation that ran out is dropped.
    pub fn awaiting(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        now: Instant,
    ) -> Option<Duration> {
        let key = (kind, namespace.to_owned(), name.to_owned());
        let mut created = lock(&self.created);
        let since = *created.get(&key)?;
        let left = TIMEOUT.checked_sub(now.saturating_duration_since(since));
        match left {
            Some(left) if !left.is_zero() => Some(left),
            _ => {
                created.remove(&key);
                None
            }
        }
    }

    /// Whether every creation was seen (or ran out).
    pub fn is_empty(&self) -> bool {
        lock(&self.created).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_object_is_awaited_until_the_watch_shows_it() {
        let expectations = Expectations::default();
        let t0 = Instant::now();
        expectations.expect(Kind::Pod, "ns", "job-worker-0", t0);
        let left =
            expectations.awaiting(Kind::Pod, "ns", "job-worker-0", t0 + Duration::from_secs(1));
        assert_eq!(left, Some(TIMEOUT - Duration::from_secs(1)));
        // The same name of another kind or namespace is another object.
        assert_eq!(
            expectations.awaiting(Kind::Service, "ns", "job-worker-0", t0),
            None
        );
        assert_eq!(
            expectations.awaiting(Kind::Pod, "other", "job-worker-0", t0),
            None
        );

        expectations.observe(Kind::Pod, "ns", "job-worker-0");
        assert_eq!(
            expectations.awaiting(Kind::Pod, "ns", "job-worker-0", t0),
            None
        );
        assert!(expectations.is_empty());
    }

    #[test]
    fn a_failed_create_is_not_awaited() {
        let expectations = Expectations::default();
        let t0 = Instant::now();
        expectations.expect(Kind::Service, "ns", "job-ps-0", t0);
        expectations.forget(Kind::Service, "ns", "job-ps-0");
        assert_eq!(
            expectations.awaiting(Kind::Service, "ns", "job-ps-0", t0),
            None
        );
    }

    #[test]
    fn an_expectation_runs_out_after_the_timeout_and_is_dropped() {
        let expectations = Expectations::default();
        let t0 = Instant::now();
        expectations.expect(Kind::Pod, "ns", "job-worker-1", t0);
        assert!(
            expectations
                .awaiting(
                    Kind::Pod,
                    "ns",
                    "job-worker-1",
                    t0 + TIMEOUT - Duration::from_millis(1)
                )
                .is_some()
        );
        assert_eq!(
            expectations.awaiting(Kind::Pod, "ns", "job-worker-1", t0 + TIMEOUT),
            None
        );
        assert!(expectations.is_empty());
    }
}
