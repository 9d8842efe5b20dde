//! The server's verdict on a plan before anything is written: a server-side dry run of each
//! object, which `mlkube validate` reports and `mlkube apply` must pass before it writes, and
//! what an apply the server refused says about it.
//!
//! Expected flow of an apply's checks: every object the apply would send (not those its fast
//! path finds unchanged since the last apply) is dry-run once, concurrently, exactly as it will
//! be sent: server-side apply with `dryRun=All`, its field manager (`mlkube`, or the set's own
//! for shared objects) and the same force-conflicts choice. That is the first pass, before
//! anything is written. An object the server cannot judge yet because the same apply creates
//! what it needs is deferred, not sent: one in a namespace that does not exist yet (the
//! server's NamespaceLifecycle admission refuses anything in it) is dry-run as soon as the
//! apply has created its namespaces, before it writes anything else; one of a kind whose
//! CustomResourceDefinition is in the plan and not served yet, as soon as those CRDs are
//! established, before anything of a later tier is written. `mlkube validate` sends the objects
//! of a namespace that does not exist yet all the same: the server converts a server-side apply
//! against its schema (unknown fields, wrong types) before admission finds the namespace
//! missing, so a `NotFound` answer means "checked against the schema only".
//!
//! Guarantees: when the server rejects any object, the apply fails listing every rejected
//! object with the server's message, and has written nothing; or, when only deferred objects
//! were rejected, no more than what their check needed first, which the error names: the
//! namespaces, and for custom objects also the inventory (it is always widened before a
//! member is written) and the CRDs. An object that needs a namespace neither the cluster nor
//! the apply has is rejected in the first pass. `apply --dry-run` runs the first pass, reports
//! the same rejections, and lists the deferred objects as not checked: it cannot create what
//! they need. Each object costs one dry-run request, and an unchanged one none; an object the
//! fast path cannot vouch for (a shared one carries no configuration hash) but whose dry run
//! answers with the live object as it is, is not written at all, so a re-apply that changes
//! nothing sends a dry run where it used to send a write.
//!
//! Caveats: the server is asked, not bound. A write that its dry run accepted can still fail
//! (a quota used up in between, a webhook that answers otherwise); the apply then stops after
//! that tier, as it always did. Objects of a CRD that is already served are checked against the
//! schema served now, before the plan's version of the CRD is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use futures::StreamExt;
use serde_json::Value;

use crate::deploy::cancel::Cancel;
use crate::deploy::cluster::{
    self, ApplyMode, CONCURRENCY, Cluster, Conflict, Resolved, namespace_resource,
};
pub use crate::deploy::deferred::Blocker;
use crate::deploy::key::Key;
use crate::deploy::plan::{Desired, Plan};

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The headline says who refused what (the server's dry run, or a conflict, which mlkube
    /// may have found itself), and the one hint fits them all.
    #[error(
        "{}; {written}:\n{details}\n  hint: {}",
        headline(refused),
        hint(refused)
    )]
    Rejected {
        count: usize,
        written: Written,
        details: String,
        /// Every object refused, in the order of `details`.
        refused: Vec<(Key, Refusal)>,
    },
    #[error("cannot read namespace `{namespace}`")]
    Namespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// Why an object cannot be applied as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Another field manager owns some of its fields (the server's answer, or mlkube's own
    /// finding for a Secret's value); otherwise the server rejected it.
    pub conflict: bool,
    pub message: String,
}

impl Refusal {
    pub fn rejected(message: String) -> Refusal {
        Refusal {
            conflict: false,
            message,
        }
    }

    pub fn conflict(message: String) -> Refusal {
        Refusal {
            conflict: true,
            message,
        }
    }
}

const CONFLICT_HINT: &str = "pass --force-conflicts to take these fields over, or stop the other \
                             manager setting them";

/// `the server rejected 2 object(s) in a dry run`, `1 object(s) conflict with other field
/// managers`, or both.
fn headline(refused: &[(Key, Refusal)]) -> String {
    let conflicts = refused.iter().filter(|(_, r)| r.conflict).count();
    let rejected = refused.len() - conflicts;
    match (rejected, conflicts) {
        (_, 0) => format!("the server rejected {rejected} object(s) in a dry run"),
        (0, _) => format!("{conflicts} object(s) conflict with other field managers"),
        _ => format!(
            "the server rejected {rejected} object(s) in a dry run, and {conflicts} conflict \
             with other field managers"
        ),
    }
}

/// The one hint that fits every refusal.
fn hint(refused: &[(Key, Refusal)]) -> &'static str {
    let conflicts = refused.iter().any(|(_, r)| r.conflict);
    let rejected = refused.iter().any(|(_, r)| !r.conflict);
    match (rejected, conflicts) {
        (false, true) => CONFLICT_HINT,
        (true, true) => {
            "fix what the server names (the component's params or Jsonnet), and pass \
             --force-conflicts to take the conflicting fields over (or stop the other manager \
             setting them); then apply again"
        }
        _ => "fix what the server names (the component's params or Jsonnet), then apply again",
    }
}

/// The hint for objects refused at their write, when some were refused for a conflict.
pub fn write_hint(refused: &[(Key, Refusal)]) -> String {
    if refused.iter().any(|(_, r)| r.conflict) {
        format!("\n  hint: {CONFLICT_HINT}")
    } else {
        String::new()
    }
}

/// What an apply had written when the server rejected an object it could only check then.
#[derive(Debug, Default)]
pub struct Written(pub Vec<Key>);

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "nothing was written");
        }
        let keys: Vec<String> = self.0.iter().map(Key::to_string).collect();
        write!(
            f,
            "nothing was written but what their check needed first: {}",
            keys.join(", ")
        )
    }
}

/// The server's answer to one object's dry run, or why it was not asked.
#[derive(Debug)]
enum Verdict {
    /// The object as the server would store it.
    Accepted(Value),
    Rejected(Refusal),
    Deferred(Blocker),
    /// In a namespace that does not exist yet: the server checked it against its schema (the
    /// fields and their types) and could go no further.
    SchemaOnly(Blocker),
}

/// The namespaces that `objects` live in and the cluster does not have.
async fn missing_namespaces(
    cluster: &impl Cluster,
    objects: &[&Desired],
) -> Result<BTreeSet<String>, PreflightError> {
    let used: BTreeSet<&str> = objects
        .iter()
        .filter_map(|d| d.key.namespace.as_deref())
        .collect();
    let reads: Vec<_> = used
        .into_iter()
        .map(|namespace| async move {
            let live = cluster
                .get(&namespace_resource(), None, namespace)
                .await
                .map_err(|source| PreflightError::Namespace {
                    namespace: namespace.to_string(),
                    source,
                })?;
            Ok(live.is_none().then(|| namespace.to_string()))
        })
        .collect();
    let found: Vec<Result<Option<String>, PreflightError>> = futures::stream::iter(reads)
        .buffered(CONCURRENCY)
        .collect()
        .await;
    found.into_iter().filter_map(Result::transpose).collect()
}

/// Whether an apply of `plan` creates namespace `namespace`: it renders it, or it is the
/// environment's own, which the apply creates when missing.
fn creates_namespace(plan: &Plan, namespace: &str) -> bool {
    namespace == plan.applyset.namespace
        || plan
            .objects
            .iter()
            .any(|d| d.key.group.is_empty() && d.key.kind == "Namespace" && d.key.name == namespace)
}

/// How the objects of one check are sent.
struct Check<'a> {
    plan: &'a Plan,
    /// Namespaces that do not exist (yet).
    missing: BTreeSet<String>,
    /// Whether an object's conflicting fields are forced, as its apply will force them.
    forced: &'a (dyn Fn(&Desired) -> bool + Sync),
    /// Once cancelled, no dry run is started any more.
    cancel: &'a Cancel,
    /// How a rejection reads.
    message: fn(&kube::Error) -> Refusal,
    /// Send objects in a namespace this apply creates all the same: the server checks them
    /// against its schema before it finds the namespace missing.
    schema_in_new_namespaces: bool,
}

impl Check<'_> {
    /// Dry-run `objects` concurrently; those cancelled before they started are left out.
    async fn run<'p>(
        &self,
        cluster: &impl Cluster,
        objects: &[&'p Desired],
    ) -> Vec<(&'p Desired, Verdict)> {
        let checks: Vec<_> = objects
            .iter()
            .map(|desired| async move {
                if self.cancel.is_cancelled() {
                    return None;
                }
                Some((*desired, self.one(cluster, desired).await))
            })
            .collect();
        let verdicts: Vec<Option<(&Desired, Verdict)>> = futures::stream::iter(checks)
            .buffered(CONCURRENCY)
            .collect()
            .await;
        verdicts.into_iter().flatten().collect()
    }

    async fn one(&self, cluster: &impl Cluster, desired: &Desired) -> Verdict {
        let key = &desired.key;
        let Some(resolved) = cluster.resolve(&desired.api_version, &key.kind) else {
            if self.plan.defines(&key.group, &key.kind) {
                return Verdict::Deferred(Blocker::Kind);
            }
            return Verdict::Rejected(Refusal::rejected(format!(
                "the cluster does not serve {} {}",
                desired.api_version, key.kind
            )));
        };
        let namespace = key.namespace.as_deref();
        let missing = self.missing_namespace(&resolved, namespace);
        if let Some(missing) = missing {
            if !creates_namespace(self.plan, missing) {
                return Verdict::Rejected(Refusal::rejected(format!(
                    "namespace `{missing}` does not exist, and this apply does not create it"
                )));
            }
            if !self.schema_in_new_namespaces {
                return Verdict::Deferred(Blocker::Namespace(missing.to_string()));
            }
        }
        let mode = ApplyMode {
            dry_run: true,
            force: (self.forced)(desired),
            manager: self.plan.manager(desired),
        };
        let answer = cluster
            .apply(&resolved, namespace, &key.name, &desired.value, mode)
            .await;
        match (answer, missing) {
            (Ok(answer), None) => Verdict::Accepted(answer),
            // The server checks the fields and their types first, then finds no namespace.
            (Err(e), Some(missing)) if cluster::is_not_found(&e) => {
                Verdict::SchemaOnly(Blocker::Namespace(missing.to_string()))
            }
            (Ok(_), Some(missing)) => Verdict::Deferred(Blocker::Namespace(missing.to_string())),
            (Err(e), _) => Verdict::Rejected((self.message)(&e)),
        }
    }

    fn missing_namespace<'n>(
        &self,
        resolved: &Resolved,
        namespace: Option<&'n str>,
    ) -> Option<&'n str> {
        namespace.filter(|ns| resolved.namespaced && self.missing.contains(*ns))
    }
}

/// The checks of one apply: the server's answers so far, and what waits for a later pass.
#[derive(Debug, Default)]
pub struct Preflight<'p> {
    /// Each accepted object as the server would store it (what a dry run reports).
    pub accepted: BTreeMap<Key, Value>,
    /// Objects not checked yet, and what each waits for.
    deferred: Vec<(&'p Desired, Blocker)>,
}

impl<'p> Preflight<'p> {
    /// The first pass, before anything is written: dry-run every object of `objects` that can
    /// be checked now, and fail listing every rejection, `known` ones (found without asking
    /// the server) included.
    pub async fn first(
        cluster: &impl Cluster,
        plan: &'p Plan,
        objects: &[&'p Desired],
        known: Vec<(Key, Refusal)>,
        forced: &(dyn Fn(&Desired) -> bool + Sync),
        cancel: &Cancel,
    ) -> Result<Preflight<'p>, PreflightError> {
        let check = Check {
            plan,
            missing: missing_namespaces(cluster, objects).await?,
            forced,
            cancel,
            message: apply_failure,
            schema_in_new_namespaces: false,
        };
        let verdicts = check.run(cluster, objects).await;
        let mut preflight = Preflight::default();
        preflight.settle(verdicts, known, Written::default())?;
        Ok(preflight)
    }

    /// A later pass, once what the objects `waits` selects needed exists: dry-run them, and
    /// fail listing every rejection and what was `written` so far.
    pub async fn then(
        &mut self,
        cluster: &impl Cluster,
        plan: &'p Plan,
        waits: fn(&Blocker) -> bool,
        forced: &(dyn Fn(&Desired) -> bool + Sync),
        (cancel, written): (&Cancel, Written),
    ) -> Result<(), PreflightError> {
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|(_, blocker)| waits(blocker));
        self.deferred = waiting;
        let objects: Vec<&'p Desired> = ready.into_iter().map(|(d, _)| d).collect();
        if objects.is_empty() {
            return Ok(());
        }
        let check = Check {
            plan,
            missing: BTreeSet::new(),
            forced,
            cancel,
            message: apply_failure,
            schema_in_new_namespaces: false,
        };
        let verdicts = check.run(cluster, &objects).await;
        self.settle(verdicts, Vec::new(), written)
    }

    /// What a dry run could not check, and why.
    pub fn unchecked(&self) -> Vec<(Key, String)> {
        self.deferred
            .iter()
            .map(|(d, blocker)| (d.key.clone(), blocker.to_string()))
            .collect()
    }

    fn settle(
        &mut self,
        verdicts: Vec<(&'p Desired, Verdict)>,
        mut refused: Vec<(Key, Refusal)>,
        written: Written,
    ) -> Result<(), PreflightError> {
        for (desired, verdict) in verdicts {
            match verdict {
                Verdict::Accepted(answer) => {
                    self.accepted.insert(desired.key.clone(), answer);
                }
                Verdict::Rejected(refusal) => refused.push((desired.key.clone(), refusal)),
                Verdict::Deferred(blocker) | Verdict::SchemaOnly(blocker) => {
                    self.deferred.push((desired, blocker));
                }
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        refused.sort_by(|a, b| a.0.cmp(&b.0));
        Err(PreflightError::Rejected {
            count: refused.len(),
            written,
            details: details(&refused),
            refused,
        })
    }
}

/// The lines of a rejection that name each object refused and why.
pub fn details(refused: &[(Key, Refusal)]) -> String {
    let lines: Vec<String> = refused
        .iter()
        .map(|(key, refusal)| format!("  {key}: {}", refusal.message))
        .collect();
    lines.join("\n")
}

/// One object the server rejected, or could not check (fully) yet.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rejection {
    #[serde(flatten)]
    pub key: Key,
    pub component: String,
    pub message: String,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct Validation {
    pub valid: usize,
    pub rejected: Vec<Rejection>,
    /// Objects in a namespace this apply creates: the server checked them against its schema
    /// (their fields and types); its admission and validation wait for the namespace.
    pub schema_only: Vec<Rejection>,
    /// Objects the server cannot check at all before an apply: their CustomResourceDefinition
    /// comes with it.
    pub skipped: Vec<Rejection>,
}

/// `mlkube validate`: a server-side dry run of every object, forced and whether or not it
/// changed, every rejection listed; objects in a namespace the apply creates are sent all the
/// same, so the server checks them against its schema.
pub async fn validate(cluster: &impl Cluster, plan: &Plan) -> Result<Validation, PreflightError> {
    let objects: Vec<&Desired> = plan.objects.iter().collect();
    let check = Check {
        plan,
        missing: missing_namespaces(cluster, &objects).await?,
        forced: &|_| true,
        cancel: &Cancel::new(),
        message: |error| Refusal::rejected(rejection_message(error)),
        schema_in_new_namespaces: true,
    };
    let mut validation = Validation::default();
    for (desired, verdict) in check.run(cluster, &objects).await {
        let rejection = |message| Rejection {
            key: desired.key.clone(),
            component: desired.component.clone(),
            message,
        };
        match verdict {
            Verdict::Accepted(_) => validation.valid += 1,
            Verdict::Rejected(refusal) => validation.rejected.push(rejection(refusal.message)),
            Verdict::SchemaOnly(blocker) => {
                validation.schema_only.push(rejection(blocker.to_string()));
            }
            Verdict::Deferred(blocker) => validation.skipped.push(rejection(blocker.to_string())),
        }
    }
    Ok(validation)
}

/// The server's message with each invalid field on its own line.
fn rejection_message(error: &kube::Error) -> String {
    let kube::Error::Api(status) = error else {
        return error.to_string();
    };
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    if causes.is_empty() {
        return status.message.clone();
    }
    let mut message = status.reason.clone();
    for cause in causes {
        let _ = write!(message, "\n    {}: {}", cause.field, cause.message);
    }
    message
}

/// What a refused apply says: every conflicting field with its owner, or the server's message.
pub fn apply_failure(error: &kube::Error) -> Refusal {
    match cluster::conflicts(error) {
        Some(conflicts) => Refusal::conflict(conflict_failure(&conflicts, Some(error))),
        None => Refusal::rejected(cluster::api_message(error)),
    }
}

/// Every conflicting field with its manager; the server's message when it named no field. How
/// to go on is the hint of the error that lists it.
pub fn conflict_failure(conflicts: &[Conflict], error: Option<&kube::Error>) -> String {
    let mut message = String::from("conflicts with other field managers:");
    for c in conflicts {
        let _ = write!(message, "\n    {} is owned by \"{}\"", c.field, c.manager);
    }
    if let (true, Some(error)) = (conflicts.is_empty(), error) {
        let _ = write!(message, " {}", cluster::api_message(error));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("ml".into()),
            name: name.into(),
        }
    }

    fn rejected(refused: Vec<(Key, Refusal)>) -> String {
        let mut settled = Preflight::default();
        let error = settled
            .settle(Vec::new(), refused, Written::default())
            .expect_err("a refusal");
        error.to_string()
    }

    #[test]
    fn conflicts_alone_are_not_the_servers_rejection_and_have_the_one_force_conflicts_hint() {
        let message = rejected(vec![(
            key("settings"),
            Refusal::conflict(
                "conflicts with other field managers:\n    .data.level is owned by \"night-shift\""
                    .into(),
            ),
        )]);
        assert!(
            message.starts_with(
                "1 object(s) conflict with other field managers; nothing was written:\n  \
                 ConfigMap ml/settings: conflicts with other field managers:"
            ),
            "{message}"
        );
        assert!(!message.contains("server rejected"), "{message}");
        let hints: Vec<&str> = message.lines().filter(|l| l.contains("hint:")).collect();
        assert_eq!(hints, [format!("  hint: {CONFLICT_HINT}")], "{message}");
    }

    #[test]
    fn rejections_and_conflicts_together_are_counted_apart_under_one_hint() {
        let message = rejected(vec![
            (
                key("a"),
                Refusal::conflict("conflicts with other field managers:".into()),
            ),
            (
                key("b"),
                Refusal::rejected("ConfigMap \"b\" is invalid".into()),
            ),
        ]);
        assert!(
            message.starts_with(
                "the server rejected 1 object(s) in a dry run, and 1 conflict with other field \
                 managers; nothing was written:"
            ),
            "{message}"
        );
        let hints: Vec<&str> = message.lines().filter(|l| l.contains("hint:")).collect();
        assert_eq!(hints.len(), 1, "{message}");
        assert!(
            hints[0].contains("fix what the server names")
                && hints[0].contains("--force-conflicts"),
            "{message}"
        );
    }
}
