//! An in-memory [`Cluster`] for fast tests of the deploy decisions: what is written, refused,
//! pruned or kept, and in which order.
//!
//! It models what those decisions depend on and no more: kinds and their scope (a CRD's kind
//! resolves after [`Cluster::refresh`]), namespaces that must exist, label selectors, resource
//! versions that move only when an object changes, and server-side apply with one configuration
//! per field manager: the live object is the merge of every manager's last configuration in the
//! order they were written, a field set to another value by another manager is a conflict
//! unless forced, a field a manager stops sending goes away unless another manager sends it too
//! (one that sends nothing is dropped), a resource version sent is a precondition, a manager taken off an object leaves the fields only it
//! sent owned by nobody ([`Cluster::disown`]), and a Secret's `stringData` lands in `data`. Every write is recorded
//! ([`MemoryCluster::writes`]), and so is every dry run ([`MemoryCluster::dry_runs`]).
//! Validation is modelled only as far as a test asks: an object it names is rejected, in a dry
//! run as in a write, once its namespace exists ([`MemoryCluster::reject`]), or only its write fails
//! ([`MemoryCluster::fail_applies_of`]). Defaulting and controllers are not modelled: a test
//! sets the status a controller or kubelet would write ([`MemoryCluster::set_status`]); the
//! cluster tests prove the same decisions against a real API server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use kube::discovery::ApiResource;
use serde_json::{Map, Value, json};

use super::{ApplyMode, Cluster, ClusterError, Resolved};

/// One request that changed (or, as a dry run, would have changed) the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// `Kind namespace/name` (or `Kind name`), and the field manager.
    Apply {
        object: String,
        manager: String,
    },
    Delete {
        object: String,
    },
    /// A field manager taken off the object, its fields left in place.
    Disown {
        object: String,
        manager: String,
    },
    /// The fields of the other managers given to this one (`apply --adopt`).
    TakeOver {
        object: String,
        manager: String,
    },
}

#[derive(Debug, Clone)]
struct Stored {
    /// Each manager's last applied configuration, the last written last.
    configs: Vec<(String, Value)>,
    resource_version: u64,
    uid: u64,
    /// The status a test set, as a controller or kubelet would ([`MemoryCluster::set_status`]).
    status: Option<Value>,
}

#[derive(Debug, Default)]
struct State {
    kinds: Vec<Kind>,
    /// Kinds of CRDs applied since the last refresh.
    pending_kinds: Vec<Kind>,
    objects: BTreeMap<(String, String, Option<String>, String), Stored>,
    next_version: u64,
    writes: Vec<Write>,
    /// Every dry-run apply, as `Kind namespace/name`.
    dry_runs: Vec<String>,
    /// Objects whose writes fail, though their dry runs pass.
    failing: BTreeSet<String>,
    /// Objects the server rejects, dry run or not, with its message.
    rejected: BTreeMap<String, String>,
    /// How many lists and gets were sent ([`MemoryCluster::reads`]).
    lists: usize,
    gets: usize,
}

#[derive(Debug, Clone)]
struct Kind {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
}

/// The built-in kinds the deploy tests use.
const BUILT_IN: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Namespace", "namespaces", false),
    ("", "v1", "ConfigMap", "configmaps", true),
    ("", "v1", "Secret", "secrets", true),
    ("", "v1", "Service", "services", true),
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("", "v1", "Pod", "pods", true),
    ("", "v1", "Event", "events", true),
    ("apps", "v1", "Deployment", "deployments", true),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
];

/// An API server in memory.
#[derive(Debug)]
pub struct MemoryCluster {
    state: Mutex<State>,
}

impl Default for MemoryCluster {
    fn default() -> Self {
        MemoryCluster::new()
    }
}

impl MemoryCluster {
    pub fn new() -> MemoryCluster {
        let kinds = BUILT_IN
            .iter()
            .map(|(group, version, kind, plural, namespaced)| Kind {
                group: (*group).into(),
                version: (*version).into(),
                kind: (*kind).into(),
                plural: (*plural).into(),
                namespaced: *namespaced,
            })
            .collect();
        MemoryCluster {
            state: Mutex::new(State {
                kinds,
                next_version: 1,
                ..State::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every write so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.state().writes.clone()
    }

    /// Forget the writes and dry runs recorded so far.
    pub fn clear_writes(&self) {
        let mut state = self.state();
        state.writes.clear();
        state.dry_runs.clear();
    }

    /// How many lists and gets were sent so far.
    pub fn reads(&self) -> (usize, usize) {
        let state = self.state();
        (state.lists, state.gets)
    }

    /// Every dry-run apply so far, in order.
    pub fn dry_runs(&self) -> Vec<String> {
        self.state().dry_runs.clone()
    }

    /// Make every write of the object called `name` fail from now on, while its dry runs pass
    /// (as when a quota is used up between the two).
    pub fn fail_applies_of(&self, name: &str) {
        self.state().failing.insert(name.to_string());
    }

    /// Reject every apply of the object called `name` from now on, dry runs included, with
    /// `message` as the server's validation would.
    pub fn reject(&self, name: &str, message: &str) {
        self.state()
            .rejected
            .insert(name.to_string(), message.to_string());
    }

    /// Create `object` as another field manager would (`kubectl create`, another tool).
    pub fn create_as(&self, manager: &str, object: Value) {
        let resolved = self
            .resolve(
                object["apiVersion"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default(),
            )
            .expect("a kind the memory cluster serves");
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mode = ApplyMode {
            dry_run: false,
            force: true,
            manager,
        };
        let mut state = self.state();
        apply_locked(
            &mut state,
            &resolved,
            namespace.as_deref(),
            &name,
            &object,
            mode,
        )
        .expect("the object is created");
        state.writes.pop();
    }

    /// Replace the status of an object that exists, as its controller (or the kubelet, for a
    /// pod) would; not a write of any field manager, so not recorded.
    pub fn set_status(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        status: Value,
    ) {
        let resolved = self
            .resolve(api_version, kind)
            .expect("a kind the memory cluster serves");
        let mut state = self.state();
        let stored = state
            .objects
            .get_mut(&object_key(&resolved, namespace, name))
            .expect("the object exists");
        stored.status = Some(status);
    }

    /// The live object, as a GET would return it.
    pub fn object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let resolved = self.resolve(api_version, kind)?;
        let state = self.state();
        let stored = state.objects.get(&object_key(&resolved, namespace, name))?;
        Some(live(&resolved, namespace, name, stored))
    }
}

fn object_key(
    resolved: &Resolved,
    namespace: Option<&str>,
    name: &str,
) -> (String, String, Option<String>, String) {
    (
        resolved.resource.group.clone(),
        resolved.resource.kind.clone(),
        namespace
            .filter(|_| resolved.namespaced)
            .map(str::to_string),
        name.to_string(),
    )
}

fn describe(resolved: &Resolved, namespace: Option<&str>, name: &str) -> String {
    match namespace.filter(|_| resolved.namespaced) {
        Some(ns) => format!("{} {ns}/{name}", resolved.resource.kind),
        None => format!("{} {name}", resolved.resource.kind),
    }
}

fn status(code: u16, reason: &str, message: String, causes: Vec<Value>) -> kube::Error {
    let status = json!({"status": "Failure", "code": code, "reason": reason, "message": message,
                        "details": {"causes": causes}});
    kube::Error::Api(Box::new(
        serde_json::from_value(status).expect("a valid Status"),
    ))
}

/// Deep merge: objects by key, everything else replaced.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (k, v) in from {
                match into.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        into.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// The leaves (scalars, lists) of a configuration, with their paths; an empty map sets nothing.
fn leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                leaves(v, path, out);
                path.pop();
            }
        }
        other => out.push((path.clone(), other.clone())),
    }
}

fn at<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, k| v.get(k))
}

fn remove_at(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for k in parents {
        match current.get_mut(k) {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Some(map) = current.as_object_mut() {
        map.remove(last);
    }
}

/// `f:` field sets as `managedFields` records them, lists counted as leaves.
fn fields_v1(value: &Value) -> Value {
    match value {
        Value::Object(map) if !map.is_empty() => Value::Object(
            map.iter()
                .map(|(k, v)| (format!("f:{k}"), fields_v1(v)))
                .collect::<Map<String, Value>>(),
        ),
        _ => json!({}),
    }
}

fn live(resolved: &Resolved, namespace: Option<&str>, name: &str, stored: &Stored) -> Value {
    let mut object = json!({
        "apiVersion": resolved.resource.api_version,
        "kind": resolved.resource.kind,
        "metadata": {"name": name},
    });
    let secret = resolved.resource.group.is_empty() && resolved.resource.kind == "Secret";
    for (_, config) in &stored.configs {
        merge(&mut object, config);
        if secret {
            string_data_into_data(&mut object);
        }
    }
    let metadata = &mut object["metadata"];
    if let Some(ns) = namespace.filter(|_| resolved.namespaced) {
        metadata["namespace"] = json!(ns);
    }
    metadata["uid"] = json!(format!("uid-{}", stored.uid));
    metadata["resourceVersion"] = json!(stored.resource_version.to_string());
    metadata["managedFields"] = Value::Array(
        stored
            .configs
            .iter()
            .filter(|(manager, _)| manager != ORPHANED)
            .map(|(manager, config)| {
                json!({"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1",
                       "fieldsV1": fields_v1(config)})
            })
            .collect(),
    );
    if resolved.resource.kind == "CustomResourceDefinition" {
        object["status"] = json!({"conditions": [{"type": "Established", "status": "True"}]});
    }
    if let Some(status) = &stored.status {
        object["status"] = status.clone();
    }
    object
}

/// A Secret's `stringData` is written into `data` and never stored; ownership stays with the
/// path each manager wrote.
fn string_data_into_data(secret: &mut Value) {
    use base64::Engine as _;
    let Some(Value::Object(strings)) = secret.as_object_mut().and_then(|s| s.remove("stringData"))
    else {
        return;
    };
    for (key, value) in strings {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(value.as_str().unwrap_or(""));
        secret["data"][key] = Value::String(encoded);
    }
}

/// The fields of disowned managers that no other manager set: they stay on the object, owned by
/// nobody, until a manager applies them ([`Cluster::disown`]).
const ORPHANED: &str = "";

/// Only what a manager configures: identity and bookkeeping are the server's.
fn configuration(object: &Value) -> Value {
    let mut config = object.clone();
    if let Some(map) = config.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "managedFields",
            ] {
                metadata.remove(field);
            }
        }
    }
    config
}

fn apply_locked(
    state: &mut State,
    resolved: &Resolved,
    namespace: Option<&str>,
    name: &str,
    object: &Value,
    mode: ApplyMode<'_>,
) -> Result<Value, kube::Error> {
    let described = describe(resolved, namespace, name);
    if mode.dry_run {
        state.dry_runs.push(described.clone());
    }
    admit(state, resolved, namespace, name, &described, mode)?;
    let key = object_key(resolved, namespace, name);
    let before = state.objects.get(&key).cloned();
    if let (Some(expected), Some(before)) =
        (object["metadata"]["resourceVersion"].as_str(), &before)
        && expected != before.resource_version.to_string()
    {
        // A resource version in the configuration is a precondition, as on the server.
        let message = format!("{described}: the object has been modified");
        return Err(status(409, "Conflict", message, vec![]));
    }
    let mut stored = before.clone().unwrap_or_else(|| Stored {
        configs: Vec::new(),
        resource_version: 0,
        uid: state.next_version,
        status: None,
    });
    configure(&mut stored, configuration(object), mode)?;
    let changed = before.as_ref().is_none_or(|before| {
        strip(&live(resolved, namespace, name, before))
            != strip(&live(resolved, namespace, name, &stored))
    });
    if changed {
        stored.resource_version = if mode.dry_run {
            stored.resource_version
        } else {
            state.next_version
        };
    }
    let result = live(resolved, namespace, name, &stored);
    if !mode.dry_run {
        state.writes.push(Write::Apply {
            object: described,
            manager: mode.manager.to_string(),
        });
        if changed {
            state.next_version += 1;
        }
        if resolved.resource.kind == "CustomResourceDefinition"
            && let Some(kind) = defined_kind(object)
        {
            state.pending_kinds.push(kind);
        }
        state.objects.insert(key, stored);
    }
    Ok(result)
}

/// Refuse an apply the server refuses before it looks at the fields: in a namespace that does
/// not exist (admission), then what a test made it reject or fail (validation).
fn admit(
    state: &State,
    resolved: &Resolved,
    namespace: Option<&str>,
    name: &str,
    described: &str,
    mode: ApplyMode<'_>,
) -> Result<(), kube::Error> {
    // Validation comes after admission, which refuses anything in a missing namespace.
    if let Some(ns) = namespace.filter(|_| resolved.namespaced) {
        let namespace_key = (String::new(), "Namespace".to_string(), None, ns.to_string());
        if !state.objects.contains_key(&namespace_key) {
            return Err(status(
                404,
                "NotFound",
                format!("namespaces \"{ns}\" not found"),
                vec![],
            ));
        }
    }
    if let Some(message) = state.rejected.get(name) {
        return Err(status(422, "Invalid", message.clone(), vec![]));
    }
    if state.failing.contains(name) && !mode.dry_run {
        return Err(status(
            422,
            "Invalid",
            format!("{described} is invalid"),
            vec![],
        ));
    }
    Ok(())
}

/// Make `config` `mode.manager`'s configuration of `stored`: it takes the fields nobody owns,
/// and a field another manager set to another value is a conflict, unless forced.
fn configure(stored: &mut Stored, config: Value, mode: ApplyMode<'_>) -> Result<(), kube::Error> {
    let mut mine = Vec::new();
    leaves(&config, &mut Vec::new(), &mut mine);
    let mut conflicts = Vec::new();
    for (manager, other) in stored.configs.iter_mut() {
        if manager == ORPHANED {
            // Fields no manager owns are taken by whoever applies them.
            for (path, _) in &mine {
                remove_at(other, path);
            }
            continue;
        }
        if manager == mode.manager {
            continue;
        }
        for (path, value) in &mine {
            if at(other, path).is_some_and(|theirs| theirs != value) {
                if mode.force {
                    remove_at(other, path);
                } else {
                    conflicts.push(json!({"reason": "FieldManagerConflict",
                        "message": format!("conflict with \"{manager}\""),
                        "field": format!(".{}", path.join("."))}));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(status(
            409,
            "Conflict",
            format!("Apply failed with {} conflicts", conflicts.len()),
            conflicts,
        ));
    }
    // The last write comes last, so it wins where paths do not overlap but values do (a
    // Secret's `data` and `stringData`).
    stored.configs.retain(|(m, _)| m != mode.manager);
    if !mine.is_empty() {
        // A manager that sets nothing any more owns nothing, and the server drops it.
        stored.configs.push((mode.manager.to_string(), config));
    }
    Ok(())
}

/// The live object without its resource version, to tell whether an apply changed anything.
fn strip(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("resourceVersion");
    }
    object
}

fn defined_kind(crd: &Value) -> Option<Kind> {
    let spec = &crd["spec"];
    let versions = spec["versions"].as_array()?;
    let version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or(versions.first())?;
    Some(Kind {
        group: spec["group"].as_str()?.to_string(),
        version: version["name"].as_str()?.to_string(),
        kind: spec["names"]["kind"].as_str()?.to_string(),
        plural: spec["names"]["plural"].as_str()?.to_string(),
        namespaced: spec["scope"] != "Cluster",
    })
}

fn resolved(kind: &Kind) -> Resolved {
    let api_version = if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    };
    Resolved {
        resource: ApiResource {
            group: kind.group.clone(),
            version: kind.version.clone(),
            api_version,
            kind: kind.kind.clone(),
            plural: kind.plural.clone(),
        },
        namespaced: kind.namespaced,
    }
}

/// `a=b`, `a` and `!a`, joined by commas.
fn selects(selector: &str, labels: &Value) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .all(|term| {
            if let Some(key) = term.strip_prefix('!') {
                labels.get(key).is_none()
            } else if let Some((key, value)) = term.split_once('=') {
                labels.get(key).and_then(Value::as_str) == Some(value)
            } else {
                labels.get(term).is_some()
            }
        })
}

/// Whether `object` has each `path=value` of `selector` (a path of dotted field names).
fn fields_match(selector: &str, object: &Value) -> bool {
    selector
        .split(',')
        .filter_map(|term| term.trim().split_once('='))
        .all(|(path, value)| {
            let field = path.split('.').fold(object, |at, name| &at[name]);
            field.as_str() == Some(value)
        })
}

fn disown_locked(
    state: &mut State,
    resolved: &Resolved,
    live: &Value,
    manager: &str,
    label: &str,
) -> Result<(), kube::Error> {
    let namespace = live["metadata"]["namespace"].as_str();
    let name = live["metadata"]["name"].as_str().unwrap_or_default();
    let described = describe(resolved, namespace, name);
    let key = object_key(resolved, namespace, name);
    let Some(stored) = state.objects.get_mut(&key) else {
        return Err(status(
            404,
            "NotFound",
            format!("{described} not found"),
            vec![],
        ));
    };
    if live["metadata"]["resourceVersion"] != stored.resource_version.to_string().as_str() {
        let message = format!("{described}: the object has been modified");
        return Err(status(409, "Conflict", message, vec![]));
    }
    let label_path = [
        "metadata".to_string(),
        "labels".to_string(),
        label.to_string(),
    ];
    let mut orphaned = json!({});
    for (owner, config) in &mut stored.configs {
        remove_at(config, &label_path);
        if owner == manager || owner == ORPHANED {
            merge(&mut orphaned, config);
        }
    }
    stored
        .configs
        .retain(|(owner, _)| owner != manager && owner != ORPHANED);
    stored.configs.insert(0, (ORPHANED.to_string(), orphaned));
    stored.resource_version = state.next_version;
    state.next_version += 1;
    state.writes.push(Write::Disown {
        object: described,
        manager: manager.to_string(),
    });
    Ok(())
}

/// Merge the configurations of every manager but the subresources' and mlkube's into
/// `manager`'s, as [`crate::deploy::cluster::managed_fields::transfer`] does to the managed fields.
fn take_over_locked(
    state: &mut State,
    resolved: &Resolved,
    live: &Value,
    manager: &str,
) -> Result<(), kube::Error> {
    let namespace = live["metadata"]["namespace"].as_str();
    let name = live["metadata"]["name"].as_str().unwrap_or_default();
    let described = describe(resolved, namespace, name);
    let Some(stored) = state
        .objects
        .get_mut(&object_key(resolved, namespace, name))
    else {
        return Err(status(
            404,
            "NotFound",
            format!("{described} not found"),
            vec![],
        ));
    };
    if live["metadata"]["resourceVersion"] != stored.resource_version.to_string().as_str() {
        let message = format!("{described}: the object has been modified");
        return Err(status(409, "Conflict", message, vec![]));
    }
    let taken =
        |owner: &str| owner == manager || !(owner.starts_with("mlkube") || owner == ORPHANED);
    let mut merged = json!({});
    for (owner, config) in &stored.configs {
        if taken(owner) {
            merge(&mut merged, config);
        }
    }
    stored.configs.retain(|(owner, _)| !taken(owner));
    stored.configs.push((manager.to_string(), merged));
    stored.resource_version = state.next_version;
    state.next_version += 1;
    state.writes.push(Write::TakeOver {
        object: described,
        manager: manager.to_string(),
    });
    Ok(())
}

impl Cluster for MemoryCluster {
    /// Publishes no OpenAPI documents: objects are not walked along the server's schemas.
    async fn openapi(&self, _api_version: &str) -> Result<Option<Value>, kube::Error> {
        Ok(None)
    }

    async fn take_over(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
    ) -> Result<(), kube::Error> {
        take_over_locked(&mut self.state(), resolved, live, manager)
    }

    async fn disown(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
        label: &str,
    ) -> Result<(), kube::Error> {
        disown_locked(&mut self.state(), resolved, live, manager, label)
    }

    fn resolve(&self, api_version: &str, kind: &str) -> Option<Resolved> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.state()
            .kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
            .map(resolved)
    }

    fn resolve_group_kind(&self, group: &str, kind: &str) -> Option<Resolved> {
        self.state()
            .kinds
            .iter()
            .find(|k| k.group == group && k.kind == kind)
            .map(resolved)
    }

    async fn refresh(&self) -> Result<(), ClusterError> {
        let mut state = self.state();
        let pending = std::mem::take(&mut state.pending_kinds);
        state.kinds.extend(pending);
        Ok(())
    }

    async fn get(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, kube::Error> {
        let mut state = self.state();
        state.gets += 1;
        Ok(state
            .objects
            .get(&object_key(resolved, namespace, name))
            .map(|stored| live(resolved, namespace, name, stored)))
    }

    async fn apply(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
        object: &Value,
        mode: ApplyMode<'_>,
    ) -> Result<Value, kube::Error> {
        apply_locked(&mut self.state(), resolved, namespace, name, object, mode)
    }

    async fn delete(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        let key = object_key(resolved, namespace, name);
        if state.objects.remove(&key).is_some() {
            state.writes.push(Write::Delete {
                object: describe(resolved, namespace, name),
            });
        }
        Ok(())
    }

    async fn list(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        let mut state = self.state();
        state.lists += 1;
        Ok(state
            .objects
            .iter()
            .filter(|((group, kind, ns, _), _)| {
                *group == resolved.resource.group
                    && *kind == resolved.resource.kind
                    && (namespace.is_none() || ns.as_deref() == namespace)
            })
            .map(|((_, _, ns, name), stored)| live(resolved, ns.as_deref(), name, stored))
            .filter(|object| selects(label_selector, &object["metadata"]["labels"]))
            .collect())
    }

    async fn list_by_fields(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        field_selector: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        let listed = self.list(resolved, namespace, "").await?;
        Ok(listed
            .into_iter()
            .filter(|object| fields_match(field_selector, object))
            .collect())
    }
}
