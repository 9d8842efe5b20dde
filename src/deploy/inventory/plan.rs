//! The desired state of one deploy run: the rendered objects keyed by identity, put in apply
//! tiers, and labelled as members of the environment's ApplySet.
//!
//! Pure: no cluster. `diff`, `apply` and `validate` all send exactly what [`plan`] produced, so
//! a diff never disagrees with the apply that follows it.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;

use sha2::{Digest, Sha256};

use super::applyset::{ApplySet, PART_OF_LABEL, SHARED_HASH_PREFIX};
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::managed_fields::FIELD_MANAGER;
use crate::render::kinds::{Tier, tier};

/// The hash of the configuration mlkube last applied to an object. With the live values, it lets
/// a re-apply or diff skip objects whose configuration did not change ([`unchanged`]).
pub const CONFIG_HASH_ANNOTATION: &str = "mlkube.io/config-hash";
use crate::render::manifest::Manifest;

/// One object as it will be sent.
#[derive(Debug, Clone)]
pub struct Desired {
    pub key: Key,
    pub api_version: String,
    pub component: String,
    pub tier: Tier,
    /// Cluster-scoped and so shared with other environments and apps: claimed rather than
    /// owned, and written with the set's own field manager (see [`super::ownership`]).
    pub shared: bool,
    /// The rendered object plus the ApplySet membership label, or the set's claim when shared.
    pub value: Value,
}

impl Desired {
    /// Whether the object is recorded in the inventory. Namespaces never are: a prune or a
    /// delete must never take a namespace (and everything in it) with it.
    pub fn is_member(&self) -> bool {
        self.tier != Tier::Namespaces
    }
}

/// The objects of one run, in apply order.
#[derive(Debug, Clone)]
pub struct Plan {
    pub applyset: ApplySet,
    pub objects: Vec<Desired>,
    /// `-c` was given: only these components were rendered, so prune and delete consider only
    /// members of these components.
    pub components: Vec<String>,
}

impl Plan {
    /// The CustomResourceDefinition of `kind` in `group` that the plan renders, if any.
    pub fn crd_of(&self, group: &str, kind: &str) -> Option<&Desired> {
        self.objects.iter().find(|d| {
            let spec = &d.value["spec"];
            d.key.kind == "CustomResourceDefinition"
                && spec["group"].as_str() == Some(group)
                && spec["names"]["kind"].as_str() == Some(kind)
        })
    }

    /// The group-kinds of the members, as the inventory records them.
    pub fn group_kinds(&self) -> BTreeSet<String> {
        self.objects
            .iter()
            .filter(|d| d.is_member())
            .map(|d| d.key.group_kind())
            .collect()
    }

    /// The namespaces the members live in.
    pub fn namespaces(&self) -> BTreeSet<String> {
        self.objects
            .iter()
            .filter(|d| d.is_member())
            .filter_map(|d| d.key.namespace.clone())
            .collect()
    }

    /// The key of the environment's own Namespace object.
    pub fn namespace_key(&self) -> Key {
        Key {
            group: String::new(),
            kind: "Namespace".into(),
            namespace: None,
            name: self.applyset.namespace.clone(),
        }
    }

    /// Whether `key` is planned. A scan: callers that ask for many keys take [`Plan::keys`].
    pub fn contains(&self, key: &Key) -> bool {
        self.objects.iter().any(|d| &d.key == key)
    }

    /// The planned keys, for asking about many objects at once.
    pub fn keys(&self) -> HashSet<&Key> {
        self.objects.iter().map(|d| &d.key).collect()
    }

    /// The field manager that writes `desired`: `mlkube`, or the set's own for shared objects.
    pub fn manager(&self, desired: &Desired) -> &str {
        if desired.shared {
            &self.applyset.shared_manager
        } else {
            FIELD_MANAGER
        }
    }

    /// Whether a CRD in the plan defines this group and kind. A scan: callers that ask for many
    /// objects take [`Plan::defined_kinds`].
    pub fn defines(&self, group: &str, kind: &str) -> bool {
        self.defined_kinds().contains(&(group, kind))
    }

    /// The group and kind of every CustomResourceDefinition in the plan.
    pub fn defined_kinds(&self) -> HashSet<(&str, &str)> {
        self.objects
            .iter()
            .filter(|d| d.key.kind == "CustomResourceDefinition")
            .filter_map(|d| {
                let spec = &d.value["spec"];
                Some((spec["group"].as_str()?, spec["names"]["kind"].as_str()?))
            })
            .collect()
    }

    /// Whether a member of the inventory is in scope for prune/delete under `-c`.
    pub fn covers_component(&self, component: Option<&str>) -> bool {
        self.components.is_empty()
            || component.is_some_and(|c| self.components.iter().any(|s| s == c))
    }
}

/// Whether applying `desired` over `live` is known to change nothing, without asking the server:
/// the configuration is the one mlkube applied last (same hash, so the same set of fields and no
/// field to remove), and every value it sets is still the live value (nobody drifted it).
///
/// When this says `false` the object simply goes the slow way (a server-side dry run or apply);
/// values the server normalises (quantities, for one) end up there too, which is safe.
pub fn unchanged(desired: &Desired, live: &Value) -> bool {
    let Some((annotation, hash)) = config_hash(&desired.value) else {
        return false;
    };
    live["metadata"]["annotations"][annotation].as_str() == Some(hash)
        && subset(&desired.value, live)
}

/// The annotation holding a rendered object's configuration hash, and the hash: a member's
/// [`CONFIG_HASH_ANNOTATION`], or a shared object's, under its set's own name.
fn config_hash(value: &Value) -> Option<(&str, &str)> {
    let annotations = value["metadata"]["annotations"].as_object()?;
    annotations
        .iter()
        .find(|(k, _)| *k == CONFIG_HASH_ANNOTATION || k.starts_with(SHARED_HASH_PREFIX))
        .and_then(|(k, v)| Some((k.as_str(), v.as_str()?)))
}

/// Every value in `small` is in `large` at the same place (lists item by item, same length).
fn subset(small: &Value, large: &Value) -> bool {
    match (small, large) {
        (Value::Object(s), Value::Object(l)) => s
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| subset(v, lv))),
        (Value::Array(s), Value::Array(l)) => {
            s.len() == l.len() && s.iter().zip(l).all(|(a, b)| subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(
        "object {index} of component `{component}` has no {field}\n  hint: every object needs \
         apiVersion, kind and metadata.name; check what the component renders with `mlkube show`"
    )]
    Incomplete {
        index: usize,
        component: String,
        field: &'static str,
    },
    #[error(
        "{key} is rendered twice, by components `{first}` and `{second}`\n  hint: give one of \
         them another name"
    )]
    Duplicate {
        key: Key,
        first: String,
        second: String,
    },
}

/// Key, tier and label every object of the manifest, keeping the renderer's order within a tier.
pub fn plan(
    manifest: &Manifest,
    applyset: &ApplySet,
    components: &[String],
) -> Result<Plan, PlanError> {
    let mut objects: Vec<Desired> = Vec::with_capacity(manifest.objects.len());
    // Where each key was first rendered: one lookup per object, not a scan of those before it.
    let mut seen: HashMap<Key, usize> = HashMap::with_capacity(manifest.objects.len());
    for (index, object) in manifest.objects.iter().enumerate() {
        let incomplete = |field| PlanError::Incomplete {
            index,
            component: object.component.clone(),
            field,
        };
        if object.api_version().is_empty() {
            return Err(incomplete("apiVersion"));
        }
        if object.kind().is_empty() {
            return Err(incomplete("kind"));
        }
        let key = Key::of(&object.value).ok_or_else(|| incomplete("metadata.name"))?;
        if let Some(&first) = seen.get(&key) {
            return Err(PlanError::Duplicate {
                key,
                first: objects[first].component.clone(),
                second: object.component.clone(),
            });
        }
        seen.insert(key.clone(), objects.len());
        let tier = tier(&key.group, &key.kind);
        let shared = tier != Tier::Namespaces && key.namespace.is_none();
        let value = labelled(&object.value, tier, shared, applyset, &object.component);
        objects.push(Desired {
            key,
            api_version: object.api_version().to_string(),
            component: object.component.clone(),
            tier,
            shared,
            value,
        });
    }
    objects.sort_by_key(|d| d.tier);
    Ok(Plan {
        applyset: applyset.clone(),
        objects,
        components: components.to_vec(),
    })
}

/// The object as it is sent: a member carries the set's label and the hash of its
/// configuration; a shared object carries the set's claim and the hash under the set's own
/// annotation (each set writes its own value); a namespace carries neither label.
fn labelled(rendered: &Value, tier: Tier, shared: bool, set: &ApplySet, component: &str) -> Value {
    let mut value = rendered.clone();
    let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
        return value;
    };
    if tier != Tier::Namespaces {
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(labels) = labels.as_object_mut() {
            if shared {
                labels.insert(set.claim_label(), Value::String(component.to_string()));
            } else {
                labels.insert(PART_OF_LABEL.to_string(), Value::String(set.id.clone()));
            }
        }
    }
    let annotation = match shared {
        true => set.shared_hash_annotation(),
        false => CONFIG_HASH_ANNOTATION.to_string(),
    };
    let hash = Sha256::digest(value.to_string().as_bytes());
    let hash: String = hash.iter().take(16).map(|b| format!("{b:02x}")).collect();
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(annotation, Value::String(hash));
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::manifest::Object;
    use serde_json::json;

    fn object(component: &str, api_version: &str, kind: &str, name: &str) -> Object {
        Object {
            component: component.into(),
            value: json!({"apiVersion": api_version, "kind": kind,
                          "metadata": {"name": name, "namespace": "kf"}}),
        }
    }

    #[test]
    fn objects_are_put_in_tiers_keeping_the_render_order_within_a_tier() {
        let manifest = Manifest {
            objects: vec![
                object("a", "apps/v1", "Deployment", "d1"),
                object("a", "kubeflow.org/v1", "TFJob", "j"),
                object("a", "v1", "Service", "s"),
                object(
                    "b",
                    "apiextensions.k8s.io/v1",
                    "CustomResourceDefinition",
                    "c",
                ),
                object("a", "apps/v1", "Deployment", "d0"),
                object("b", "v1", "Namespace", "kf"),
                object("b", "rbac.authorization.k8s.io/v1", "ClusterRole", "r"),
                object("b", "v1", "ServiceAccount", "sa"),
                object("b", "v1", "ConfigMap", "cm"),
                object(
                    "b",
                    "admissionregistration.k8s.io/v1",
                    "ValidatingWebhookConfiguration",
                    "w",
                ),
            ],
        };
        let set = ApplySet::new("app", "dev", "kf");
        let plan = plan(&manifest, &set, &[]).unwrap();
        let order: Vec<&str> = plan.objects.iter().map(|d| d.key.name.as_str()).collect();
        assert_eq!(
            order,
            ["kf", "c", "r", "sa", "cm", "s", "d1", "d0", "j", "w"]
        );
    }

    #[test]
    fn members_are_labelled_and_namespaces_are_never_members() {
        let manifest = Manifest {
            objects: vec![
                object("a", "v1", "Namespace", "kf"),
                object("a", "v1", "ConfigMap", "c"),
            ],
        };
        let set = ApplySet::new("app", "dev", "kf");
        let plan = plan(&manifest, &set, &[]).unwrap();
        assert!(plan.objects[0].value["metadata"]["labels"].is_null());
        assert_eq!(
            plan.objects[1].value["metadata"]["labels"][PART_OF_LABEL],
            json!(set.id)
        );
        assert_eq!(
            plan.group_kinds(),
            BTreeSet::from(["ConfigMap".to_string()])
        );
    }

    #[test]
    fn an_object_is_unchanged_only_with_the_same_config_and_no_drift() {
        let set = ApplySet::new("app", "dev", "kf");
        let manifest = Manifest {
            objects: vec![object("a", "v1", "ConfigMap", "c")],
        };
        let mut desired = plan(&manifest, &set, &[]).unwrap().objects.remove(0);
        desired.value["data"] = json!({"k": "v", "list": [{"name": "x"}]});
        let mut live = desired.value.clone();
        live["metadata"]["uid"] = json!("u");
        live["data"]["list"][0]["defaulted"] = json!(true);
        assert!(
            unchanged(&desired, &live),
            "server additions are not changes"
        );
        let mut drifted = live.clone();
        drifted["data"]["k"] = json!("edited");
        assert!(
            !unchanged(&desired, &drifted),
            "a drifted value is re-applied"
        );
        let mut older = live.clone();
        older["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] = json!("0");
        assert!(
            !unchanged(&desired, &older),
            "another configuration may remove fields"
        );
    }

    #[test]
    fn a_duplicate_object_names_both_components() {
        let manifest = Manifest {
            objects: vec![
                object("a", "v1", "ConfigMap", "c"),
                object("b", "v1", "ConfigMap", "c"),
            ],
        };
        let message = plan(&manifest, &ApplySet::new("app", "dev", "kf"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("`a`") && message.contains("`b`"),
            "{message}"
        );
    }
}
