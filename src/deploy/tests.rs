//! The decisions of apply, prune and delete, against the in-memory cluster: which requests are
//! sent, in which order, and what is refused with nothing written. The cluster tests prove the
//! same flows against the real control plane.

use std::time::Duration;

use serde_json::{Value, json};

use super::apply::{self, ApplyOptions};
use super::checks::preflight::PreflightError;
use super::cluster::cancel::Cancel;
use super::cluster::key::Key;
use super::cluster::memory::{MemoryCluster, Write};
use super::delete::{self, DeleteOptions};
use super::health::answer::ANSWERED_BY;
use super::inventory::applyset::{self, ApplySet};
use super::inventory::plan::{self, Plan};
use super::prune::{self, PruneOptions};
use super::report::{ApplyError, ApplyReport, Consent, Outcome, Quiet};
use crate::render::manifest::{Manifest, Object};

const NS: &str = "ml";

/// A cancel nobody sends.
fn never() -> &'static Cancel {
    static NEVER: std::sync::LazyLock<Cancel> = std::sync::LazyLock::new(Cancel::new);
    &NEVER
}

/// `--yes`.
struct Yes;

impl Consent for Yes {
    fn confirm(&self, _: &'static str, _: &[Key]) -> Result<(), ApplyError> {
        Ok(())
    }
}

/// No terminal and no `--yes`.
struct No;

impl Consent for No {
    fn confirm(&self, verb: &'static str, doomed: &[Key]) -> Result<(), ApplyError> {
        if doomed.is_empty() {
            Ok(())
        } else {
            Err(ApplyError::NoConsent {
                verb,
                count: doomed.len(),
            })
        }
    }
}

fn object(component: &str, api_version: &str, kind: &str, name: &str, rest: Value) -> Object {
    let mut value = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"mlkube.io/component": component}}});
    if let (Some(value), Some(rest)) = (value.as_object_mut(), rest.as_object()) {
        value.extend(rest.clone());
    }
    Object {
        component: component.into(),
        value,
    }
}

fn config_map(component: &str, name: &str) -> Object {
    object(
        component,
        "v1",
        "ConfigMap",
        name,
        json!({"data": {"k": name}}),
    )
}

fn deployment(component: &str, name: &str) -> Object {
    object(
        component,
        "apps/v1",
        "Deployment",
        name,
        json!({"spec": {"replicas": 1}}),
    )
}

fn service_account(component: &str, name: &str) -> Object {
    object(component, "v1", "ServiceAccount", name, json!({}))
}

fn crd() -> Object {
    Object {
        component: "widgets".into(),
        value: json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}}),
    }
}

fn widget(name: &str) -> Object {
    object(
        "widgets",
        "example.com/v1",
        "Widget",
        name,
        json!({"spec": {"size": 3}}),
    )
}

fn set() -> ApplySet {
    ApplySet::new("app", "local", NS)
}

fn plan_of(objects: Vec<Object>, components: &[&str]) -> Plan {
    let components: Vec<String> = components.iter().map(|c| c.to_string()).collect();
    plan::plan(&Manifest { objects }, &set(), &components).expect("a valid plan")
}

fn options(consent: &dyn Consent) -> ApplyOptions<'_> {
    ApplyOptions {
        dry_run: false,
        prune: false,
        consent,
        force_conflicts: false,
        wait: false,
        timeout: Duration::from_secs(5),
        allow_empty: false,
        adopt: false,
        observer: &Quiet,
        cancel: never(),
    }
}

fn pruning(consent: &dyn Consent) -> ApplyOptions<'_> {
    ApplyOptions {
        prune: true,
        ..options(consent)
    }
}

fn applied(object: &str) -> Write {
    Write::Apply {
        object: object.into(),
        manager: "mlkube".into(),
    }
}

fn deleted(object: &str) -> Write {
    Write::Delete {
        object: object.into(),
    }
}

/// The CRD, applied with the set's own field manager: it is shared.
fn crd_claimed() -> Write {
    Write::Apply {
        object: "CustomResourceDefinition widgets.example.com".into(),
        manager: set().shared_manager,
    }
}

fn inventory() -> &'static str {
    "Secret ml/mlkube-applyset-app-local"
}

/// A cluster where `objects` were applied once, its writes forgotten.
async fn deployed(objects: Vec<Object>) -> MemoryCluster {
    let cluster = MemoryCluster::new();
    apply::apply(&cluster, &plan_of(objects, &[]), &options(&Yes))
        .await
        .expect("the first apply");
    cluster.clear_writes();
    cluster
}

async fn group_kinds(cluster: &MemoryCluster) -> Vec<String> {
    let recorded = applyset::read(cluster, &set())
        .await
        .expect("the inventory reads")
        .expect("an inventory");
    recorded.group_kinds.into_iter().collect()
}

#[tokio::test]
async fn the_inventory_is_widened_before_members_are_written_and_narrowed_after_the_prune() {
    let cluster = MemoryCluster::new();
    let first = vec![
        deployment("serving", "serving"),
        config_map("serving", "config"),
        service_account("serving", "serving"),
    ];
    apply::apply(&cluster, &plan_of(first, &[]), &options(&Yes))
        .await
        .expect("the first apply");
    assert_eq!(
        cluster.writes(),
        [
            applied("Namespace ml"),
            applied(inventory()),
            applied("ServiceAccount ml/serving"),
            applied("ConfigMap ml/config"),
            applied("Deployment ml/serving"),
        ],
        "namespace, inventory, then members tier by tier"
    );

    cluster.clear_writes();
    let second = vec![
        config_map("serving", "config"),
        config_map("serving", "new"),
    ];
    let report = apply::apply(&cluster, &plan_of(second, &[]), &pruning(&Yes))
        .await
        .expect("the apply with prune");
    assert_eq!(
        cluster.writes(),
        [
            applied("ConfigMap ml/new"),
            deleted("Deployment ml/serving"),
            deleted("ServiceAccount ml/serving"),
            applied(inventory()),
        ],
        "unchanged members are not sent; prune in reverse tier order, then narrow"
    );
    assert_eq!(report.pruned.len(), 2);
    assert_eq!(group_kinds(&cluster).await, ["ConfigMap"]);
}

#[tokio::test]
async fn a_new_kind_is_recorded_before_its_first_object_is_written() {
    let cluster = deployed(vec![config_map("a", "c")]).await;
    cluster.fail_applies_of("d");
    let failed = apply::apply(
        &cluster,
        &plan_of(vec![config_map("a", "c"), deployment("a", "d")], &[]),
        &options(&Yes),
    )
    .await;
    assert!(matches!(failed, Err(ApplyError::Objects { count: 1, .. })));
    assert_eq!(cluster.writes(), [applied(inventory())]);
    assert_eq!(
        group_kinds(&cluster).await,
        ["ConfigMap", "Deployment.apps"]
    );
}

#[tokio::test]
async fn rendering_nothing_refuses_to_prune_everything_and_writes_nothing() {
    let cluster = deployed(vec![config_map("a", "c")]).await;

    let empty = apply::apply(&cluster, &plan_of(vec![], &[]), &pruning(&Yes)).await;
    assert!(matches!(
        empty,
        Err(ApplyError::EmptyPrune { count: 1, .. })
    ));
    let empty = prune::prune(
        &cluster,
        &plan_of(vec![], &[]),
        &PruneOptions {
            dry_run: false,
            consent: &Yes,
            allow_empty: false,
            observer: &Quiet,
            cancel: never(),
        },
    )
    .await;
    assert!(matches!(empty, Err(ApplyError::EmptyPrune { .. })));
    assert_eq!(cluster.writes(), []);

    let allowed = ApplyOptions {
        allow_empty: true,
        ..pruning(&Yes)
    };
    apply::apply(&cluster, &plan_of(vec![], &[]), &allowed)
        .await
        .expect("an empty environment, as asked");
    assert_eq!(
        cluster.writes(),
        [deleted("ConfigMap ml/c"), applied(inventory())]
    );
}

#[tokio::test]
async fn without_consent_nothing_is_written() {
    let cluster = deployed(vec![config_map("a", "kept"), config_map("b", "dropped")]).await;
    let changed = vec![
        object(
            "a",
            "v1",
            "ConfigMap",
            "kept",
            json!({"data": {"k": "changed"}}),
        ),
        config_map("a", "added"),
    ];
    let refused = apply::apply(&cluster, &plan_of(changed, &[]), &pruning(&No)).await;
    assert!(matches!(
        refused,
        Err(ApplyError::NoConsent { count: 1, .. })
    ));
    assert_eq!(cluster.writes(), []);
}

#[tokio::test]
async fn with_components_named_only_their_members_are_pruned_and_the_inventory_stays_wide() {
    let all = vec![
        config_map("a", "a-kept"),
        config_map("a", "a-dropped"),
        deployment("b", "b-untouched"),
    ];
    let cluster = deployed(all).await;
    let only_a = plan_of(vec![config_map("a", "a-kept")], &["a"]);
    let report = apply::apply(&cluster, &only_a, &pruning(&Yes))
        .await
        .expect("apply -c a --prune");
    assert_eq!(cluster.writes(), [deleted("ConfigMap ml/a-dropped")]);
    assert_eq!(report.pruned.len(), 1);
    assert_eq!(
        group_kinds(&cluster).await,
        ["ConfigMap", "Deployment.apps"]
    );

    cluster.clear_writes();
    let delete_b = DeleteOptions {
        components: vec!["b".into()],
        delete_namespace: false,
        consent: &Yes,
        observer: &Quiet,
        cancel: never(),
    };
    delete::delete(&cluster, &set(), &delete_b)
        .await
        .expect("delete -c b");
    assert_eq!(
        cluster.writes(),
        [deleted("Deployment ml/b-untouched")],
        "the inventory stays: component a is still applied"
    );
}

#[tokio::test]
async fn a_custom_object_waits_for_its_crd_and_a_dry_run_sends_neither() {
    let cluster = MemoryCluster::new();
    let objects = vec![widget("w"), crd()];
    let dry = ApplyOptions {
        dry_run: true,
        ..options(&Yes)
    };
    let report = apply::apply(&cluster, &plan_of(objects.clone(), &[]), &dry)
        .await
        .expect("the dry run");
    assert_eq!(cluster.writes(), [], "a dry run writes nothing");
    assert!(
        report
            .applied
            .iter()
            .any(|(key, outcome)| key.kind == "Widget" && *outcome == Outcome::Created),
        "{:?}",
        report.applied
    );

    apply::apply(&cluster, &plan_of(objects, &[]), &options(&Yes))
        .await
        .expect("the apply");
    assert_eq!(
        cluster.writes(),
        [
            applied("Namespace ml"),
            applied(inventory()),
            crd_claimed(),
            applied("Widget ml/w"),
        ]
    );
}

#[tokio::test]
async fn delete_removes_members_in_reverse_tier_order_then_leaves_the_inventory_a_tombstone() {
    let objects = vec![
        service_account("a", "sa"),
        config_map("a", "c"),
        deployment("a", "d"),
    ];
    let cluster = deployed(objects).await;
    let everything = DeleteOptions {
        components: vec![],
        delete_namespace: false,
        consent: &Yes,
        observer: &Quiet,
        cancel: never(),
    };
    let report = delete::delete(&cluster, &set(), &everything)
        .await
        .expect("delete");
    assert_eq!(
        cluster.writes(),
        [
            deleted("Deployment ml/d"),
            deleted("ConfigMap ml/c"),
            deleted("ServiceAccount ml/sa"),
            applied(inventory()),
        ]
    );
    assert_eq!(report.pruned.len(), 3);
    let parent = cluster
        .object("v1", "Secret", Some(NS), &set().name)
        .expect("the tombstone");
    assert!(applyset::deleted_at(&parent).is_some(), "{parent:#}");
    assert_eq!(
        applyset::read(&cluster, &set()).await.expect("it reads"),
        None,
        "a tombstone is no inventory"
    );
    assert!(
        cluster.object("v1", "Namespace", None, NS).is_some(),
        "the namespace stays"
    );
}

// ---------------------------------------------------------------------------------------------
// the server's dry run before anything is written

/// The rejection of one apply, as `(what was written, details)`; panics on anything else.
fn rejection(result: Result<ApplyReport, ApplyError>) -> (Vec<String>, String) {
    match result {
        Err(ApplyError::Preflight(PreflightError::Rejected {
            written, details, ..
        })) => (written.0.iter().map(Key::to_string).collect(), details),
        other => panic!("expected a rejection in the dry run, got {other:?}"),
    }
}

const INVALID: &str = "Deployment.apps \"d\" is invalid: spec.selector: Required value";

#[tokio::test]
async fn an_object_the_server_rejects_fails_the_apply_and_its_dry_run_with_nothing_written() {
    let cluster = deployed(vec![config_map("a", "c")]).await;
    cluster.reject("d", INVALID);
    let changed = object("a", "v1", "ConfigMap", "c", json!({"data": {"k": "v2"}}));
    let plan = plan_of(
        vec![changed, config_map("a", "new"), deployment("a", "d")],
        &[],
    );
    for dry_run in [false, true] {
        let options = ApplyOptions {
            dry_run,
            ..options(&Yes)
        };
        let refused = apply::apply(&cluster, &plan, &options).await;
        let message = format!("{}", refused.as_ref().expect_err("a rejection"));
        assert!(
            message.contains("rejected 1 object(s) in a dry run; nothing was written"),
            "{message}"
        );
        let (written, details) = rejection(refused);
        assert_eq!(written, Vec::<String>::new());
        assert_eq!(details, format!("  Deployment.apps ml/d: {INVALID}"));
        assert_eq!(cluster.writes(), [], "dry run: {dry_run}");
        let mut checked = cluster.dry_runs();
        checked.sort();
        assert_eq!(
            checked,
            ["ConfigMap ml/c", "ConfigMap ml/new", "Deployment ml/d"],
            "one dry run per object, dry run: {dry_run}"
        );
        cluster.clear_writes();
    }
}

#[tokio::test]
async fn an_unchanged_object_is_not_dry_run_and_a_changed_one_once() {
    let objects = vec![config_map("a", "c"), deployment("a", "d")];
    let cluster = deployed(objects.clone()).await;
    apply::apply(&cluster, &plan_of(objects, &[]), &options(&Yes))
        .await
        .expect("the no-op re-apply");
    assert_eq!(cluster.dry_runs(), Vec::<String>::new());
    assert_eq!(cluster.writes(), []);

    let changed = object("a", "v1", "ConfigMap", "c", json!({"data": {"k": "v2"}}));
    let plan = plan_of(vec![changed, deployment("a", "d")], &[]);
    apply::apply(&cluster, &plan, &options(&Yes))
        .await
        .expect("the apply of one change");
    assert_eq!(cluster.dry_runs(), ["ConfigMap ml/c"]);
    assert_eq!(cluster.writes(), [applied("ConfigMap ml/c")]);
}

#[tokio::test]
async fn a_shared_object_unchanged_since_the_sets_apply_is_skipped_and_a_drifted_one_checked() {
    // A shared object carries the set's own configuration hash: the fast path skips it too.
    let objects = vec![config_map("a", "c"), storage_class()];
    let cluster = deployed(objects.clone()).await;
    let report = apply::apply(&cluster, &plan_of(objects.clone(), &[]), &options(&Yes))
        .await
        .expect("the no-op re-apply");
    assert_eq!(cluster.dry_runs(), Vec::<String>::new());
    assert_eq!(cluster.writes(), []);
    assert!(
        report
            .applied
            .iter()
            .all(|(_, outcome)| *outcome == Outcome::Unchanged),
        "{:?}",
        report.applied
    );

    // A value the set wrote, changed by hand: the fast path cannot vouch for it any more.
    cluster.create_as(
        "kubectl-edit",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "kvc", "labels": {"mlkube.io/component": "by-hand"}}}),
    );
    // Whether it then conflicts or is taken back is the apply's business; it is asked first.
    let _ = apply::apply(&cluster, &plan_of(objects, &[]), &options(&Yes)).await;
    assert_eq!(cluster.dry_runs(), ["StorageClass kvc"]);
}

#[tokio::test]
async fn in_a_namespace_the_apply_creates_objects_are_checked_once_it_exists_before_any_is_written()
{
    let cluster = MemoryCluster::new();
    cluster.reject("d", INVALID);
    let plan = plan_of(vec![config_map("a", "c"), deployment("a", "d")], &[]);

    let dry = ApplyOptions {
        dry_run: true,
        ..options(&Yes)
    };
    let report = apply::apply(&cluster, &plan, &dry)
        .await
        .expect("a dry run cannot check them: the namespace would be created first");
    let unchecked: Vec<String> = report
        .unchecked
        .iter()
        .map(|(key, why)| format!("{key}: {why}"))
        .collect();
    assert_eq!(
        unchecked,
        [
            "ConfigMap ml/c: namespace `ml` does not exist yet; apply creates it",
            "Deployment.apps ml/d: namespace `ml` does not exist yet; apply creates it",
        ]
    );
    assert_eq!(cluster.writes(), []);
    cluster.clear_writes();

    let (written, details) = rejection(apply::apply(&cluster, &plan, &options(&Yes)).await);
    assert_eq!(written, ["Namespace ml"]);
    assert_eq!(details, format!("  Deployment.apps ml/d: {INVALID}"));
    assert_eq!(
        cluster.writes(),
        [applied("Namespace ml")],
        "the namespace, and neither the inventory nor any object"
    );
    assert_eq!(cluster.dry_runs(), ["ConfigMap ml/c", "Deployment ml/d"]);
}

#[tokio::test]
async fn a_custom_object_is_checked_once_its_crd_is_established_before_the_next_tier() {
    let cluster = MemoryCluster::new();
    cluster.reject(
        "w",
        "Widget.example.com \"w\" is invalid: spec.size: must be at most 2",
    );
    let plan = plan_of(vec![widget("w"), crd(), config_map("a", "c")], &[]);
    let (written, details) = rejection(apply::apply(&cluster, &plan, &options(&Yes)).await);
    assert_eq!(
        written,
        [
            "Namespace ml",
            "CustomResourceDefinition.apiextensions.k8s.io widgets.example.com",
            inventory(),
        ]
    );
    assert!(
        details.starts_with("  Widget.example.com ml/w: "),
        "{details}"
    );
    assert_eq!(
        cluster.writes(),
        [applied("Namespace ml"), applied(inventory()), crd_claimed(),],
        "the ConfigMap of the next tier is not written"
    );
}

#[tokio::test]
async fn an_object_in_a_namespace_nobody_creates_is_rejected_before_anything_is_written() {
    let cluster = deployed(vec![config_map("a", "c")]).await;
    let elsewhere = in_namespace(config_map("a", "e"), "nowhere");
    let plan = plan_of(vec![config_map("a", "new"), elsewhere], &[]);
    let (written, details) = rejection(apply::apply(&cluster, &plan, &options(&Yes)).await);
    assert_eq!(written, Vec::<String>::new());
    assert_eq!(
        details,
        "  ConfigMap nowhere/e: namespace `nowhere` does not exist, and this apply does not create it"
    );
    assert_eq!(cluster.writes(), []);
}

// ---------------------------------------------------------------------------------------------
// ownership: never take over or delete what another environment, app or tool owns

fn in_namespace(mut object: Object, namespace: &str) -> Object {
    object.value["metadata"]["namespace"] = json!(namespace);
    object
}

fn storage_class() -> Object {
    Object {
        component: "volumes".into(),
        value: json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "kvc", "labels": {"mlkube.io/component": "volumes"}},
            "provisioner": "kubernetes.io/no-provisioner"}),
    }
}

fn plan_for(set: &ApplySet, objects: Vec<Object>) -> Plan {
    plan::plan(&Manifest { objects }, set, &[]).expect("a valid plan")
}

/// Whether `diff` finds differences; they are printed, for the failure message.
async fn diff_exit(cluster: &MemoryCluster, plan: &Plan) -> bool {
    let changes = super::diff::diff(cluster, plan, super::diff::DiffOptions::default())
        .await
        .expect("diff");
    println!("{}", super::diff::render_text(&changes, false));
    changes.has_differences()
}

#[tokio::test]
async fn an_environment_sharing_the_namespace_never_takes_over_the_other_ones_objects() {
    let cluster = deployed(vec![config_map("a", "config")]).await;
    let dup = ApplySet::new("app", "dup", NS);
    let plan = plan_for(&dup, vec![config_map("a", "config")]);

    let refused = apply::apply(&cluster, &plan, &options(&Yes)).await;
    let Err(ApplyError::NotOurs { count: 1, details }) = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    assert!(
        details.contains("ConfigMap ml/config") && details.contains(&set().id),
        "{details}"
    );
    assert_eq!(cluster.writes(), [], "nothing is written");
    assert!(diff_exit(&cluster, &plan).await, "diff marks it");

    let nothing = DeleteOptions {
        components: vec![],
        delete_namespace: false,
        consent: &Yes,
        observer: &Quiet,
        cancel: never(),
    };
    delete::delete(&cluster, &dup, &nothing)
        .await
        .expect("delete dup");
    assert_eq!(
        cluster.writes(),
        [],
        "delete of dup removes nothing of local's"
    );
}

#[tokio::test]
async fn an_object_someone_else_created_is_refused_then_adopted_and_then_prunable() {
    let cluster = deployed(vec![config_map("a", "config")]).await;
    cluster.create_as(
        "kubectl-create",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "preexisting", "namespace": NS}, "data": {"k": "preexisting"}}),
    );
    let with_it = plan_of(
        vec![config_map("a", "config"), config_map("a", "preexisting")],
        &[],
    );
    let refused = apply::apply(&cluster, &with_it, &pruning(&Yes)).await;
    let Err(ApplyError::NotOurs { details, .. }) = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    assert!(details.contains("exists, not ours") && details.contains("kubectl-create"));
    assert_eq!(cluster.writes(), []);

    let adopting = ApplyOptions {
        adopt: true,
        ..options(&Yes)
    };
    let report = apply::apply(&cluster, &with_it, &adopting)
        .await
        .expect("apply --adopt");
    assert_eq!(report.adopted.len(), 1, "{:?}", report.adopted);
    assert!(
        !diff_exit(&cluster, &with_it).await,
        "adopted: nothing to mark"
    );

    cluster.clear_writes();
    apply::apply(
        &cluster,
        &plan_of(vec![config_map("a", "config")], &[]),
        &pruning(&Yes),
    )
    .await
    .expect("prune the adopted object");
    assert_eq!(cluster.writes(), [deleted("ConfigMap ml/preexisting")]);
}

#[tokio::test]
async fn an_adopted_object_is_reported_adopted_in_a_dry_run_and_for_real_not_created() {
    let cluster = deployed(vec![config_map("a", "config")]).await;
    cluster.create_as(
        "kubectl-create",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "preexisting", "namespace": NS}, "data": {"k": "theirs"}}),
    );
    let with_it = plan_of(
        vec![config_map("a", "config"), config_map("a", "preexisting")],
        &[],
    );
    let outcomes = |report: &ApplyReport| -> Vec<(String, Outcome)> {
        report
            .applied
            .iter()
            .map(|(key, outcome)| (key.name.clone(), *outcome))
            .collect()
    };
    let expected = [
        ("config".to_string(), Outcome::Unchanged),
        ("preexisting".to_string(), Outcome::Adopted),
    ];
    for dry_run in [true, false] {
        let adopting = ApplyOptions {
            adopt: true,
            dry_run,
            ..options(&Yes)
        };
        let report = apply::apply(&cluster, &with_it, &adopting)
            .await
            .expect("apply --adopt");
        let mut told = outcomes(&report);
        told.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(told, expected, "dry run: {dry_run}");
    }
}

/// The TFJob CRD, enough for the memory cluster to serve the kind.
fn tfjob_crd() -> Object {
    Object {
        component: "operator".into(),
        value: json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "tfjobs.kubeflow.org"},
            "spec": {"group": "kubeflow.org", "scope": "Namespaced",
                "names": {"plural": "tfjobs", "kind": "TFJob"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}}),
    }
}

fn tfjob(name: &str, workers: u32) -> Object {
    let spec = json!({"tfReplicaSpecs": {"Worker": {"replicas": workers}}});
    object(
        "mnist",
        "kubeflow.org/v1",
        "TFJob",
        name,
        json!({ "spec": spec }),
    )
}

#[tokio::test]
async fn a_finished_job_adopted_or_changed_is_told_that_its_operator_will_not_run_it_again() {
    let cluster = deployed(vec![tfjob_crd(), tfjob("ours", 1)]).await;
    let succeeded = json!({"conditions": [
        {"type": "Created", "status": "True"}, {"type": "Running", "status": "False"},
        {"type": "Succeeded", "status": "True"}]});
    cluster.set_status("kubeflow.org/v1", "TFJob", Some(NS), "ours", succeeded);
    cluster.create_as("kubectl-create", tfjob("theirs", 1).value);
    let failed = json!({"conditions": [{"type": "Failed", "status": "True"}]});
    cluster.set_status("kubeflow.org/v1", "TFJob", Some(NS), "theirs", failed);

    let unchanged = plan_of(vec![tfjob_crd(), tfjob("ours", 1)], &[]);
    let report = apply::apply(&cluster, &unchanged, &options(&Yes))
        .await
        .expect("apply, nothing changed");
    assert_eq!(report.finished_jobs, [], "nothing written, nothing to say");

    let changed = plan_of(vec![tfjob_crd(), tfjob("ours", 2), tfjob("theirs", 2)], &[]);
    for dry_run in [true, false] {
        let adopting = ApplyOptions {
            adopt: true,
            dry_run,
            ..options(&Yes)
        };
        let report = apply::apply(&cluster, &changed, &adopting)
            .await
            .expect("apply --adopt");
        let told: Vec<(String, &str)> = report
            .finished_jobs
            .iter()
            .map(|(key, ended)| (key.name.clone(), *ended))
            .collect();
        let expected = [
            ("ours".to_string(), "Succeeded"),
            ("theirs".to_string(), "Failed"),
        ];
        assert_eq!(told, expected, "dry run: {dry_run}");
    }
}

/// A job component's request for keys of its own, answered by the Secret of its name.
fn request_for_keys(name: &str) -> Object {
    let mut request = object(
        "mnist",
        "v1",
        "ConfigMap",
        name,
        json!({"data": {"prefix": "models/mnist/v1"}}),
    );
    request.value["metadata"]["annotations"] = json!({ANSWERED_BY: name});
    request
}

/// The plan of a TFJob `mnist` and its request for keys `mnist-keys`.
fn job_with_keys() -> Plan {
    let objects = vec![
        tfjob_crd(),
        request_for_keys("mnist-keys"),
        tfjob("mnist", 1),
    ];
    plan_of(objects, &[])
}

#[tokio::test]
async fn a_job_is_written_only_once_its_keys_exist_with_or_without_waiting() {
    let cluster = deployed(vec![tfjob_crd()]).await;
    let plan = job_with_keys();
    for wait in [false, true] {
        let unanswered = ApplyOptions {
            wait,
            timeout: Duration::from_millis(200),
            ..options(&Yes)
        };
        let report = apply::apply(&cluster, &plan, &unanswered)
            .await
            .expect("apply");
        let waited: Vec<(String, &str)> = report
            .not_ready
            .iter()
            .map(|n| (n.key.to_string(), n.reason.as_str()))
            .collect();
        let why = "waiting for the Secret mnist-keys that answers it (the object store's \
                   model-keys container makes it; a store with an external endpoint makes none: \
                   give such a job objectStoreCredentials)";
        assert_eq!(waited, [("ConfigMap ml/mnist-keys".to_string(), why)]);
        let job = cluster.object("kubeflow.org/v1", "TFJob", Some(NS), "mnist");
        assert!(
            job.is_none(),
            "the job was written without its keys (wait: {wait})"
        );
    }
    let refused = ApplyOptions {
        timeout: Duration::from_secs(60),
        ..options(&Yes)
    };
    let request = cluster.object("v1", "ConfigMap", Some(NS), "mnist-keys");
    let uid = &request.expect("the request")["metadata"]["uid"];
    for (about, message) in [
        ("uid-0", "another object's"),
        (
            uid.as_str().expect("a uid"),
            "no keys: a prefix of another job's",
        ),
    ] {
        let event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{about}.1"), "namespace": NS}, "type": "Warning",
            "involvedObject": {"uid": about}, "message": message});
        cluster.create_as("model-keys", event);
    }
    let report = apply::apply(&cluster, &plan, &refused)
        .await
        .expect("apply, refused");
    let said: Vec<&str> = report.not_ready.iter().map(|n| n.reason.as_str()).collect();
    assert_eq!(
        said,
        ["no keys: a prefix of another job's"],
        "the store's reason, at once"
    );
    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "mnist-keys", "uid": uid});
    let answer = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "mnist-keys", "namespace": NS, "ownerReferences": [owner]}});
    cluster.create_as("model-keys", answer);
    let report = apply::apply(&cluster, &plan, &options(&Yes))
        .await
        .expect("apply, answered");
    assert!(report.not_ready.is_empty(), "{:?}", report.not_ready);
    let job = cluster.object("kubeflow.org/v1", "TFJob", Some(NS), "mnist");
    assert!(job.is_some(), "the job is written once its keys exist");
}

#[tokio::test]
async fn a_secret_the_request_does_not_own_is_refused_and_the_job_is_not_written() {
    let cluster = deployed(vec![tfjob_crd()]).await;
    let planted = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "mnist-keys", "namespace": NS}});
    cluster.create_as("another-user", planted);
    let plan = job_with_keys();
    let report = apply::apply(&cluster, &plan, &options(&Yes))
        .await
        .expect("apply");
    let said: Vec<&str> = report.not_ready.iter().map(|n| n.reason.as_str()).collect();
    let why = "the Secret mnist-keys exists but was not made for this job's keys (it is not owned \
               by their request): delete it, or give the job another name";
    assert_eq!(said, [why]);
    let job = cluster.object("kubeflow.org/v1", "TFJob", Some(NS), "mnist");
    assert!(
        job.is_none(),
        "the job was written with keys somebody else made"
    );
}

#[tokio::test]
async fn environments_share_cluster_scoped_objects_and_the_last_one_out_deletes_them() {
    let cluster = MemoryCluster::new();
    let local = ApplySet::new("app", "local", "a");
    let other = ApplySet::new("other-app", "b", "b");
    let render = |ns: &str| vec![in_namespace(config_map("a", "config"), ns), storage_class()];
    let (local_plan, other_plan) = (plan_for(&local, render("a")), plan_for(&other, render("b")));

    // Applied in turns, each diffs clean after its own apply and after the other's.
    let turns = [&local_plan, &other_plan, &local_plan, &other_plan];
    for (turn, plan) in turns.into_iter().enumerate() {
        apply::apply(&cluster, plan, &options(&Yes))
            .await
            .expect("each applies cleanly");
        assert!(
            !diff_exit(&cluster, plan).await,
            "clean after its own apply"
        );
        if turn > 0 {
            assert!(!diff_exit(&cluster, &local_plan).await, "local diffs clean");
            assert!(!diff_exit(&cluster, &other_plan).await, "the other clean");
        }
    }

    let everything = DeleteOptions {
        components: vec![],
        delete_namespace: false,
        consent: &Yes,
        observer: &Quiet,
        cancel: never(),
    };
    let asking = DeleteOptions {
        consent: &No,
        ..everything.clone()
    };
    let refused = delete::delete(&cluster, &other, &asking).await;
    assert!(
        matches!(refused, Err(ApplyError::NoConsent { count: 1, .. })),
        "only the ConfigMap is deleted, so only it is asked about: {refused:?}"
    );
    let report = delete::delete(&cluster, &other, &everything)
        .await
        .expect("delete the other");
    assert_eq!(
        report.released.len(),
        1,
        "the StorageClass is only released"
    );
    assert!(
        cluster
            .object("storage.k8s.io/v1", "StorageClass", None, "kvc")
            .is_some()
    );
    assert!(
        !diff_exit(&cluster, &local_plan).await,
        "local still diffs clean"
    );

    let report = delete::delete(&cluster, &local, &everything)
        .await
        .expect("delete local");
    assert_eq!(report.pruned.len(), 2, "the last user deletes it");
    assert!(
        cluster
            .object("storage.k8s.io/v1", "StorageClass", None, "kvc")
            .is_none()
    );
}

#[tokio::test]
async fn two_apps_of_one_name_never_share_an_applyset() {
    let cluster = MemoryCluster::new();
    let x = set().with_app_id(Some("x-id"));
    let y = set().with_app_id(Some("y-id"));
    apply::apply(
        &cluster,
        &plan_for(&x, vec![config_map("a", "c")]),
        &options(&Yes),
    )
    .await
    .expect("app x");
    cluster.clear_writes();
    let refused = apply::apply(
        &cluster,
        &plan_for(&y, vec![config_map("a", "other")]),
        &pruning(&Yes),
    )
    .await
    .expect_err("app y is refused");
    let message = refused.to_string();
    assert!(
        message.contains("x-id") && message.contains("y-id"),
        "{message}"
    );
    assert_eq!(cluster.writes(), []);
}

fn secret(written_as: &str, value: &str) -> Object {
    object(
        "serving",
        "v1",
        "Secret",
        "token",
        json!({written_as: {"token": value}}),
    )
}

/// The token, decoded, as the cluster stores it.
fn stored_token(cluster: &MemoryCluster) -> String {
    use base64::Engine as _;
    let live = cluster
        .object("v1", "Secret", Some(NS), "token")
        .expect("the Secret");
    let encoded = live["data"]["token"].as_str().expect("a token");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8(bytes).expect("text")
}

#[tokio::test]
async fn a_secret_value_another_manager_changed_is_a_conflict_through_data_or_string_data() {
    // (mlkube writes through, the other manager through)
    let ways = [
        ("data", "stringData"),
        ("stringData", "data"),
        ("data", "data"),
    ];
    for (ours, theirs) in ways {
        let encode = |written_as: &str, text: &str| {
            use base64::Engine as _;
            if written_as == "data" {
                base64::engine::general_purpose::STANDARD.encode(text)
            } else {
                text.to_string()
            }
        };
        let rendered = vec![secret(ours, &encode(ours, "one"))];
        let cluster = deployed(rendered.clone()).await;
        cluster.create_as(
            "night-shift",
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "token", "namespace": NS},
                   theirs: {"token": encode(theirs, "two")}}),
        );
        let plan = plan_of(rendered, &[]);
        let changes = super::diff::diff(&cluster, &plan, Default::default())
            .await
            .expect("diff");
        let conflicts = &changes.changes[0].conflicts;
        assert_eq!(conflicts.len(), 1, "{ours} vs {theirs}: {conflicts:?}");
        assert_eq!(conflicts[0].manager, "night-shift");

        let refused = apply::apply(&cluster, &plan, &options(&Yes)).await;
        let Err(ApplyError::Preflight(PreflightError::Rejected { details, .. })) = refused else {
            panic!("{ours} vs {theirs}: expected a conflict, got {refused:?}");
        };
        assert!(
            details.contains(&format!(".{theirs}.token")) && details.contains("night-shift"),
            "{details}"
        );
        assert_eq!(stored_token(&cluster), "two", "{ours} vs {theirs}");

        let forcing = ApplyOptions {
            force_conflicts: true,
            ..options(&Yes)
        };
        apply::apply(&cluster, &plan, &forcing)
            .await
            .expect("apply --force-conflicts");
        assert_eq!(stored_token(&cluster), "one", "{ours} vs {theirs}");
    }
}

/// Cancels after it was told of `after` objects applied or removed, as a Ctrl-C would then.
struct CancelAfter {
    after: usize,
    told: std::sync::atomic::AtomicUsize,
    cancel: Cancel,
}

impl CancelAfter {
    fn new(after: usize) -> CancelAfter {
        CancelAfter {
            after,
            told: Default::default(),
            cancel: Cancel::new(),
        }
    }

    fn tell(&self) {
        let told = self.told.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if told == self.after {
            self.cancel.cancel();
        }
    }
}

impl super::report::Observer for CancelAfter {
    fn applied(&self, _: &Key, _: Outcome) {
        self.tell();
    }

    fn removed(&self, _: &Key, _: super::report::Removal) {
        self.tell();
    }

    fn namespace_created(&self, _: &Key) {
        self.tell();
    }
}

fn many(count: usize) -> Vec<Object> {
    (0..count)
        .map(|i| config_map("bulk", &format!("bulk-{i:02}")))
        .chain([deployment("serving", "serving")])
        .collect()
}

/// Every object `writes` applied as mlkube is a member of the inventory.
async fn inventory_covers(cluster: &MemoryCluster, writes: &[Write]) {
    let recorded = applyset::read(cluster, &set())
        .await
        .expect("the inventory reads")
        .expect("an inventory");
    let members = applyset::members(cluster, &set(), &recorded)
        .await
        .expect("the members list");
    let members: Vec<String> = members.iter().map(|m| m.key.to_string()).collect();
    for write in writes {
        let Write::Apply { object, .. } = write else {
            continue;
        };
        if object.starts_with("Namespace") || object == inventory() {
            continue;
        }
        let name = object.rsplit('/').next().unwrap_or_default();
        assert!(
            members.iter().any(|m| m.ends_with(&format!("/{name}"))),
            "{object} was written but is not a member: {members:?}"
        );
    }
}

#[tokio::test]
async fn a_cancelled_apply_starts_nothing_more_and_its_inventory_covers_what_it_wrote() {
    let cluster = MemoryCluster::new();
    let observer = CancelAfter::new(6);
    let cancelling = ApplyOptions {
        observer: &observer,
        cancel: &observer.cancel,
        ..options(&Yes)
    };
    let report = apply::apply(&cluster, &plan_of(many(40), &[]), &cancelling)
        .await
        .expect("the interrupted apply");
    assert!(report.interrupted);
    // The namespace and five ConfigMaps; the inventory before them; no Deployment.
    assert!(report.namespace_created.is_some());
    assert_eq!(report.applied.len(), 5, "{:?}", report.applied);
    let writes = cluster.writes();
    assert_eq!(writes.len(), 7, "{writes:?}");
    assert_eq!(writes[1], applied(inventory()), "inventory first");
    assert!(!writes.contains(&applied("Deployment ml/serving")));
    inventory_covers(&cluster, &writes).await;
    assert_eq!(
        group_kinds(&cluster).await,
        ["ConfigMap", "Deployment.apps"],
        "widened to the whole plan before the first member"
    );

    let rerun = apply::apply(&cluster, &plan_of(many(40), &[]), &options(&Yes))
        .await
        .expect("the re-run");
    assert!(!rerun.interrupted);
    assert!(
        !diff_exit(&cluster, &plan_of(many(40), &[])).await,
        "the re-run converges"
    );
}

#[tokio::test]
async fn a_cancelled_prune_or_delete_keeps_the_inventory_of_what_is_left() {
    let cluster = deployed(many(20)).await;
    let observer = CancelAfter::new(3);
    let cancelling = ApplyOptions {
        observer: &observer,
        cancel: &observer.cancel,
        ..pruning(&Yes)
    };
    let report = apply::apply(
        &cluster,
        &plan_of(vec![], &[]),
        &ApplyOptions {
            allow_empty: true,
            ..cancelling
        },
    )
    .await
    .expect("the interrupted prune");
    assert!(report.interrupted);
    assert_eq!(report.pruned.len(), 3, "{:?}", report.pruned);
    assert!(
        report.pruned.iter().any(|k| k.kind == "Deployment"),
        "reverse tier order: the Deployment first"
    );
    assert_eq!(
        group_kinds(&cluster).await,
        ["ConfigMap", "Deployment.apps"],
        "not narrowed"
    );

    let observer = CancelAfter::new(4);
    let interrupted = DeleteOptions {
        components: vec![],
        delete_namespace: false,
        consent: &Yes,
        observer: &observer,
        cancel: &observer.cancel,
    };
    let report = delete::delete(&cluster, &set(), &interrupted)
        .await
        .expect("the interrupted delete");
    assert!(report.interrupted);
    assert_eq!(report.pruned.len(), 4);
    let left = applyset::read(&cluster, &set()).await.expect("reads");
    assert!(left.is_some(), "the inventory stays while members are left");

    let rerun = DeleteOptions {
        observer: &Quiet,
        cancel: never(),
        ..interrupted
    };
    let report = delete::delete(&cluster, &set(), &rerun)
        .await
        .expect("the re-run of delete");
    assert_eq!(report.pruned.len(), 21 - 3 - 4, "{:?}", report.pruned);
    assert!(
        applyset::read(&cluster, &set())
            .await
            .expect("reads")
            .is_none()
    );
}

// ---------------------------------------------------------------------------------------------
// releasing shared objects (issue 24)

/// The CRD of `crd()`, with an annotation at `revision`.
fn crd_at(revision: &str) -> Object {
    let mut object = crd();
    object.value["metadata"]["annotations"] = json!({"example.com/revision": revision});
    object.value["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "mlkube"});
    object
}

fn crd_live(cluster: &MemoryCluster) -> Value {
    cluster
        .object(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        )
        .expect("the CRD stays")
}

fn mlkube_managers(live: &Value) -> Vec<String> {
    live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .filter(|m| m.starts_with("mlkube@"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn delete_releases_a_shared_crd_completely_and_the_last_one_out_leaves_it_unclaimed() {
    let cluster = MemoryCluster::new();
    let local = ApplySet::new("app", "local", "a");
    let dev = ApplySet::new("app", "dev", "b");
    let render = |ns: &str, revision: &str| {
        vec![
            in_namespace(config_map("a", "config"), ns),
            crd_at(revision),
        ]
    };
    for (set, ns) in [(&local, "a"), (&dev, "b")] {
        apply::apply(&cluster, &plan_for(set, render(ns, "1")), &options(&Yes))
            .await
            .expect("each applies");
    }
    let everything = DeleteOptions {
        components: vec![],
        delete_namespace: false,
        consent: &No,
        observer: &Quiet,
        cancel: never(),
    };
    let refused = delete::delete(&cluster, &local, &everything).await;
    assert!(
        matches!(refused, Err(ApplyError::NoConsent { count: 1, .. })),
        "only the ConfigMap is deleted, so only it is asked about: {refused:?}"
    );
    let everything = DeleteOptions {
        consent: &Yes,
        ..everything
    };
    let report = delete::delete(&cluster, &local, &everything)
        .await
        .expect("delete local");
    assert_eq!(report.released.len(), 1, "{report:?}");
    assert!(report.unused.is_empty(), "dev still uses it");
    assert_eq!(
        mlkube_managers(&crd_live(&cluster)),
        [dev.shared_manager.as_str()]
    );

    // dev changes a field local had set too: no conflict with local's manager.
    apply::apply(&cluster, &plan_for(&dev, render("b", "2")), &options(&Yes))
        .await
        .expect("dev changes the CRD");
    assert_eq!(
        crd_live(&cluster)["metadata"]["annotations"]["example.com/revision"],
        "2"
    );

    cluster.clear_writes();
    let report = delete::delete(&cluster, &dev, &everything)
        .await
        .expect("delete dev");
    assert_eq!(report.unused.len(), 1, "{report:?}");
    assert!(cluster.writes().contains(&Write::Disown {
        object: "CustomResourceDefinition widgets.example.com".into(),
        manager: dev.shared_manager.clone(),
    }));
    let left = crd_live(&cluster);
    assert!(mlkube_managers(&left).is_empty(), "{left:#}");
    assert_eq!(left["metadata"]["annotations"]["example.com/revision"], "2");
    assert_eq!(left["spec"]["group"], "example.com", "its fields stay");

    // Unclaimed, it is shared again by the next environment that renders it.
    apply::apply(
        &cluster,
        &plan_for(&local, render("a", "3")),
        &options(&Yes),
    )
    .await
    .expect("local takes it up again");
    assert_eq!(
        crd_live(&cluster)["metadata"]["annotations"]["example.com/revision"],
        "3"
    );
}

#[tokio::test]
async fn a_prune_releases_a_crd_no_longer_rendered_and_a_plain_apply_counts_what_it_left() {
    let cluster = deployed(vec![config_map("a", "c"), crd_at("1")]).await;
    let report = apply::apply(
        &cluster,
        &plan_of(vec![config_map("a", "c")], &[]),
        &options(&Yes),
    )
    .await
    .expect("a plain apply");
    assert_eq!(report.not_rendered.len(), 1, "{report:?}");
    let report = apply::apply(
        &cluster,
        &plan_of(vec![config_map("a", "c")], &[]),
        &pruning(&No),
    )
    .await
    .expect("releasing needs no consent: nothing is deleted");
    assert_eq!((report.released.len(), report.unused.len()), (1, 1));
    assert!(
        report.pruned.is_empty() && report.kept.is_empty(),
        "{report:?}"
    );
    assert!(mlkube_managers(&crd_live(&cluster)).is_empty());
}

#[tokio::test]
async fn the_namespace_an_apply_creates_is_told_apart_from_the_rendered_objects() {
    let cluster = MemoryCluster::new();
    let plan = plan_of(vec![config_map("web", "a"), config_map("web", "b")], &[]);
    let report = apply::apply(&cluster, &plan, &options(&Yes))
        .await
        .expect("the apply");
    // As many as `diff` counts: the objects the app renders.
    assert_eq!(report.applied.len(), 2, "{:?}", report.applied);
    assert_eq!(
        report.namespace_created.map(|key| key.to_string()),
        Some(format!("Namespace {NS}"))
    );
    let again = apply::apply(&cluster, &plan, &options(&Yes))
        .await
        .expect("the second apply");
    assert_eq!(again.applied.len(), 2, "{:?}", again.applied);
    assert_eq!(again.namespace_created, None);
}

#[tokio::test]
async fn diff_counts_what_apply_counts_and_names_the_namespace_apart() {
    let cluster = MemoryCluster::new();
    let plan = plan_of(vec![config_map("web", "a"), config_map("web", "b")], &[]);
    let before = super::diff::diff(&cluster, &plan, Default::default())
        .await
        .expect("the diff");
    let summary = before.summary();
    assert_eq!((summary.create, summary.creates_namespace), (2, true));
    assert!(before.has_differences());
    assert_eq!(
        summary.to_string(),
        "2 to create, 0 to update, 0 to prune, 0 unchanged, and the environment's namespace"
    );
    let report = apply::apply(&cluster, &plan, &options(&Yes))
        .await
        .expect("the apply");
    let created = report
        .applied
        .iter()
        .filter(|(_, outcome)| *outcome == Outcome::Created)
        .count();
    assert_eq!(created, summary.create);
    let after = super::diff::diff(&cluster, &plan, Default::default())
        .await
        .expect("the diff after");
    assert_eq!(after.summary().unchanged, created);
    assert!(!after.summary().creates_namespace);
}

fn route_crd() -> Object {
    Object {
        component: "gateway".into(),
        value: json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "httproutes.gateway.networking.k8s.io"},
            "spec": {"group": "gateway.networking.k8s.io", "scope": "Namespaced",
                "names": {"plural": "httproutes", "kind": "HTTPRoute"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}}),
    }
}

/// The serving component's route sending `weights` of the traffic to `serving-<version>`.
fn route(weights: &[(&str, u32)]) -> Object {
    let backends: Vec<Value> = weights
        .iter()
        .map(|(version, weight)| json!({"name": format!("serving-{version}"), "weight": weight}))
        .collect();
    let spec = json!({"parentRefs": [{"name": "gateway"}], "rules": [{"backendRefs": backends}]});
    let api = "gateway.networking.k8s.io/v1";
    object(
        "serving",
        api,
        "HTTPRoute",
        "serving",
        json!({ "spec": spec }),
    )
}

/// The route's CRD, the route with `weights`, and a Deployment `serving-<v>` of each version.
fn serving(weights: &[(&str, u32)], versions: &[&str]) -> Vec<Object> {
    let mut objects = vec![route_crd(), route(weights)];
    objects.extend(
        versions
            .iter()
            .map(|v| deployment("serving", &format!("serving-{v}"))),
    );
    objects
}

fn ready(cluster: &MemoryCluster, name: &str) {
    let status = json!({"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1});
    cluster.set_status("apps/v1", "Deployment", Some(NS), name, status);
}

#[tokio::test]
async fn no_wait_is_refused_for_a_change_of_route_and_writes_nothing() {
    let cluster = deployed(serving(&[("v1", 100)], &["v1"])).await;
    let no_wait = ApplyOptions {
        wait: false,
        ..pruning(&Yes)
    };
    // Unchanged routes: --no-wait is fine.
    cluster.clear_writes();
    let same = plan_of(serving(&[("v1", 100)], &["v1"]), &[]);
    apply::apply(&cluster, &same, &no_wait)
        .await
        .expect("an apply that moves no traffic");
    let canary = plan_of(serving(&[("v1", 90), ("v2", 10)], &["v1", "v2"]), &[]);
    for dry_run in [true, false] {
        cluster.clear_writes();
        let options = ApplyOptions { dry_run, ..no_wait };
        let error = apply::apply(&cluster, &canary, &options)
            .await
            .expect_err("moving traffic without waiting");
        let text = error.to_string();
        assert!(
            text.starts_with("apply --no-wait would change 1 route(s)")
                && text.contains("HTTPRoute.gateway.networking.k8s.io ml/serving")
                && text.contains("hint: drop --no-wait"),
            "{text}"
        );
        assert_eq!(
            cluster.writes(),
            [],
            "nothing is written (dry run {dry_run})"
        );
    }
}

#[tokio::test]
async fn a_route_keeps_its_weights_and_nothing_is_pruned_while_a_new_version_is_not_ready() {
    let cluster = deployed(serving(&[("v1", 100)], &["v1"])).await;
    ready(&cluster, "serving-v1");
    let accepted = json!({"parents": [{"parentRef": {"name": "gateway"}, "conditions": [
        {"type": "Accepted", "status": "True"}, {"type": "ResolvedRefs", "status": "True"}]}]});
    let api = "gateway.networking.k8s.io/v1";
    cluster.set_status(api, "HTTPRoute", Some(NS), "serving", accepted);
    let waiting = ApplyOptions {
        wait: true,
        timeout: Duration::from_millis(300),
        ..pruning(&Yes)
    };

    let canary = serving(&[("v1", 90), ("v2", 10)], &["v1", "v2"]);
    // A dry run says the route waits for what it sends to, and writes nothing.
    let dry = ApplyOptions {
        dry_run: true,
        ..waiting
    };
    let report = apply::apply(&cluster, &plan_of(canary.clone(), &[]), &dry)
        .await
        .expect("the dry run");
    let gated: Vec<String> = report.gated_routes.iter().map(Key::to_string).collect();
    assert_eq!(gated, ["HTTPRoute.gateway.networking.k8s.io ml/serving"]);
    assert_eq!(cluster.writes(), [], "a dry run writes nothing");

    let report = apply::apply(&cluster, &plan_of(canary, &[]), &waiting)
        .await
        .expect("the apply");
    let not_ready: Vec<String> = report.not_ready.iter().map(|n| n.key.to_string()).collect();
    assert_eq!(not_ready, ["Deployment.apps ml/serving-v2"]);
    let held: Vec<String> = report.held_routes.iter().map(Key::to_string).collect();
    assert_eq!(held, ["HTTPRoute.gateway.networking.k8s.io ml/serving"]);
    assert!(
        !cluster
            .writes()
            .iter()
            .any(|w| format!("{w:?}").contains("HTTPRoute")),
        "{:?}",
        cluster.writes()
    );
    let live = cluster.object(api, "HTTPRoute", Some(NS), "serving");
    assert_eq!(
        live.expect("the route")["spec"]["rules"][0]["backendRefs"][0]["weight"],
        100
    );

    // Promoted once v2 answers: the route moves, then v1 is pruned.
    ready(&cluster, "serving-v2");
    cluster.clear_writes();
    let promoted = serving(&[("v2", 100)], &["v2"]);
    let report = apply::apply(&cluster, &plan_of(promoted, &[]), &waiting)
        .await
        .expect("the promotion");
    assert!(report.held_routes.is_empty());
    let writes = cluster.writes();
    let at = |needle: &str| {
        writes
            .iter()
            .position(|w| format!("{w:?}").contains(needle))
    };
    assert!(
        at("HTTPRoute").is_some() && at("Deployment ml/serving-v1") > at("HTTPRoute"),
        "{writes:?}"
    );
}

/// A version's PodDisruptionBudget, as the serving component renders one beside its Deployment.
fn budget(component: &str, name: &str) -> Object {
    let selector = json!({"matchLabels": {"app.kubernetes.io/instance": name}});
    object(
        component,
        "policy/v1",
        "PodDisruptionBudget",
        name,
        json!({"spec": {"maxUnavailable": 1, "selector": selector}}),
    )
}

#[tokio::test]
async fn a_disruption_budget_is_written_before_its_pods_never_waited_for_and_pruned_after_them() {
    let version = |v: &str| {
        let name = format!("serving-{v}");
        vec![deployment("serving", &name), budget("serving", &name)]
    };
    let cluster = MemoryCluster::new();
    apply::apply(&cluster, &plan_of(version("v1"), &[]), &options(&Yes))
        .await
        .expect("the first apply");
    assert_eq!(
        cluster.writes(),
        [
            applied("Namespace ml"),
            applied(inventory()),
            applied("PodDisruptionBudget ml/serving-v1"),
            applied("Deployment ml/serving-v1"),
        ],
        "the budget is there before the pods it guards"
    );
    assert_eq!(
        group_kinds(&cluster).await,
        ["Deployment.apps", "PodDisruptionBudget.policy"]
    );

    // The Deployment ready, the apply waits for nothing more: a budget has no state to reach.
    ready(&cluster, "serving-v1");
    let waiting = ApplyOptions {
        wait: true,
        timeout: Duration::from_millis(300),
        ..options(&Yes)
    };
    let report = apply::apply(&cluster, &plan_of(version("v1"), &[]), &waiting)
        .await
        .expect("the apply that waits");
    assert!(report.not_ready.is_empty(), "{:?}", report.not_ready);

    cluster.clear_writes();
    apply::apply(&cluster, &plan_of(version("v2"), &[]), &pruning(&Yes))
        .await
        .expect("the apply that retires v1");
    assert_eq!(
        cluster.writes(),
        [
            applied("PodDisruptionBudget ml/serving-v2"),
            applied("Deployment ml/serving-v2"),
            deleted("Deployment ml/serving-v1"),
            deleted("PodDisruptionBudget ml/serving-v1"),
        ],
        "pruned in reverse tier order: the pods' Deployment, then their budget"
    );
}
