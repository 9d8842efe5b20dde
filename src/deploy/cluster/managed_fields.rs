//! mlkube's field managers, and the merge patches of an object's `managedFields` that hand its
//! fields from one manager to another: how `apply --adopt` takes an object over
//! ([`transfer`], see [`crate::deploy::inventory::adopt`]) and how the last claim on a shared
//! object mlkube never deletes is released ([`disowning`], see
//! [`crate::deploy::inventory::ownership`]).
//!
//! Pure: the patches are built here and sent by the cluster ([`crate::deploy::cluster`]), which
//! sits above this module and below the deploy stages that decide when to send them.

use serde_json::{Map, Value, json};

/// The field manager every mlkube write uses.
pub const FIELD_MANAGER: &str = "mlkube";

/// Whose fields an adopt takes over: every manager's but `manager`'s own applies, the
/// subresources' and the other mlkube managers'.
pub fn taken_over(entry: &Value) -> bool {
    let name = entry["manager"].as_str().unwrap_or_default();
    let subresource = entry["subresource"].as_str().is_some_and(|s| !s.is_empty());
    !subresource && !name.starts_with(FIELD_MANAGER)
}

/// An entry of `manager`'s own server-side applies.
pub fn is_own_apply(entry: &Value, manager: &str) -> bool {
    entry["manager"] == manager && entry["operation"] == "Apply"
}

/// The `managedFields` entries of an object.
pub fn entries(object: &Value) -> &[Value] {
    object["metadata"]["managedFields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The merge patch that makes `manager` the owner of every field the other managers wrote on
/// `live` (as read), through one `Apply` entry; the resource version makes the server refuse it
/// when the object changed since.
pub fn transfer(live: &Value, manager: &str) -> Value {
    let mut fields = Value::Object(Map::new());
    let mut entries_kept = Vec::new();
    for entry in entries(live) {
        if taken_over(entry) || is_own_apply(entry, manager) {
            union(&mut fields, &entry["fieldsV1"]);
        } else {
            entries_kept.push(entry.clone());
        }
    }
    entries_kept.push(json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": live["apiVersion"],
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    json!({"metadata": {
        "resourceVersion": live["metadata"]["resourceVersion"],
        "managedFields": entries_kept,
    }})
}

fn union(into: &mut Value, from: &Value) {
    let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) else {
        return;
    };
    for (step, sub) in from {
        let entry = into
            .entry(step.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        union(entry, sub);
    }
}

/// The prefix of the annotation in which a set records its configuration of a shared object,
/// before the set's id (as its claim label has it after `used-by.mlkube.io/`).
pub const SHARED_HASH_PREFIX: &str = "config-hash.mlkube.io/";

/// The merge patch that takes `manager` with the label `label` and its set's configuration hash off `live`, on the condition that
/// `live` is still the object's state (its resource version). The server takes managed fields
/// written by a patch as the object's new ones; every field stays, and those only `manager`
/// owned are owned by nobody. A list of no managers would be read as "not given", so one empty
/// entry stands for none.
pub fn disowning(live: &Value, manager: &str, label: &str) -> Value {
    let mut remaining: Vec<Value> = live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] != manager)
        .cloned()
        .collect();
    if remaining.is_empty() {
        remaining.push(json!({}));
    }
    let id = label.rsplit('/').next().unwrap_or(label);
    json!({"metadata": {
        "resourceVersion": live["metadata"]["resourceVersion"],
        "managedFields": remaining,
        "labels": {label: null},
        "annotations": {format!("{SHARED_HASH_PREFIX}{id}"): null},
    }})
}
