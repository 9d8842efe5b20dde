//! What an apply would change: a server-side dry-run apply of each planned object compared with
//! the live object, plus the inventory members that a prune would remove.
//!
//! The dry run is exactly the request `apply` sends (same field manager, same labels), so the
//! diff and the apply never disagree, and server defaults, admission mutations and fields other
//! managers own appear identically on both sides. Both sides are then normalised
//! ([`normalize`]): bookkeeping (`managedFields`, `resourceVersion`, `uid`, `generation`,
//! `creationTimestamp`) and `status` are dropped. Whole-object additions and removals show only
//! the fields mlkube sets ([`project`] on mlkube's managed fields), not every server default.
//! Secret values are masked unless asked otherwise ([`Masker`]).
//!
//! One object failing (a webhook without dry-run support, a rejected field) does not hide the
//! others: it is listed with its error and the verb exits 2.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::deploy::checks::secret::{is_secret, value_conflicts};
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::managed_fields::FIELD_MANAGER;
use crate::deploy::cluster::{
    self, ApplyMode, CONCURRENCY, Cluster, Conflict, Resolved, namespace_resource,
};
use crate::deploy::inventory::adopt::{self, RemovedField};
use crate::deploy::inventory::applyset::{self, ApplySetError, Member, NotOurs};
use crate::deploy::inventory::live;
use crate::deploy::inventory::ownership::{self, Verdict};
use crate::deploy::inventory::plan::{Desired, Plan};
use crate::render::kinds::Tier;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Prune,
    Unchanged,
}

/// One object's change.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    #[serde(flatten)]
    pub key: Key,
    pub component: Option<String>,
    pub action: Action,
    /// Normalised live object (masked), `None` for a creation and for a member known unchanged
    /// without asking the server (there is nothing to show).
    #[serde(skip)]
    pub before: Option<Value>,
    /// Normalised object after the apply (masked), `None` for a prune and for a member known
    /// unchanged without asking the server.
    #[serde(skip)]
    pub after: Option<Value>,
    /// Why the diff was computed without the server, or what else to know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Fields another manager owns: the apply will refuse them without `--force-conflicts`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<Conflict>,
    /// The object exists but is not this environment's: `owned by app/env ...` or `exists,
    /// not ours`. The apply refuses it without `--adopt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Of an object that is not ours: the fields other managers wrote that the render lacks,
    /// which `apply --adopt` removes (see [`crate::deploy::inventory::adopt`]); `after` is
    /// without them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<RemovedField>,
}

/// An object the server would not dry-run.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    #[serde(flatten)]
    pub key: Key,
    pub component: Option<String>,
    pub message: String,
}

/// A member that is no longer rendered but is not mlkube's to delete.
#[derive(Debug, Clone, Serialize)]
pub struct Kept {
    #[serde(flatten)]
    pub key: Key,
    pub reason: String,
}

#[derive(Debug, Default, Serialize)]
pub struct ChangeSet {
    pub changes: Vec<Change>,
    pub failures: Vec<Failure>,
    pub kept: Vec<Kept>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub prune: usize,
    pub unchanged: usize,
    pub failed: usize,
    /// Rendered objects that exist but are not this environment's.
    pub not_ours: usize,
    /// The environment's namespace does not exist, and the app does not render it: apply
    /// creates it. Not in `create`, which counts what the app renders, as apply counts it.
    pub creates_namespace: bool,
}

impl ChangeSet {
    pub fn summary(&self) -> Summary {
        let rendered = || {
            self.changes
                .iter()
                .filter(|c| !c.is_environment_namespace())
        };
        let count = |a| rendered().filter(|c| c.action == a).count();
        Summary {
            create: count(Action::Create),
            update: count(Action::Update),
            prune: count(Action::Prune),
            unchanged: count(Action::Unchanged),
            failed: self.failures.len(),
            not_ours: self.changes.iter().filter(|c| c.owner.is_some()).count(),
            creates_namespace: self.changes.iter().any(Change::is_environment_namespace),
        }
    }

    /// Whether the cluster differs from the plan (failures aside); an object that is not this
    /// environment's is a difference even when its content matches.
    pub fn has_differences(&self) -> bool {
        let s = self.summary();
        s.create + s.update + s.prune + s.not_ours > 0 || s.creates_namespace
    }
}

impl Change {
    /// The environment's namespace that apply creates, which the app does not render
    /// ([`missing_namespace`]): the only change of no component that creates a Namespace.
    fn is_environment_namespace(&self) -> bool {
        self.action == Action::Create
            && self.component.is_none()
            && self.key.group.is_empty()
            && self.key.kind == "Namespace"
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} to create, {} to update, {} to prune, {} unchanged",
            self.create, self.update, self.prune, self.unchanged
        )?;
        if self.creates_namespace {
            write!(f, ", and the environment's namespace")?;
        }
        if self.not_ours > 0 {
            write!(f, ", {} not ours", self.not_ours)?;
        }
        if self.failed > 0 {
            write!(f, ", {} failed", self.failed)?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error(transparent)]
    Inventory(#[from] ApplySetError),
    #[error("cannot check whether namespace `{namespace}` exists")]
    Namespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

#[derive(Debug, Clone, Copy, Default)]
pub struct DiffOptions {
    pub show_secrets: bool,
}

/// Compare the plan with the cluster.
pub async fn diff(
    cluster: &impl Cluster,
    plan: &Plan,
    options: DiffOptions,
) -> Result<ChangeSet, DiffError> {
    let inventory = applyset::read(cluster, &plan.applyset).await?;
    let members = match &inventory {
        Some(inventory) => applyset::members(cluster, &plan.applyset, inventory).await?,
        None => Vec::new(),
    };
    diff_members(cluster, plan, &members, options).await
}

/// Compare the plan with the cluster whose live members were listed already (`status` lists
/// them for itself): no list is sent twice.
///
/// Linear in the objects: each planned object looks its member up by key, the unchanged ones
/// ([`crate::deploy::inventory::plan::unchanged`]) cost no request, and the others one dry run
/// each, `CONCURRENCY` in flight. Objects that are not members are read first ([`live::read`]: a list
/// per kind and namespace where they are many).
pub async fn diff_members(
    cluster: &impl Cluster,
    plan: &Plan,
    members: &[Member],
    options: DiffOptions,
) -> Result<ChangeSet, DiffError> {
    let listed: HashMap<&Key, &Member> = members.iter().map(|m| (&m.key, m)).collect();
    let masker = Masker::new(options.show_secrets);
    let resolved: Vec<Option<Resolved>> = plan
        .objects
        .iter()
        .map(|d| cluster.resolve(&d.api_version, &d.key.kind))
        .collect();
    let wanted: Vec<live::Wanted<'_>> = plan
        .objects
        .iter()
        .zip(&resolved)
        .filter(|(d, _)| !listed.contains_key(&d.key))
        .filter_map(|(d, r)| Some((&d.key, r.as_ref()?)))
        .collect();
    let others = live::read(cluster, &wanted).await;

    let mut set = ChangeSet::default();
    if let Some(change) = missing_namespace(cluster, plan).await? {
        set.changes.push(change);
    }
    let results = diff_planned(cluster, plan, &resolved, &listed, &others).await;
    for result in results {
        match result {
            Ok(change) => set.changes.push(change),
            Err(failure) => set.failures.push(failure),
        }
    }
    for (member, verdict) in prunable(plan, members) {
        match verdict {
            Ok(()) => set.changes.push(prune_change(plan, member)),
            Err(reason) => set.kept.push(Kept {
                key: member.key.clone(),
                reason: reason.to_string(),
            }),
        }
    }
    for change in &mut set.changes {
        masker.mask(change);
    }
    Ok(set)
}

/// Diff every planned object, in the plan's order, against what was read of it: its member as
/// `listed`, or its live object among `others`; `CONCURRENCY` dry runs in flight.
async fn diff_planned(
    cluster: &impl Cluster,
    plan: &Plan,
    resolved: &[Option<Resolved>],
    listed: &HashMap<&Key, &Member>,
    others: &HashMap<Key, Result<Option<Value>, kube::Error>>,
) -> Vec<Result<Change, Failure>> {
    let defined = plan.defined_kinds();
    futures::stream::iter(
        plan.objects
            .iter()
            .zip(resolved)
            .map(|(desired, resolved)| {
                let seen = match listed.get(&desired.key) {
                    Some(member) => Seen::Member(&member.value),
                    None => Seen::Other(others.get(&desired.key)),
                };
                let planned = Planned {
                    plan,
                    defined: &defined,
                };
                diff_one(cluster, planned, desired, resolved.as_ref(), seen)
            })
            .collect::<Vec<_>>(),
    )
    .buffered(CONCURRENCY)
    .collect()
    .await
}

/// The change a prune makes to `member`; of a shared object other environments still use, only
/// this environment's claim goes, as its note says.
fn prune_change(plan: &Plan, member: &Member) -> Change {
    Change {
        key: member.key.clone(),
        component: member.component.clone(),
        action: Action::Prune,
        before: Some(normalize(&project_managed(&member.value))),
        after: None,
        note: member
            .shared
            .then(|| {
                let others = ownership::other_users(&plan.applyset, &member.value).len();
                (others > 0).then(|| {
                    format!(
                        "shared with {others} other environment(s): only this \
                         environment's claim is removed"
                    )
                })
            })
            .flatten(),
        conflicts: Vec::new(),
        owner: None,
        removed: Vec::new(),
    }
}

/// The members a prune would consider: no longer planned, in the `-c` scope, with the verdict on
/// whether they are mlkube's to delete.
pub fn prunable<'m>(plan: &Plan, members: &'m [Member]) -> Vec<(&'m Member, Result<(), NotOurs>)> {
    let planned = plan.keys();
    members
        .iter()
        .filter(|m| !planned.contains(&m.key) && plan.covers_component(m.component.as_deref()))
        .map(|m| (m, applyset::ownership(&m.value)))
        .collect()
}

/// The environment's namespace, when neither the cluster nor the plan has it: apply creates it.
async fn missing_namespace(
    cluster: &impl Cluster,
    plan: &Plan,
) -> Result<Option<Change>, DiffError> {
    let namespace = &plan.applyset.namespace;
    let key = plan.namespace_key();
    if plan.contains(&key) {
        return Ok(None);
    }
    let resolved = namespace_resource();
    let live = cluster
        .get(&resolved, None, namespace)
        .await
        .map_err(|source| DiffError::Namespace {
            namespace: namespace.clone(),
            source,
        })?;
    Ok(live.is_none().then(|| Change {
        key,
        component: None,
        action: Action::Create,
        before: None,
        after: Some(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        ),
        note: Some("the environment's namespace; apply creates it".into()),
        conflicts: Vec::new(),
        owner: None,
        removed: Vec::new(),
    }))
}

/// The plan, and the kinds its CustomResourceDefinitions define.
#[derive(Clone, Copy)]
struct Planned<'p> {
    plan: &'p Plan,
    defined: &'p HashSet<(&'p str, &'p str)>,
}

/// What was read of a planned object before its dry run.
enum Seen<'a> {
    /// It is a member: its value as listed.
    Member(&'a Value),
    /// It is not: its live object, if it exists, as read (`None`: not read).
    Other(Option<&'a Result<Option<Value>, kube::Error>>),
}

/// The change that applying `desired` makes: the object as the server would store it (by a
/// dry-run apply), beside the live one (`seen`, or read now), with whose it is and the fields
/// another manager owns. `resolved` is `None` when the cluster does not serve its kind.
async fn diff_one(
    cluster: &impl Cluster,
    Planned { plan, defined }: Planned<'_>,
    desired: &Desired,
    resolved: Option<&Resolved>,
    seen: Seen<'_>,
) -> Result<Change, Failure> {
    let Some(resolved) = resolved else {
        if defined.contains(&(desired.key.group.as_str(), desired.key.kind.as_str())) {
            return Ok(static_create(
                desired,
                "its CustomResourceDefinition is created by this apply".into(),
            ));
        }
        return Err(unserved(desired));
    };
    let listed = match seen {
        Seen::Member(value) => Some(value),
        Seen::Other(_) => None,
    };
    if let Some(live) = listed
        && crate::deploy::inventory::plan::unchanged(desired, live)
    {
        // Nothing to show, so nothing is copied: a no-op diff stays cheap at any size.
        return Ok(Change::bare(desired, Action::Unchanged));
    }
    let live = read_live(cluster, resolved, desired, seen).await?;
    let owner = match (listed, &live) {
        (None, Some(live)) if desired.tier != Tier::Namespaces => {
            match ownership::judge(&plan.applyset, desired.shared, live) {
                Verdict::Ours => None,
                verdict => Some(verdict.to_string()),
            }
        }
        _ => None,
    };
    let manager = plan.manager(desired);
    let (after, mut conflicts) = match dry_run(cluster, resolved, desired, manager, &live).await? {
        DryRun::Applied { after, conflicts } => (after, conflicts),
        DryRun::NoNamespaceYet => {
            return Ok(static_create(
                desired,
                format!(
                    "namespace `{}` does not exist yet; apply creates it",
                    desired.key.namespace.as_deref().unwrap_or_default()
                ),
            ));
        }
    };
    if let Some(live) = live.as_ref().filter(|_| is_secret(&desired.key)) {
        conflicts.extend(value_conflicts(&desired.value, live, manager));
    }
    // Adopting an object removes what its other managers wrote and the render lacks.
    let removed = match &owner {
        Some(_) => adopt::removals(&after, manager),
        None => Vec::new(),
    };
    let after = adopt::without(&after, &removed);
    let note = (!conflicts.is_empty()).then(|| {
        "another field manager owns some of these fields: apply refuses them unless --force-conflicts".to_string()
    });
    Ok(Change {
        note,
        conflicts,
        owner,
        removed,
        ..sides(desired, live, &after)
    })
}

impl Change {
    /// A change of `desired` with nothing to show: no sides, note, conflicts or owner.
    fn bare(desired: &Desired, action: Action) -> Change {
        Change {
            key: desired.key.clone(),
            component: Some(desired.component.clone()),
            action,
            before: None,
            after: None,
            note: None,
            conflicts: Vec::new(),
            owner: None,
            removed: Vec::new(),
        }
    }
}

/// A creation of `desired` told without asking the server, and why.
fn static_create(desired: &Desired, note: String) -> Change {
    Change {
        after: Some(normalize(&desired.value)),
        note: Some(note),
        ..Change::bare(desired, Action::Create)
    }
}

/// `desired` could not be diffed: why.
fn failure(desired: &Desired, message: String) -> Failure {
    Failure {
        key: desired.key.clone(),
        component: Some(desired.component.clone()),
        message,
    }
}

/// `desired`'s kind is not served, and no CustomResourceDefinition of this apply defines it.
fn unserved(desired: &Desired) -> Failure {
    failure(
        desired,
        format!(
            "the cluster does not serve {} {}\n  hint: install the CustomResourceDefinition for \
             it, or check the apiVersion",
            desired.api_version, desired.key.kind
        ),
    )
}

/// The live object of `desired`: as listed or read before, else read now.
async fn read_live(
    cluster: &impl Cluster,
    resolved: &Resolved,
    desired: &Desired,
    seen: Seen<'_>,
) -> Result<Option<Value>, Failure> {
    match seen {
        Seen::Member(value) => Ok(Some(value.clone())),
        Seen::Other(Some(Ok(value))) => Ok(value.clone()),
        Seen::Other(Some(Err(e))) => Err(failure(desired, cluster::api_message(e))),
        Seen::Other(None) => cluster
            .get(
                resolved,
                desired.key.namespace.as_deref(),
                &desired.key.name,
            )
            .await
            .map_err(|e| failure(desired, cluster::api_message(&e))),
    }
}

/// What the server says of a dry-run apply.
enum DryRun {
    /// The object as it would be stored, and the fields another manager owns (then the object
    /// is the answer of a forced apply, to show the rest of the change).
    Applied {
        after: Value,
        conflicts: Vec<Conflict>,
    },
    /// The object's namespace does not exist yet (the apply creates it).
    NoNamespaceYet,
}

/// Apply `desired` as `manager` in a dry run; on a conflict, again with force.
async fn dry_run(
    cluster: &impl Cluster,
    resolved: &Resolved,
    desired: &Desired,
    manager: &str,
    live: &Option<Value>,
) -> Result<DryRun, Failure> {
    let namespace = desired.key.namespace.as_deref();
    let name = &desired.key.name;
    let mode = |force| ApplyMode {
        dry_run: true,
        force,
        manager,
    };
    match cluster
        .apply(resolved, namespace, name, &desired.value, mode(false))
        .await
    {
        Ok(after) => Ok(DryRun::Applied {
            after,
            conflicts: Vec::new(),
        }),
        Err(e) if cluster::conflicts(&e).is_some() => {
            let conflicts = cluster::conflicts(&e).unwrap_or_default();
            let after = cluster
                .apply(resolved, namespace, name, &desired.value, mode(true))
                .await
                .map_err(|e| failure(desired, cluster::api_message(&e)))?;
            Ok(DryRun::Applied { after, conflicts })
        }
        Err(e) if live.is_none() && cluster::is_not_found(&e) && namespace.is_some() => {
            Ok(DryRun::NoNamespaceYet)
        }
        Err(e) => Err(failure(desired, cluster::api_message(&e))),
    }
}

/// The two sides of the change: a creation (the object as the server would store it, without
/// the fields the server fills in) or the live object beside it, unchanged or updated.
fn sides(desired: &Desired, live: Option<Value>, after: &Value) -> Change {
    match live {
        None => Change {
            after: Some(normalize(&project_managed(after))),
            ..Change::bare(desired, Action::Create)
        },
        Some(live) => {
            let (before, after) = (normalize(&live), normalize(after));
            let action = if before == after {
                Action::Unchanged
            } else {
                Action::Update
            };
            Change {
                before: Some(before),
                after: Some(after),
                ..Change::bare(desired, action)
            }
        }
    }
}

/// Drop what is bookkeeping rather than configuration, on either side of a diff.
pub fn normalize(object: &Value) -> Value {
    let mut object = canonical_order(object);
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            // Listed objects keep the server's order of fields, answers to an apply kube's:
            // metadata, labels and annotations in key order read the same from both.
            metadata.sort_keys();
            for field in ["labels", "annotations"] {
                if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
                    map.sort_keys();
                }
            }
            for field in [
                "managedFields",
                "resourceVersion",
                "uid",
                "generation",
                "creationTimestamp",
                "selfLink",
            ] {
                metadata.remove(field);
            }
            if let Some(annotations) = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.remove(crate::deploy::inventory::plan::CONFIG_HASH_ANNOTATION);
            }
            for field in ["labels", "annotations"] {
                if metadata
                    .get(field)
                    .is_some_and(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
                {
                    metadata.remove(field);
                }
            }
        }
    }
    object
}

/// The same object with `apiVersion`, `kind` and `metadata` first, the rest in their order: the
/// API returns them in different places depending on the request (single object or list item).
fn canonical_order(object: &Value) -> Value {
    let Some(map) = object.as_object() else {
        return object.clone();
    };
    let mut ordered = Map::new();
    for field in ["apiVersion", "kind", "metadata"] {
        if let Some(v) = map.get(field) {
            ordered.insert(field.into(), v.clone());
        }
    }
    for (k, v) in map {
        ordered.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(ordered)
}

/// The part of an object the mlkube field manager owns (plus its identity), for showing whole
/// objects without the server's defaults. Falls back to the whole object when mlkube owns nothing.
pub fn project_managed(object: &Value) -> Value {
    let Some(fields) = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["manager"] == FIELD_MANAGER && m["operation"] == "Apply")
        .and_then(|m| m["fieldsV1"].as_object())
    else {
        return object.clone();
    };
    let mut projected = project(object, fields).unwrap_or_else(|| json!({}));
    if let Some(map) = projected.as_object_mut() {
        for field in ["apiVersion", "kind"] {
            map.insert(field.into(), object[field].clone());
        }
        let metadata = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            for field in ["name", "namespace"] {
                if !object["metadata"][field].is_null() {
                    metadata.insert(field.into(), object["metadata"][field].clone());
                }
            }
        }
    }
    canonical_order(&projected)
}

/// Keep the parts of `value` that a managed-fields set (`fieldsV1`) names.
///
/// `f:<name>` names a field, `k:<json>` a list item by its key fields, `v:<json>` a set item by
/// value, `i:<n>` a list item by index, and `.` the node itself.
pub fn project(value: &Value, fields: &Map<String, Value>) -> Option<Value> {
    let children: Vec<(&String, &Value)> =
        fields.iter().filter(|(k, _)| k.as_str() != ".").collect();
    if children.is_empty() {
        return Some(value.clone());
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (field, sub) in map {
                let Some(spec) = fields.get(&format!("f:{field}")) else {
                    continue;
                };
                let sub_fields = spec.as_object().cloned().unwrap_or_default();
                if let Some(projected) = project(sub, &sub_fields) {
                    out.insert(field.clone(), projected);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let spec = children.iter().find_map(|(k, spec)| {
                    let matches = if let Some(keys) = k.strip_prefix("k:") {
                        serde_json::from_str::<Map<String, Value>>(keys)
                            .is_ok_and(|keys| keys.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))
                    } else if let Some(v) = k.strip_prefix("v:") {
                        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
                    } else if let Some(i) = k.strip_prefix("i:") {
                        i.parse::<usize>().is_ok_and(|i| i == index)
                    } else {
                        false
                    };
                    matches.then_some(*spec)
                });
                if let Some(spec) = spec {
                    let sub_fields = spec.as_object().cloned().unwrap_or_default();
                    if let Some(projected) = project(item, &sub_fields) {
                        out.push(projected);
                    }
                }
            }
            Some(Value::Array(out))
        }
        other => Some(other.clone()),
    }
}

/// Masks Secret values with a salted hash that is stable within one run: the same value gives
/// the same mask on both sides (no diff), a changed value a different mask (a diff that shows
/// the change without the value). The salt is new every run, so masks cannot be compared across
/// CI logs to guess values.
pub struct Masker {
    salt: Option<[u8; 16]>,
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

impl Masker {
    pub fn new(show_secrets: bool) -> Masker {
        if show_secrets {
            return Masker { salt: None };
        }
        Masker {
            salt: Some(crate::random::bytes()),
        }
    }

    fn mask_value(&self, salt: &[u8], value: &Value) -> Value {
        let mut hasher = Sha256::new();
        hasher.update(salt);
        hasher.update(value.to_string().as_bytes());
        let digest = hasher.finalize();
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        Value::String(format!("(masked {hex})"))
    }

    fn mask_object(&self, salt: &[u8], object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            for field in ["data", "stringData"] {
                if let Some(data) = map.get_mut(field).and_then(Value::as_object_mut) {
                    for value in data.values_mut() {
                        *value = self.mask_value(salt, value);
                    }
                }
            }
        }
        if let Some(annotation) = object.pointer_mut(&format!(
            "/metadata/annotations/{}",
            LAST_APPLIED.replace('/', "~1")
        )) {
            *annotation = self.mask_value(salt, annotation);
        }
    }

    /// Mask both sides of a Secret's change.
    pub fn mask(&self, change: &mut Change) {
        let Some(salt) = &self.salt else { return };
        if !is_secret(&change.key) {
            return;
        }
        for side in [&mut change.before, &mut change.after]
            .into_iter()
            .flatten()
        {
            self.mask_object(salt, side);
        }
    }
}

fn to_yaml(value: &Option<Value>) -> String {
    match value {
        Some(v) => {
            serde_yaml::to_string(v).unwrap_or_else(|e| format!("# cannot show as YAML: {e}\n"))
        }
        None => String::new(),
    }
}

/// The unified diff of one change, uncoloured.
pub fn unified(change: &Change) -> String {
    let (before, after) = (to_yaml(&change.before), to_yaml(&change.after));
    let path = match &change.key.namespace {
        Some(ns) => format!("{}/{ns}/{}", change.key.group_kind(), change.key.name),
        None => format!("{}/{}", change.key.group_kind(), change.key.name),
    };
    let old = if change.before.is_some() {
        format!("live/{path}")
    } else {
        "/dev/null".to_string()
    };
    let new = if change.after.is_some() {
        format!("mlkube/{path}")
    } else {
        "/dev/null".to_string()
    };
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&old, &new)
        .to_string()
}

/// The human-readable diff: a heading per changed object, its unified diff, notes and
/// conflicts; then the failures. The summary line is left to the caller (it goes to stderr).
/// The changes a diff shows: everything but unchanged objects that are this environment's.
fn differing(set: &ChangeSet) -> impl Iterator<Item = &Change> {
    set.changes
        .iter()
        .filter(|c| c.action != Action::Unchanged || c.owner.is_some())
}

/// `update Deployment.apps ml/resnet-v1 (component resnet)`.
fn headline(change: &Change) -> String {
    let verb = match change.action {
        Action::Create => "create",
        Action::Update => "update",
        Action::Prune => "prune",
        Action::Unchanged => "unchanged",
    };
    let component = change
        .component
        .as_deref()
        .map(|c| format!(" (component {c})"))
        .unwrap_or_default();
    format!("{verb} {}{component}", change.key)
}

/// `diff --summary`: one line per object that differs, marked when it is not this
/// environment's or has conflicts; the counts follow on stderr as after a full diff.
pub fn render_summary(set: &ChangeSet) -> String {
    let mut out = String::new();
    for change in differing(set) {
        let mut line = headline(change);
        if let Some(owner) = &change.owner {
            let _ = write!(line, "; {owner}");
        }
        if !change.removed.is_empty() {
            let _ = write!(line, "; adopting removes {} field(s)", change.removed.len());
        }
        if !change.conflicts.is_empty() {
            let _ = write!(line, "; {} conflict(s)", change.conflicts.len());
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

pub fn render_text(set: &ChangeSet, color: bool) -> String {
    let paint = |code: &str, text: &str| {
        if color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    };
    let mut out = String::new();
    for change in differing(set) {
        let _ = writeln!(out, "{}", paint("1", &format!("# {}", headline(change))));
        if let Some(owner) = &change.owner {
            let _ = writeln!(out, "# {owner}: apply refuses it unless --adopt");
        }
        for removal in &change.removed {
            let _ = writeln!(out, "# adopting removes {removal}");
        }
        if let Some(note) = &change.note {
            let _ = writeln!(out, "# note: {note}");
        }
        for conflict in &change.conflicts {
            let _ = writeln!(
                out,
                "# conflict: {} is owned by field manager \"{}\"",
                conflict.field, conflict.manager
            );
        }
        for line in unified(change).lines() {
            let painted = if line.starts_with("+++") || line.starts_with("---") {
                paint("1", line)
            } else if line.starts_with('+') {
                paint("32", line)
            } else if line.starts_with('-') {
                paint("31", line)
            } else if line.starts_with("@@") {
                paint("36", line)
            } else {
                line.to_string()
            };
            let _ = writeln!(out, "{painted}");
        }
    }
    for kept in &set.kept {
        let _ = writeln!(
            out,
            "# kept {}: no longer rendered, but {}",
            kept.key, kept.reason
        );
    }
    out
}

/// The failures, one block each, for stderr.
pub fn render_failures(set: &ChangeSet) -> String {
    let mut out = String::new();
    for failure in &set.failures {
        let _ = writeln!(out, "mlkube: error: {}: {}", failure.key, failure.message);
    }
    out
}

/// The same as data: every object with its action and unified diff, and the summary.
pub fn render_json(set: &ChangeSet) -> Value {
    let changes: Vec<Value> = set
        .changes
        .iter()
        .map(|c| {
            let mut value = serde_json::to_value(c).unwrap_or_default();
            if c.action != Action::Unchanged
                && let Some(map) = value.as_object_mut()
            {
                map.insert("diff".into(), Value::String(unified(c)));
            }
            value
        })
        .collect();
    json!({
        "changes": changes,
        "failures": set.failures,
        "kept": set.kept,
        "summary": set.summary(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret_change(before: &str, after: &str) -> Change {
        Change {
            key: Key {
                group: String::new(),
                kind: "Secret".into(),
                namespace: Some("ns".into()),
                name: "s".into(),
            },
            component: None,
            action: Action::Update,
            before: Some(json!({"data": {"a": "c2FtZQ==", "b": before}})),
            after: Some(json!({"data": {"a": "c2FtZQ==", "b": after}})),
            note: None,
            conflicts: Vec::new(),
            owner: None,
            removed: Vec::new(),
        }
    }

    #[test]
    fn bookkeeping_and_status_are_normalised_away() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u", "resourceVersion": "7", "generation": 2,
                         "creationTimestamp": "t", "managedFields": [], "annotations": {}},
            "data": {"k": "v"}, "status": {"x": 1}});
        assert_eq!(
            normalize(&live),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn equal_secret_values_mask_equally_and_changed_ones_differently() {
        let masker = Masker::new(false);
        let mut change = secret_change("b2xk", "bmV3");
        masker.mask(&mut change);
        let (before, after) = (change.before.unwrap(), change.after.unwrap());
        assert_eq!(before["data"]["a"], after["data"]["a"]);
        assert_ne!(before["data"]["b"], after["data"]["b"]);
        let shown = format!("{before}{after}");
        assert!(
            !shown.contains("c2FtZQ") && !shown.contains("b2xk") && !shown.contains("bmV3"),
            "{shown}"
        );
        assert!(shown.contains("(masked "), "{shown}");
    }

    #[test]
    fn show_secrets_leaves_values_alone() {
        let mut change = secret_change("b2xk", "bmV3");
        Masker::new(true).mask(&mut change);
        assert_eq!(change.after.unwrap()["data"]["b"], "bmV3");
    }

    #[test]
    fn projection_keeps_only_managed_fields_matching_list_items_by_key() {
        let object = json!({"spec": {"replicas": 1, "strategy": {"type": "RollingUpdate"},
            "template": {"spec": {"containers": [
                {"name": "a", "image": "x", "imagePullPolicy": "Always"},
                {"name": "b", "image": "y"}]}}}});
        let fields = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}});
        let projected = project(&object, fields.as_object().unwrap()).unwrap();
        assert_eq!(
            projected,
            json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}})
        );
    }

    #[test]
    fn a_unified_diff_shows_exactly_the_changed_field() {
        let change = Change {
            key: Key {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: Some("ns".into()),
                name: "d".into(),
            },
            component: Some("c".into()),
            action: Action::Update,
            before: Some(json!({"spec": {"replicas": 1, "paused": false}})),
            after: Some(json!({"spec": {"replicas": 2, "paused": false}})),
            note: None,
            conflicts: Vec::new(),
            owner: None,
            removed: Vec::new(),
        };
        let text = unified(&change);
        let changed: Vec<&str> = text
            .lines()
            .filter(|l| {
                (l.starts_with('+') || l.starts_with('-'))
                    && !l.starts_with("+++")
                    && !l.starts_with("---")
            })
            .collect();
        assert_eq!(changed, ["-  replicas: 1", "+  replicas: 2"]);
        assert!(text.contains("--- live/Deployment.apps/ns/d"), "{text}");
    }

    /// A cluster where `count` ConfigMaps of environment `local` were applied, and their plan.
    async fn applied_config_maps(
        count: usize,
    ) -> (crate::deploy::cluster::memory::MemoryCluster, Plan) {
        use crate::deploy::apply::{self, ApplyOptions};
        use crate::deploy::report::{ApplyError, Consent, Quiet};
        use crate::render::manifest::{Manifest, Object};
        struct Yes;
        impl Consent for Yes {
            fn confirm(&self, _: &'static str, _: &[Key]) -> Result<(), ApplyError> {
                Ok(())
            }
        }
        let objects = (0..count)
            .map(|i| Object {
                component: "c".into(),
                value: json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": "ml"},
                    "data": {"i": i.to_string()}}),
            })
            .collect();
        let set = crate::deploy::inventory::applyset::ApplySet::new("app", "local", "ml");
        let plan = crate::deploy::inventory::plan::plan(&Manifest { objects }, &set, &[]).unwrap();
        let cluster = crate::deploy::cluster::memory::MemoryCluster::new();
        let cancel = crate::deploy::cluster::cancel::Cancel::new();
        let options = ApplyOptions {
            dry_run: false,
            prune: false,
            consent: &Yes,
            force_conflicts: false,
            wait: false,
            timeout: std::time::Duration::from_secs(5),
            allow_empty: false,
            adopt: false,
            observer: &Quiet,
            cancel: &cancel,
        };
        apply::apply(&cluster, &plan, &options).await.unwrap();
        (cluster, plan)
    }

    #[tokio::test]
    async fn a_no_op_diff_and_the_drift_check_of_status_list_each_kind_once_and_read_nothing_per_object()
     {
        let (cluster, plan) = applied_config_maps(300).await;
        let (lists, gets) = cluster.reads();
        let changes = diff(&cluster, &plan, DiffOptions::default()).await.unwrap();
        assert_eq!(changes.summary().unchanged, 300);
        // The inventory's parent and the environment's namespace are read; the one kind listed.
        assert_eq!(cluster.reads(), (lists + 1, gets + 2), "diff");

        let (lists, gets) = cluster.reads();
        crate::observe::status::status(&cluster, &plan)
            .await
            .unwrap();
        // `status` reads the parent twice (the inventory, then its record of the last apply).
        assert_eq!(cluster.reads(), (lists + 1, gets + 3), "status");
    }

    #[test]
    fn the_summary_reads_like_the_issue_asks() {
        let set = ChangeSet {
            changes: vec![secret_change("a", "b")],
            failures: Vec::new(),
            kept: Vec::new(),
        };
        assert_eq!(
            set.summary().to_string(),
            "0 to create, 1 to update, 0 to prune, 0 unchanged"
        );
        assert!(set.has_differences());
    }
}
