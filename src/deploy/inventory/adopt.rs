//! Adopting an object someone else wrote (`apply --adopt`): afterwards it is what the app
//! renders, as if mlkube had created it.
//!
//! A server-side apply never removes a field another field manager owns, so an object created
//! by `kubectl create` with a key the app does not render would keep that key for ever. Adopting
//! therefore first makes mlkube's manager the owner of every field the other managers wrote
//! ([`transfer`](crate::deploy::cluster::managed_fields::transfer), one merge patch of the managed fields, refused if the object changed since it
//! was read); the apply that follows then removes the fields the render does not have, as it
//! removes those an earlier render had and this one dropped, and later renders own the whole
//! object.
//!
//! What the adopt removes is known before it is written: the server's dry run of the apply
//! tells which fields mlkube's manager will own, and the other managers' fields outside them
//! are the ones that go ([`removals`]). `diff` and `apply --adopt --dry-run` show them, each
//! with the managers that wrote it.
//!
//! Left alone: fields written through a subresource (`status`, and what controllers record
//! with it) and fields of other mlkube managers (the claims of other environments on shared
//! objects).
//!
//! Caveat: a removed field the API server defaults (a Deployment's `progressDeadlineSeconds`
//! that `kubectl create` wrote with its default) comes back with its default; the diff shows it
//! removed.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::deploy::cluster::managed_fields::{entries, is_own_apply, taken_over};

/// A field the adopt removes, and the field managers that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedField {
    /// `data.b`, `spec.template.spec.containers[name=main].env[name=DEBUG]`.
    pub field: String,
    pub managers: Vec<String>,
    /// The field as `managedFields` names it, one step per element.
    #[serde(skip)]
    pub path: Vec<String>,
}

impl std::fmt::Display for RemovedField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (written by {})",
            self.field,
            self.managers.join(", ")
        )
    }
}

/// The fields that adopting removes, given `answer`: the server's dry run of `manager`'s apply
/// over the live object.
pub fn removals(answer: &Value, manager: &str) -> Vec<RemovedField> {
    let mut kept: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut others: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for entry in entries(answer) {
        let mut paths = Vec::new();
        if let Some(fields) = entry["fieldsV1"].as_object() {
            owned(fields, &mut Vec::new(), &mut paths);
        }
        if taken_over(entry) && !is_own_apply(entry, manager) {
            let name = entry["manager"].as_str().unwrap_or_default().to_string();
            for path in paths {
                others.entry(path).or_default().push(name.clone());
            }
        } else {
            kept.extend(paths);
        }
    }
    // A field stays when a manager that is not taken over owns it or anything inside it.
    let staying: BTreeSet<&[String]> = kept
        .iter()
        .flat_map(|path| (1..=path.len()).map(move |n| &path[..n]))
        .collect();
    let going: Vec<(&Vec<String>, &Vec<String>)> = others
        .iter()
        .filter(|(path, _)| !staying.contains(path.as_slice()))
        .collect();
    // Only the outermost: removing `data` removes `data.b` with it.
    going
        .iter()
        .filter(|(path, _)| {
            !(1..path.len()).any(|n| going.iter().any(|(other, _)| other[..] == path[..n]))
        })
        .map(|(path, managers)| {
            let mut managers = (*managers).clone();
            managers.dedup();
            RemovedField {
                field: field_name(path),
                managers,
                path: (*path).clone(),
            }
        })
        .collect()
}

/// Every path a `fieldsV1` set owns: a leaf, or a node marked `.` (owned as a whole).
fn owned(fields: &Map<String, Value>, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (step, sub) in fields {
        if step == "." {
            continue;
        }
        prefix.push(step.clone());
        let sub = sub.as_object();
        if sub.is_none_or(|s| s.is_empty() || s.contains_key(".")) {
            out.push(prefix.clone());
        }
        if let Some(sub) = sub {
            owned(sub, prefix, out);
        }
        prefix.pop();
    }
}

/// `data.b`, `spec.containers[name=main].image`: a managed-fields path as a reader spells it.
pub fn field_name(path: &[String]) -> String {
    let mut name = String::new();
    for step in path {
        if let Some(field) = step.strip_prefix("f:") {
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(field);
        } else if let Some(keys) = step.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
            let keys: Vec<String> = keys
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
                .collect();
            name.push_str(&format!("[{}]", keys.join(",")));
        } else if let Some(value) = step.strip_prefix("v:") {
            name.push_str(&format!("[={value}]"));
        } else if let Some(index) = step.strip_prefix("i:") {
            name.push_str(&format!("[{index}]"));
        }
    }
    name
}

/// `object` without the removed fields: what the adopt leaves.
pub fn without(object: &Value, removals: &[RemovedField]) -> Value {
    let mut object = object.clone();
    for removal in removals {
        remove(&mut object, &removal.path);
    }
    object
}

fn remove(value: &mut Value, path: &[String]) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    if let Some(field) = step.strip_prefix("f:") {
        let Some(map) = value.as_object_mut() else {
            return;
        };
        match rest.is_empty() {
            true => {
                map.remove(field);
            }
            false => {
                if let Some(child) = map.get_mut(field) {
                    remove(child, rest);
                }
            }
        }
        return;
    }
    let Some(items) = value.as_array_mut() else {
        return;
    };
    let Some(index) = items
        .iter()
        .enumerate()
        .position(|(i, item)| matches(step, i, item))
    else {
        return;
    };
    match rest.is_empty() {
        true => {
            items.remove(index);
        }
        false => remove(&mut items[index], rest),
    }
}

/// Whether a list item is the one a `k:`, `v:` or `i:` step names.
fn matches(step: &str, index: usize, item: &Value) -> bool {
    if let Some(keys) = step.strip_prefix("k:") {
        serde_json::from_str::<Map<String, Value>>(keys)
            .is_ok_and(|keys| keys.iter().all(|(k, v)| item.get(k) == Some(v)))
    } else if let Some(value) = step.strip_prefix("v:") {
        serde_json::from_str::<Value>(value).is_ok_and(|v| &v == item)
    } else if let Some(i) = step.strip_prefix("i:") {
        i.parse::<usize>().is_ok_and(|i| i == index)
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::deploy::cluster::managed_fields::transfer;

    /// A ConfigMap `kubectl create` wrote with keys a and b, after a dry run of mlkube's apply
    /// of key a alone.
    fn answer() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "7",
                   "labels": {"team": "x"},
                   "managedFields": [
                       {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}},
                                     "f:metadata": {"f:labels": {".": {}, "f:team": {}}}}},
                       {"manager": "mlkube", "operation": "Apply", "apiVersion": "v1",
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}},
                       {"manager": "kube-controller-manager", "operation": "Update",
                        "subresource": "status", "apiVersion": "v1", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:metadata": {"f:annotations": {"f:seen": {}}}}}]},
               "data": {"a": "1", "b": "2"}})
    }

    #[test]
    fn the_other_managers_fields_the_render_lacks_are_removed_naming_their_writer() {
        let removed = removals(&answer(), "mlkube");
        let names: Vec<String> = removed.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "data.b (written by kubectl-create)",
                "metadata.labels (written by kubectl-create)"
            ]
        );
        let left = without(&answer(), &removed);
        assert_eq!(left["data"], json!({"a": "1"}));
        assert!(left["metadata"]["labels"].is_null(), "{left}");
    }

    #[test]
    fn nothing_is_removed_when_the_render_has_every_field() {
        let mut answer = answer();
        answer["metadata"]["managedFields"][1]["fieldsV1"] = json!({"f:data": {"f:a": {}, "f:b": {}},
            "f:metadata": {"f:labels": {"f:team": {}}}});
        assert_eq!(removals(&answer, "mlkube"), []);
    }

    #[test]
    fn list_items_are_named_by_their_keys_and_removed_by_them() {
        let path: Vec<String> = ["f:spec", "f:containers", "k:{\"name\":\"b\"}"]
            .map(String::from)
            .into();
        assert_eq!(field_name(&path), "spec.containers[name=b]");
        let object = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let removal = RemovedField {
            field: field_name(&path),
            managers: vec!["kubectl".into()],
            path,
        };
        assert_eq!(
            without(&object, &[removal]),
            json!({"spec": {"containers": [{"name": "a"}]}})
        );
    }

    #[test]
    fn the_transfer_gives_mlkube_every_field_but_the_subresources() {
        let patch = transfer(&answer(), "mlkube");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let entries = patch["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 2, "{patch:#}");
        assert_eq!(entries[0]["manager"], "kube-controller-manager");
        assert_eq!(entries[1]["manager"], "mlkube");
        assert_eq!(entries[1]["operation"], "Apply");
        assert_eq!(
            entries[1]["fieldsV1"],
            json!({"f:data": {".": {}, "f:a": {}, "f:b": {}},
                   "f:metadata": {"f:labels": {".": {}, "f:team": {}}}})
        );
    }
}
