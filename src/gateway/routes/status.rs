//! The statuses this gateway writes: each route's entry for the served Gateway (Accepted,
//! ResolvedRefs), the Gateway's (its address, Accepted, Programmed, each listener's routes),
//! and its GatewayClass's Accepted. Each is made from what is live, keeping other
//! controllers' entries and a condition's lastTransitionTime while its status holds, and is
//! `None` when the live status says the same already, so nothing is written twice.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::attach::{self, Refusal};
use super::translate::Verdict;
use super::world::{GROUP, Served, generation};

/// One condition, `ok` or refused.
fn condition(kind: &str, outcome: Result<&str, &Refusal>, observed: i64) -> Value {
    let (status, reason, message) = match outcome {
        Ok(reason) => ("True", reason, String::new()),
        Err(refusal) => ("False", refusal.reason, refusal.message.clone()),
    };
    json!({ "type": kind, "status": status, "reason": reason, "message": message, "observedGeneration": observed })
}

/// `conditions` with each one's lastTransitionTime: the live one's while its status holds,
/// else `now`.
fn stamped(conditions: Vec<Value>, live: &Value, now: &str) -> Vec<Value> {
    conditions
        .into_iter()
        .map(|mut c| {
            let before = (live.as_array().into_iter().flatten()).find(|l| l["type"] == c["type"]);
            let since = match before {
                Some(l) if l["status"] == c["status"] => l["lastTransitionTime"].clone(),
                _ => Value::from(now),
            };
            c["lastTransitionTime"] = since;
            c
        })
        .collect()
}

/// The live status with `made`'s fields in place of its own, if that changes it.
fn changed(made: Value, live: &Value) -> Option<Value> {
    let mut merged = if live.is_object() {
        live.clone()
    } else {
        json!({})
    };
    for (key, value) in made.as_object().into_iter().flatten() {
        merged[key] = value.clone();
    }
    (merged != *live).then_some(merged)
}

/// The route's status with this gateway's entries as `verdict` says, if that changes it.
pub fn route(route: &Value, verdict: &Verdict, served: &Served, now: &str) -> Option<Value> {
    let live = &route["status"]["parents"];
    let observed = generation(route);
    let mut parents: Vec<Value> = (live.as_array().into_iter().flatten())
        .filter(|p| p["controllerName"] != served.controller.as_str())
        .cloned()
        .collect();
    for parent in &verdict.parents {
        let accepted = match (&parent.listeners, &verdict.unsupported) {
            (Err(refusal), _) | (Ok(_), Some(refusal)) => Err(refusal),
            (Ok(_), None) => Ok("Accepted"),
        };
        let resolved = verdict.resolved.as_ref().map(|()| "ResolvedRefs");
        let conditions = vec![
            condition("Accepted", accepted, observed),
            condition("ResolvedRefs", resolved, observed),
        ];
        let before = (live.as_array().into_iter().flatten()).find(|p| {
            p["controllerName"] == served.controller.as_str() && p["parentRef"] == parent.reference
        });
        let before = before.map_or(&Value::Null, |p| &p["conditions"]);
        parents.push(json!({
            "parentRef": parent.reference,
            "controllerName": served.controller,
            "conditions": stamped(conditions, before, now),
        }));
    }
    if parents.is_empty() && live.is_null() {
        return None;
    }
    changed(json!({ "parents": parents }), &route["status"])
}

/// The Gateway's status: its address, and each listener served or not with its routes.
pub fn gateway(
    gateway: &Value,
    served: &Served,
    attached: &BTreeMap<String, i64>,
    hostname: &str,
    now: &str,
) -> Option<Value> {
    let observed = generation(gateway);
    let live = &gateway["status"];
    let mut any_served = false;
    let listeners: Vec<Value> = (gateway["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten())
    .map(|l| {
        let name = l["name"].as_str().unwrap_or_default();
        let outcome = attach::listener_served(served, l);
        any_served |= outcome.is_ok();
        let conditions = vec![
            condition("Accepted", outcome.as_ref().map(|()| "Accepted"), observed),
            condition(
                "Programmed",
                outcome.as_ref().map(|()| "Programmed"),
                observed,
            ),
            condition("ResolvedRefs", Ok("ResolvedRefs"), observed),
        ];
        let before =
            (live["listeners"].as_array().into_iter().flatten()).find(|b| b["name"] == name);
        let before = before.map_or(&Value::Null, |b| &b["conditions"]);
        json!({
            "name": name,
            "supportedKinds": [{ "group": GROUP, "kind": "HTTPRoute" }],
            "attachedRoutes": attached.get(name).copied().unwrap_or_default(),
            "conditions": stamped(conditions, before, now),
        })
    })
    .collect();
    let none = Refusal::new(
        "ListenersNotValid",
        "no listener is served: this gateway serves HTTP on one port",
    );
    let outcome = if any_served { Ok(()) } else { Err(&none) };
    let conditions = vec![
        condition("Accepted", outcome.map(|()| "Accepted"), observed),
        condition("Programmed", outcome.map(|()| "Programmed"), observed),
    ];
    let made = json!({
        "addresses": [{ "type": "Hostname", "value": hostname }],
        "conditions": stamped(conditions, &live["conditions"], now),
        "listeners": listeners,
    });
    changed(made, live)
}

/// The GatewayClass's status: accepted.
pub fn class(class: &Value, now: &str) -> Option<Value> {
    let live = &class["status"];
    let accepted = condition("Accepted", Ok("Accepted"), generation(class));
    changed(
        json!({ "conditions": stamped(vec![accepted], &live["conditions"], now) }),
        live,
    )
}
