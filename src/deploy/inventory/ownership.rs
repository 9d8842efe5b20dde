//! Who owns an object on the cluster, and what an environment may do with it.
//!
//! Every object an environment renders is one of two sorts:
//!
//! - **Exclusive**: namespaced objects. An exclusive object belongs to exactly one ApplySet, as
//!   kubectl's ApplySet defines it: its `applyset.kubernetes.io/part-of` label names the set.
//!   mlkube applies them with the field manager `mlkube`.
//! - **Shared**: cluster-scoped objects (CRDs, StorageClasses, ClusterRoles, ...). Two
//!   environments of one app, or two apps, on one cluster render the same ones, so no set
//!   owns them alone. Each set that uses one holds a claim on it: a label of its own,
//!   `used-by.mlkube.io/<ApplySet id>` (its value is the component that renders it), applied
//!   with a field manager of its own, `mlkube@<ApplySet id>`. Server-side apply keeps each
//!   manager's fields apart, so one set's apply never removes another's claim (no flip-flop),
//!   and fields every set sets to the same value are co-owned, not conflicts. A shared object
//!   carries neither the app's, the environment's nor the component's name (the renderer leaves
//!   those labels off cluster-scoped objects), so the sets' configurations agree, whatever their
//!   apps and components are called, and `--force-conflicts` has nothing of another's to take.
//!
//! Before anything is written, every rendered object that exists on the cluster is judged
//! ([`judge`]):
//!
//! | live object | verdict |
//! |---|---|
//! | absent | create it |
//! | exclusive, labelled with this set | ours |
//! | shared, claimed by any mlkube set (or labelled by one, as before claims) | share it |
//! | shared, unclaimed but labelled as mlkube's (a CRD its last set released) | share it |
//! | labelled with another ApplySet | **owned by** that set: refused |
//! | no ApplySet label (and, if shared, no claim) | **exists, not ours**: refused |
//!
//! `diff` marks refused objects and exits 1; `apply` refuses them all, naming each object and its
//! owner, before writing anything (exit 2), unless `--adopt`: then it takes them over and says
//! so. Taking over makes mlkube's manager own every field the other managers wrote (`adopt`),
//! so the forced apply that follows removes the fields the render does not have. An adopted
//! object is a member like any other, so a later prune may delete it.
//!
//! Prune and delete only ever remove members: exclusive objects labelled with this set and
//! applied by `mlkube` (so created or adopted by it), never owned by a controller. A shared
//! object another set still claims is released instead, and completely: this set applies an
//! empty configuration under its manager. Server-side apply then drops every field that manager
//! alone owned (its claim label among them) and the manager itself, and leaves the fields the
//! others co-own: the object is exactly what the remaining claimants applied, and none of them
//! can ever conflict with a manager whose set is gone. The last user deletes the object, except
//! a CustomResourceDefinition (deleting one deletes every object of its kind, in every
//! namespace): an empty apply would strip its spec, so the last claim on a CRD is released by
//! taking the manager and the claim label off it ([`disowning`](crate::deploy::cluster::managed_fields::disowning)), leaving its fields in place
//! and owned by nobody. Such a CRD (unclaimed, labelled as mlkube's) is shared again by the next
//! set that renders it.
//!
//! Identity: the inventory (the ApplySet parent) records the app's id from `app.yaml`. An apply
//! whose parent exists but records another app's id refuses, naming both apps (an app without an
//! id is refused too, told how to give it one): two apps that share a name never share an
//! ApplySet.
//!
//! Caveats: a release is conditional on the object being as it was listed; two sets releasing
//! the same shared object at the same moment make one of them read it again and decide anew. An
//! app with an id is not checked against an inventory written by an app without one (it may be
//! that app, given an id since).

use serde_json::Value;

use super::applyset::{ApplySet, CLAIM_PREFIX, PART_OF_LABEL};
use crate::deploy::cluster::managed_fields::FIELD_MANAGER;
use crate::render::manifest::labels::{MANAGED_BY, MANAGER};

/// What this ApplySet may do with a rendered object that exists on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A member of this set, or a shared object other mlkube sets use too.
    Ours,
    /// A member of another ApplySet, named `app/env` when its labels say so.
    OwnedBy { owner: String },
    /// Exists, and no ApplySet owns it.
    NotOurs { managers: Vec<String> },
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Ours => write!(f, "ours"),
            Verdict::OwnedBy { owner } => write!(f, "owned by {owner}"),
            Verdict::NotOurs { managers } if managers.is_empty() => write!(f, "exists, not ours"),
            Verdict::NotOurs { managers } => {
                write!(f, "exists, not ours (written by {})", managers.join(", "))
            }
        }
    }
}

impl Verdict {
    /// Whose an object was, as `apply --adopt` tells what it took over.
    pub fn was(&self) -> String {
        match self {
            Verdict::Ours => "it was already this environment's".into(),
            Verdict::OwnedBy { owner } => format!("it was owned by {owner}"),
            Verdict::NotOurs { managers } if managers.is_empty() => {
                "it existed, and no environment owned it".into()
            }
            Verdict::NotOurs { managers } => format!(
                "it existed, written by {}, and no environment owned it",
                managers.join(", ")
            ),
        }
    }
}

/// Judge the live object of a rendered one (see the table above).
pub fn judge(set: &ApplySet, shared: bool, live: &Value) -> Verdict {
    let labels = &live["metadata"]["labels"];
    let part_of = labels[PART_OF_LABEL].as_str();
    if part_of == Some(set.id.as_str()) {
        return Verdict::Ours;
    }
    if shared && !claims(live).is_empty() {
        return Verdict::Ours;
    }
    if shared && part_of.is_some() && managers(live).iter().any(|m| m == FIELD_MANAGER) {
        // Applied by mlkube before claims: another environment's, shared the same way.
        return Verdict::Ours;
    }
    if shared && part_of.is_none() && labels[MANAGED_BY].as_str() == Some(MANAGER) {
        // Rendered by mlkube and released by every set that used it (a CRD is never deleted).
        return Verdict::Ours;
    }
    match part_of {
        Some(id) => Verdict::OwnedBy {
            owner: owner_name(live, id),
        },
        None => Verdict::NotOurs {
            managers: managers(live),
        },
    }
}

/// `app/env (ApplySet <id>)` from the mlkube labels of a member, or the bare id.
fn owner_name(live: &Value, id: &str) -> String {
    let labels = &live["metadata"]["labels"];
    match (
        labels["app.kubernetes.io/part-of"].as_str(),
        labels["mlkube.io/environment"].as_str(),
    ) {
        (Some(app), Some(env)) => format!("{app}/{env} (ApplySet {id})"),
        _ => format!("ApplySet {id}"),
    }
}

/// The field managers of an object.
pub fn managers(live: &Value) -> Vec<String> {
    let mut managers: Vec<String> = live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect();
    managers.dedup();
    managers
}

/// The ApplySet ids holding a claim on a shared object.
pub fn claims(live: &Value) -> Vec<String> {
    live["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(key, _)| key.strip_prefix(CLAIM_PREFIX).map(str::to_string))
        .collect()
}

/// The mlkube sets other than `set` that use a shared object: their claims, and the set of a
/// membership label mlkube wrote before claims.
pub fn other_users(set: &ApplySet, live: &Value) -> Vec<String> {
    let mut users: Vec<String> = claims(live)
        .into_iter()
        .filter(|id| *id != set.id)
        .collect();
    if let Some(id) = live["metadata"]["labels"][PART_OF_LABEL].as_str()
        && id != set.id
        && !users.iter().any(|u| u == id)
    {
        users.push(id.to_string());
    }
    users
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::deploy::cluster::managed_fields::disowning;

    fn crd(labels: Value, managers: &[&str]) -> Value {
        let managed: Vec<Value> = managers.iter().map(|m| json!({"manager": m})).collect();
        json!({"metadata": {"name": "widgets.example.com", "resourceVersion": "7",
                            "labels": labels, "managedFields": managed}})
    }

    #[test]
    fn a_crd_released_by_every_set_is_shared_again_and_a_foreign_one_is_not() {
        let set = ApplySet::new("app", "local", "ml");
        let released = crd(json!({MANAGED_BY: MANAGER}), &["kube-apiserver"]);
        assert_eq!(judge(&set, true, &released), Verdict::Ours);
        let foreign = crd(json!({"app": "other"}), &["helm"]);
        assert!(matches!(
            judge(&set, true, &foreign),
            Verdict::NotOurs { .. }
        ));
        assert!(matches!(
            judge(&set, false, &released),
            Verdict::NotOurs { .. }
        ));
    }

    #[test]
    fn disowning_keeps_the_other_managers_and_removes_the_claim_on_condition() {
        let set = ApplySet::new("app", "local", "ml");
        let live = crd(
            json!({set.claim_label(): "ops"}),
            &[&set.shared_manager, "mlkube@other", "kube-apiserver"],
        );
        let patch = disowning(&live, &set.shared_manager, &set.claim_label());
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["metadata"]["managedFields"],
            json!([{"manager": "mlkube@other"}, {"manager": "kube-apiserver"}])
        );
        assert_eq!(patch["metadata"]["labels"][set.claim_label()], Value::Null);
        let alone = crd(json!({}), &[&set.shared_manager]);
        let patch = disowning(&alone, &set.shared_manager, &set.claim_label());
        assert_eq!(patch["metadata"]["managedFields"], json!([{}]));
    }
}
