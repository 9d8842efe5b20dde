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
//! established, before anything of a later tier is written. `mlkube validate` and
//! `apply --dry-run`, which create nothing, check those objects as far as they can be checked
//! before ([`super::deferred`]): the objects of a namespace that does not exist yet are
//! sent all the same (the server converts a server-side apply against its schema, finding
//! unknown fields and wrong types, before admission finds the namespace missing, so a
//! `NotFound` answer means "checked against the schema only") and walked along the server's
//! OpenAPI schema for their required fields; the objects of a kind whose CRD comes with the
//! apply are walked along that CRD's schema in the plan.
//!
//! Guarantees: when the server rejects any object, the apply fails listing every rejected
//! object with the server's message, and has written nothing; or, when only deferred objects
//! were rejected, no more than what their check needed first, which the error names: the
//! namespaces, and for custom objects also the inventory (it is always widened before a
//! member is written) and the CRDs. An object that needs a namespace neither the cluster nor
//! the apply has is rejected in the first pass. `apply --dry-run` runs the first pass, reports
//! the same rejections and what its walks along the schemas found (headed "do not match their
//! schema": mlkube found them, not the server), and lists the deferred objects with how far
//! they were checked: it cannot create what they need. Each object costs one dry-run request, and an unchanged one none; an object the
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

use crate::deploy::checks::deferred;
pub use crate::deploy::checks::deferred::{Blocker, Checked, Deferred, Refusal, Refused};
use crate::deploy::checks::openapi::Documents;
use crate::deploy::cluster::cancel::Cancel;
use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{
    self, ApplyMode, CONCURRENCY, Cluster, Conflict, Resolved, namespace_resource,
};
use crate::deploy::inventory::plan::{Desired, Plan};

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
    #[error("cannot read the API server's OpenAPI schemas")]
    Schemas(#[source] kube::Error),
}

const CONFLICT_HINT: &str = "pass --force-conflicts to take these fields over, or stop the other \
                             manager setting them";

/// `the server rejected 2 object(s) in a dry run`, `1 object(s) do not match their schema`,
/// `1 object(s) conflict with other field managers`, or several of them.
fn headline(refused: &[(Key, Refusal)]) -> String {
    let count = |kind| refused.iter().filter(|(_, r)| r.kind == kind).count();
    let (rejected, invalid, conflicts) = (
        count(Refused::Rejected),
        count(Refused::Invalid),
        count(Refused::Conflict),
    );
    let mut parts = Vec::new();
    if rejected > 0 {
        parts.push(format!(
            "the server rejected {rejected} object(s) in a dry run"
        ));
    }
    if invalid > 0 {
        let objects = if parts.is_empty() { " object(s)" } else { "" };
        parts.push(format!("{invalid}{objects} do not match their schema"));
    }
    if conflicts > 0 {
        let objects = if parts.is_empty() { " object(s)" } else { "" };
        parts.push(format!(
            "{conflicts}{objects} conflict with other field managers"
        ));
    }
    match parts.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{}, and {last}", rest.join(", ")),
        None => "nothing was refused".to_owned(),
    }
}

/// What the server says of a change to a StatefulSet's fields it never updates.
const STATEFULSET_FIXED: &str = "updates to statefulset spec for fields other than";

const STATEFULSET_HINT: &str = "a StatefulSet keeps its volumeClaimTemplates (a component's \
     `storage` and `storageClass`) and selector as created: set the params back (`mlkube param \
     set COMPONENT storage OLD --env ENV`); to grow a volume, grow its claim (`kubectl patch pvc \
     data-NAME-0 -p '{\"spec\":{\"resources\":{\"requests\":{\"storage\":\"SIZE\"}}}}'`) where its \
     StorageClass allows expansion";

/// The one hint that fits every refusal.
fn hint(refused: &[(Key, Refusal)]) -> &'static str {
    let any = |kind| refused.iter().any(|(_, r)| r.kind == kind);
    let conflicts = any(Refused::Conflict);
    let fixed_fields = refused.iter().any(|(key, r)| {
        r.kind == Refused::Rejected
            && key.kind == "StatefulSet"
            && r.message.contains(STATEFULSET_FIXED)
    });
    if fixed_fields && refused.len() == 1 {
        return STATEFULSET_HINT;
    }
    match (any(Refused::Invalid), any(Refused::Rejected), conflicts) {
        (false, false, _) => CONFLICT_HINT,
        (false, true, false) => {
            "fix what the server names (the component's params or Jsonnet), then apply again"
        }
        (false, true, true) => {
            "fix what the server names (the component's params or Jsonnet), and pass \
             --force-conflicts to take the conflicting fields over (or stop the other manager \
             setting them); then apply again"
        }
        (true, _, false) => {
            "fix the fields named (the component's params or Jsonnet), then apply again"
        }
        (true, _, true) => {
            "fix the fields named (the component's params or Jsonnet), and pass \
             --force-conflicts to take the conflicting fields over (or stop the other manager \
             setting them); then apply again"
        }
    }
}

/// The hint for objects refused at their write, when some were refused for a conflict.
pub fn write_hint(refused: &[(Key, Refusal)]) -> String {
    if refused.iter().any(|(_, r)| r.is_conflict()) {
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

/// The server's answer to one object's dry run, or why it could not judge it yet.
#[derive(Debug)]
enum Verdict {
    /// The object as the server would store it.
    Accepted(Value),
    Rejected(Refusal),
    /// Waits for what the apply creates, checked as far as it says.
    Deferred(Deferred),
}

impl Verdict {
    fn deferred(blocker: Blocker, checked: Checked) -> Verdict {
        Verdict::Deferred(Deferred { blocker, checked })
    }
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
    /// Check what the server cannot judge yet as far as it can be: send objects in a namespace
    /// this apply creates all the same (the server checks them against its schema before it
    /// finds the namespace missing), and walk those and the objects of a kind the plan's CRD
    /// defines along their schemas (see [`crate::deploy::checks::deferred`]).
    thorough: bool,
}

impl Check<'_> {
    /// Dry-run `objects` concurrently; those cancelled before they started are left out.
    async fn run<'p>(
        &self,
        cluster: &impl Cluster,
        objects: &[&'p Desired],
    ) -> Result<Vec<(&'p Desired, Verdict)>, PreflightError> {
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
        let verdicts = verdicts.into_iter().flatten().collect();
        if !self.thorough {
            return Ok(verdicts);
        }
        self.walk_deferred(cluster, verdicts).await
    }

    /// Walk the objects the server could not judge along the schemas at hand.
    async fn walk_deferred<'p>(
        &self,
        cluster: &impl Cluster,
        verdicts: Vec<(&'p Desired, Verdict)>,
    ) -> Result<Vec<(&'p Desired, Verdict)>, PreflightError> {
        let waiting = verdicts
            .iter()
            .filter_map(|(desired, verdict)| match verdict {
                Verdict::Deferred(deferred) => Some((*desired, deferred)),
                _ => None,
            });
        let api_versions = deferred::api_versions(waiting);
        let documents = Documents::fetch(cluster, &api_versions)
            .await
            .map_err(PreflightError::Schemas)?;
        let walked = verdicts.into_iter().map(|(desired, verdict)| {
            let Verdict::Deferred(before) = verdict else {
                return (desired, verdict);
            };
            match deferred::walk(self.plan, &documents, desired, before) {
                Ok(after) => (desired, Verdict::Deferred(after)),
                Err(refusal) => (desired, Verdict::Rejected(refusal)),
            }
        });
        Ok(walked.collect())
    }

    async fn one(&self, cluster: &impl Cluster, desired: &Desired) -> Verdict {
        let key = &desired.key;
        let Some(resolved) = cluster.resolve(&desired.api_version, &key.kind) else {
            if self.plan.defines(&key.group, &key.kind) {
                return Verdict::deferred(Blocker::Kind, Checked::Not);
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
            if !self.thorough {
                return Verdict::deferred(Blocker::Namespace(missing.to_string()), Checked::Not);
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
            (Err(e), Some(missing)) if cluster::is_not_found(&e) => Verdict::deferred(
                Blocker::Namespace(missing.to_string()),
                Checked::ServerSchema,
            ),
            (Ok(_), Some(missing)) => {
                Verdict::deferred(Blocker::Namespace(missing.to_string()), Checked::Not)
            }
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
    /// Objects the server could not judge yet, what each waits for, and how far it was
    /// checked.
    deferred: Vec<(&'p Desired, Deferred)>,
}

impl<'p> Preflight<'p> {
    /// The first pass, before anything is written: dry-run every object of `objects` that can
    /// be checked now, and fail listing every rejection, `known` ones (found without asking
    /// the server) included. A `dry_run` also checks what waits for the apply as far as it
    /// can be checked before (see [`super::deferred`]): it creates nothing to check it later.
    pub async fn first(
        cluster: &impl Cluster,
        plan: &'p Plan,
        objects: &[&'p Desired],
        known: Vec<(Key, Refusal)>,
        forced: &(dyn Fn(&Desired) -> bool + Sync),
        (cancel, dry_run): (&Cancel, bool),
    ) -> Result<Preflight<'p>, PreflightError> {
        let check = Check {
            plan,
            missing: missing_namespaces(cluster, objects).await?,
            forced,
            cancel,
            message: apply_failure,
            thorough: dry_run,
        };
        let verdicts = check.run(cluster, objects).await?;
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
            .partition(|(_, pending)| waits(&pending.blocker));
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
            thorough: false,
        };
        let verdicts = check.run(cluster, &objects).await?;
        self.settle(verdicts, Vec::new(), written)
    }

    /// What the server could not judge in a dry run, why, and how far it was checked.
    pub fn unchecked(&self) -> Vec<(Key, Deferred)> {
        self.deferred
            .iter()
            .map(|(d, pending)| (d.key.clone(), pending.clone()))
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
                Verdict::Deferred(pending) => self.deferred.push((desired, pending)),
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
    /// (their fields and types), mlkube along its OpenAPI schema (required fields); its
    /// admission and validation wait for the namespace.
    pub schema_only: Vec<Rejection>,
    /// Objects of a kind whose CustomResourceDefinition comes with the apply, checked against
    /// that CRD's schema in the plan; the server checks them once it serves the CRD.
    pub plan_crd_only: Vec<Rejection>,
    /// Objects not checked at all before an apply: their CustomResourceDefinition comes with
    /// it and has no schema for their version.
    pub skipped: Vec<Rejection>,
}

/// `mlkube validate`: a server-side dry run of every object, forced and whether or not it
/// changed, every rejection listed; what the server cannot judge yet is checked as far as it
/// can be (see [`crate::deploy::checks::deferred`]).
pub async fn validate(cluster: &impl Cluster, plan: &Plan) -> Result<Validation, PreflightError> {
    let objects: Vec<&Desired> = plan.objects.iter().collect();
    let check = Check {
        plan,
        missing: missing_namespaces(cluster, &objects).await?,
        forced: &|_| true,
        cancel: &Cancel::new(),
        message: |error| Refusal::rejected(rejection_message(error)),
        thorough: true,
    };
    let mut validation = Validation::default();
    for (desired, verdict) in check.run(cluster, &objects).await? {
        let rejection = |message| Rejection {
            key: desired.key.clone(),
            component: desired.component.clone(),
            message,
        };
        match verdict {
            Verdict::Accepted(_) => validation.valid += 1,
            Verdict::Rejected(refusal) => validation.rejected.push(rejection(refusal.message)),
            Verdict::Deferred(pending) => {
                let list = match pending.checked {
                    Checked::ServerSchema => &mut validation.schema_only,
                    Checked::PlanCrd => &mut validation.plan_crd_only,
                    Checked::Not => &mut validation.skipped,
                };
                list.push(rejection(pending.blocker.to_string()));
            }
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
    use serde_json::json;

    use super::*;
    use crate::deploy::cluster::memory::MemoryCluster;
    use crate::deploy::inventory::applyset::ApplySet;
    use crate::render::manifest::{Manifest, Object};

    /// A plan of a CRD for Widgets whose spec requires an integer `size`, and `widgets`.
    fn plan_with_widgets(widgets: &[(&str, Value)]) -> Plan {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "required": ["size"],
                        "properties": {"size": {"type": "integer"}}}}}}}]}});
        let mut objects = vec![Object {
            component: "widgets".into(),
            value: crd,
        }];
        for (name, spec) in widgets {
            objects.push(Object {
                component: "widgets".into(),
                value: json!({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": name, "namespace": "ml"}, "spec": spec}),
            });
        }
        let set = ApplySet::new("app", "local", "ml");
        crate::deploy::inventory::plan::plan(&Manifest { objects }, &set, &[])
            .expect("a valid plan")
    }

    #[test]
    fn a_statefulsets_claim_template_refused_says_to_grow_the_claim_instead() {
        let key = Key {
            group: "apps".into(),
            kind: "StatefulSet".into(),
            namespace: Some("ml".into()),
            name: "object-store".into(),
        };
        // As the API server words it.
        let said = "StatefulSet.apps \"object-store\" is invalid: spec: Forbidden: updates to \
                    statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
                    'updateStrategy', 'revisionHistoryLimit', \
                    'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
        let error = PreflightError::Rejected {
            count: 1,
            written: Written::default(),
            details: format!("  {key}: {said}"),
            refused: vec![(key, Refusal::rejected(said.into()))],
        };
        let message = error.to_string();
        assert!(
            message.ends_with(&format!("\n  hint: {STATEFULSET_HINT}")),
            "{message}"
        );
        assert!(message.contains("grow its claim (`kubectl patch pvc data-NAME-0"));
    }

    #[tokio::test]
    async fn validate_walks_a_custom_object_along_the_crd_in_the_plan() {
        let plan = plan_with_widgets(&[
            ("good", json!({"size": 2})),
            ("bad", json!({"size": "two"})),
        ]);
        let validation = validate(&MemoryCluster::new(), &plan)
            .await
            .expect("validate");
        let names = |list: &[Rejection]| -> Vec<String> {
            list.iter().map(|r| r.key.name.clone()).collect()
        };
        assert_eq!(names(&validation.plan_crd_only), ["good"]);
        assert_eq!(names(&validation.rejected), ["bad"]);
        assert_eq!(
            validation.rejected[0].message,
            "Widget.example.com \"bad\" is invalid: spec.size: Invalid value: \"string\": \
             spec.size in body must be of type integer: \"string\" (checked against the \
             CustomResourceDefinition in the plan)"
        );
        assert!(validation.skipped.is_empty(), "{validation:?}");
    }

    #[tokio::test]
    async fn a_dry_runs_first_pass_refuses_what_the_crd_in_the_plan_does_not_allow() {
        let plan = plan_with_widgets(&[("good", json!({"size": 2})), ("bad", json!({}))]);
        let objects: Vec<&Desired> = plan.objects.iter().collect();
        let cluster = MemoryCluster::new();
        for dry_run in [true, false] {
            let hooks = (&Cancel::new(), dry_run);
            let first =
                Preflight::first(&cluster, &plan, &objects, vec![], &|_| false, hooks).await;
            if !dry_run {
                // A real apply leaves them to the server, once the CRD is established.
                let unchecked = first.expect("no check before the CRD exists").unchecked();
                assert!(unchecked.iter().all(|(_, d)| d.checked == Checked::Not));
                continue;
            }
            let message = first.expect_err("the dry run refuses `bad`").to_string();
            assert!(
                message.starts_with(
                    "1 object(s) do not match their schema; nothing was written:\n  \
                     Widget.example.com ml/bad: Widget.example.com \"bad\" is invalid: spec.size: \
                     Required value (checked against the CustomResourceDefinition in the plan)\n  \
                     hint: fix the fields named"
                ),
                "{message}"
            );
        }
        assert!(cluster.writes().is_empty());
    }

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
