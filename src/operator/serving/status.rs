//! The InferenceService's status in KServe's shape, from what a reconcile saw and decided.
//! Pure: the time comes in.
//!
//! Conditions: `PredictorReady` (every revision that gets requests is ready),
//! `LatestDeploymentReady` (the current spec's revision is), `IngressReady` (the gateway took
//! the route's latest weights, so it is false from their write until the gateway has; without
//! a gateway, the address Service is the way in), and `Ready`, all of them but
//! `LatestDeploymentReady`, so a canary that is held never takes the service down, and waiting
//! for `Ready` waits for the traffic asked for.
//! A spec that cannot be served turns `PredictorReady` and `Ready` false with KServe's reason
//! and a message naming the fix, and leaves the revisions and their traffic as they were.

use super::api::{
    Addressable, ComponentStatus, Condition, FailureInfo, InferenceServiceStatus, ModelStates,
    ModelStatus, TrafficTarget,
};
use super::traffic::Decision;

/// The KServe condition types written here.
pub const READY: &str = "Ready";
pub const PREDICTOR_READY: &str = "PredictorReady";
pub const INGRESS_READY: &str = "IngressReady";
pub const LATEST_READY: &str = "LatestDeploymentReady";

/// What a reconcile that could serve the spec saw.
pub struct Served<'a> {
    pub decision: &'a Decision,
    pub latest: &'a str,
    /// The newest revision that is ready.
    pub latest_ready: Option<&'a str>,
    /// Why each revision that is not ready is not (e.g. its pod's waiting reason).
    pub not_ready: &'a [(String, String)],
    pub url: String,
    pub address: String,
    /// `None`: the gateway took the route (or there is none); else why not yet.
    pub ingress_pending: Option<String>,
}

/// A condition, keeping its transition time when its status did not change.
fn condition(
    before: &InferenceServiceStatus,
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    now: &str,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = (before.conditions.iter())
        .find(|c| c.type_ == type_ && c.status == status)
        .and_then(|c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: if ok { None } else { reason.map(str::to_owned) },
        message: if ok { None } else { message },
        severity: None,
        last_transition_time: Some(since.unwrap_or_else(|| now.to_owned())),
    }
}

/// The status of a served spec.
pub fn served(
    before: &InferenceServiceStatus,
    generation: Option<i64>,
    s: &Served,
    now: &str,
) -> InferenceServiceStatus {
    let unready: Vec<&str> = (s.decision.traffic.iter())
        .map(|(name, _)| name.as_str())
        .filter(|name| s.not_ready.iter().any(|(n, _)| n == name))
        .collect();
    let latest_ready = !s.not_ready.iter().any(|(n, _)| n == s.latest);
    let up_to_date = latest_ready && s.decision.held.is_none();
    InferenceServiceStatus {
        observed_generation: generation,
        url: Some(s.url.clone()),
        address: Some(Addressable {
            url: Some(s.address.clone()),
        }),
        conditions: conditions(before, s, &unready, latest_ready, now),
        components: [("predictor".to_owned(), predictor(s))]
            .into_iter()
            .collect(),
        model_status: Some(ModelStatus {
            transition_status: if up_to_date { "UpToDate" } else { "InProgress" }.into(),
            states: Some(ModelStates {
                active_model_state: if unready.is_empty() {
                    "Loaded"
                } else {
                    "Pending"
                }
                .into(),
                target_model_state: "Loaded".into(),
            }),
            last_failure_info: None,
        }),
        deployment_mode: Some("RawDeployment".into()),
    }
}

/// Why `revision` is not ready, as the reconcile saw it.
fn why<'a>(s: &'a Served, revision: &str) -> std::borrow::Cow<'a, str> {
    (s.not_ready.iter())
        .find(|(name, _)| name == revision)
        .map_or("its pods are not ready yet".into(), |(_, why)| {
            why.as_str().into()
        })
}

/// The four conditions; `unready` are the revisions that get requests and are not ready.
fn conditions(
    before: &InferenceServiceStatus,
    s: &Served,
    unready: &[&str],
    latest_ready: bool,
    now: &str,
) -> Vec<Condition> {
    let predictor_message = (unready.first())
        .map(|r| format!("revision {r} gets requests and is not ready: {}", why(s, r)));
    let latest_message = match &s.decision.held {
        Some(held) => format!(
            "revision {} is not ready ({}), so {} keeps the {}% asked for it",
            held.revision,
            why(s, &held.revision),
            held.keeps,
            held.asked
        ),
        None => format!("revision {} is not ready: {}", s.latest, why(s, s.latest)),
    };
    let serving = unready.is_empty();
    let ingress = s.ingress_pending.is_none();
    let ready_reason = if serving {
        "RouteNotAccepted"
    } else {
        "RevisionNotReady"
    };
    let ready_message = predictor_message
        .clone()
        .or_else(|| s.ingress_pending.clone());
    vec![
        condition(
            before,
            INGRESS_READY,
            ingress,
            Some("RouteNotAccepted"),
            s.ingress_pending.clone(),
            now,
        ),
        condition(
            before,
            LATEST_READY,
            latest_ready,
            Some("RevisionNotReady"),
            Some(latest_message),
            now,
        ),
        condition(
            before,
            PREDICTOR_READY,
            serving,
            Some("RevisionNotReady"),
            predictor_message,
            now,
        ),
        condition(
            before,
            READY,
            serving && ingress,
            Some(ready_reason),
            ready_message,
            now,
        ),
    ]
}

/// The predictor's revisions and traffic.
fn predictor(s: &Served) -> ComponentStatus {
    let traffic = (s.decision.traffic.iter())
        .map(|(name, percent)| TrafficTarget {
            revision_name: name.clone(),
            percent: *percent,
            latest_revision: name == s.latest,
            tag: None,
        })
        .collect();
    ComponentStatus {
        url: Some(s.url.clone()),
        address: Some(Addressable {
            url: Some(s.address.clone()),
        }),
        latest_created_revision: Some(s.latest.to_owned()),
        latest_ready_revision: s.latest_ready.map(str::to_owned),
        latest_rolledout_revision: s.decision.rolled_out.clone(),
        previous_rolledout_revision: s.decision.previous_rolled_out.clone(),
        traffic,
    }
}

/// The status of a spec that cannot be served: what was served before stays, the predictor's
/// and the whole's readiness turn false with `reason` and `message`.
pub fn refused(
    before: &InferenceServiceStatus,
    generation: Option<i64>,
    reason: &str,
    message: &str,
    now: &str,
) -> InferenceServiceStatus {
    let mut status = before.clone();
    status.observed_generation = generation;
    status
        .conditions
        .retain(|c| c.type_ != PREDICTOR_READY && c.type_ != READY && c.type_ != LATEST_READY);
    for type_ in [LATEST_READY, PREDICTOR_READY, READY] {
        status.conditions.push(condition(
            before,
            type_,
            false,
            Some(reason),
            Some(message.to_owned()),
            now,
        ));
    }
    status.model_status = Some(ModelStatus {
        transition_status: "InvalidSpec".into(),
        states: before.model_status.as_ref().and_then(|m| m.states.clone()),
        last_failure_info: Some(FailureInfo {
            reason: reason.to_owned(),
            message: message.to_owned(),
        }),
    });
    status.deployment_mode = Some("RawDeployment".into());
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::serving::traffic::Held;

    fn decision(traffic: &[(&str, i64)], held: Option<Held>) -> Decision {
        Decision {
            traffic: traffic.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect(),
            rolled_out: Some("r1".into()),
            previous_rolled_out: None,
            held,
            retire: vec![],
        }
    }

    fn served_with<'a>(d: &'a Decision, not_ready: &'a [(String, String)]) -> Served<'a> {
        Served {
            decision: d,
            latest: "r2",
            latest_ready: Some("r1"),
            not_ready,
            url: "http://x-ns.example.com".into(),
            address: "http://x-predictor.ns.svc.cluster.local".into(),
            ingress_pending: None,
        }
    }

    fn find<'a>(s: &'a InferenceServiceStatus, t: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn a_held_canary_leaves_the_service_ready_and_says_who_keeps_its_share() {
        let held = Held {
            revision: "r2".into(),
            keeps: "r1".into(),
            asked: 10,
        };
        let d = decision(&[("r1", 100)], Some(held));
        let not_ready = [(
            "r2".to_owned(),
            "container kserve-container: CrashLoopBackOff".to_owned(),
        )];
        let s = served(
            &InferenceServiceStatus::default(),
            Some(2),
            &served_with(&d, &not_ready),
            "t0",
        );
        assert_eq!(find(&s, READY).status, "True");
        let latest = find(&s, LATEST_READY);
        assert_eq!(latest.status, "False");
        assert_eq!(
            latest.message.as_deref(),
            Some(
                "revision r2 is not ready (container kserve-container: CrashLoopBackOff), so r1 keeps the 10% asked for it"
            )
        );
        assert_eq!(s.model_status.unwrap().transition_status, "InProgress");
    }

    #[test]
    fn transition_times_stay_while_a_condition_holds_and_a_refusal_keeps_the_traffic() {
        let d = decision(&[("r1", 100)], None);
        let first = served(
            &InferenceServiceStatus::default(),
            Some(1),
            &served_with(&d, &[]),
            "t0",
        );
        let again = served(&first, Some(1), &served_with(&d, &[]), "t1");
        assert_eq!(first, again);
        let refused = refused(
            &again,
            Some(2),
            "NoSupportingRuntime",
            "no runtime supports onnx",
            "t2",
        );
        assert_eq!(
            find(&refused, READY).reason.as_deref(),
            Some("NoSupportingRuntime")
        );
        assert_eq!(find(&refused, INGRESS_READY).status, "True");
        assert_eq!(
            refused.components, again.components,
            "the traffic is as it was"
        );
    }
}
