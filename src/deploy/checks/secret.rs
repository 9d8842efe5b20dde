//! A Secret's value is one field that can be written two ways, `data` (base64) or
//! `stringData` (plain text, merged into `data` by the API server and never stored).
//!
//! Server-side apply tracks ownership by the path that was written: a manager that sets
//! `stringData.token` owns `f:stringData.f:token`, not `f:data.f:token`. So when another manager
//! changes a value through the path mlkube does not use, the server sees no conflict, and
//! mlkube's next apply would silently write its own value back. The same change through the
//! path mlkube uses is a conflict. [`value_conflicts`] closes that gap: a value mlkube would
//! change that another manager owns through the other path is a conflict, found from the live
//! object's `managedFields` before anything is sent, by `diff` and `apply` alike.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::deploy::cluster::Conflict;
use crate::deploy::cluster::key::Key;

/// Whether `key` names a Secret.
pub fn is_secret(key: &Key) -> bool {
    key.group.is_empty() && key.kind == "Secret"
}

/// The values a Secret configuration sets, base64 as `data` stores them, each with the field it
/// is written through; `stringData` wins over `data`, as on the server.
fn desired_values(object: &Value) -> Vec<(&str, String, &'static str)> {
    let mut values: Vec<(&str, String, &'static str)> = Vec::new();
    for (key, value) in object["data"].as_object().into_iter().flatten() {
        if let Some(value) = value.as_str() {
            values.push((key, value.to_string(), "data"));
        }
    }
    for (key, value) in object["stringData"].as_object().into_iter().flatten() {
        if let Some(value) = value.as_str() {
            values.retain(|(k, _, _)| *k != key.as_str());
            values.push((key, STANDARD.encode(value), "stringData"));
        }
    }
    values
}

/// The values `desired` would change on the `live` Secret that a manager other than `manager`
/// owns through the other path (`data` when mlkube writes `stringData`, and the other way
/// round). Conflicts on the path mlkube writes are the server's to report.
pub fn value_conflicts(desired: &Value, live: &Value, manager: &str) -> Vec<Conflict> {
    let mut conflicts = Vec::new();
    for (key, value, ours) in desired_values(desired) {
        if live["data"][key].as_str() == Some(value.as_str()) {
            continue;
        }
        let theirs = if ours == "data" { "stringData" } else { "data" };
        for entry in live["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let owned = !entry["fieldsV1"][format!("f:{theirs}")][format!("f:{key}")].is_null();
            if owned && entry["manager"] != manager {
                conflicts.push(Conflict {
                    field: format!(".{theirs}.{key}"),
                    manager: entry["manager"].as_str().unwrap_or("?").to_string(),
                });
            }
        }
    }
    conflicts
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn live(value: &str, owners: Value) -> Value {
        json!({"data": {"token": STANDARD.encode(value)}, "metadata": {"managedFields": owners}})
    }

    #[test]
    fn a_value_another_manager_wrote_through_the_other_path_is_a_conflict() {
        let owners = json!([
            {"manager": "mlkube", "fieldsV1": {"f:data": {"f:token": {}}}},
            {"manager": "night-shift", "fieldsV1": {"f:stringData": {"f:token": {}}}},
        ]);
        let desired = json!({"data": {"token": STANDARD.encode("one")}});
        assert_eq!(
            value_conflicts(&desired, &live("two", owners), "mlkube"),
            [Conflict {
                field: ".stringData.token".into(),
                manager: "night-shift".into()
            }]
        );
    }

    #[test]
    fn string_data_rendered_conflicts_with_a_data_owner_and_an_equal_value_never_does() {
        let owners = json!([
            {"manager": "mlkube", "fieldsV1": {"f:stringData": {"f:token": {}}}},
            {"manager": "kubectl-edit", "fieldsV1": {"f:data": {"f:token": {}}}},
        ]);
        let desired = json!({"stringData": {"token": "one"}});
        let conflicts = value_conflicts(&desired, &live("two", owners.clone()), "mlkube");
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        assert_eq!(conflicts[0].field, ".data.token");
        assert!(value_conflicts(&desired, &live("one", owners), "mlkube").is_empty());
    }

    #[test]
    fn the_same_path_is_left_to_the_server() {
        let owners = json!([{"manager": "night-shift", "fieldsV1": {"f:data": {"f:token": {}}}}]);
        let desired = json!({"data": {"token": STANDARD.encode("one")}});
        assert!(value_conflicts(&desired, &live("two", owners), "mlkube").is_empty());
    }
}
