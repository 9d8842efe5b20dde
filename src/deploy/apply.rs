//! Applying a plan to the cluster, and with `--prune` removing what it no longer renders (as
//! `prune` and `delete` remove members: [`crate::deploy::removal`]).
//!
//! Expected flow of `apply`: resolve every kind first (kinds whose CRD is in the plan wait for
//! it), read the inventory and list its members, have the server check every object it would
//! send in a dry run ([`crate::deploy::checks::preflight`]), decide and confirm the prune,
//! create the namespaces and check what waited for them, widen the inventory to cover the plan,
//! then apply tier by tier (concurrently within a tier, server-side with field manager `mlkube`),
//! waiting for CRDs to be `Established`, refreshing discovery and checking the objects of their
//! kinds before the next tier; then prune in reverse tier order and narrow the inventory; then
//! wait for health. A dry run sends only the first checks and reports their answers.
//!
//! Guarantees: nothing is written before every kind resolves, the server accepted every object
//! it could check, and the prune is confirmed; an object it could check only later (its
//! namespace or CRD is created by this apply) is checked before anything but those is written.
//! A conflict with another field manager fails the checks (every conflicting field and manager
//! listed) unless `force_conflicts`; a write refused all the same stops the apply after its
//! tier.
//! Cancelled (the command line's Ctrl-C), no request is started any more, those in flight
//! finish, and the report says what was done and that it was interrupted: the inventory was
//! widened before the first member was written and is narrowed (by a prune) or deleted (by
//! `delete`) only when every member was reached, so it covers everything written. Killed
//! anywhere, a re-run converges all the same: server-side apply is idempotent. Each object is
//! told to the [`Observer`] as soon as its request returns.
//!
//! Caveats: a prune deletes only inventory members that mlkube applied and no controller owns
//! (see [`crate::deploy::inventory::applyset`]); namespaces are never members, so neither prune nor delete removes
//! a namespace unless `delete --delete-namespace` says so.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::deploy::checks::preflight::{
    Blocker, Preflight, Refusal, Written, apply_failure, conflict_failure,
};
use crate::deploy::checks::secret::{is_secret, value_conflicts};
use crate::deploy::checks::{gateways, node_ports, operators, requires};
use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::managed_fields::FIELD_MANAGER;
use crate::deploy::cluster::{self, ApplyMode, CONCURRENCY, Cluster, Resolved, namespace_resource};
use crate::deploy::diff;
use crate::deploy::health::answer;
use crate::deploy::health::wait::{self, NotReady, Pending, Watched};
use crate::deploy::inventory::adopt::{RemovedField, removals};
use crate::deploy::inventory::applyset::{self, Inventory, Member};
use crate::deploy::inventory::live;
use crate::deploy::inventory::ownership::{self, Verdict};
use crate::deploy::inventory::plan::{Desired, Plan};
use crate::deploy::removal::{decide_prune, delete_members, split_prunable};
use crate::deploy::report::{ApplyError, ApplyReport, Consent, Observer, Outcome};
use crate::render::kinds::Tier;

#[derive(Clone, Copy)]
pub struct ApplyOptions<'a> {
    pub dry_run: bool,
    pub prune: bool,
    pub consent: &'a dyn Consent,
    pub force_conflicts: bool,
    pub wait: bool,
    pub timeout: Duration,
    pub allow_empty: bool,
    /// Take over rendered objects that exist but are not this environment's.
    pub adopt: bool,
    pub observer: &'a dyn Observer,
    /// Stop starting requests, finish those in flight, and return what was done.
    pub cancel: &'a Cancel,
}

/// Apply `plan`.
pub async fn apply(
    cluster: &impl Cluster,
    plan: &Plan,
    options: &ApplyOptions<'_>,
) -> Result<ApplyReport, ApplyError> {
    let resolved = resolve_all(cluster, plan)?;
    operators::check(cluster, plan).await?;
    node_ports::check(cluster, plan).await?;
    gateways::check(cluster, plan).await?;
    requires::check(cluster, plan)?;
    let inventory = applyset::read(cluster, &plan.applyset).await?;
    let members = match &inventory {
        Some(inventory) => applyset::members(cluster, &plan.applyset, inventory).await?,
        None => Vec::new(),
    };
    let mut report = ApplyReport::default();
    let listed: BTreeMap<&Key, &Member> = members.iter().map(|m| (&m.key, m)).collect();

    let adopted = adopt(cluster, plan, &listed, &resolved, options, &mut report).await?;

    let sending = Sending {
        plan,
        dry_run: options.dry_run,
        force: options.force_conflicts,
        adopted: &adopted,
        answers: &BTreeMap::new(),
        observer: options.observer,
        cancel: options.cancel,
    };
    let forced = |desired: &Desired| sending.mode(desired).force;
    let mut checks = first_checks(cluster, plan, &listed, sending, &forced).await?;
    if options.dry_run {
        report.unchecked = checks.unchecked();
    }

    if !options.wait {
        refuse_unwaited_routes(plan, &listed, &checks.accepted)?;
    }
    let doomed = members_to_prune(plan, &members, options, &mut report)?;

    // A dry run reports the server's answers to the checks instead of asking again.
    let answers = std::mem::take(&mut checks.accepted);
    report.removed_fields = removed_by_adopting(plan, &adopted, &answers);
    let sending = Sending {
        answers: &answers,
        ..sending
    };
    if options.cancel.is_cancelled() {
        report.interrupted = true;
        return Ok(report);
    }

    let writing = Writing {
        cluster,
        plan,
        options,
        listed: &listed,
        sending,
        forced: &forced,
    };
    writing
        .write(resolved, checks, inventory, &doomed, &mut report)
        .await?;
    report.finished_jobs = finished_jobs(&report.applied, &listed, &adopted);
    Ok(report)
}

/// The training jobs of `applied` that were adopted or changed after they had finished, and
/// how they ended, judged from the objects as read before the apply.
fn finished_jobs(
    applied: &[(Key, Outcome)],
    listed: &BTreeMap<&Key, &Member>,
    adopted: &BTreeMap<Key, Value>,
) -> Vec<(Key, &'static str)> {
    applied
        .iter()
        .filter(|(_, outcome)| matches!(outcome, Outcome::Adopted | Outcome::Configured))
        .filter_map(|(key, _)| {
            let before = adopted.get(key).or(listed.get(key).map(|m| &m.value))?;
            Some((key.clone(), wait::finished_job(&key.group, before)?))
        })
        .collect()
}

/// With a prune, the members it deletes (see [`decide_prune`]); without one, none, and the
/// report tells the members a prune would remove.
fn members_to_prune<'m>(
    plan: &Plan,
    members: &'m [Member],
    options: &ApplyOptions<'_>,
    report: &mut ApplyReport,
) -> Result<Vec<&'m Member>, ApplyError> {
    if options.prune {
        let consent = (!options.dry_run).then_some(options.consent);
        decide_prune(plan, members, options.allow_empty, consent, report)
    } else {
        let (left, _) = split_prunable(plan, members);
        report.not_rendered = left.iter().map(|m| m.key.clone()).collect();
        Ok(Vec::new())
    }
}

/// What the writing steps of one apply share, once every check before them passed: the plan,
/// how its objects are sent, and the members listed before anything was written.
struct Writing<'w, C> {
    cluster: &'w C,
    plan: &'w Plan,
    options: &'w ApplyOptions<'w>,
    listed: &'w BTreeMap<&'w Key, &'w Member>,
    sending: Sending<'w>,
    /// Whether an object's apply forces conflicts, for the later checks.
    forced: &'w (dyn Fn(&Desired) -> bool + Sync),
}

impl<'w, C: Cluster> Writing<'w, C> {
    /// Write the plan in order: the namespaces, the widened inventory, every other tier; then
    /// prune the `doomed` members, narrow the inventory and wait for health. Stops early, the
    /// report saying so, when cancelled.
    async fn write(
        &self,
        mut resolved: BTreeMap<Key, Resolved>,
        mut checks: Preflight<'w>,
        inventory: Option<Inventory>,
        doomed: &[&Member],
        report: &mut ApplyReport,
    ) -> Result<(), ApplyError> {
        let (cluster, plan, options) = (self.cluster, self.plan, self.options);
        // Namespaces first: the inventory lives in the environment's.
        self.namespaces(&resolved, &mut checks, report).await?;

        let planned = Inventory {
            group_kinds: plan.group_kinds(),
            namespaces: plan.namespaces(),
        };
        let widened = match &inventory {
            Some(recorded) => recorded.union(&planned),
            None => planned.clone(),
        };
        // A dry run records nothing (and the namespace may not exist to hold the record).
        let widening = inventory.as_ref() != Some(&widened) && !options.dry_run;
        if widening {
            applyset::write(cluster, &plan.applyset, &widened, options.dry_run).await?;
        }

        let tiers = self.tiers(&mut resolved, &mut checks, widening, report);
        if tiers.await?.is_break() {
            return Ok(());
        }

        if !doomed.is_empty() {
            let hooks = (options.observer, options.cancel);
            let set = &plan.applyset;
            delete_members(cluster, set, doomed, options.dry_run, hooks, report).await?;
        }
        if report.interrupted {
            return Ok(());
        }
        // Narrow the inventory only when the whole environment was applied and pruned, and not
        // interrupted (members not reached yet stay in it): under `-c` the plan is part of the
        // environment, and without a prune old members still exist.
        if options.prune && plan.components.is_empty() && widened != planned && !options.dry_run {
            applyset::write(cluster, &plan.applyset, &planned, options.dry_run).await?;
        }

        if options.wait && !options.dry_run {
            wait_for_health(cluster, plan, &resolved, options, report).await?;
        }
        Ok(())
    }

    /// Apply the namespaces the plan renders and create the environment's, then check the
    /// objects whose check waited for their namespace.
    async fn namespaces(
        &self,
        resolved: &BTreeMap<Key, Resolved>,
        checks: &mut Preflight<'w>,
        report: &mut ApplyReport,
    ) -> Result<(), ApplyError> {
        let (cluster, plan, options) = (self.cluster, self.plan, self.options);
        let namespaces: Vec<&Desired> = plan
            .objects
            .iter()
            .filter(|d| d.tier == Tier::Namespaces)
            .collect();
        let (listed, sending) = (self.listed, self.sending);
        apply_tier(cluster, &namespaces, resolved, listed, sending, report).await?;
        ensure_namespace(cluster, plan, sending, report).await?;
        if !options.dry_run {
            let written = (options.cancel, Written(written(report)));
            let in_new_namespace = |b: &Blocker| matches!(b, Blocker::Namespace(_));
            checks
                .then(cluster, plan, in_new_namespace, self.forced, written)
                .await?;
        }
        Ok(())
    }

    /// Apply every tier after the namespaces, in order. After the CRDs: wait until they are
    /// established, discover their kinds again and check the objects of those kinds (`widening`:
    /// the inventory was written too). Breaks when cancelled, the report saying so, and before
    /// the routes when what they send to is not ready ([`Self::routes`]).
    async fn tiers(
        &self,
        resolved: &mut BTreeMap<Key, Resolved>,
        checks: &mut Preflight<'w>,
        widening: bool,
        report: &mut ApplyReport,
    ) -> Result<ControlFlow<()>, ApplyError> {
        let (cluster, plan, options) = (self.cluster, self.plan, self.options);
        let tiers: BTreeSet<Tier> = plan
            .objects
            .iter()
            .map(|d| d.tier)
            .filter(|t| *t != Tier::Namespaces)
            .collect();
        for current in tiers {
            let in_tier: Vec<&Desired> =
                plan.objects.iter().filter(|d| d.tier == current).collect();
            let objects: Vec<&Desired> = in_tier
                .iter()
                .copied()
                .filter(|d| {
                    let deferred = !resolved.contains_key(&d.key);
                    if deferred && options.dry_run {
                        // Its CRD exists only after a real apply; a dry run cannot send it.
                        options.observer.applied(&d.key, Outcome::Created);
                        report.applied.push((d.key.clone(), Outcome::Created));
                    }
                    !deferred || !options.dry_run
                })
                .collect();
            let (listed, sending) = (self.listed, self.sending);
            if current == Tier::Other
                && !options.dry_run
                && self.answers(resolved, report).await?.is_break()
            {
                return Ok(ControlFlow::Break(()));
            }
            if current == Tier::Routes && options.wait && !options.dry_run {
                if self.routes(resolved, &objects, report).await?.is_break() {
                    return Ok(ControlFlow::Break(()));
                }
            } else {
                apply_tier(cluster, &objects, resolved, listed, sending, report).await?;
                if current == Tier::Routes && options.wait {
                    report.gated_routes = changing(report, &in_tier);
                }
            }
            if options.cancel.is_cancelled() {
                // The inventory was widened before this tier: it already covers what was written.
                report.interrupted = true;
                return Ok(ControlFlow::Break(()));
            }
            if current == Tier::Crds && !options.dry_run && !objects.is_empty() {
                established(cluster, &objects, resolved, options.timeout).await?;
                *resolved = rediscover(cluster, plan).await?;
                let mut keys = written(report);
                keys.extend(widening.then(|| plan.applyset.parent_key()));
                let written = (options.cancel, Written(keys));
                let of_new_kind = |b: &Blocker| *b == Blocker::Kind;
                checks
                    .then(cluster, plan, of_new_kind, self.forced, written)
                    .await?;
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// Of `objects`, those the report has created, adopted or configured.
fn changing(report: &ApplyReport, objects: &[&Desired]) -> Vec<Key> {
    let changed = |d: &&&Desired| {
        let outcome = report.applied.iter().find(|(key, _)| *key == d.key);
        outcome.is_some_and(|(_, outcome)| *outcome != Outcome::Unchanged)
    };
    objects
        .iter()
        .filter(changed)
        .map(|d| d.key.clone())
        .collect()
}

impl<'w, C: Cluster> Writing<'w, C> {
    /// Apply the routes only once every workload written before them is ready, so that no
    /// weight moves to a version that cannot answer; then wait until their gateways took up
    /// the new weights, so that a prune after them retires only versions no traffic goes to.
    /// When a workload is not ready, the routes keep their live weights and the apply stops
    /// (nothing after them, no prune), the report naming what was not ready and the routes.
    async fn routes(
        &self,
        resolved: &BTreeMap<Key, Resolved>,
        routes: &[&Desired],
        report: &mut ApplyReport,
    ) -> Result<ControlFlow<()>, ApplyError> {
        let (cluster, options) = (self.cluster, self.options);
        let before = self.plan.objects.iter().filter(|d| d.tier < Tier::Routes);
        let not_ready = wait_until_healthy(cluster, before, resolved, options).await?;
        if self.stop_unless_ready(not_ready, report).is_break() {
            report.held_routes = routes.iter().map(|d| d.key.clone()).collect();
            return Ok(ControlFlow::Break(()));
        }
        apply_tier(cluster, routes, resolved, self.listed, self.sending, report).await?;
        let written = routes.iter().copied();
        let not_ready = wait_until_healthy(cluster, written, resolved, options).await?;
        Ok(self.stop_unless_ready(not_ready, report))
    }

    /// Before the custom objects (the jobs), wait until every request written before them is
    /// answered ([`answer`]): a job's pods then never start without their Secret, and a request
    /// refused stops the apply with its reason, no job written. `--no-wait` waits for this too:
    /// a job written without its keys could not start.
    async fn answers(
        &self,
        resolved: &BTreeMap<Key, Resolved>,
        report: &mut ApplyReport,
    ) -> Result<ControlFlow<()>, ApplyError> {
        let requests = self
            .plan
            .objects
            .iter()
            .filter(|d| d.tier < Tier::Other && answer::answered_by(&d.value).is_some());
        let not_ready = wait_until_healthy(self.cluster, requests, resolved, self.options).await?;
        Ok(self.stop_unless_ready(not_ready, report))
    }

    /// Go on when nothing is left `not_ready` and the apply was not cancelled; else stop, the
    /// report saying why.
    fn stop_unless_ready(
        &self,
        not_ready: Vec<NotReady>,
        report: &mut ApplyReport,
    ) -> ControlFlow<()> {
        let cancelled = self.options.cancel.is_cancelled();
        if not_ready.is_empty() && !cancelled {
            return ControlFlow::Continue(());
        }
        report.interrupted = cancelled;
        report.not_ready = not_ready;
        ControlFlow::Break(())
    }
}

/// Refuse rendered objects that exist but are not this environment's, or with `--adopt` take
/// them over: the keys adopted with their live objects as read, also told in the report.
async fn adopt(
    cluster: &impl Cluster,
    plan: &Plan,
    listed: &BTreeMap<&Key, &Member>,
    resolved: &BTreeMap<Key, Resolved>,
    options: &ApplyOptions<'_>,
    report: &mut ApplyReport,
) -> Result<BTreeMap<Key, Value>, ApplyError> {
    let foreign = foreign(cluster, plan, listed, resolved).await?;
    if !foreign.is_empty() && !options.adopt {
        let details: Vec<String> = foreign
            .iter()
            .map(|(k, v, _)| format!("  {k}: {v}"))
            .collect();
        return Err(ApplyError::NotOurs {
            count: foreign.len(),
            details: details.join("\n"),
        });
    }
    report.adopted = foreign
        .iter()
        .map(|(k, v, _)| (k.clone(), v.clone()))
        .collect();
    Ok(foreign.into_iter().map(|(k, _, live)| (k, live)).collect())
}

/// Wait until the applied objects that have a health are healthy, or the timeout; what is not
/// is told in the report.
async fn wait_for_health(
    cluster: &impl Cluster,
    plan: &Plan,
    resolved: &BTreeMap<Key, Resolved>,
    options: &ApplyOptions<'_>,
    report: &mut ApplyReport,
) -> Result<(), ApplyError> {
    report.not_ready = wait_until_healthy(cluster, plan.objects.iter(), resolved, options).await?;
    report.interrupted = options.cancel.is_cancelled();
    Ok(())
}

/// Wait until those of `objects` that have a health are healthy, the timeout passes or the
/// apply is cancelled; return those not ready.
async fn wait_until_healthy<'d>(
    cluster: &impl Cluster,
    objects: impl Iterator<Item = &'d Desired>,
    resolved: &BTreeMap<Key, Resolved>,
    options: &ApplyOptions<'_>,
) -> Result<Vec<NotReady>, ApplyError> {
    let pending: Vec<Pending> = objects
        .filter(|d| {
            wait::waits_for(&d.key.group, &d.key.kind) || answer::answered_by(&d.value).is_some()
        })
        .filter_map(|d| {
            Some(Pending {
                key: d.key.clone(),
                resolved: resolved.get(&d.key)?.clone(),
            })
        })
        .collect();
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let on_poll = |elapsed: Duration, objects: &[Watched]| {
        options.observer.waiting(elapsed, objects);
    };
    Ok(wait::wait(cluster, pending, options.timeout, &on_poll, options.cancel).await?)
}

/// The fields of each adopted object that its other managers wrote and the render lacks, as
/// the server's check of its apply tells them.
fn removed_by_adopting(
    plan: &Plan,
    adopted: &BTreeMap<Key, Value>,
    answers: &BTreeMap<Key, Value>,
) -> Vec<(Key, RemovedField)> {
    plan.objects
        .iter()
        .filter(|d| adopted.contains_key(&d.key))
        .filter_map(|d| Some((d, answers.get(&d.key)?)))
        .flat_map(|(d, answer)| {
            let removed = removals(answer, plan.manager(d));
            removed.into_iter().map(|r| (d.key.clone(), r))
        })
        .collect()
}

/// The rendered objects that exist on the cluster but are not this set's to write (see
/// [`ownership::judge`]), with the verdict on each and the object as read. Members are this
/// set's by definition; the others are read at once ([`live::read`]).
async fn foreign(
    cluster: &impl Cluster,
    plan: &Plan,
    listed: &BTreeMap<&Key, &Member>,
    resolved: &BTreeMap<Key, Resolved>,
) -> Result<Vec<(Key, Verdict, Value)>, ApplyError> {
    let mut unknown: Vec<&Desired> = Vec::new();
    let mut wanted: Vec<live::Wanted<'_>> = Vec::new();
    for desired in &plan.objects {
        if desired.tier != Tier::Namespaces
            && !listed.contains_key(&desired.key)
            && let Some(resolved) = resolved.get(&desired.key)
        {
            unknown.push(desired);
            wanted.push((&desired.key, resolved));
        }
    }
    let mut read = live::read(cluster, &wanted).await;
    let mut foreign = Vec::new();
    for desired in unknown {
        let key = &desired.key;
        let live = match read.remove(key) {
            Some(Ok(live)) => live,
            Some(Err(source)) => {
                let key = key.clone();
                return Err(ApplyError::Read { key, source });
            }
            None => None,
        };
        let Some(live) = live else { continue };
        match ownership::judge(&plan.applyset, desired.shared, &live) {
            Verdict::Ours => {}
            verdict => foreign.push((key.clone(), verdict, live)),
        }
    }
    Ok(foreign)
}

/// The server's first look at every object the apply would send (see
/// [`crate::deploy::checks::preflight`]), before anything is written; a Secret value another
/// manager changed fails it too.
async fn first_checks<'p>(
    cluster: &impl Cluster,
    plan: &'p Plan,
    listed: &BTreeMap<&Key, &Member>,
    sending: Sending<'_>,
    forced: &(dyn Fn(&Desired) -> bool + Sync),
) -> Result<Preflight<'p>, ApplyError> {
    let sent: Vec<&Desired> = plan
        .objects
        .iter()
        .filter(|d| !unchanged_member(d, listed))
        .collect();
    let known: Vec<(Key, Refusal)> = sent
        .iter()
        .filter_map(|d| {
            let conflict = secret_conflict(d, listed.get(&d.key).copied(), sending.mode(d))?;
            Some((d.key.clone(), conflict))
        })
        .collect();
    let hooks = (sending.cancel, sending.dry_run);
    let checks = Preflight::first(cluster, plan, &sent, known, forced, hooks).await?;
    Ok(checks)
}

/// With `--no-wait`, refuse an apply that would change a route the environment has: its new
/// weights would go out without waiting until the versions it sends to are ready, and a prune
/// would retire the old versions at once, so traffic would go to versions that cannot answer.
/// A new route moves no traffic that flows; a member is changed unless it is unchanged since
/// the last apply, or its check's answer equals it as it is.
fn refuse_unwaited_routes(
    plan: &Plan,
    listed: &BTreeMap<&Key, &Member>,
    answers: &BTreeMap<Key, Value>,
) -> Result<(), ApplyError> {
    let changed = |d: &&Desired| match (listed.get(&d.key), answers.get(&d.key)) {
        _ if unchanged_member(d, listed) => false,
        (Some(member), Some(answer)) => diff::normalize(&member.value) != diff::normalize(answer),
        (Some(_), None) => true,
        (None, _) => false,
    };
    let routes: Vec<String> = plan
        .objects
        .iter()
        .filter(|d| d.tier == Tier::Routes)
        .filter(changed)
        .map(|d| format!("  {}", d.key))
        .collect();
    if routes.is_empty() {
        return Ok(());
    }
    Err(ApplyError::UnwaitedRoutes {
        count: routes.len(),
        details: routes.join("\n"),
    })
}

/// What the apply has written so far: the namespace it created, and every object it applied
/// that was not unchanged.
fn written(report: &ApplyReport) -> Vec<Key> {
    let applied = report
        .applied
        .iter()
        .filter(|(_, outcome)| *outcome != Outcome::Unchanged)
        .map(|(key, _)| key);
    report
        .namespace_created
        .iter()
        .chain(applied)
        .cloned()
        .collect()
}

/// The fast path: the configuration mlkube applied last, and nothing drifted since.
fn unchanged_member(desired: &Desired, listed: &BTreeMap<&Key, &Member>) -> bool {
    listed
        .get(&desired.key)
        .is_some_and(|m| crate::deploy::inventory::plan::unchanged(desired, &m.value))
}

/// A Secret value another manager changed: a conflict the server does not see when one wrote it
/// through `data` and the other through `stringData`.
fn secret_conflict(
    desired: &Desired,
    before: Option<&Member>,
    mode: ApplyMode<'_>,
) -> Option<Refusal> {
    let member = before.filter(|_| !mode.force && is_secret(&desired.key))?;
    let conflicts = value_conflicts(&desired.value, &member.value, mode.manager);
    (!conflicts.is_empty()).then(|| Refusal::conflict(conflict_failure(&conflicts, None)))
}

/// Resolve every planned kind; kinds whose CRD is in the plan may stay unresolved for now.
fn resolve_all(cluster: &impl Cluster, plan: &Plan) -> Result<BTreeMap<Key, Resolved>, ApplyError> {
    let mut resolved = BTreeMap::new();
    let mut unknown = BTreeSet::new();
    let defined = plan.defined_kinds();
    for desired in &plan.objects {
        match cluster.resolve(&desired.api_version, &desired.key.kind) {
            Some(r) => {
                resolved.insert(desired.key.clone(), r);
            }
            None if defined.contains(&(desired.key.group.as_str(), desired.key.kind.as_str())) => {}
            None => {
                unknown.insert(format!("{} {}", desired.api_version, desired.key.kind));
            }
        }
    }
    if unknown.is_empty() {
        Ok(resolved)
    } else {
        Err(ApplyError::UnknownKinds {
            kinds: unknown.into_iter().collect::<Vec<_>>().join(", "),
        })
    }
}

/// Refresh discovery after CRDs were established until every planned kind resolves; the
/// aggregated discovery document can trail the `Established` condition by a moment.
async fn rediscover(
    cluster: &impl Cluster,
    plan: &Plan,
) -> Result<BTreeMap<Key, Resolved>, ApplyError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        cluster.refresh().await?;
        let resolved = resolve_all(cluster, plan)?;
        let missing: BTreeSet<String> = plan
            .objects
            .iter()
            .filter(|d| !resolved.contains_key(&d.key))
            .map(|d| format!("{} {}", d.api_version, d.key.kind))
            .collect();
        if missing.is_empty() {
            return Ok(resolved);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApplyError::UnknownKinds {
                kinds: missing.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn ensure_namespace(
    cluster: &impl Cluster,
    plan: &Plan,
    sending: Sending<'_>,
    report: &mut ApplyReport,
) -> Result<(), ApplyError> {
    let namespace = &plan.applyset.namespace;
    let key = plan.namespace_key();
    if plan.contains(&key) {
        return Ok(());
    }
    let error = |source| ApplyError::Namespace {
        namespace: namespace.clone(),
        source,
    };
    let resource = namespace_resource();
    if cluster
        .get(&resource, None, namespace)
        .await
        .map_err(error)?
        .is_some()
    {
        return Ok(());
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {"app.kubernetes.io/managed-by": "mlkube"}},
    });
    cluster
        .apply(
            &resource,
            None,
            namespace,
            &object,
            ApplyMode {
                dry_run: sending.dry_run,
                force: false,
                manager: FIELD_MANAGER,
            },
        )
        .await
        .map_err(error)?;
    sending.observer.namespace_created(&key);
    report.namespace_created = Some(key);
    Ok(())
}

/// How the objects of one apply are sent.
#[derive(Clone, Copy)]
struct Sending<'a> {
    plan: &'a Plan,
    dry_run: bool,
    force: bool,
    /// Objects taken over with `--adopt`, as read: their conflicting fields are forced, and
    /// the fields other managers wrote are taken over before the apply.
    adopted: &'a BTreeMap<Key, Value>,
    /// In a dry run, the server's answer to each object's check, which stands for its apply.
    answers: &'a BTreeMap<Key, Value>,
    observer: &'a dyn Observer,
    cancel: &'a Cancel,
}

impl Sending<'_> {
    fn mode<'d>(&self, desired: &'d Desired) -> ApplyMode<'d>
    where
        Self: 'd,
    {
        ApplyMode {
            dry_run: self.dry_run,
            force: self.force || self.adopted.contains_key(&desired.key),
            manager: self.plan.manager(desired),
        }
    }
}

async fn apply_tier(
    cluster: &impl Cluster,
    objects: &[&Desired],
    resolved: &BTreeMap<Key, Resolved>,
    listed: &BTreeMap<&Key, &Member>,
    sending: Sending<'_>,
    report: &mut ApplyReport,
) -> Result<(), ApplyError> {
    let results: Vec<Option<(Key, Result<Outcome, Refusal>)>> = futures::stream::iter(
        objects
            .iter()
            .map(|desired| async move {
                if sending.cancel.is_cancelled() {
                    return None;
                }
                let result = apply_one(cluster, desired, resolved, listed, sending).await;
                if let Ok(outcome) = &result {
                    sending.observer.applied(&desired.key, *outcome);
                }
                Some((desired.key.clone(), result))
            })
            .collect::<Vec<_>>(),
    )
    .buffer_unordered(CONCURRENCY)
    .collect()
    .await;
    let mut failures = Vec::new();
    let mut applied = Vec::new();
    for (key, result) in results.into_iter().flatten() {
        match result {
            Ok(outcome) => applied.push((key, outcome)),
            Err(message) => failures.push((key, message)),
        }
    }
    // Keep the report in plan order regardless of completion order.
    let order: BTreeMap<&Key, usize> = objects
        .iter()
        .enumerate()
        .map(|(i, d)| (&d.key, i))
        .collect();
    applied.sort_by_key(|(k, _)| order.get(k).copied().unwrap_or(usize::MAX));
    report.applied.extend(applied);
    if failures.is_empty() {
        return Ok(());
    }
    failures.sort_by(|a, b| a.0.cmp(&b.0));
    let mut details = String::new();
    for (key, refusal) in &failures {
        let _ = writeln!(details, "  {key}: {}", refusal.message);
    }
    Err(ApplyError::Objects {
        count: failures.len(),
        details: details.trim_end().to_string(),
        refused: failures,
    })
}

/// Apply one object (or skip it when it is unchanged since the last apply), and judge what that
/// did; a failure is why it was refused.
async fn apply_one(
    cluster: &impl Cluster,
    desired: &Desired,
    resolved: &BTreeMap<Key, Resolved>,
    listed: &BTreeMap<&Key, &Member>,
    sending: Sending<'_>,
) -> Result<Outcome, Refusal> {
    let Some(r) = resolved.get(&desired.key) else {
        return Err(Refusal::rejected(format!(
            "the cluster does not serve {} {}",
            desired.api_version, desired.key.kind
        )));
    };
    if unchanged_member(desired, listed) {
        return Ok(Outcome::Unchanged);
    }
    let namespace = desired.key.namespace.as_deref();
    let mode = sending.mode(desired);
    // A shared object another set claims is not listed as this one's: read it, to tell what the
    // apply does to it as `diff` tells it.
    let unlisted = match listed.get(&desired.key) {
        None if desired.shared => cluster
            .get(r, namespace, &desired.key.name)
            .await
            .map_err(|e| Refusal::rejected(cluster::api_message(&e)))?
            .and_then(|live| Member::of(live, &sending.plan.applyset)),
        _ => None,
    };
    let before = listed.get(&desired.key).copied().or(unlisted.as_ref());
    if let Some(conflict) = secret_conflict(desired, before, mode) {
        return Err(conflict);
    }
    let answer = sending.answers.get(&desired.key);
    let adopted = sending.adopted.get(&desired.key);
    if mode.dry_run {
        // Checked already; what the checks deferred waits for its namespace, so is created.
        return Ok(match answer {
            _ if adopted.is_some() => Outcome::Adopted,
            Some(answer) => outcome(answer, before, mode),
            None => Outcome::Created,
        });
    }
    if let Some(live) = adopted {
        // The fields the other managers wrote become mlkube's, so the apply removes those the
        // render lacks.
        cluster
            .take_over(r, live, mode.manager)
            .await
            .map_err(|e| apply_failure(&e))?;
        return cluster
            .apply(r, namespace, &desired.key.name, &desired.value, mode)
            .await
            .map(|_| Outcome::Adopted)
            .map_err(|e| apply_failure(&e));
    }
    if let (Some(answer), Some(member)) = (answer, before)
        && *answer == member.value
    {
        // The server answered the check with the live object as it is, to the last field
        // manager's timestamp: the write would change nothing, so it is not sent.
        return Ok(Outcome::Unchanged);
    }
    let result = cluster
        .apply(r, namespace, &desired.key.name, &desired.value, mode)
        .await;
    result
        .map(|applied| outcome(&applied, before, mode))
        .map_err(|e| apply_failure(&e))
}

/// What an apply did, judged from the inventory listing taken before it. A real apply moves the
/// resource version exactly when it changed something; a dry run never moves it, so there the
/// object is compared as `diff` compares it.
fn outcome(applied: &Value, before: Option<&Member>, mode: ApplyMode<'_>) -> Outcome {
    match before {
        Some(member) if mode.dry_run => {
            if diff::normalize(&member.value) == diff::normalize(applied) {
                Outcome::Unchanged
            } else {
                Outcome::Configured
            }
        }
        Some(member)
            if applied["metadata"]["resourceVersion"] == member.resource_version.as_str() =>
        {
            Outcome::Unchanged
        }
        Some(_) => Outcome::Configured,
        None => {
            // Not a member yet: created now, or a shared object other environments hold
            // (their managers show up). An adopted object is told apart before.
            let others = applied["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["manager"] != mode.manager);
            if others {
                Outcome::Configured
            } else {
                Outcome::Created
            }
        }
    }
}

async fn established(
    cluster: &impl Cluster,
    crds: &[&Desired],
    resolved: &BTreeMap<Key, Resolved>,
    timeout: Duration,
) -> Result<(), ApplyError> {
    let pending: Vec<Pending> = crds
        .iter()
        .filter_map(|d| {
            Some(Pending {
                key: d.key.clone(),
                resolved: resolved.get(&d.key)?.clone(),
            })
        })
        .collect();
    let timeout = timeout.min(Duration::from_secs(120));
    let not_ready = wait::crds_established(cluster, &pending, timeout).await?;
    if not_ready.is_empty() {
        return Ok(());
    }
    let details: Vec<String> = not_ready
        .iter()
        .map(|n| format!("  {}: {}", n.key, n.reason))
        .collect();
    Err(ApplyError::NotEstablished {
        what: format!("{} CustomResourceDefinition(s)", not_ready.len()),
        timeout,
        details: details.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(rv: &str) -> Member {
        Member {
            shared: false,
            key: Key {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: Some("n".into()),
                name: "c".into(),
            },
            api_version: "v1".into(),
            component: None,
            resource_version: rv.into(),
            value: Value::Null,
        }
    }

    fn real() -> ApplyMode<'static> {
        ApplyMode {
            dry_run: false,
            force: false,
            manager: FIELD_MANAGER,
        }
    }

    #[test]
    fn a_dry_run_outcome_compares_the_object_as_diff_does() {
        let dry = ApplyMode {
            dry_run: true,
            ..real()
        };
        let mut before = member("5");
        before.value = json!({"metadata": {"resourceVersion": "5"}, "spec": {"replicas": 1}});
        let changed = json!({"metadata": {"resourceVersion": "5"}, "spec": {"replicas": 2}});
        assert_eq!(outcome(&changed, Some(&before), dry), Outcome::Configured);
        assert_eq!(
            outcome(&before.value, Some(&before), dry),
            Outcome::Unchanged
        );
    }

    #[test]
    fn the_outcome_compares_resource_versions_with_the_listing() {
        let applied =
            json!({"metadata": {"resourceVersion": "5", "managedFields": [{"manager": "mlkube"}]}});
        assert_eq!(
            outcome(&applied, Some(&member("5")), real()),
            Outcome::Unchanged
        );
        assert_eq!(
            outcome(&applied, Some(&member("4")), real()),
            Outcome::Configured
        );
        assert_eq!(outcome(&applied, None, real()), Outcome::Created);
        let shared = json!({"metadata": {"managedFields": [{"manager": "mlkube"}, {"manager": "mlkube@other"}]}});
        assert_eq!(outcome(&shared, None, real()), Outcome::Configured);
    }
}
