//! The last event a controller recorded on an object (`events.k8s.io/v1`, which serves the
//! core Events too), in one line: what a training job that has no condition yet is waiting for
//! (the operator's `WaitingForData`, say) when no pod of it says why.
//!
//! Events are best effort, as everywhere in Kubernetes: none may have been recorded, or the API
//! server dropped them after an hour; a caller then says what it said before.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::deploy::cluster::Cluster;

/// The newest event on each object of `namespace` that has one, by the object's UID, as
/// `REASON (from CONTROLLER): NOTE`; empty when the events cannot be read.
pub async fn newest_by_uid(cluster: &impl Cluster, namespace: &str) -> BTreeMap<String, String> {
    let Some(resolved) = cluster.resolve("events.k8s.io/v1", "Event") else {
        return BTreeMap::new();
    };
    let events = cluster
        .list(&resolved, Some(namespace), "")
        .await
        .unwrap_or_default();
    let mut newest: BTreeMap<&str, &Value> = BTreeMap::new();
    for event in &events {
        let Some(uid) = event["regarding"]["uid"].as_str() else {
            continue;
        };
        let seen = newest.entry(uid).or_insert(event);
        if when(event) > when(seen) {
            *seen = event;
        }
    }
    newest
        .into_iter()
        .map(|(uid, event)| (uid.to_string(), describe(event)))
        .collect()
}

/// When an event last happened, comparable as text: its series' last time, its own time, the
/// older API's last timestamp, or its creation, written with microseconds.
fn when(event: &Value) -> String {
    let time = [
        &event["series"]["lastObservedTime"],
        &event["eventTime"],
        &event["deprecatedLastTimestamp"],
        &event["metadata"]["creationTimestamp"],
    ]
    .into_iter()
    .find_map(Value::as_str)
    .unwrap_or_default();
    match time.strip_suffix('Z') {
        Some(seconds) if !seconds.contains('.') => format!("{seconds}.000000Z"),
        _ => time.to_string(),
    }
}

/// `REASON (from CONTROLLER): NOTE`, each part left out when the event has none.
fn describe(event: &Value) -> String {
    let reason = event["reason"].as_str().unwrap_or("an event");
    let from = event["reportingController"]
        .as_str()
        .or(event["deprecatedSource"]["component"].as_str())
        .filter(|c| !c.is_empty())
        .map(|c| format!(" (from {c})"))
        .unwrap_or_default();
    match event["note"].as_str().filter(|n| !n.is_empty()) {
        Some(note) => format!("{reason}{from}: {note}"),
        None => format!("{reason}{from}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_newest_of_an_objects_events_is_told_with_its_reason_source_and_note() {
        let older = json!({"reason": "Created", "eventTime": "2026-11-29T06:00:00.500000Z",
            "reportingController": "mlkube-operator", "note": "created"});
        let newer = json!({"reason": "WaitingForData", "eventTime": "2026-11-29T06:00:01Z",
            "reportingController": "mlkube-operator", "note": "waiting for VolumeManager x",
            "series": {"count": 3, "lastObservedTime": "2026-11-29T06:02:00.100000Z"}});
        let newest = [older, newer].into_iter().max_by_key(when).unwrap();
        assert_eq!(
            describe(&newest),
            "WaitingForData (from mlkube-operator): waiting for VolumeManager x"
        );
    }

    #[test]
    fn a_time_without_fractions_sorts_before_a_later_one_within_the_same_second() {
        let whole = json!({"metadata": {"creationTimestamp": "2026-11-29T06:00:00Z"}});
        let later = json!({"eventTime": "2026-11-29T06:00:00.250000Z"});
        assert!(when(&whole) < when(&later));
        assert_eq!(describe(&json!({})), "an event");
        let core = json!({"reason": "FailedMount", "deprecatedSource": {"component": "kubelet"}});
        assert_eq!(describe(&core), "FailedMount (from kubelet)");
    }
}
