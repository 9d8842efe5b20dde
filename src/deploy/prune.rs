//! `mlkube prune`: delete the members no longer rendered (see [`crate::deploy::removal`]), and
//! narrow the inventory to what is left.
//!
//! Guarantees: interrupted, the inventory is not narrowed, so it still finds the members not
//! reached yet; a re-run finishes the job.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::BTreeSet;

use crate::deploy::cluster::Cluster;
use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::inventory::applyset::{self, Inventory};
use crate::deploy::inventory::plan::Plan;
use crate::deploy::removal::{decide_prune, delete_members};
use crate::deploy::report::{ApplyError, ApplyReport, Consent, Observer};

#[derive(Clone, Copy)]
pub struct PruneOptions<'a> {
    pub dry_run: bool,
    pub consent: &'a dyn Consent,
    pub allow_empty: bool,
    pub observer: &'a dyn Observer,
    pub cancel: &'a Cancel,
}

/// `mlkube prune`: delete the members no longer rendered, and narrow the inventory.
pub async fn prune(
    cluster: &impl Cluster,
    plan: &Plan,
    options: &PruneOptions<'_>,
) -> Result<ApplyReport, ApplyError> {
    let mut report = ApplyReport::default();
    let Some(inventory) = applyset::read(cluster, &plan.applyset).await? else {
        return Ok(report);
    };
    let members = applyset::members(cluster, &plan.applyset, &inventory).await?;
    let consent = (!options.dry_run).then_some(options.consent);
    let doomed = decide_prune(plan, &members, options.allow_empty, consent, &mut report)?;
    let (set, hooks) = (&plan.applyset, (options.observer, options.cancel));
    delete_members(cluster, set, &doomed, options.dry_run, hooks, &mut report).await?;
    if report.interrupted {
        // Not narrowed: members not reached yet stay in the inventory.
        return Ok(report);
    }
    if plan.components.is_empty() {
        // Keep the group-kinds of members that are still there (rendered, or kept as not ours).
        let remaining: BTreeSet<String> = members
            .iter()
            .filter(|m| !report.pruned.contains(&m.key))
            .map(|m| m.key.group_kind())
            .chain(plan.group_kinds())
            .collect();
        let narrowed = Inventory {
            group_kinds: remaining,
            namespaces: inventory
                .namespaces
                .union(&plan.namespaces())
                .cloned()
                .collect(),
        };
        if narrowed != inventory {
            applyset::write(cluster, &plan.applyset, &narrowed, options.dry_run).await?;
        }
    }
    Ok(report)
}
