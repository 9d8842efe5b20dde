//! Removing members, as the prune of `apply --prune`, `prune` and `delete` all do it: which
//! members are mlkube's to remove and what removing each does ([`Removal`]: delete it, or only
//! release this set's claim on a shared object another set still uses, see
//! [`crate::deploy::inventory::ownership`]), the consent asked before, and the removing itself,
//! in reverse tier order, concurrently within a tier.
//!
//! Guarantees: a member is deleted only when it was applied by mlkube and no controller owns
//! it, and never when it is a CustomResourceDefinition (see
//! [`crate::deploy::inventory::applyset`]); a release is conditional on the object being as it
//! was listed, and decided again when it was not. Once cancelled, no further member is touched
//! and the report says it was interrupted.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;

use futures::StreamExt;
use serde_json::json;

use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{self, ApplyMode, CONCURRENCY, Cluster, Resolved};
use crate::deploy::diff::prunable;
use crate::deploy::inventory::applyset::{self, ApplySet, Member, NotOurs};
use crate::deploy::inventory::ownership;
use crate::deploy::inventory::plan::Plan;
use crate::deploy::report::{ApplyError, ApplyReport, Consent, Observer, Removal};
use crate::render::kinds::{Tier, tier};

/// The members a prune deletes, confirmed by `consent` (none in a dry run); the others kept
/// are told in the report. Pruning everything takes `allow_empty`.
pub(super) fn decide_prune<'m>(
    plan: &Plan,
    members: &'m [Member],
    allow_empty: bool,
    consent: Option<&dyn Consent>,
    report: &mut ApplyReport,
) -> Result<Vec<&'m Member>, ApplyError> {
    let (prune, kept) = split_prunable(plan, members);
    report.kept = kept;
    let member_count = plan.objects.iter().filter(|d| d.is_member()).count();
    if member_count == 0 && !prune.is_empty() && !allow_empty {
        return Err(ApplyError::EmptyPrune {
            env: plan.applyset.env.clone(),
            count: prune.len(),
            verb: "prune",
        });
    }
    if let Some(consent) = consent {
        consent.confirm("prune", &deletions(&plan.applyset, &prune))?;
    }
    Ok(prune)
}

/// Split the no-longer-rendered members into those mlkube may delete and those it keeps.
pub(super) fn split_prunable<'m>(
    plan: &Plan,
    members: &'m [Member],
) -> (Vec<&'m Member>, Vec<(Key, String)>) {
    let mut prune = Vec::new();
    let mut kept = Vec::new();
    for (member, _) in prunable(plan, members) {
        match removal(&plan.applyset, member) {
            Ok(_) => prune.push(member),
            Err(reason) => kept.push((member.key.clone(), reason.to_string())),
        }
    }
    (prune, kept)
}

/// Remove members in reverse tier order, concurrently within a tier: delete each, except a
/// shared object another set still uses, which is released (see [`ownership`]). Returns what
/// was deleted and what was released in the report. Once cancelled, no further member is
/// touched and the report says it was interrupted.
pub(super) async fn delete_members(
    cluster: &impl Cluster,
    set: &ApplySet,
    members: &[&Member],
    dry_run: bool,
    (observer, cancel): (&dyn Observer, &Cancel),
    report: &mut ApplyReport,
) -> Result<(), ApplyError> {
    let mut by_tier: BTreeMap<Tier, Vec<&Member>> = BTreeMap::new();
    for member in members {
        by_tier
            .entry(tier(&member.key.group, &member.key.kind))
            .or_default()
            .push(member);
    }
    let (mut deleted, mut released, mut unused) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = Vec::new();
    for (_, members) in by_tier.into_iter().rev() {
        let results: Vec<Option<(Key, Result<Removal, String>)>> = futures::stream::iter(
            members
                .into_iter()
                .map(|member| async move {
                    if cancel.is_cancelled() {
                        return None;
                    }
                    let result = remove(cluster, set, member, dry_run).await;
                    if let Ok(removal) = &result {
                        observer.removed(&member.key, *removal);
                    }
                    Some((member.key.clone(), result))
                })
                .collect::<Vec<_>>(),
        )
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
        for (key, result) in results.into_iter().flatten() {
            match result {
                Ok(Removal::Deleted) => deleted.push(key),
                Ok(Removal::Released) => released.push(key),
                Ok(Removal::Unused) => {
                    unused.push(key.clone());
                    released.push(key);
                }
                Err(message) => failures.push(format!("  {key}: {message}")),
            }
        }
    }
    if failures.is_empty() {
        deleted.sort();
        released.sort();
        unused.sort();
        (report.pruned, report.released, report.unused) = (deleted, released, unused);
        report.interrupted = cancel.is_cancelled();
        Ok(())
    } else {
        failures.sort();
        Err(ApplyError::Delete {
            count: failures.len(),
            details: failures.join("\n"),
        })
    }
}

/// What removing `members` deletes: the consent is asked for these. A shared object whose claim
/// is only released is not deleted.
pub(super) fn deletions(set: &ApplySet, members: &[&Member]) -> Vec<Key> {
    members
        .iter()
        .filter(|m| removal(set, m) == Ok(Removal::Deleted))
        .map(|m| m.key.clone())
        .collect()
}

/// What removing `member` does (see [`ownership`]), or why it is not mlkube's to remove.
pub(super) fn removal(set: &ApplySet, member: &Member) -> Result<Removal, NotOurs> {
    let others = member.shared && !ownership::other_users(set, &member.value).is_empty();
    match applyset::ownership(&member.value) {
        Ok(()) if others => Ok(Removal::Released),
        Ok(()) => Ok(Removal::Deleted),
        Err(NotOurs::Definition) if others => Ok(Removal::Released),
        Err(NotOurs::Definition) if member.shared => Ok(Removal::Unused),
        Err(reason) => Err(reason),
    }
}

/// Remove one member as [`removal`] decides. A release is conditional on the object being as it
/// was listed: when another set changed it meanwhile (releasing its own claim, say), it is read
/// again and the decision taken anew.
async fn remove(
    cluster: &impl Cluster,
    set: &ApplySet,
    member: &Member,
    dry_run: bool,
) -> Result<Removal, String> {
    let Some(resolved) = cluster.resolve(&member.api_version, &member.key.kind) else {
        // Its kind is gone (CRD deleted), and with it the object.
        return Ok(Removal::Deleted);
    };
    let mut current = member.clone();
    for _ in 0..3 {
        let decided = removal(set, &current).map_err(|reason| reason.to_string())?;
        if dry_run {
            return Ok(decided);
        }
        match carry_out(cluster, set, &resolved, &current, decided).await {
            Ok(()) => return Ok(decided),
            Err(e) if modified_meanwhile(&e) => {}
            Err(e) => return Err(cluster::api_message(&e)),
        }
        let namespace = current.key.namespace.as_deref();
        let live = cluster
            .get(&resolved, namespace, &current.key.name)
            .await
            .map_err(|e| cluster::api_message(&e))?;
        match live.and_then(|live| Member::of(live, set)) {
            Some(again) => current = again,
            // Gone meanwhile: nothing of this set's is left on it.
            None => return Ok(decided),
        }
    }
    Err("it kept changing while its claim was released; run the same command again".into())
}

/// Delete `member`, or release this set's claim on it.
async fn carry_out(
    cluster: &impl Cluster,
    set: &ApplySet,
    resolved: &Resolved,
    member: &Member,
    removal: Removal,
) -> Result<(), kube::Error> {
    match removal {
        Removal::Deleted => {
            let namespace = member.key.namespace.as_deref();
            cluster.delete(resolved, namespace, &member.key.name).await
        }
        Removal::Released => release(cluster, set, resolved, member).await,
        Removal::Unused => {
            let (manager, label) = (&set.shared_manager, set.claim_label());
            cluster
                .disown(resolved, &member.value, manager, &label)
                .await
        }
    }
}

/// Whether a conditional write failed because the object changed since it was read (a 409 that
/// names no field manager's conflict).
fn modified_meanwhile(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
        && cluster::conflicts(error).is_none_or(|found| found.is_empty())
}

/// Release this set's claim on a shared object others still use: an empty configuration applied
/// under the set's manager drops the fields it alone owned (its claim among them) and the manager
/// itself, on the condition that the object is still as listed.
async fn release(
    cluster: &impl Cluster,
    set: &ApplySet,
    resolved: &Resolved,
    member: &Member,
) -> Result<(), kube::Error> {
    let empty = json!({"apiVersion": member.api_version, "kind": member.key.kind,
                       "metadata": {"name": member.key.name,
                                    "resourceVersion": member.resource_version}});
    let mode = ApplyMode {
        dry_run: false,
        force: false,
        manager: &set.shared_manager,
    };
    let namespace = member.key.namespace.as_deref();
    cluster
        .apply(resolved, namespace, &member.key.name, &empty, mode)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_release_decides_again_when_the_object_changed_since_it_was_listed() {
        use crate::deploy::cluster::memory::MemoryCluster;
        let cluster = MemoryCluster::new();
        let (a, b) = (
            ApplySet::new("app", "a", "a"),
            ApplySet::new("app", "b", "b"),
        );
        let resolved = cluster
            .resolve("storage.k8s.io/v1", "StorageClass")
            .expect("served");
        for set in [&a, &b] {
            let claimed = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "kvc", "labels": {set.claim_label(): "volumes"}},
                "provisioner": "kubernetes.io/no-provisioner"});
            let mode = ApplyMode {
                dry_run: false,
                force: false,
                manager: &set.shared_manager,
            };
            cluster
                .apply(&resolved, None, "kvc", &claimed, mode)
                .await
                .expect("claimed");
        }
        let listed = |set: &ApplySet| {
            let live = cluster.object("storage.k8s.io/v1", "StorageClass", None, "kvc");
            Member::of(live.expect("the StorageClass"), set).expect("a member")
        };
        let stale = listed(&a);
        assert_eq!(
            remove(&cluster, &b, &listed(&b), false).await,
            Ok(Removal::Released)
        );
        // a listed it while b still claimed it: its release is refused, and a, the last user
        // now, deletes it.
        assert_eq!(
            remove(&cluster, &a, &stale, false).await,
            Ok(Removal::Deleted)
        );
        assert!(
            cluster
                .object("storage.k8s.io/v1", "StorageClass", None, "kvc")
                .is_none()
        );
    }
}
