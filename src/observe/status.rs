//! What an environment runs and whether it is well: every member of its ApplySet with its
//! health, whether it drifted since the last apply, and the record of that apply.
//!
//! Expected flow: read the inventory (none: the environment was never applied, or deleted, which
//! the tombstone `delete` leaves says, with when), list the live
//! members, ask [`diff::diff`] what an apply of the current render would change, and join the
//! three per object. Health follows the apply wait's rules ([`wait::health`]) plus the training
//! jobs' last condition ([`training_job_health`]); drift follows the diff's own decision, and the
//! config hash tells a change made on the cluster from a change made in the app ([`drift`]).
//! A rendered object on the cluster that is not this environment's is `missing` for it, with
//! whose it is: another set's or tool's (the diff's verdict), or, for a shared object other
//! environments claim and this one does not yet, the environments that hold it, named by their
//! inventories ([`held_by_others`]).
//!
//! The last apply (time, mlkube version, the app's git commit) is read from the record an apply
//! leaves on the ApplySet parent ([`LastApply`]). Everything goes through the [`Cluster`] trait,
//! so the whole of `status` is tested against the in-memory cluster too.
//!
//! Caveats: an object rendered but absent from the cluster is reported `missing` whether it was
//! deleted since the last apply or added to the app since: the inventory records kinds, not
//! names, so the two cannot be told apart.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;

use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{CONCURRENCY, Cluster, namespace_resource};
use crate::deploy::diff::{self, Action, ChangeSet, DiffError, DiffOptions};
use crate::deploy::health::blocked;
use crate::deploy::health::wait::{self, Health};
use crate::deploy::inventory::applyset::{self, ApplySet, ApplySetError, Member};
use crate::deploy::inventory::last_apply::LastApply;
use crate::deploy::inventory::ownership;
use crate::deploy::inventory::plan::{CONFIG_HASH_ANNOTATION, Desired, Plan};
use crate::observe::events;
use crate::observe::serving::{self, ServedVersion};

/// The kinds of kubeflow.org/v1 training jobs, whose health is their last condition.
pub const TRAINING_JOB_KINDS: [&str; 7] = [
    "TFJob",
    "PyTorchJob",
    "MXJob",
    "XGBoostJob",
    "PaddleJob",
    "JAXJob",
    "MPIJob",
];

/// How a member is doing, as `status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Healthy,
    /// Not there yet: rolling out, a training job still running.
    Progressing,
    /// Will not get well by waiting: a failed Job or training job.
    Failed,
    /// Rendered, but not on the cluster.
    Missing,
}

/// Whether a member changed since the last apply, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drift {
    /// Live as last applied, and the app still renders it so.
    None,
    /// Someone changed it on the cluster: mlkube's config hash is the app's, its values are not.
    Changed,
    /// The app renders a different configuration than the last apply.
    AppChanged,
    /// Rendered but gone from the cluster (deleted since the last apply, or new in the app).
    Missing,
    /// On the cluster but no longer rendered: a prune would delete it.
    NotRendered,
    /// The comparison failed (the server refused the dry run); see the reason.
    Unknown,
}

impl Drift {
    pub fn drifted(self) -> bool {
        self != Drift::None
    }
}

/// One member of the environment.
#[derive(Debug, Clone, Serialize)]
pub struct MemberStatus {
    #[serde(flatten)]
    pub key: Key,
    pub component: Option<String>,
    pub state: State,
    /// The last condition of a training job (`Created`, `Running`, `Restarting`, `Succeeded`,
    /// `Failed`, `Suspended`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Why it is not healthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub drift: Drift,
    pub drifted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_reason: Option<String>,
}

/// Counts over the members.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub members: usize,
    pub healthy: usize,
    pub progressing: usize,
    pub failed: usize,
    pub missing: usize,
    pub drifted: usize,
}

/// An environment's status.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub app: String,
    pub env: String,
    pub namespace: String,
    pub last_apply: Option<LastApply>,
    pub members: Vec<MemberStatus>,
    /// The versions of served models: ready replicas, live weight, model path.
    pub serving: Vec<ServedVersion>,
    pub summary: Summary,
}

impl Status {
    /// Every member healthy and none drifted.
    pub fn all_well(&self) -> bool {
        self.summary.healthy == self.summary.members && self.summary.drifted == 0
    }

    /// Some member is failed, progressing or missing.
    pub fn unhealthy(&self) -> bool {
        self.summary.healthy < self.summary.members
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(
        "environment `{env}` was never applied to this cluster: there is no inventory Secret \
         {namespace}/{name}\n  hint: apply it with `mlkube apply {env}`, or check the \
         kubeconfig context"
    )]
    NeverApplied {
        env: String,
        namespace: String,
        name: String,
    },
    #[error(
        "environment `{env}` was deleted from this cluster at {at} (`mlkube delete`); what is \
         left of it is its empty inventory, Secret {namespace}/{name}\n  hint: apply it again \
         with `mlkube apply {env}`"
    )]
    Deleted {
        env: String,
        namespace: String,
        name: String,
        /// When, as the inventory's tombstone records it.
        at: String,
    },
    #[error(
        "environment `{env}` is not applied to this cluster: its namespace `{namespace}` does \
         not exist (it may have been deleted with it, by `mlkube delete {env} \
         --delete-namespace`)\n  hint: apply it with `mlkube apply {env}`, or check the \
         kubeconfig context"
    )]
    NamespaceGone { env: String, namespace: String },
    #[error(
        "environment `{env}` is not applied to this cluster: its namespace `{namespace}` is \
         being deleted, and its inventory with it\n  hint: once the namespace is gone, \
         `mlkube apply {env}` applies it again"
    )]
    NamespaceDeleting { env: String, namespace: String },
    #[error(transparent)]
    Inventory(#[from] ApplySetError),
    #[error(transparent)]
    Diff(#[from] DiffError),
}

/// The status of the environment whose current render is `plan`.
pub async fn status(cluster: &impl Cluster, plan: &Plan) -> Result<Status, StatusError> {
    let set = &plan.applyset;
    let never = || StatusError::NeverApplied {
        env: set.env.clone(),
        namespace: set.namespace.clone(),
        name: set.name.clone(),
    };
    let Some(inventory) = applyset::read(cluster, set).await? else {
        return Err(not_applied(cluster, set).await);
    };
    let parent = read_parent(cluster, set).await?.ok_or_else(never)?;
    let members = applyset::members(cluster, set, &inventory).await?;
    let options = DiffOptions {
        show_secrets: false,
    };
    let changes = diff::diff_members(cluster, plan, &members, options).await?;
    let held = held_by_others(cluster, plan, &members, &changes).await;

    let mut statuses = members_status(plan, &members, &changes, &held);
    explain_blocked(cluster, &mut statuses, &members).await;
    explain_silent_jobs(cluster, &mut statuses, &members).await;
    Ok(Status {
        app: set.app.clone(),
        env: set.env.clone(),
        namespace: set.namespace.clone(),
        last_apply: LastApply::of_parent(&parent),
        summary: Summary::of(&statuses),
        serving: serving::served_versions(&members),
        members: statuses,
    })
}

/// Each object's status from what the diff decided about it and the live members, sorted by
/// key; `held` names, for each shared object this environment renders but holds no claim on,
/// the environments that hold one ([`held_by_others`]). Pure: the cluster was read before.
pub fn members_status(
    plan: &Plan,
    members: &[Member],
    changes: &ChangeSet,
    held: &BTreeMap<Key, Vec<String>>,
) -> Vec<MemberStatus> {
    let live: BTreeMap<&Key, &Member> = members.iter().map(|m| (&m.key, m)).collect();
    let desired: BTreeMap<&Key, &Desired> = plan.objects.iter().map(|d| (&d.key, d)).collect();
    let mut statuses: Vec<MemberStatus> = Vec::new();
    for change in &changes.changes {
        // The environment's namespace is never a member.
        if desired.get(&change.key).is_some_and(|d| !d.is_member())
            || (change.key.kind == "Namespace" && change.key.group.is_empty())
        {
            continue;
        }
        let member = live.get(&change.key).copied();
        // Rendered, on the cluster, but another environment's or another tool's: not a member
        // of this one (apply refuses it without --adopt).
        if let (None, Some(owner)) = (member, &change.owner) {
            statuses.push(not_held(
                change,
                owner.clone(),
                "`mlkube apply --adopt` takes it over",
            ));
            continue;
        }
        // Shared, and claimed by other environments but not this one.
        if let (None, Some(holders)) = (member, held.get(&change.key)) {
            statuses.push(not_held(
                change,
                format!(
                    "on the cluster, shared with {}, but this environment holds no claim on it",
                    holders.join(", ")
                ),
                "`mlkube apply` claims it for this environment too",
            ));
            continue;
        }
        let drift = drift(
            change.action,
            desired.get(&change.key).copied(),
            member.map(|m| &m.value),
        );
        statuses.push(member_status(
            &change.key,
            change.component.clone(),
            member,
            drift,
            None,
        ));
    }
    for failure in &changes.failures {
        let member = live.get(&failure.key).copied();
        statuses.push(member_status(
            &failure.key,
            failure.component.clone(),
            member,
            Drift::Unknown,
            Some(failure.message.clone()),
        ));
    }
    for kept in &changes.kept {
        let member = live.get(&kept.key).copied();
        statuses.push(member_status(
            &kept.key,
            member.and_then(|m| m.component.clone()),
            member,
            Drift::NotRendered,
            Some(format!("no longer rendered, but {}", kept.reason)),
        ));
    }
    statuses.sort_by(|a, b| a.key.cmp(&b.key));
    statuses
}

/// The label the training operator puts on every pod of a job, with the job's name.
pub const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";

/// For each member not healthy whose pods say why (a pod the scheduler cannot place, an image
/// that cannot be pulled, a container crashing), add the first such reason to its own: a
/// Deployment failed by its progress deadline says why it made no progress.
/// An image that cannot be pulled fails it, as it fails the apply's wait: waiting will not
/// help. Best effort: pods that cannot be listed add nothing.
async fn explain_blocked(
    cluster: &impl Cluster,
    statuses: &mut [MemberStatus],
    members: &[Member],
) {
    let live: BTreeMap<&Key, &Value> = members.iter().map(|m| (&m.key, &m.value)).collect();
    let reads: Vec<_> = statuses
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.state, State::Progressing | State::Failed))
        .filter_map(|(i, s)| Some((i, s.key.clone(), *live.get(&s.key)?)))
        .map(|(i, key, object)| async move {
            let pods = member_pods(cluster, &key, object).await;
            (i, blocker(&key, object, &pods))
        })
        .collect();
    let found: Vec<(usize, Option<blocked::Blocked>)> = futures::stream::iter(reads)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for (i, blocked) in found {
        let Some(blocked) = blocked else { continue };
        let status = &mut statuses[i];
        status.reason = Some(match status.reason.take() {
            Some(reason) => format!("{}; {}", reason.trim_end_matches('.'), blocked.text),
            None => blocked.text,
        });
        if blocked.lasting {
            status.state = State::Failed;
        }
    }
}

/// For each training job with no condition yet and no pod that says why, the last event on
/// it instead of the guess that the operator is not running: a job waiting for its data has
/// the operator's `WaitingForData` event and no condition. Best effort, as events are.
async fn explain_silent_jobs(
    cluster: &impl Cluster,
    statuses: &mut [MemberStatus],
    members: &[Member],
) {
    let live: BTreeMap<&Key, &Value> = members.iter().map(|m| (&m.key, &m.value)).collect();
    let silent: Vec<(usize, &Value)> = statuses
        .iter()
        .enumerate()
        .filter(|(_, s)| is_training_job(&s.key.group, &s.key.kind))
        .filter(|(_, s)| s.condition.is_none() && s.reason.as_deref() == Some(NO_CONDITION))
        .filter_map(|(i, s)| Some((i, *live.get(&s.key)?)))
        .collect();
    let namespaces: BTreeSet<&str> = silent
        .iter()
        .filter_map(|(_, job)| job["metadata"]["namespace"].as_str())
        .collect();
    let mut newest = BTreeMap::new();
    for namespace in namespaces {
        newest.extend(events::newest_by_uid(cluster, namespace).await);
    }
    for (i, job) in silent {
        let uid = job["metadata"]["uid"].as_str().unwrap_or_default();
        if let Some(event) = newest.get(uid) {
            statuses[i].reason = Some(format!("no condition yet; the last event on it: {event}"));
        }
    }
}

/// The pods of a member: a training job's by the operator's job-name label, a workload's by its
/// selector; none for other kinds.
async fn member_pods(cluster: &impl Cluster, key: &Key, object: &Value) -> Vec<Value> {
    if !is_training_job(&key.group, &key.kind) {
        return wait::pods_of(cluster, key, object).await;
    }
    let Some(pods) = cluster.resolve("v1", "Pod") else {
        return Vec::new();
    };
    let selector = format!("{JOB_NAME_LABEL}={}", key.name);
    cluster
        .list(&pods, key.namespace.as_deref(), &selector)
        .await
        .unwrap_or_default()
}

/// The first reason one of a member's pods (not being deleted) gives for not running, else for
/// not being ready after a restart. For a workload an image counts as lasting only when it is
/// its pod template's current one.
fn blocker(key: &Key, object: &Value, pods: &[Value]) -> Option<blocked::Blocked> {
    let current: Vec<Value> = pods
        .iter()
        .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
        .cloned()
        .collect();
    let found = (current.iter().find_map(blocked::pod_blocked))
        .or_else(|| current.iter().find_map(blocked::pod_restarting))?;
    let lasting = found.lasting
        && (is_training_job(&key.group, &key.kind)
            || wait::image_pull_failure(object, &current).is_some());
    Some(blocked::Blocked { lasting, ..found })
}

/// A rendered object that is on the cluster but not this environment's: `missing` for it,
/// with whose it is and what takes it in.
fn not_held(change: &diff::Change, whose: String, remedy: &str) -> MemberStatus {
    MemberStatus {
        reason: Some(whose),
        drift_reason: Some(remedy.to_string()),
        ..member_status(
            &change.key,
            change.component.clone(),
            None,
            Drift::Missing,
            None,
        )
    }
}

/// For each shared object the plan renders that exists but is no member of this environment
/// (another environment claims it), the environments that hold a claim on it, `app/env` as
/// their inventories name them, or `ApplySet <id>` when no inventory of that id can be read
/// (this user may not list Secrets in every namespace).
pub async fn held_by_others(
    cluster: &impl Cluster,
    plan: &Plan,
    members: &[Member],
    changes: &ChangeSet,
) -> BTreeMap<Key, Vec<String>> {
    let shared: BTreeSet<&Key> = plan
        .objects
        .iter()
        .filter(|d| d.shared)
        .map(|d| &d.key)
        .collect();
    let claimed: BTreeMap<Key, Vec<String>> = changes
        .changes
        .iter()
        .filter(|c| c.owner.is_none() && shared.contains(&c.key))
        .filter(|c| !members.iter().any(|m| m.key == c.key))
        .filter_map(|c| {
            let users = ownership::other_users(&plan.applyset, c.before.as_ref()?);
            (!users.is_empty()).then(|| (c.key.clone(), users))
        })
        .collect();
    let ids: BTreeSet<&String> = claimed.values().flatten().collect();
    let names = futures::future::join_all(
        ids.into_iter()
            .map(|id| async move { (id.clone(), applyset::name_of(cluster, id).await) }),
    )
    .await;
    let names: BTreeMap<String, String> = names.into_iter().collect();
    claimed
        .into_iter()
        .map(|(key, ids)| {
            let holders = ids
                .iter()
                .map(|id| {
                    names
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| format!("ApplySet {id}"))
                })
                .collect();
            (key, holders)
        })
        .collect()
}

fn member_status(
    key: &Key,
    component: Option<String>,
    live: Option<&Member>,
    drift: Drift,
    drift_reason: Option<String>,
) -> MemberStatus {
    let (state, condition, reason) = match live {
        Some(member) => {
            let condition = is_training_job(&key.group, &key.kind)
                .then(|| last_condition(&member.value).map(|c| c.0))
                .flatten();
            match member_health(key, &member.value) {
                Health::Ready => (State::Healthy, condition, None),
                Health::Progressing(why) => (State::Progressing, condition, Some(why)),
                Health::Failed(why) => (State::Failed, condition, Some(why)),
            }
        }
        None => (State::Missing, None, Some("not on the cluster".into())),
    };
    MemberStatus {
        key: key.clone(),
        component,
        state,
        condition,
        reason,
        drift,
        drifted: drift.drifted(),
        drift_reason: drift_reason.or_else(|| drift_explained(drift).map(str::to_string)),
    }
}

impl Summary {
    /// The counts over `members`.
    pub fn of(members: &[MemberStatus]) -> Summary {
        let count = |state| members.iter().filter(|m| m.state == state).count();
        Summary {
            members: members.len(),
            healthy: count(State::Healthy),
            progressing: count(State::Progressing),
            failed: count(State::Failed),
            missing: count(State::Missing),
            drifted: members.iter().filter(|m| m.drifted).count(),
        }
    }
}

fn drift_explained(drift: Drift) -> Option<&'static str> {
    match drift {
        Drift::None | Drift::Unknown => None,
        Drift::Changed => {
            Some("changed on the cluster since the last apply; `mlkube diff` shows how")
        }
        Drift::AppChanged => Some(
            "the app renders another configuration than the last apply; `mlkube diff` shows it",
        ),
        Drift::Missing => {
            Some("rendered but not on the cluster: deleted since the last apply, or new in the app")
        }
        Drift::NotRendered => Some("no longer rendered: `mlkube prune` would delete it"),
    }
}

/// Whether a member changed since the last apply, from what the diff decided about it and the
/// config hashes: the same hash means mlkube last applied what the app renders now, so any
/// difference was made on the cluster.
pub fn drift(action: Action, desired: Option<&Desired>, live: Option<&Value>) -> Drift {
    let hash = |v: &Value| {
        v["metadata"]["annotations"][CONFIG_HASH_ANNOTATION]
            .as_str()
            .map(str::to_string)
    };
    match action {
        Action::Unchanged => Drift::None,
        Action::Create => Drift::Missing,
        Action::Prune => Drift::NotRendered,
        Action::Update => match (desired, live) {
            (Some(desired), Some(live))
                if hash(&desired.value).is_some() && hash(&desired.value) == hash(live) =>
            {
                Drift::Changed
            }
            _ => Drift::AppChanged,
        },
    }
}

/// Whether a group and kind is a kubeflow.org training job.
pub fn is_training_job(group: &str, kind: &str) -> bool {
    group == "kubeflow.org" && TRAINING_JOB_KINDS.contains(&kind)
}

/// The health of a live member: the apply wait's rules, and training jobs by their last
/// condition.
pub fn member_health(key: &Key, object: &Value) -> Health {
    if is_training_job(&key.group, &key.kind) {
        training_job_health(object)
    } else {
        wait::health(&key.group, &key.kind, object)
    }
}

/// A training job by its last true condition: `Succeeded` is healthy, `Failed` failed with its
/// message, anything else (`Created`, `Running`, `Restarting`, `Suspended`, none yet) still
/// progressing, with the condition's message (the condition itself is reported beside it).
pub fn training_job_health(job: &Value) -> Health {
    match last_condition(job) {
        Some((kind, _)) if kind == "Succeeded" => Health::Ready,
        Some((kind, message)) if kind == "Failed" => Health::Failed(message),
        Some((_, message)) => Health::Progressing(message),
        None => Health::Progressing(NO_CONDITION.into()),
    }
}

/// Why a training job without a condition is progressing, unless an event says more.
const NO_CONDITION: &str = "no condition yet: is the operator running?";

/// The type and message (or reason) of the last condition whose status is true.
fn last_condition(job: &Value) -> Option<(String, String)> {
    let condition = job["status"]["conditions"]
        .as_array()?
        .iter()
        .rev()
        .find(|c| c["status"] == "True")?;
    let kind = condition["type"].as_str()?.to_string();
    let message = condition["message"]
        .as_str()
        .or(condition["reason"].as_str())
        .unwrap_or("no message")
        .to_string();
    Some((kind, message))
}

/// Why an environment has no inventory: `delete` left its tombstone (which says when); its
/// namespace, where the inventory and the tombstone live, is gone or going (`delete
/// --delete-namespace` takes them with it, and mlkube keeps no record outside the namespace);
/// or it was never applied to this cluster.
async fn not_applied(cluster: &impl Cluster, set: &ApplySet) -> StatusError {
    let parent = match read_parent(cluster, set).await {
        Ok(parent) => parent,
        Err(error) => return error,
    };
    if let Some(at) = parent.as_ref().and_then(applyset::deleted_at) {
        return StatusError::Deleted {
            env: set.env.clone(),
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            at: at.to_string(),
        };
    }
    let (env, namespace) = (set.env.clone(), set.namespace.clone());
    match cluster
        .get(&namespace_resource(), None, &set.namespace)
        .await
    {
        Ok(None) => return StatusError::NamespaceGone { env, namespace },
        Ok(Some(live)) if !live["metadata"]["deletionTimestamp"].is_null() => {
            return StatusError::NamespaceDeleting { env, namespace };
        }
        // A namespace that is there, or one this user may not read: the inventory says it all.
        Ok(Some(_)) | Err(_) => {}
    }
    StatusError::NeverApplied {
        env: set.env.clone(),
        namespace: set.namespace.clone(),
        name: set.name.clone(),
    }
}

/// The ApplySet parent as it is, for the record of the last apply.
async fn read_parent(cluster: &impl Cluster, set: &ApplySet) -> Result<Option<Value>, StatusError> {
    cluster
        .get(
            &ApplySet::parent_resource(),
            Some(&set.namespace),
            &set.name,
        )
        .await
        .map_err(|source| {
            StatusError::Inventory(ApplySetError::ReadParent {
                env: set.env.clone(),
                namespace: set.namespace.clone(),
                name: set.name.clone(),
                source,
            })
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::deploy::inventory::applyset::ApplySet;
    use crate::render::kinds::Tier;

    fn tfjob(conditions: Value) -> Value {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
               "metadata": {"name": "j", "namespace": "ns"},
               "status": {"conditions": conditions}})
    }

    fn condition(kind: &str, status: &str, message: &str) -> Value {
        json!({"type": kind, "status": status, "reason": format!("TFJob{kind}"), "message": message})
    }

    fn key(group: &str, kind: &str) -> Key {
        Key {
            group: group.into(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: "j".into(),
        }
    }

    fn with_hash(hash: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "annotations": {CONFIG_HASH_ANNOTATION: hash}},
               "data": data})
    }

    fn desired(value: Value) -> Desired {
        Desired {
            key: Key::of(&value).unwrap(),
            api_version: "v1".into(),
            component: "c".into(),
            tier: Tier::Workloads,
            shared: false,
            value,
        }
    }

    #[test]
    fn a_training_job_is_healthy_only_once_its_last_condition_is_succeeded() {
        let running = tfjob(json!([
            condition("Created", "True", "created"),
            condition("Running", "True", "running")
        ]));
        assert_eq!(
            training_job_health(&running),
            Health::Progressing("running".into())
        );
        let succeeded = tfjob(json!([
            condition("Created", "True", "created"),
            condition("Running", "False", "running"),
            condition("Succeeded", "True", "done")
        ]));
        assert_eq!(training_job_health(&succeeded), Health::Ready);
        for kind in ["Created", "Restarting", "Suspended"] {
            let job = tfjob(json!([condition(kind, "True", "m")]));
            assert!(
                matches!(training_job_health(&job), Health::Progressing(_)),
                "{kind}"
            );
        }
    }

    #[test]
    fn a_failed_training_job_is_failed_with_its_message() {
        let failed = tfjob(json!([
            condition("Running", "False", "running"),
            condition("Failed", "True", "worker 0 exited with code 1")
        ]));
        assert_eq!(
            member_health(&key("kubeflow.org", "TFJob"), &failed),
            Health::Failed("worker 0 exited with code 1".into())
        );
    }

    #[test]
    fn a_training_job_without_conditions_asks_whether_the_operator_runs() {
        let fresh = json!({"kind": "TFJob", "metadata": {"name": "j"}});
        let Health::Progressing(why) = training_job_health(&fresh) else {
            panic!("a job without conditions is progressing")
        };
        assert!(why.contains("operator"), "{why}");
    }

    #[test]
    fn other_kinds_follow_the_apply_wait() {
        let deployment = json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "availableReplicas": 1, "updatedReplicas": 2,
                       "replicas": 2}});
        assert_eq!(
            member_health(&key("apps", "Deployment"), &deployment),
            wait::health("apps", "Deployment", &deployment)
        );
        assert!(matches!(
            member_health(&key("apps", "Deployment"), &deployment),
            Health::Progressing(_)
        ));
        // A kind mlkube does not wait for is healthy by being there, as in the apply wait.
        assert_eq!(
            member_health(&key("", "ConfigMap"), &json!({})),
            Health::Ready
        );
        // kubeflow.org kinds that are not training jobs are not read as jobs.
        assert!(!is_training_job("kubeflow.org", "Notebook"));
        assert!(is_training_job("kubeflow.org", "PyTorchJob"));
    }

    #[test]
    fn regression_every_kind_the_operator_runs_is_read_as_a_training_job() {
        for registered in &crate::operator::training::registry::ALL {
            let kind = registered.framework.kind;
            assert!(is_training_job("kubeflow.org", kind), "{kind}");
        }
    }

    #[test]
    fn an_update_with_the_applied_hash_is_a_change_on_the_cluster() {
        let applied = desired(with_hash("h1", json!({"k": "v"})));
        let edited = with_hash("h1", json!({"k": "edited"}));
        assert_eq!(
            drift(Action::Update, Some(&applied), Some(&edited)),
            Drift::Changed
        );
    }

    #[test]
    fn an_update_with_another_hash_is_a_change_in_the_app() {
        let rendered = desired(with_hash("h2", json!({"k": "new"})));
        let live = with_hash("h1", json!({"k": "v"}));
        assert_eq!(
            drift(Action::Update, Some(&rendered), Some(&live)),
            Drift::AppChanged
        );
    }

    #[test]
    fn missing_and_unrendered_members_are_drift_and_unchanged_ones_are_not() {
        assert_eq!(drift(Action::Unchanged, None, None), Drift::None);
        assert_eq!(drift(Action::Create, None, None), Drift::Missing);
        assert_eq!(drift(Action::Prune, None, None), Drift::NotRendered);
        assert!(!Drift::None.drifted());
        assert!(Drift::Missing.drifted() && Drift::Unknown.drifted());
    }

    fn plan_of(objects: Vec<Desired>) -> Plan {
        Plan {
            applyset: ApplySet::new("a", "local", "ns"),
            objects,
            components: Vec::new(),
        }
    }

    fn member_of(value: &Value) -> Member {
        Member {
            key: Key::of(value).unwrap(),
            shared: false,
            api_version: "v1".into(),
            component: Some("c".into()),
            resource_version: "1".into(),
            value: value.clone(),
        }
    }

    fn change(value: &Value, action: Action) -> diff::Change {
        diff::Change {
            key: Key::of(value).unwrap(),
            component: Some("c".into()),
            action,
            before: None,
            after: None,
            note: None,
            conflicts: Vec::new(),
            owner: None,
            removed: Vec::new(),
        }
    }

    fn config_map(name: &str, hash: &str, data: Value) -> Value {
        let mut value = with_hash(hash, data);
        value["metadata"]["name"] = json!(name);
        value["metadata"]["namespace"] = json!("ns");
        value
    }

    #[test]
    fn each_object_joins_its_diff_verdict_with_its_live_health() {
        let kept_live = config_map("kept", "h0", json!({}));
        let same = config_map("same", "h1", json!({"k": "v"}));
        let edited = config_map("edited", "h2", json!({"k": "v"}));
        let edited_live = config_map("edited", "h2", json!({"k": "by hand"}));
        let gone = config_map("gone", "h3", json!({}));
        let refused = config_map("refused", "h4", json!({}));
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
        let plan = plan_of(vec![
            desired(same.clone()),
            desired(edited.clone()),
            desired(gone.clone()),
            desired(refused.clone()),
        ]);
        let members = [&same, &edited_live, &refused, &kept_live].map(member_of);
        let changes = ChangeSet {
            changes: vec![
                change(&namespace, Action::Create),
                change(&same, Action::Unchanged),
                change(&edited, Action::Update),
                change(&gone, Action::Create),
            ],
            failures: vec![diff::Failure {
                key: Key::of(&refused).unwrap(),
                component: Some("c".into()),
                message: "denied by a webhook".into(),
            }],
            kept: vec![diff::Kept {
                key: Key::of(&kept_live).unwrap(),
                reason: "mlkube never applied it".into(),
            }],
        };
        let statuses = members_status(&plan, &members, &changes, &BTreeMap::new());
        let by_name: BTreeMap<&str, &MemberStatus> =
            statuses.iter().map(|m| (m.key.name.as_str(), m)).collect();
        // The environment's namespace is not a member, even when the diff would create it.
        assert_eq!(
            by_name.keys().copied().collect::<Vec<_>>(),
            ["edited", "gone", "kept", "refused", "same"]
        );
        assert_eq!(
            (by_name["same"].state, by_name["same"].drift),
            (State::Healthy, Drift::None)
        );
        assert_eq!(by_name["edited"].drift, Drift::Changed);
        assert_eq!(
            (by_name["gone"].state, by_name["gone"].drift),
            (State::Missing, Drift::Missing)
        );
        assert_eq!(by_name["refused"].drift, Drift::Unknown);
        assert_eq!(
            by_name["refused"].drift_reason.as_deref(),
            Some("denied by a webhook")
        );
        assert_eq!(
            (by_name["kept"].state, by_name["kept"].drift),
            (State::Healthy, Drift::NotRendered)
        );
        let summary = Summary::of(&statuses);
        assert_eq!(
            (
                summary.members,
                summary.healthy,
                summary.missing,
                summary.drifted
            ),
            (5, 4, 1, 4)
        );
    }

    mod against_memory {
        //! The whole of `status`, and the record of the last apply, against the in-memory
        //! cluster: no API server, the same trait calls.

        use super::*;
        use crate::deploy::apply::{self, ApplyOptions};
        use crate::deploy::cluster::ApplyMode;
        use crate::deploy::cluster::memory::MemoryCluster;
        use crate::deploy::inventory::last_apply::{self, Commit};
        use crate::deploy::inventory::plan;
        use crate::deploy::report::{ApplyError, Consent, Quiet};
        use crate::render::manifest::{Manifest, Object};

        struct Yes;

        impl Consent for Yes {
            fn confirm(&self, _: &'static str, _: &[Key]) -> Result<(), ApplyError> {
                Ok(())
            }
        }

        fn config(name: &str) -> Object {
            Object {
                component: "settings".into(),
                value: json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "ml",
                                 "labels": {"mlkube.io/component": "settings"}},
                    "data": {"k": name}}),
            }
        }

        fn env_plan() -> Plan {
            let manifest = Manifest {
                objects: vec![config("healthy"), config("drifted"), config("missing")],
            };
            plan::plan(&manifest, &ApplySet::new("app", "local", "ml"), &[]).expect("a plan")
        }

        async fn applied(plan: &Plan) -> MemoryCluster {
            let cluster = MemoryCluster::new();
            apply_to(&cluster, plan).await;
            cluster
        }

        async fn apply_to(cluster: &MemoryCluster, plan: &Plan) {
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
                cancel: &crate::deploy::cluster::cancel::Cancel::new(),
            };
            apply::apply(cluster, plan, &options)
                .await
                .expect("the apply");
        }

        /// The operator's CRD, which every environment that runs an operator renders.
        fn crd() -> Object {
            Object {
                component: "operator".into(),
                value: json!({"apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": "widgets.example.com"},
                    "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": true, "storage": true}]}}),
            }
        }

        /// The plan of environment `env` of the app, in namespace `env`: one ConfigMap, and
        /// the CRD when `with_crd`.
        fn plan_in(env: &str, with_crd: bool) -> Plan {
            let mut settings = config("settings");
            settings.value["metadata"]["namespace"] = json!(env);
            let objects = std::iter::once(settings)
                .chain(with_crd.then(crd))
                .collect();
            let set = ApplySet::new("app", env, env);
            plan::plan(&Manifest { objects }, &set, &[]).expect("a plan")
        }

        #[tokio::test]
        async fn a_shared_crd_another_environment_holds_names_its_holder_until_applied() {
            // `local` runs the operator; `dev` was applied before it rendered the operator too.
            let cluster = applied(&plan_in("local", true)).await;
            apply_to(&cluster, &plan_in("dev", false)).await;

            let held = status(&cluster, &plan_in("dev", true))
                .await
                .expect("the status");
            let crd = held
                .members
                .iter()
                .find(|m| m.key.kind == "CustomResourceDefinition")
                .expect("the CRD is listed");
            assert_eq!((crd.state, crd.drift), (State::Missing, Drift::Missing));
            assert_eq!(
                crd.reason.as_deref(),
                Some(
                    "on the cluster, shared with app/local, but this environment holds no \
                     claim on it"
                ),
            );
            assert_eq!(
                crd.drift_reason.as_deref(),
                Some("`mlkube apply` claims it for this environment too")
            );

            apply_to(&cluster, &plan_in("dev", true)).await;
            let claimed = status(&cluster, &plan_in("dev", true))
                .await
                .expect("the status");
            assert!(claimed.all_well(), "{:#?}", claimed.members);
        }

        fn recorded(commit: Option<&str>) -> LastApply {
            LastApply {
                time: "2026-11-23T13:00:00Z".into(),
                tooling: applyset::tooling(),
                commit: commit.map(|sha| Commit {
                    sha: sha.into(),
                    dirty: false,
                }),
            }
        }

        #[tokio::test]
        async fn a_healthy_member_a_drifted_one_and_a_missing_one() {
            let plan = env_plan();
            let cluster = applied(&plan).await;
            last_apply::record(&cluster, &plan.applyset, &recorded(Some("abc")))
                .await
                .expect("the record");
            // Someone edits one member by hand and deletes another.
            cluster.create_as(
                "kubectl-edit",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "drifted", "namespace": "ml"},
                       "data": {"k": "by hand"}}),
            );
            let configmaps = cluster.resolve("v1", "ConfigMap").unwrap();
            cluster
                .delete(&configmaps, Some("ml"), "missing")
                .await
                .expect("the delete");

            let status = status(&cluster, &plan).await.expect("the status");
            let by_name: BTreeMap<&str, &MemberStatus> = status
                .members
                .iter()
                .map(|m| (m.key.name.as_str(), m))
                .collect();
            assert_eq!(
                by_name.keys().copied().collect::<Vec<_>>(),
                ["drifted", "healthy", "missing"],
                "the members, and not the namespace"
            );
            assert_eq!(
                (by_name["healthy"].state, by_name["healthy"].drift),
                (State::Healthy, Drift::None)
            );
            assert_eq!(
                (by_name["drifted"].state, by_name["drifted"].drift),
                (State::Healthy, Drift::Changed),
                "the config hash is the app's: changed on the cluster"
            );
            assert_eq!(
                (by_name["missing"].state, by_name["missing"].drift),
                (State::Missing, Drift::Missing)
            );
            assert_eq!(status.last_apply, Some(recorded(Some("abc"))));
            assert_eq!(
                (
                    status.summary.healthy,
                    status.summary.missing,
                    status.summary.drifted
                ),
                (2, 1, 2)
            );
            assert!(status.unhealthy());
        }

        fn serving() -> Object {
            Object {
                component: "serving".into(),
                value: json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "serving", "namespace": "ml",
                                 "labels": {"mlkube.io/component": "serving"}},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serving"}},
                        "template": {"metadata": {"labels": {"app": "serving"}},
                            "spec": {"containers": [{"name": "serving",
                                                     "image": "example/serving:1"}]}}}}),
            }
        }

        /// The Deployment's pod, its status as the scheduler or kubelet left it.
        fn serving_pod(cluster: &MemoryCluster, status: Value) {
            cluster.create_as(
                "kube-controller-manager",
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "serving-1", "namespace": "ml",
                                    "labels": {"app": "serving"}},
                       "spec": {"containers": [{"name": "serving",
                                                "image": "example/serving:1"}]}}),
            );
            cluster.set_status("v1", "Pod", Some("ml"), "serving-1", status);
        }

        async fn serving_status(pod_status: Value) -> MemberStatus {
            let manifest = Manifest {
                objects: vec![serving()],
            };
            let plan =
                plan::plan(&manifest, &ApplySet::new("app", "local", "ml"), &[]).expect("a plan");
            let cluster = applied(&plan).await;
            let (namespace, name) = (Some("ml"), "serving");
            cluster.set_status(
                "apps/v1",
                "Deployment",
                namespace,
                name,
                json!({"replicas": 1}),
            );
            serving_pod(&cluster, pod_status);
            let status = status(&cluster, &plan).await.expect("the status");
            status.members.into_iter().next().expect("one member")
        }

        #[tokio::test]
        async fn a_member_not_ready_says_what_its_pods_wait_for_and_an_image_pull_fails_it() {
            let pulling = serving_status(json!({"containerStatuses": [{"name": "serving",
                "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull",
                                                         "message": "not found"}}}]}))
            .await;
            assert_eq!(pulling.state, State::Failed);
            let reason = pulling.reason.unwrap_or_default();
            assert!(
                reason.contains(
                    "; pod serving-1: container serving: image example/serving:1 cannot be \
                     pulled: not found (ErrImagePull)"
                ),
                "{reason}"
            );
            let unscheduled = serving_status(json!({"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu."}]}))
            .await;
            assert_eq!(unscheduled.state, State::Progressing);
            let reason = unscheduled.reason.unwrap_or_default();
            assert!(
                reason.ends_with(
                    "; pod serving-1 cannot be scheduled: 0/1 nodes are available: 1 \
                     Insufficient cpu."
                ),
                "{reason}"
            );
        }

        #[tokio::test]
        async fn the_record_survives_inventory_writes_and_drops_a_stale_commit() {
            let plan = env_plan();
            let cluster = applied(&plan).await;
            last_apply::record(&cluster, &plan.applyset, &recorded(Some("abc")))
                .await
                .expect("the record");
            // The inventory's own apply (manager `mlkube`) leaves the record alone.
            applyset::write(
                &cluster,
                &plan.applyset,
                &applyset::read(&cluster, &plan.applyset)
                    .await
                    .unwrap()
                    .unwrap(),
                false,
            )
            .await
            .expect("the inventory write");
            let parent = read_parent(&cluster, &plan.applyset)
                .await
                .unwrap()
                .expect("the parent");
            assert_eq!(LastApply::of_parent(&parent), Some(recorded(Some("abc"))));
            // An apply of pre-rendered objects has no commit: the old one must not stay.
            last_apply::record(&cluster, &plan.applyset, &recorded(None))
                .await
                .expect("the second record");
            let parent = read_parent(&cluster, &plan.applyset)
                .await
                .unwrap()
                .expect("the parent");
            assert_eq!(LastApply::of_parent(&parent), Some(recorded(None)));
            assert!(applyset::read(&cluster, &plan.applyset).await.is_ok());
        }

        #[tokio::test]
        async fn an_environment_never_applied_says_so_and_whether_its_namespace_is_there() {
            let cluster = MemoryCluster::new();
            let error = status(&cluster, &env_plan()).await.unwrap_err();
            assert!(
                matches!(&error, StatusError::NamespaceGone { namespace, .. } if namespace == "ml"),
                "{error}"
            );
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": "ml"}});
            let mode = ApplyMode {
                dry_run: false,
                force: false,
                manager: "test",
            };
            cluster
                .apply(&namespace_resource(), None, "ml", &namespace, mode)
                .await
                .expect("the namespace");
            let error = status(&cluster, &env_plan()).await.unwrap_err();
            assert!(matches!(error, StatusError::NeverApplied { .. }), "{error}");
        }
    }
}
