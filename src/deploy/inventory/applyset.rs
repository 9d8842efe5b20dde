//! The inventory of what an environment applied, in the Kubernetes ApplySet format (KEP-3659),
//! so `kubectl` understands it too.
//!
//! One parent object per app and environment: a Secret named `mlkube-applyset-<app>-<env>` in
//! the environment's namespace, labelled `applyset.kubernetes.io/id` and annotated with the
//! tooling, the group-kinds of its members and the namespaces they live in. Members carry the
//! label `applyset.kubernetes.io/part-of: <id>`.
//!
//! Shared cluster-scoped objects are not members in that sense: each set that uses one holds a
//! claim on it instead (see [`super::ownership`]), and [`members`] lists them by their claim.
//!
//! `delete` leaves the parent behind as a tombstone: no members, and the time of the delete
//! ([`DELETED_AT_ANNOTATION`]), so `status` can say the environment was deleted and when. [`read`]
//! takes a tombstone for no inventory at all (the environment is not on the cluster), and the next
//! apply writes the parent over it.
//!
//! Guarantees: the parent's group-kinds are widened *before* members are applied and narrowed
//! only after a prune removed the rest, so an apply interrupted at any point leaves an
//! inventory that still finds every member. A member is deleted only when it carries this
//! set's label, was applied by the `mlkube` field manager, and no controller owns it; labels
//! alone (which controllers copy onto Endpoints and the like) never make an object prunable.
//! CustomResourceDefinitions are never deleted: that would delete every object of their kind,
//! in every namespace and environment.

use std::collections::BTreeSet;

use base64::Engine;
use futures::future::try_join_all;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::managed_fields::FIELD_MANAGER;
use crate::deploy::cluster::{ApplyMode, Cluster, Resolved};

pub const ID_LABEL: &str = "applyset.kubernetes.io/id";
pub const PART_OF_LABEL: &str = "applyset.kubernetes.io/part-of";
pub const TOOLING_ANNOTATION: &str = "applyset.kubernetes.io/tooling";
pub const GROUP_KINDS_ANNOTATION: &str = "applyset.kubernetes.io/contains-group-kinds";
pub const NAMESPACES_ANNOTATION: &str = "applyset.kubernetes.io/additional-namespaces";
pub const COMPONENT_LABEL: &str = "mlkube.io/component";
/// The prefix of the label by which a set claims a shared object: `used-by.mlkube.io/<id>`.
pub const CLAIM_PREFIX: &str = "used-by.mlkube.io/";
pub use crate::deploy::cluster::managed_fields::SHARED_HASH_PREFIX;
/// The parent's record of the app's id, so two apps of one name never share a set.
pub const APP_ID_ANNOTATION: &str = "mlkube.io/app-id";
/// On a parent `delete` left behind: when the environment was deleted (RFC 3339, UTC).
pub const DELETED_AT_ANNOTATION: &str = "mlkube.io/deleted-at";

/// The ApplySet of one app and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplySet {
    pub app: String,
    pub env: String,
    /// The parent's namespace: the environment's.
    pub namespace: String,
    /// The parent Secret's name.
    pub name: String,
    /// `applyset-<base64url(sha256("<name>.<namespace>.Secret."))>-v1`
    pub id: String,
    /// The field manager of this set's writes to shared objects: `mlkube@<id>`.
    pub shared_manager: String,
    /// The app's id from `app.yaml`, recorded on the parent and checked on every read.
    pub app_id: Option<String>,
}

impl ApplySet {
    pub fn new(app: &str, env: &str, namespace: &str) -> ApplySet {
        let name = format!("mlkube-applyset-{app}-{env}");
        let digest = Sha256::digest(format!("{name}.{namespace}.Secret.").as_bytes());
        let id = format!(
            "applyset-{}-v1",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_slice())
        );
        ApplySet {
            app: app.into(),
            env: env.into(),
            namespace: namespace.into(),
            name,
            shared_manager: format!("{FIELD_MANAGER}@{id}"),
            id,
            app_id: None,
        }
    }

    /// The same set, for the app with this id.
    pub fn with_app_id(mut self, app_id: Option<&str>) -> ApplySet {
        self.app_id = app_id.map(str::to_string);
        self
    }

    /// The label by which this set claims a shared object.
    pub fn claim_label(&self) -> String {
        format!("{CLAIM_PREFIX}{}", self.id)
    }

    /// The annotation in which this set records the hash of its configuration of a shared
    /// object: each set its own, as each writes its own value.
    pub fn shared_hash_annotation(&self) -> String {
        format!("{SHARED_HASH_PREFIX}{}", self.id)
    }

    /// The label selector of the members.
    pub fn selector(&self) -> String {
        format!("{PART_OF_LABEL}={}", self.id)
    }

    /// The parent object recording `inventory`.
    pub fn parent(&self, inventory: &Inventory) -> Value {
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        let other_namespaces: BTreeSet<String> = inventory
            .namespaces
            .iter()
            .filter(|ns| **ns != self.namespace)
            .cloned()
            .collect();
        let mut annotations = json!({
            TOOLING_ANNOTATION: tooling(),
            GROUP_KINDS_ANNOTATION: join(&inventory.group_kinds),
            NAMESPACES_ANNOTATION: join(&other_namespaces),
        });
        if let Some(app_id) = &self.app_id {
            annotations[APP_ID_ANNOTATION] = json!(app_id);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {
                    ID_LABEL: self.id,
                    "app.kubernetes.io/managed-by": "mlkube",
                    "app.kubernetes.io/part-of": self.app,
                    "mlkube.io/environment": self.env,
                },
                "annotations": annotations,
            },
            "type": "Opaque",
        })
    }

    /// The key of the parent Secret, which records the inventory.
    pub fn parent_key(&self) -> Key {
        Key {
            group: String::new(),
            kind: "Secret".into(),
            namespace: Some(self.namespace.clone()),
            name: self.name.clone(),
        }
    }

    pub(crate) fn parent_resource() -> Resolved {
        Resolved {
            resource: kube::discovery::ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "Secret".into(),
                plural: "secrets".into(),
            },
            namespaced: true,
        }
    }
}

pub fn tooling() -> String {
    format!("mlkube/v{}", env!("CARGO_PKG_VERSION"))
}

/// What the parent records: the group-kinds and namespaces of the members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub group_kinds: BTreeSet<String>,
    pub namespaces: BTreeSet<String>,
}

impl Inventory {
    pub fn union(&self, other: &Inventory) -> Inventory {
        Inventory {
            group_kinds: self
                .group_kinds
                .union(&other.group_kinds)
                .cloned()
                .collect(),
            namespaces: self.namespaces.union(&other.namespaces).cloned().collect(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplySetError {
    #[error("cannot read the inventory of environment `{env}` (Secret {namespace}/{name})")]
    ReadParent {
        env: String,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot record the inventory of environment `{env}` (Secret {namespace}/{name})")]
    WriteParent {
        env: String,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Secret {namespace}/{name} is not an mlkube inventory (its ApplySet tooling is \
         `{tooling}`, its id `{id}`)\n  hint: another tool owns an object with mlkube's inventory \
         name; rename or remove it, mlkube will not write over it"
    )]
    ForeignParent {
        namespace: String,
        name: String,
        tooling: String,
        id: String,
    },
    #[error(
        "environment `{env}` of app `{app}` would use the inventory Secret {namespace}/{name}, but \
         it belongs to another app named `{app}` (id {theirs}; this app's id is {ours})\n  hint: two \
         apps of one name cannot share a namespace: rename one (`name` in its app.yaml), or move \
         this environment to another namespace"
    )]
    OtherApp {
        app: String,
        env: String,
        namespace: String,
        name: String,
        theirs: String,
        ours: String,
    },
    #[error(
        "environment `{env}` of app `{app}` would use the inventory Secret {namespace}/{name}, but \
         it belongs to the app `{app}` with id {theirs}, and this app has no id (it was made \
         before ids)\n  hint: if this is that app, add the line `id: {theirs}` to its app.yaml; \
         if it is another one, give it an id of its own (the line `id: {suggested}` in its \
         app.yaml) and rename it (`name` in app.yaml) or move this environment to another \
         namespace"
    )]
    NoAppId {
        app: String,
        env: String,
        namespace: String,
        name: String,
        theirs: String,
        /// A fresh id the user may take.
        suggested: String,
    },
    #[error("cannot list the {group_kind} members of environment `{env}`")]
    ListMembers {
        env: String,
        group_kind: String,
        #[source]
        source: kube::Error,
    },
}

/// The inventory recorded on the cluster, or `None` when the environment was never applied.
pub async fn read(
    cluster: &impl Cluster,
    set: &ApplySet,
) -> Result<Option<Inventory>, ApplySetError> {
    let parent = cluster
        .get(
            &ApplySet::parent_resource(),
            Some(&set.namespace),
            &set.name,
        )
        .await
        .map_err(|source| ApplySetError::ReadParent {
            env: set.env.clone(),
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            source,
        })?;
    let Some(parent) = parent else {
        return Ok(None);
    };
    let metadata = &parent["metadata"];
    let tooling = metadata["annotations"][TOOLING_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    let id = metadata["labels"][ID_LABEL].as_str().unwrap_or_default();
    if !tooling.starts_with("mlkube/") || id != set.id {
        return Err(ApplySetError::ForeignParent {
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            tooling: tooling.to_string(),
            id: id.to_string(),
        });
    }
    if deleted_at(&parent).is_some() {
        // A tombstone: nothing of any app is left in it, so whoever applies next takes it.
        return Ok(None);
    }
    if let Some(refusal) = other_app(set, metadata["annotations"][APP_ID_ANNOTATION].as_str()) {
        return Err(refusal);
    }
    let split = |annotation: &str| -> BTreeSet<String> {
        metadata["annotations"][annotation]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut namespaces = split(NAMESPACES_ANNOTATION);
    namespaces.insert(set.namespace.clone());
    Ok(Some(Inventory {
        group_kinds: split(GROUP_KINDS_ANNOTATION),
        namespaces,
    }))
}

/// When the environment of this parent was deleted, if it is the tombstone `delete` leaves.
pub fn deleted_at(parent: &Value) -> Option<&str> {
    parent["metadata"]["annotations"][DELETED_AT_ANNOTATION].as_str()
}

/// The environment of the ApplySet `id`, `app/env` as its parent's labels name it, found by
/// the parent's id label in any namespace; `ApplySet <id>` when no parent of that id can be
/// listed (there is none, or this user may not list Secrets in every namespace).
pub async fn name_of(cluster: &impl Cluster, id: &str) -> String {
    let selector = format!("{ID_LABEL}={id}");
    let parents = cluster
        .list(&ApplySet::parent_resource(), None, &selector)
        .await
        .unwrap_or_default();
    parents
        .iter()
        .find_map(|parent| {
            let labels = &parent["metadata"]["labels"];
            let app = labels["app.kubernetes.io/part-of"].as_str()?;
            let env = labels["mlkube.io/environment"].as_str()?;
            Some(format!("{app}/{env}"))
        })
        .unwrap_or_else(|| format!("ApplySet {id}"))
}

/// The refusal of an inventory that records another app's id (`theirs`): an app of the same
/// name, or an app without an id, which cannot be the app that recorded it.
fn other_app(set: &ApplySet, theirs: Option<&str>) -> Option<ApplySetError> {
    let theirs = theirs?.to_string();
    let (app, env) = (set.app.clone(), set.env.clone());
    let (namespace, name) = (set.namespace.clone(), set.name.clone());
    match set.app_id.as_deref() {
        Some(ours) if ours == theirs => None,
        Some(ours) => Some(ApplySetError::OtherApp {
            app,
            env,
            namespace,
            name,
            theirs,
            ours: ours.to_string(),
        }),
        None => Some(ApplySetError::NoAppId {
            app,
            env,
            namespace,
            name,
            theirs,
            suggested: crate::random::id(),
        }),
    }
}

/// Record `inventory` on the parent (created when missing).
pub async fn write(
    cluster: &impl Cluster,
    set: &ApplySet,
    inventory: &Inventory,
    dry_run: bool,
) -> Result<(), ApplySetError> {
    let mode = ApplyMode {
        dry_run,
        force: true,
        manager: FIELD_MANAGER,
    };
    cluster
        .apply(
            &ApplySet::parent_resource(),
            Some(&set.namespace),
            &set.name,
            &set.parent(inventory),
            mode,
        )
        .await
        .map_err(|source| ApplySetError::WriteParent {
            env: set.env.clone(),
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            source,
        })?;
    Ok(())
}

/// Leave the parent as the tombstone of an environment deleted at `at` (after its members): an
/// inventory of nothing. Written by the inventory's own manager, so the next apply's inventory
/// write drops the mark.
pub async fn write_tombstone(
    cluster: &impl Cluster,
    set: &ApplySet,
    at: &str,
) -> Result<(), ApplySetError> {
    let mut tombstone = set.parent(&Inventory::default());
    tombstone["metadata"]["annotations"][DELETED_AT_ANNOTATION] = json!(at);
    let mode = ApplyMode {
        dry_run: false,
        force: true,
        manager: FIELD_MANAGER,
    };
    cluster
        .apply(
            &ApplySet::parent_resource(),
            Some(&set.namespace),
            &set.name,
            &tombstone,
            mode,
        )
        .await
        .map_err(|source| ApplySetError::WriteParent {
            env: set.env.clone(),
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            source,
        })?;
    Ok(())
}

/// An object on the cluster that carries this set's membership label.
#[derive(Debug, Clone)]
pub struct Member {
    pub key: Key,
    /// Cluster-scoped: claimed, not owned (see [`super::ownership`]).
    pub shared: bool,
    pub api_version: String,
    pub component: Option<String>,
    pub resource_version: String,
    pub value: Value,
}

impl Member {
    /// The live object `value` as a member of `set`; `None` when it has no kind or name.
    pub fn of(value: Value, set: &ApplySet) -> Option<Member> {
        let key = Key::of(&value)?;
        let labels = &value["metadata"]["labels"];
        // A shared object names no component: this set's claim does.
        let component = labels[set.claim_label()]
            .as_str()
            .or(labels[COMPONENT_LABEL].as_str());
        Some(Member {
            shared: key.namespace.is_none(),
            component: component.map(str::to_string),
            key,
            api_version: value["apiVersion"].as_str().unwrap_or_default().to_string(),
            resource_version: value["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            value,
        })
    }
}

/// Every live member of the set, listed once per group-kind of the inventory. Group-kinds the
/// server no longer serves (their CRD is gone, and with it their objects) are skipped.
pub async fn members(
    cluster: &impl Cluster,
    set: &ApplySet,
    inventory: &Inventory,
) -> Result<Vec<Member>, ApplySetError> {
    let claim = set.claim_label();
    let lists = inventory.group_kinds.iter().flat_map(|group_kind| {
        let (kind, group) = group_kind.split_once('.').unwrap_or((group_kind, ""));
        let resolved = cluster.resolve_group_kind(group, kind);
        // Shared objects are found by their claim, and by the membership label mlkube wrote on
        // them before claims.
        let selectors = match &resolved {
            Some(r) if !r.namespaced => vec![claim.clone(), set.selector()],
            Some(_) => vec![set.selector()],
            None => Vec::new(),
        };
        selectors.into_iter().filter_map(move |selector| {
            let resolved = resolved.clone()?;
            Some(async move {
                cluster
                    .list(&resolved, None, &selector)
                    .await
                    .map_err(|source| ApplySetError::ListMembers {
                        env: set.env.clone(),
                        group_kind: group_kind.clone(),
                        source,
                    })
            })
        })
    });
    let lists = try_join_all(lists).await?;
    let mut members: Vec<Member> = lists
        .into_iter()
        .flatten()
        .filter_map(|value| Member::of(value, set))
        .collect();
    members.sort_by(|a, b| a.key.cmp(&b.key));
    members.dedup_by(|a, b| a.key == b.key);
    Ok(members)
}

/// Why a labelled object is still not mlkube's to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOurs {
    /// No `mlkube` field manager applied it: someone copied or set the label.
    NotApplied { managers: Vec<String> },
    /// A controller owns it (its owner will delete it).
    Controlled { owner: String },
    /// A CustomResourceDefinition: deleting it deletes every object of its kind in every
    /// namespace, other environments' included.
    Definition,
}

impl std::fmt::Display for NotOurs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotOurs::NotApplied { managers } => {
                write!(
                    f,
                    "it carries the inventory label but mlkube never applied it (managers: {})",
                    managers.join(", ")
                )
            }
            NotOurs::Controlled { owner } => write!(f, "it is owned by the controller of {owner}"),
            NotOurs::Definition => write!(
                f,
                "a CustomResourceDefinition is never deleted (that would delete every object of \
                 its kind in every namespace): only this environment's claim on it is released; \
                 delete it with kubectl once nothing uses it"
            ),
        }
    }
}

/// Whether a member may be deleted by mlkube.
pub fn ownership(member: &Value) -> Result<(), NotOurs> {
    if member["kind"] == "CustomResourceDefinition"
        && member["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
    {
        return Err(NotOurs::Definition);
    }
    if let Some(owner) = member["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == Value::Bool(true))
    {
        return Err(NotOurs::Controlled {
            owner: format!(
                "{} {}",
                owner["kind"].as_str().unwrap_or_default(),
                owner["name"].as_str().unwrap_or_default()
            ),
        });
    }
    let managers: Vec<String> = member["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect();
    let applied_by_mlkube = |m: &String| {
        m == FIELD_MANAGER
            || m.strip_prefix(FIELD_MANAGER)
                .is_some_and(|s| s.starts_with('@'))
    };
    if managers.iter().any(applied_by_mlkube) {
        Ok(())
    } else {
        Err(NotOurs::NotApplied { managers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_follows_the_applyset_spec() {
        let set = ApplySet::new("kubeflow", "dev", "kf-dev");
        assert!(
            set.id.starts_with("applyset-") && set.id.ends_with("-v1"),
            "{}",
            set.id
        );
        // base64url of 32 bytes without padding is 43 characters, all label-safe.
        let hash = &set.id["applyset-".len()..set.id.len() - 3];
        assert_eq!(hash.len(), 43);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert!(set.id.len() <= 63, "a label value is at most 63 characters");
        assert_ne!(set.id, ApplySet::new("kubeflow", "prod", "kf-dev").id);
    }

    #[test]
    fn the_parent_records_group_kinds_and_other_namespaces() {
        let set = ApplySet::new("a", "dev", "kf");
        let inventory = Inventory {
            group_kinds: ["Deployment.apps".to_string(), "ConfigMap".to_string()].into(),
            namespaces: ["kf".to_string(), "other".to_string()].into(),
        };
        let parent = set.parent(&inventory);
        let annotations = &parent["metadata"]["annotations"];
        assert_eq!(
            annotations[GROUP_KINDS_ANNOTATION],
            "ConfigMap,Deployment.apps"
        );
        assert_eq!(annotations[NAMESPACES_ANNOTATION], "other");
        assert_eq!(parent["metadata"]["labels"][ID_LABEL], set.id.as_str());
    }

    #[test]
    fn a_labelled_object_mlkube_never_applied_is_not_ours() {
        let copied = json!({"metadata": {"managedFields": [{"manager": "kubectl"}]}});
        assert!(matches!(
            ownership(&copied),
            Err(NotOurs::NotApplied { .. })
        ));
        let controlled = json!({"metadata": {
            "managedFields": [{"manager": "mlkube"}],
            "ownerReferences": [{"kind": "Service", "name": "s", "controller": true}]}});
        assert!(matches!(
            ownership(&controlled),
            Err(NotOurs::Controlled { .. })
        ));
        let ours = json!({"metadata": {"managedFields": [{"manager": "mlkube"}]}});
        assert_eq!(ownership(&ours), Ok(()));
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"managedFields": [{"manager": "mlkube"}]}});
        assert_eq!(ownership(&crd), Err(NotOurs::Definition));
    }
}
