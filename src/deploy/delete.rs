//! `mlkube delete`: delete the environment's members in reverse tier order (see
//! [`crate::deploy::removal`]), then, when the whole environment went, leave its inventory as a
//! tombstone (see [`crate::deploy::inventory::applyset`]); the namespace only when asked.
//!
//! Guarantees: interrupted, the inventory stays as it was, so it still finds the members not
//! reached yet. Namespaces are never members: only `--delete-namespace` deletes one.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{Cluster, namespace_resource};
use crate::deploy::inventory::applyset::{self, ApplySet};
use crate::deploy::removal::{delete_members, deletions, removal};
use crate::deploy::report::{ApplyError, ApplyReport, Consent, Observer, Removal};

#[derive(Clone)]
pub struct DeleteOptions<'a> {
    /// Only members of these components (all when empty).
    pub components: Vec<String>,
    pub delete_namespace: bool,
    pub consent: &'a dyn Consent,
    pub observer: &'a dyn Observer,
    pub cancel: &'a Cancel,
}

/// `mlkube delete`: delete the environment's members in reverse order, then its inventory;
/// the namespace only when asked.
pub async fn delete(
    cluster: &impl Cluster,
    set: &ApplySet,
    options: &DeleteOptions<'_>,
) -> Result<ApplyReport, ApplyError> {
    let mut report = ApplyReport::default();
    let inventory = applyset::read(cluster, set).await?;
    let members = match &inventory {
        Some(inventory) => applyset::members(cluster, set, inventory).await?,
        None => Vec::new(),
    };
    let mut doomed = Vec::new();
    for member in &members {
        let in_scope = options.components.is_empty()
            || member
                .component
                .as_deref()
                .is_some_and(|c| options.components.iter().any(|s| s == c));
        if !in_scope {
            continue;
        }
        match removal(set, member) {
            Ok(_) => doomed.push(member),
            Err(reason) => report.kept.push((member.key.clone(), reason.to_string())),
        }
    }
    let mut listed = deletions(set, &doomed);
    let namespace_key = Key {
        group: String::new(),
        kind: "Namespace".into(),
        namespace: None,
        name: set.namespace.clone(),
    };
    if options.delete_namespace {
        listed.push(namespace_key.clone());
    }
    options.consent.confirm("delete", &listed)?;
    let hooks = (options.observer, options.cancel);
    delete_members(cluster, set, &doomed, false, hooks, &mut report).await?;
    if report.interrupted {
        // The inventory stays: it still lists the members not reached yet.
        return Ok(report);
    }
    if options.components.is_empty() && inventory.is_some() {
        let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
        applyset::write_tombstone(cluster, set, &now.to_string()).await?;
    }
    if options.delete_namespace {
        cluster
            .delete(&namespace_resource(), None, &set.namespace)
            .await
            .map_err(|source| ApplyError::Namespace {
                namespace: set.namespace.clone(),
                source,
            })?;
        options.observer.removed(&namespace_key, Removal::Deleted);
        report.pruned.push(namespace_key);
    }
    Ok(report)
}
