//! diff, apply, prune, delete and validate against the real control plane.
//!
//! Each test deploys an environment of its own (its namespace is the test namespace, its app a
//! name of its own) built directly as a Manifest, so these tests do not depend on the renderer.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use mlkube::cli::exit::Exit;
use mlkube::cli::output::Confirmation;
use mlkube::deploy::apply::{self, ApplyOptions};
use mlkube::deploy::checks::preflight;
use mlkube::deploy::cluster::cancel::Cancel;
use mlkube::deploy::cluster::{Cluster, ClusterError, KubeCluster, Target};
use mlkube::deploy::delete::{self, DeleteOptions};
use mlkube::deploy::diff::{self, Action, DiffOptions};
use mlkube::deploy::inventory::applyset::{self, ApplySet, GROUP_KINDS_ANNOTATION, PART_OF_LABEL};
use mlkube::deploy::inventory::plan::{self, Plan};
use mlkube::deploy::prune::{self, PruneOptions};
use mlkube::deploy::report::{ApplyError, ApplyReport, Outcome, Quiet};
use mlkube::operator::serving::api::InferenceService;
use mlkube::render::manifest::{Manifest, Object};
use serde_json::{Value, json};

use crate::inference_service;
use crate::support::{self, TestNamespace, mlkube};

// ---------------------------------------------------------------------------------------------
// builders

/// A cancel nobody sends.
fn never() -> &'static Cancel {
    static NEVER: std::sync::LazyLock<Cancel> = std::sync::LazyLock::new(Cancel::new);
    &NEVER
}

fn labels(env: &str, component: &str) -> Value {
    json!({
        "app.kubernetes.io/managed-by": "mlkube",
        "app.kubernetes.io/part-of": "t",
        "mlkube.io/environment": env,
        "mlkube.io/component": component,
    })
}

pub(crate) fn config_map(ns: &str, component: &str, name: &str, data: Value) -> Object {
    Object {
        component: component.into(),
        value: json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ns, component)},
            "data": data}),
    }
}

fn secret(ns: &str, component: &str, name: &str, data: Value) -> Object {
    Object {
        component: component.into(),
        value: json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ns, component)},
            "type": "Opaque", "data": data}),
    }
}

pub(crate) fn deployment(ns: &str, component: &str, name: &str, replicas: i64) -> Object {
    Object {
        component: component.into(),
        value: json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ns, component)},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "registry.invalid/mlkube/serve:1",
                                             "ports": [{"containerPort": 8500}]}]}}}}),
    }
}

pub(crate) fn service(ns: &str, component: &str, name: &str) -> Object {
    Object {
        component: component.into(),
        value: json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ns, component)},
            "spec": {"selector": {"app": name}, "ports": [{"name": "grpc", "port": 9000, "targetPort": 8500}]}}),
    }
}

fn service_account(ns: &str, component: &str, name: &str) -> Object {
    Object {
        component: component.into(),
        value: json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ns, component)}}),
    }
}

/// A CRD with a group of its own per test, so tests never share a cluster-scoped kind.
fn crd(group: &str) -> Object {
    Object {
        component: "widgets".into(),
        value: json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("widgets.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}),
    }
}

fn widget(ns: &str, group: &str, name: &str) -> Object {
    Object {
        component: "widgets".into(),
        value: json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ns, "widgets")},
            "spec": {"size": 3}}),
    }
}

/// The environment of a test: deployed into `ns`, app `t`, environment named like the namespace.
pub(crate) struct Env {
    cluster: KubeCluster,
    client: Client,
    pub(crate) set: ApplySet,
    ns: String,
}

impl Env {
    pub(crate) async fn new(ns: &str) -> Env {
        let client = support::client().await;
        let cluster = KubeCluster::with_client(client.clone(), "test".into(), "local".into())
            .await
            .expect("discovery on the test cluster");
        Env {
            cluster,
            client,
            set: ApplySet::new("t", ns, ns),
            ns: ns.to_string(),
        }
    }

    fn plan(&self, objects: Vec<Object>) -> Plan {
        plan::plan(&Manifest { objects }, &self.set, &[]).expect("a valid plan")
    }

    async fn diff(&self, objects: Vec<Object>) -> diff::ChangeSet {
        diff::diff(&self.cluster, &self.plan(objects), DiffOptions::default())
            .await
            .expect("diff")
    }

    pub(crate) async fn apply(
        &self,
        objects: Vec<Object>,
        options: &ApplyOptions<'_>,
    ) -> Result<ApplyReport, ApplyError> {
        apply::apply(&self.cluster, &self.plan(objects), options).await
    }

    /// Another field manager, `night-shift`, takes the fields of `intruder` over.
    async fn night_shift_applies<K>(&self, intruder: &Value)
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let name = intruder["metadata"]["name"].as_str().expect("a name");
        Api::<K>::namespaced(self.client.clone(), &self.ns)
            .patch(
                name,
                &PatchParams::apply("night-shift").force(),
                &Patch::Apply(intruder),
            )
            .await
            .expect("the other manager's apply");
    }

    /// `diff` names the one conflict on `field` with `night-shift`, and `apply` refuses it.
    async fn assert_night_shift_conflict(&self, objects: Vec<Object>, field: &str) {
        let changes = self.diff(objects.clone()).await;
        let conflicts = &changes.changes[0].conflicts;
        assert_eq!(conflicts.len(), 1, "{field}: {conflicts:?}");
        assert_eq!(conflicts[0].manager, "night-shift");
        assert_eq!(conflicts[0].field, field);

        let refused = self
            .apply(objects, &options())
            .await
            .expect_err("a conflict refuses");
        let message = refused.to_string();
        assert!(
            message.contains(field) && message.contains("\"night-shift\""),
            "{message}"
        );
        assert!(message.contains("--force-conflicts"), "{message}");
    }

    async fn config_map(&self, name: &str) -> Option<ConfigMap> {
        Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns)
            .get_opt(name)
            .await
            .expect("get ConfigMap")
    }
}

pub(crate) fn options() -> ApplyOptions<'static> {
    ApplyOptions {
        dry_run: false,
        prune: false,
        consent: &Confirmation::Given,
        force_conflicts: false,
        wait: false,
        timeout: Duration::from_secs(60),
        allow_empty: false,
        adopt: false,
        observer: &Quiet,
        cancel: never(),
    }
}

fn app(ns: &str) -> Vec<Object> {
    vec![
        service_account(ns, "serving", "serving"),
        config_map(
            ns,
            "serving",
            "serving-config",
            json!({"model": "mnist", "batch": "8"}),
        ),
        secret(
            ns,
            "serving",
            "serving-token",
            json!({"token": "c2VjcmV0LW9uZQ==", "user": "YWRtaW4="}),
        ),
        service(ns, "serving", "serving"),
        deployment(ns, "serving", "serving", 1),
    ]
}

fn changed_lines(change: &diff::Change) -> Vec<String> {
    diff::unified(change)
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// tests

#[tokio::test]
async fn diff_on_a_fresh_cluster_shows_creations_including_the_namespace_and_custom_kinds() {
    let test = TestNamespace::new("deploy-fresh").await;
    // An environment whose namespace does not exist yet (removed on drop all the same).
    let fresh = TestNamespace {
        client: test.client.clone(),
        name: format!("{}-new", test.name),
    };
    let env = Env::new(&fresh.name).await;
    let group = format!("{}.fresh.mlkube.test", test.name);
    let mut objects = app(&fresh.name);
    objects.push(crd(&group));
    objects.push(widget(&fresh.name, &group, "w"));

    let changes = env.diff(objects).await;

    assert!(changes.failures.is_empty(), "{:?}", changes.failures);
    assert_eq!(Exit::of_diff(&changes), Exit::Differences);
    let namespace = changes
        .changes
        .iter()
        .find(|c| c.key.kind == "Namespace")
        .expect("the namespace as a creation");
    assert_eq!(namespace.key.name, fresh.name);
    assert!(
        changes.changes.iter().all(|c| c.action == Action::Create),
        "{:?}",
        changes.summary()
    );
    // The rendered objects, as apply counts them; the namespace apart.
    assert_eq!(changes.summary().create, 7);
    assert!(changes.summary().creates_namespace);
    let custom = changes
        .changes
        .iter()
        .find(|c| c.key.kind == "Widget")
        .expect("the custom object");
    assert!(
        custom
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("CustomResourceDefinition")
    );
    // A whole-object addition, with the label that makes it a member.
    let text = diff::unified(
        changes
            .changes
            .iter()
            .find(|c| c.key.kind == "ConfigMap")
            .unwrap(),
    );
    assert!(text.contains("+  model: mnist"), "{text}");
    assert!(
        text.contains(&format!("+    {PART_OF_LABEL}: {}", env.set.id)),
        "{text}"
    );
    // A dry-run apply goes through, and says the same.
    let mut dry = options();
    dry.dry_run = true;
    let mut objects = app(&fresh.name);
    objects.push(crd(&group));
    objects.push(widget(&fresh.name, &group, "w"));
    let report = env.apply(objects, &dry).await.expect("a dry-run apply");
    assert_eq!(report.applied.len(), 7);
    assert!(report.namespace_created.is_some());
    assert!(
        report.applied.iter().all(|(_, o)| *o == Outcome::Created),
        "{:?}",
        report.applied
    );

    // Nothing was written by the diff or the dry run.
    assert!(
        Api::<Namespace>::all(env.client.clone())
            .get_opt(&fresh.name)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn apply_then_rediff_shows_no_noise_and_a_param_change_shows_exactly_that_field() {
    let test = TestNamespace::new("deploy-noise").await;
    let env = Env::new(&test.name).await;
    let mut waiting = options();
    waiting.wait = true;

    let report = env.apply(app(&test.name), &waiting).await.expect("apply");
    assert!(report.not_ready.is_empty(), "{:?}", report.not_ready);
    assert!(
        report.applied.iter().all(|(_, o)| *o == Outcome::Created),
        "{:?}",
        report.applied
    );

    // Controllers have written status, revisions and defaults by now: still no diff.
    let changes = env.diff(app(&test.name)).await;
    assert_eq!(
        Exit::of_diff(&changes),
        Exit::Done,
        "{}",
        diff::render_text(&changes, false)
    );
    assert_eq!(changes.summary().unchanged, 5);
    assert_eq!(diff::render_text(&changes, false), "");

    // A re-apply changes nothing.
    let again = env
        .apply(app(&test.name), &options())
        .await
        .expect("re-apply");
    assert!(
        again.applied.iter().all(|(_, o)| *o == Outcome::Unchanged),
        "{:?}",
        again.applied
    );

    let mut changed = app(&test.name);
    changed[4] = deployment(&test.name, "serving", "serving", 2);
    let changes = env.diff(changed).await;
    assert_eq!(Exit::of_diff(&changes), Exit::Differences);
    let updates: Vec<&diff::Change> = changes
        .changes
        .iter()
        .filter(|c| c.action == Action::Update)
        .collect();
    assert_eq!(updates.len(), 1, "{}", diff::render_text(&changes, false));
    assert_eq!(updates[0].key.kind, "Deployment");
    assert_eq!(
        changed_lines(updates[0]),
        ["-  replicas: 1", "+  replicas: 2"]
    );
}

#[tokio::test]
async fn secret_values_are_masked_unless_asked_and_a_changed_value_still_shows() {
    let test = TestNamespace::new("deploy-secret").await;
    let env = Env::new(&test.name).await;
    env.apply(app(&test.name), &options()).await.expect("apply");

    let mut changed = app(&test.name);
    changed[2] = secret(
        &test.name,
        "serving",
        "serving-token",
        json!({"token": "c2VjcmV0LXR3bw==", "user": "YWRtaW4="}),
    );
    let plan = env.plan(changed);
    let masked = diff::diff(&env.cluster, &plan, DiffOptions::default())
        .await
        .unwrap();
    let change = masked
        .changes
        .iter()
        .find(|c| c.key.kind == "Secret")
        .unwrap();
    assert_eq!(change.action, Action::Update);
    let lines = changed_lines(change);
    assert_eq!(lines.len(), 2, "only the changed key shows: {lines:?}");
    assert!(
        lines[0].starts_with("-  token: (masked ") && lines[1].starts_with("+  token: (masked "),
        "{lines:?}"
    );
    let everything = format!(
        "{}{}",
        diff::render_text(&masked, false),
        diff::render_json(&masked)
    );
    for value in ["c2VjcmV0LW9uZQ==", "c2VjcmV0LXR3bw==", "YWRtaW4="] {
        assert!(!everything.contains(value), "{value} leaked");
    }

    let shown = diff::diff(&env.cluster, &plan, DiffOptions { show_secrets: true })
        .await
        .unwrap();
    let change = shown
        .changes
        .iter()
        .find(|c| c.key.kind == "Secret")
        .unwrap();
    assert_eq!(
        changed_lines(change),
        ["-  token: c2VjcmV0LW9uZQ==", "+  token: c2VjcmV0LXR3bw=="]
    );
}

#[tokio::test]
async fn a_crd_and_its_custom_object_apply_in_one_run() {
    let test = TestNamespace::new("deploy-crd").await;
    let env = Env::new(&test.name).await;
    let group = format!("{}.crd.mlkube.test", test.name);
    /// Deletes the test's CRD, also when the test fails. With a client of its own: the test's
    /// client belongs to the test's runtime, which is blocked while this runs.
    struct DeleteCrd(String);
    impl Drop for DeleteCrd {
        fn drop(&mut self) {
            let name = self.0.clone();
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let crds = Api::<CustomResourceDefinition>::all(support::client().await);
                    crds.delete(&name, &DeleteParams::default()).await.ok()
                });
            })
            .join();
        }
    }
    let _cleanup = DeleteCrd(format!("widgets.{group}"));

    let objects = vec![widget(&test.name, &group, "w"), crd(&group)];
    let report = env
        .apply(objects.clone(), &options())
        .await
        .expect("apply CRD and custom object together");
    let order: Vec<&str> = report
        .applied
        .iter()
        .map(|(k, _)| k.kind.as_str())
        .collect();
    assert_eq!(order, ["CustomResourceDefinition", "Widget"]);

    let resolved = env
        .cluster
        .resolve(&format!("{group}/v1"), "Widget")
        .expect("discovery refreshed");
    let live = env
        .cluster
        .get(&resolved, Some(&test.name), "w")
        .await
        .unwrap()
        .expect("the widget exists");
    assert_eq!(live["spec"]["size"], 3);
    let inventory = applyset::read(&env.cluster, &env.set)
        .await
        .unwrap()
        .expect("an inventory");
    assert!(
        inventory.group_kinds.contains(&format!("Widget.{group}")),
        "{inventory:?}"
    );
    assert_eq!(Exit::of_diff(&env.diff(objects).await), Exit::Done);
}

#[tokio::test]
async fn a_conflict_with_another_field_manager_is_refused_then_forced() {
    let test = TestNamespace::new("deploy-conflict").await;
    let env = Env::new(&test.name).await;
    let objects = vec![config_map(
        &test.name,
        "c",
        "settings",
        json!({"level": "info"}),
    )];
    env.apply(objects.clone(), &options())
        .await
        .expect("first apply");

    // Someone else takes the field over.
    let intruder = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": test.name}, "data": {"level": "debug"}});
    env.night_shift_applies::<ConfigMap>(&intruder).await;

    env.assert_night_shift_conflict(objects.clone(), ".data.level")
        .await;
    assert_eq!(
        env.config_map("settings").await.unwrap().data.unwrap()["level"],
        "debug"
    );

    let mut forced = options();
    forced.force_conflicts = true;
    env.apply(objects, &forced).await.expect("forced apply");
    assert_eq!(
        env.config_map("settings").await.unwrap().data.unwrap()["level"],
        "info"
    );
}

/// The token of the Secret `name`, decoded.
async fn stored_token(env: &Env, name: &str) -> String {
    let secret = Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .get(name)
        .await
        .expect("get Secret");
    let data = secret.data.expect("data");
    String::from_utf8(data["token"].0.clone()).expect("text")
}

#[tokio::test]
async fn a_secret_value_changed_through_string_data_is_a_conflict_as_through_data() {
    let test = TestNamespace::new("deploy-secret-conflict").await;
    let env = Env::new(&test.name).await;
    // base64 of "one"
    let objects = vec![secret(&test.name, "c", "token", json!({"token": "b25l"}))];
    env.apply(objects.clone(), &options())
        .await
        .expect("first apply");

    for (written_as, value) in [("stringData", "two"), ("data", "dGhyZWU=")] {
        let intruder = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "token", "namespace": test.name}, written_as: {"token": value}});
        env.night_shift_applies::<Secret>(&intruder).await;
        let changed = stored_token(&env, "token").await;

        env.assert_night_shift_conflict(objects.clone(), &format!(".{written_as}.token"))
            .await;
        assert_eq!(stored_token(&env, "token").await, changed, "{written_as}");
    }

    let mut forced = options();
    forced.force_conflicts = true;
    env.apply(objects.clone(), &forced)
        .await
        .expect("forced apply");
    assert_eq!(stored_token(&env, "token").await, "one");
    let after = env.diff(objects).await;
    assert!(after.changes[0].conflicts.is_empty(), "{:?}", after.changes);
    assert_eq!(Exit::of_diff(&after), Exit::Done);
}

#[tokio::test]
async fn prune_removes_a_dropped_component_and_leaves_what_is_not_ours() {
    let test = TestNamespace::new("deploy-prune").await;
    let env = Env::new(&test.name).await;
    let both = vec![
        config_map(&test.name, "keep", "kept", json!({"a": "1"})),
        config_map(&test.name, "drop", "dropped", json!({"b": "2"})),
        deployment(&test.name, "drop", "dropped", 1),
    ];
    env.apply(both, &options())
        .await
        .expect("apply both components");

    // Another environment of the same app in the same namespace, and an object someone else
    // created carrying this environment's labels, inventory label included.
    let other = Env {
        set: ApplySet::new("t", "other", &test.name),
        ..Env::new(&test.name).await
    };
    other
        .apply(
            vec![config_map(
                &test.name,
                "drop",
                "other-env",
                json!({"c": "3"}),
            )],
            &options(),
        )
        .await
        .expect("apply the other environment");
    let mut stranger = config_map(&test.name, "drop", "stranger", json!({"d": "4"})).value;
    stranger["metadata"]["labels"][PART_OF_LABEL] = json!(env.set.id);
    Api::<ConfigMap>::namespaced(env.client.clone(), &test.name)
        .patch(
            "stranger",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(&stranger),
        )
        .await
        .expect("the stranger");

    let only_kept = vec![config_map(&test.name, "keep", "kept", json!({"a": "1"}))];
    let changes = env.diff(only_kept.clone()).await;
    let pruned: Vec<String> = changes
        .changes
        .iter()
        .filter(|c| c.action == Action::Prune)
        .map(|c| c.key.to_string())
        .collect();
    assert_eq!(
        pruned,
        [
            format!("ConfigMap {}/dropped", test.name),
            format!("Deployment.apps {}/dropped", test.name)
        ]
    );
    assert_eq!(changes.kept.len(), 1);

    // Without a terminal and without --yes, nothing is deleted.
    let mut refusing = options();
    refusing.prune = true;
    refusing.consent = &Confirmation::Absent;
    let refused = env
        .apply(only_kept.clone(), &refusing)
        .await
        .expect_err("no consent");
    assert!(
        matches!(refused, ApplyError::NoConsent { count: 2, .. }),
        "{refused}"
    );
    assert!(env.config_map("dropped").await.is_some());

    // Rendering nothing with an inventory is refused unless --allow-empty.
    let empty = prune::prune(
        &env.cluster,
        &env.plan(vec![]),
        &PruneOptions {
            dry_run: false,
            consent: &Confirmation::Given,
            allow_empty: false,
            observer: &Quiet,
            cancel: never(),
        },
    )
    .await;
    assert!(
        matches!(empty, Err(ApplyError::EmptyPrune { .. })),
        "{empty:?}"
    );

    let mut pruning = options();
    pruning.prune = true;
    let report = env
        .apply(only_kept, &pruning)
        .await
        .expect("apply with prune");
    assert_eq!(report.pruned.len(), 2, "{:?}", report.pruned);
    assert_eq!(report.kept.len(), 1);
    assert!(env.config_map("dropped").await.is_none());
    assert!(
        Api::<Deployment>::namespaced(env.client.clone(), &test.name)
            .get_opt("dropped")
            .await
            .unwrap()
            .is_none()
    );
    assert!(env.config_map("kept").await.is_some());
    assert!(
        env.config_map("stranger").await.is_some(),
        "an object mlkube never applied is never pruned"
    );
    assert!(
        env.config_map("other-env").await.is_some(),
        "another environment's object is never pruned"
    );
    let inventory = applyset::read(&env.cluster, &env.set)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inventory.group_kinds, ["ConfigMap".to_string()].into());
}

#[tokio::test]
async fn an_environment_pinned_to_another_server_is_refused_naming_what_was_found() {
    let kubeconfig = support::kubeconfig_path();
    let base = Target {
        env: "prod".into(),
        namespace: "kf".into(),
        kubeconfig: Some(kubeconfig.clone()),
        ..Target::default()
    };

    // The real cluster's context, when the environment pins the server it points at, connects.
    let (config, source) = mlkube::deploy::cluster::load_kubeconfig(Some(&kubeconfig)).unwrap();
    let current = config
        .current_context
        .clone()
        .expect("the test kubeconfig has a current context");
    let server = mlkube::deploy::cluster::server_of(&config, &current).expect("its server");
    let pinned_here = Target {
        server: Some(server.clone()),
        ..base.clone()
    };
    let cluster = KubeCluster::connect(&pinned_here)
        .await
        .expect("the pinned server is this cluster");
    assert_eq!(cluster.context, current);

    let elsewhere = "https://prod.example.invalid:6443";
    let pinned_away = Target {
        server: Some(elsewhere.into()),
        ..base.clone()
    };
    let error = KubeCluster::connect(&pinned_away)
        .await
        .err()
        .expect("refused");
    let message = error.to_string();
    assert!(
        matches!(error, ClusterError::NoContextForServer { .. }),
        "{message}"
    );
    assert!(
        message.contains(elsewhere) && message.contains(&current) && message.contains(&server),
        "{message}"
    );

    // --context cannot override a pinned server either.
    let forced = Target {
        server: Some(elsewhere.into()),
        context_flag: Some(current.clone()),
        ..base
    };
    let error = KubeCluster::connect(&forced).await.err().expect("refused");
    assert!(
        matches!(error, ClusterError::WrongCluster { .. }),
        "{error}"
    );
    let _ = source;
}

#[tokio::test]
async fn delete_removes_members_in_reverse_order_and_the_inventory_but_keeps_the_namespace() {
    let test = TestNamespace::new("deploy-delete").await;
    let env = Env::new(&test.name).await;
    env.apply(app(&test.name), &options()).await.expect("apply");

    let refused = delete::delete(
        &env.cluster,
        &env.set,
        &DeleteOptions {
            components: vec![],
            delete_namespace: false,
            consent: &Confirmation::Absent,
            observer: &Quiet,
            cancel: never(),
        },
    )
    .await;
    assert!(
        matches!(refused, Err(ApplyError::NoConsent { count: 5, .. })),
        "{refused:?}"
    );

    let report = delete::delete(
        &env.cluster,
        &env.set,
        &DeleteOptions {
            components: vec![],
            delete_namespace: false,
            consent: &Confirmation::Given,
            observer: &Quiet,
            cancel: never(),
        },
    )
    .await
    .expect("delete");
    assert_eq!(report.pruned.len(), 5);
    assert!(
        applyset::read(&env.cluster, &env.set)
            .await
            .unwrap()
            .is_none(),
        "the inventory is gone"
    );
    support::eventually(
        "the members to disappear",
        Duration::from_secs(30),
        || async {
            let gone = env.config_map("serving-config").await.is_none()
                && Api::<Secret>::namespaced(env.client.clone(), &test.name)
                    .get_opt("serving-token")
                    .await
                    .unwrap()
                    .is_none();
            gone.then_some(())
        },
    )
    .await;
    let namespace = Api::<Namespace>::all(env.client.clone())
        .get(&test.name)
        .await
        .expect("the namespace stays");
    assert!(namespace.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn rerunning_an_apply_killed_halfway_converges() {
    let test = TestNamespace::new("deploy-killed").await;
    let env = std::sync::Arc::new(Env::new(&test.name).await);
    let objects: Vec<Object> = (0..300)
        .map(|i| {
            config_map(
                &test.name,
                "bulk",
                &format!("bulk-{i:03}"),
                json!({"i": i.to_string()}),
            )
        })
        .chain([deployment(&test.name, "serving", "serving", 1)])
        .collect();

    let running = {
        let env = env.clone();
        let objects = objects.clone();
        tokio::spawn(async move { env.apply(objects, &options()).await })
    };
    support::eventually(
        "the first objects of the apply",
        Duration::from_secs(30),
        || async {
            env.config_map("bulk-000")
                .await
                .or(env.config_map("bulk-299").await)
                .map(|_| ())
        },
    )
    .await;
    running.abort();
    let interrupted = running.await;
    assert!(
        interrupted.is_err(),
        "the apply was interrupted before it finished"
    );

    let report = env
        .apply(objects.clone(), &options())
        .await
        .expect("the re-run");
    assert_eq!(report.applied.len(), 301);
    assert_eq!(Exit::of_diff(&env.diff(objects).await), Exit::Done);
    let inventory = applyset::read(&env.cluster, &env.set)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        inventory.group_kinds,
        ["ConfigMap".to_string(), "Deployment.apps".to_string()].into()
    );
    let parent = Api::<Secret>::namespaced(env.client.clone(), &test.name)
        .get(&env.set.name)
        .await
        .unwrap();
    assert_eq!(
        parent.metadata.annotations.unwrap()[GROUP_KINDS_ANNOTATION],
        "ConfigMap,Deployment.apps"
    );
}

#[tokio::test]
async fn waiting_times_out_listing_what_is_not_ready_and_why() {
    let test = TestNamespace::new("deploy-wait").await;
    let env = Env::new(&test.name).await;
    let mut stuck = deployment(&test.name, "serving", "stuck", 1);
    stuck.value["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"mlkube.io/no-such-node": "true"});
    let mut waiting = options();
    waiting.wait = true;
    waiting.timeout = Duration::from_secs(3);

    let report = env.apply(vec![stuck], &waiting).await.expect("apply");
    assert_eq!(report.not_ready.len(), 1, "{:?}", report.not_ready);
    let not_ready = &report.not_ready[0];
    assert_eq!(not_ready.key.name, "stuck");
    assert!(
        not_ready.reason.contains("0/1 available"),
        "{}",
        not_ready.reason
    );
    assert!(
        not_ready.pods.iter().any(|p| p.contains("not scheduled")),
        "{:?}",
        not_ready.pods
    );
}

#[tokio::test]
async fn validate_lists_every_rejection_with_its_object() {
    let test = TestNamespace::new("deploy-validate").await;
    let env = Env::new(&test.name).await;
    let mut bad_port = service(&test.name, "serving", "bad-port");
    bad_port.value["spec"]["ports"][0]["port"] = json!(700000);
    let mut no_containers = deployment(&test.name, "serving", "no-containers", 1);
    no_containers.value["spec"]["template"]["spec"]["containers"] = json!([]);
    let objects = vec![
        config_map(&test.name, "c", "fine", json!({})),
        bad_port,
        no_containers,
    ];

    let validation = preflight::validate(&env.cluster, &env.plan(objects))
        .await
        .expect("the namespace reads");
    assert_eq!(validation.valid, 1);
    let rejected: Vec<&str> = validation
        .rejected
        .iter()
        .map(|r| r.key.name.as_str())
        .collect();
    assert_eq!(rejected, ["bad-port", "no-containers"]);
    assert!(
        validation.rejected[0]
            .message
            .contains("spec.ports[0].port"),
        "{}",
        validation.rejected[0].message
    );
    assert!(
        env.config_map("fine").await.is_none(),
        "validate writes nothing"
    );
}

/// `count` ConfigMaps and a Deployment that never becomes available (no node matches it), as
/// YAML documents for `--manifest`.
fn slow_manifest(ns: &str, count: usize) -> String {
    let mut stuck = deployment(ns, "serving", "stuck", 1);
    stuck.value["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"mlkube.io/no-such-node": "true"});
    (0..count)
        .map(|i| {
            config_map(
                ns,
                "bulk",
                &format!("bulk-{i:03}"),
                json!({"i": i.to_string()}),
            )
        })
        .chain([stuck])
        .map(|o| serde_yaml::to_string(&o.value).expect("YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[tokio::test]
async fn ctrl_c_during_apply_finishes_what_is_in_flight_reports_it_and_a_rerun_converges() {
    use std::io::{BufRead, BufReader, Read};

    let test = TestNamespace::new("deploy-sigint").await;
    let env = Env::new(&test.name).await;
    let set = ApplySet::new("manifest", &test.name, &test.name);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let manifest = tmp.path().join("objects.yaml");
    std::fs::write(&manifest, slow_manifest(&test.name, 400)).expect("write the manifest");
    let manifest = manifest.to_str().unwrap();

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args([
            "apply",
            &test.name,
            "--manifest",
            manifest,
            "--timeout",
            "5m",
        ])
        .current_dir(tmp.path())
        .env("KUBECONFIG", support::kubeconfig_path())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the mlkube binary starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .expect("the first applied object");
    assert!(first.ends_with(" created\n"), "{first:?}");
    // Ctrl-C, as a terminal sends it: while the ConfigMaps are sent, or during the wait for
    // the Deployment that never becomes available.
    let signal = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(signal.success());
    let mut rest = String::new();
    stdout
        .read_to_string(&mut rest)
        .expect("the rest of stdout");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    let status = child.wait().expect("the apply ends");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("mlkube: interrupted"), "{stderr}");
    let summary = stderr.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with("apply: ") && summary.ends_with("(interrupted)"),
        "{stderr}"
    );

    // Everything written was reported, and the inventory covers it.
    let reported: Vec<String> = first
        .lines()
        .chain(rest.lines())
        .map(str::to_string)
        .collect();
    let written = Api::<ConfigMap>::namespaced(env.client.clone(), &test.name)
        .list(&kube::api::ListParams::default().labels("mlkube.io/component=bulk"))
        .await
        .expect("list ConfigMaps");
    assert!(!written.items.is_empty());
    for config_map in &written.items {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        assert!(
            reported.contains(&format!("ConfigMap {}/{name} created", test.name)),
            "{name} was written but not reported"
        );
        assert_eq!(
            config_map.metadata.labels.as_ref().unwrap()[PART_OF_LABEL],
            set.id
        );
    }
    let inventory = applyset::read(&env.cluster, &set)
        .await
        .unwrap()
        .expect("an inventory");
    assert!(inventory.group_kinds.contains("ConfigMap"), "{inventory:?}");

    let rerun = mlkube(
        tmp.path(),
        &[
            "apply",
            &test.name,
            "--manifest",
            manifest,
            "--no-wait",
            "-o",
            "json",
        ],
    );
    assert_eq!(
        rerun.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    let report: Value = serde_json::from_slice(&rerun.stdout).expect("one JSON document");
    assert_eq!(report["interrupted"], false);
    assert_eq!(report["objects"].as_array().map(Vec::len), Some(401));
    let summary = &report["summary"];
    assert_eq!(
        summary["created"].as_u64().unwrap() + summary["unchanged"].as_u64().unwrap(),
        401,
        "{summary}"
    );
    assert_eq!(summary["unchanged"], written.items.len(), "{summary}");
    let diff = mlkube(tmp.path(), &["diff", &test.name, "--manifest", manifest]);
    assert_eq!(
        diff.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&diff.stdout)
    );
}

#[tokio::test]
async fn validate_before_the_namespace_exists_checks_the_schema_and_diff_summary_lists_each_object()
{
    let test = TestNamespace::new("deploy-outputs").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let absent = format!("{}-absent", test.name);
    let init = mlkube(
        tmp.path(),
        &["init", app.to_str().unwrap(), "--namespace", &absent],
    );
    assert!(init.status.success());

    // Ten objects of the hub are namespaced, and the namespace does not exist yet: the server
    // checks them against its schema, and no further; its admission rule's two are
    // cluster-scoped, and checked in full.
    let validate = mlkube(&app, &["validate", "local", "-c", "notebook-hub"]);
    let stderr = String::from_utf8_lossy(&validate.stderr);
    assert_eq!(validate.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "10 object(s) in namespace `{absent}`, which apply creates, were checked against \
             the server's schema only"
        )),
        "{stderr}"
    );
    let json = mlkube(
        &app,
        &["validate", "local", "-c", "notebook-hub", "-o", "json"],
    );
    assert_eq!(json.status.code(), Some(0));
    let validation: Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    assert_eq!(validation["valid"], 2);
    assert_eq!(validation["schema_only"].as_array().map(Vec::len), Some(10));
    assert_eq!(validation["skipped"].as_array().map(Vec::len), Some(0));

    let summary = mlkube(&app, &["diff", "local", "-c", "notebook-hub", "--summary"]);
    assert_eq!(
        summary.status.code(),
        Some(1),
        "differences exit 1 as a full diff does"
    );
    let stdout = String::from_utf8_lossy(&summary.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        13,
        "the namespace and twelve objects: {stdout}"
    );
    assert!(lines.iter().all(|l| l.starts_with("create ")), "{stdout}");
    assert!(
        lines.contains(
            &format!("create StatefulSet.apps {absent}/notebook-hub (component notebook-hub)")
                .as_str()
        ),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&summary.stderr).contains(
            "12 to create, 0 to update, 0 to prune, 0 unchanged, and the environment's namespace"
        ),
        "the counts follow on stderr, the namespace apart as apply counts it"
    );
}

// Multi-threaded: the gateway the test plays answers while the binary runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_app_deploys_through_the_binary_and_rediffs_clean() {
    let _shared = support::lock_shared_cluster_objects().await;
    let test = TestNamespace::new("deploy-cli").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let init = mlkube(
        tmp.path(),
        &["init", app.to_str().unwrap(), "--namespace", &test.name],
    );
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    // The namespaced components only: cluster-scoped objects are shared with other tests. mnist's
    // InferenceService is served by the controller for this namespace, with a ServingRuntime of
    // its own for TensorFlow and the store's read-only keys, while the test plays the gateway.
    inference_service::install_crds(&test).await;
    let _controller = inference_service::spawn_controller(&test).await;
    let formats = json!([{ "name": "tensorflow", "autoSelect": true }]);
    inference_service::runtime(&test, "tensorflow", formats).await;
    inference_service::store_secret(&test, "object-store-read-credentials").await;
    let gateway = inference_service::keep_accepting(&test, "mnist");
    let only = ["-c", "mnist", "-c", "notebook-hub"];
    let with = |verb: &[&str]| -> Vec<String> {
        verb.iter().chain(&only).map(|s| s.to_string()).collect()
    };
    let run =
        |args: Vec<String>| mlkube(&app, &args.iter().map(String::as_str).collect::<Vec<_>>());

    let fresh = run(with(&["diff", "local"]));
    assert_eq!(
        fresh.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&fresh.stderr)
    );
    let text = String::from_utf8_lossy(&fresh.stdout);
    assert!(
        text.contains(&format!(
            "# create InferenceService.serving.kserve.io {}/mnist",
            test.name
        )),
        "{text}"
    );

    let applied = run(with(&["apply", "local", "--timeout", "90s"]));
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert_eq!(applied.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(
        stdout.contains(&format!(
            "InferenceService.serving.kserve.io {}/mnist created",
            test.name
        )),
        "{stdout}"
    );

    let clean = run(with(&["diff", "local"]));
    let stderr = String::from_utf8_lossy(&clean.stderr);
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{stderr}\n{}",
        String::from_utf8_lossy(&clean.stdout)
    );
    assert!(clean.stdout.is_empty());
    assert!(
        // mnist's ServiceAccount and InferenceService, and the hub's 12 objects.
        stderr.contains("0 to create, 0 to update, 0 to prune, 14 unchanged"),
        "{stderr}"
    );
    let json = run(with(&["diff", "local", "-o", "json"]));
    let data: Value = serde_json::from_slice(&json.stdout).expect("diff -o json prints JSON");
    assert_eq!(data["summary"]["unchanged"], 14);

    // Deleting needs a terminal to ask on, or --yes.
    let refused = run(vec![
        "delete".into(),
        "local".into(),
        "-c".into(),
        "mnist".into(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    let deleted = run(vec![
        "delete".into(),
        "local".into(),
        "-c".into(),
        "mnist".into(),
        "--yes".into(),
    ]);
    assert_eq!(
        deleted.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    let served = Api::<InferenceService>::namespaced(support::client().await, &test.name);
    support::eventually(
        "InferenceService mnist to be deleted",
        Duration::from_secs(30),
        || async {
            served
                .get_opt("mnist")
                .await
                .ok()
                .flatten()
                .is_none()
                .then_some(())
        },
    )
    .await;
    gateway.abort();
    let deployments = Api::<Deployment>::namespaced(support::client().await, &test.name);
    assert!(deployments.get_opt("notebook-hub").await.is_ok());
}

// ---------------------------------------------------------------------------------------------
// ownership: issue 11's reproductions, each refused or shared as docs/workflow.md says

fn storage_class(name: &str) -> Object {
    Object {
        component: "volumes".into(),
        value: json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "mlkube",
                                                  "mlkube.io/component": "volumes"}},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}),
    }
}

/// A CRD as the renderer leaves it: cluster-scoped, so without app or environment labels.
fn shared_crd(group: &str) -> Object {
    let mut object = crd(group);
    object.value["metadata"]["labels"] =
        json!({"app.kubernetes.io/managed-by": "mlkube", "mlkube.io/component": "widgets"});
    object
}

fn delete_all() -> DeleteOptions<'static> {
    DeleteOptions {
        components: vec![],
        delete_namespace: false,
        consent: &Confirmation::Given,
        observer: &Quiet,
        cancel: never(),
    }
}

#[tokio::test]
async fn two_environments_and_two_apps_share_cluster_scoped_objects_without_flip_flop() {
    let first = TestNamespace::new("deploy-shared-a").await;
    let second = TestNamespace::new("deploy-shared-b").await;
    let class = format!("kvc-{}", first.name);
    let group = format!("{}.shared.mlkube.test", first.name);
    let render = |ns: &str| {
        vec![
            config_map(ns, "volumes", "settings", json!({"a": "1"})),
            storage_class(&class),
            shared_crd(&group),
        ]
    };
    let local = Env::new(&first.name).await;
    // Another environment of the same app, and an environment of another app.
    let other_env = Env {
        set: ApplySet::new("t", "b", &second.name),
        ..Env::new(&second.name).await
    };
    let other_app = Env {
        set: ApplySet::new("another-app", "local", &second.name),
        ..Env::new(&second.name).await
    };
    // Applied in turns, each diffs clean after its own apply and after the other's.
    let turns = [
        (&local, &first.name),
        (&other_env, &second.name),
        (&local, &first.name),
        (&other_env, &second.name),
    ];
    for (turn, (applying, ns)) in turns.into_iter().enumerate() {
        applying
            .apply(render(ns), &options())
            .await
            .expect("each environment applies cleanly");
        let both = [(&local, &first.name), (&other_env, &second.name)];
        let checked = if turn == 0 { &both[..1] } else { &both[..] };
        for (env, ns) in checked {
            let changes = env.diff(render(ns)).await;
            assert_eq!(
                Exit::of_diff(&changes),
                Exit::Done,
                "{}: {}\n{}",
                env.set.env,
                changes.summary(),
                diff::render_text(&changes, false)
            );
        }
    }
    // The other app renders the same shared objects (its namespaced ones differ by name).
    let other_app_objects = vec![
        config_map(
            &second.name,
            "volumes",
            "other-app-settings",
            json!({"b": "2"}),
        ),
        storage_class(&class),
        shared_crd(&group),
    ];
    other_app
        .apply(other_app_objects.clone(), &options())
        .await
        .expect("another app shares them too");
    assert_eq!(
        Exit::of_diff(&local.diff(render(&first.name)).await),
        Exit::Done
    );

    let classes = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(local.client.clone());
    delete::delete(&other_env.cluster, &other_env.set, &delete_all())
        .await
        .expect("delete the other environment");
    delete::delete(&other_app.cluster, &other_app.set, &delete_all())
        .await
        .expect("delete the other app");
    assert!(
        classes.get_opt(&class).await.unwrap().is_some(),
        "local still renders the StorageClass"
    );
    let changes = local.diff(render(&first.name)).await;
    assert_eq!(
        Exit::of_diff(&changes),
        Exit::Done,
        "{}",
        diff::render_text(&changes, false)
    );

    let report = delete::delete(&local.cluster, &local.set, &delete_all())
        .await
        .expect("delete local, the last user");
    assert!(report.pruned.iter().any(|k| k.name == class), "{report:?}");
    support::eventually(
        "the StorageClass to go",
        Duration::from_secs(30),
        || async {
            classes
                .get_opt(&class)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    let crds = Api::<CustomResourceDefinition>::all(local.client.clone());
    assert!(
        crds.get_opt(&format!("widgets.{group}"))
            .await
            .unwrap()
            .is_some(),
        "a CRD is never deleted"
    );
    crds.delete(&format!("widgets.{group}"), &DeleteParams::default())
        .await
        .expect("clean up the CRD");
}

#[tokio::test]
async fn an_environment_on_another_ones_namespace_is_refused_and_its_delete_removes_nothing() {
    let test = TestNamespace::new("deploy-dup").await;
    let local = Env::new(&test.name).await;
    local
        .apply(app(&test.name), &options())
        .await
        .expect("local");
    let dup = Env {
        set: ApplySet::new("t", "dup", &test.name),
        ..Env::new(&test.name).await
    };

    let refused = dup.apply(app(&test.name), &options()).await;
    let Err(ApplyError::NotOurs { count: 5, details }) = &refused else {
        panic!("expected a refusal naming local's objects, got {refused:?}");
    };
    assert!(
        details.contains(&format!(
            "ConfigMap {}/serving-config: owned by t/{}",
            test.name, test.name
        )),
        "{details}"
    );
    let changes = dup.diff(app(&test.name)).await;
    assert_eq!(Exit::of_diff(&changes), Exit::Differences);
    assert!(
        diff::render_text(&changes, false).contains("# owned by t/"),
        "{}",
        diff::render_text(&changes, false)
    );

    let report = delete::delete(&dup.cluster, &dup.set, &delete_all())
        .await
        .expect("delete dup");
    assert!(report.pruned.is_empty(), "{report:?}");
    assert!(local.config_map("serving-config").await.is_some());
    assert_eq!(
        Exit::of_diff(&local.diff(app(&test.name)).await),
        Exit::Done
    );
}

#[tokio::test]
async fn an_object_someone_else_created_is_refused_then_adopted_and_then_prunable() {
    let test = TestNamespace::new("deploy-adopt").await;
    let env = Env::new(&test.name).await;
    env.apply(
        vec![config_map(&test.name, "a", "mine", json!({"k": "v"}))],
        &options(),
    )
    .await
    .expect("the first apply");
    let preexisting: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "preexisting"}, "data": {"k": "theirs"}}))
    .unwrap();
    Api::<ConfigMap>::namespaced(env.client.clone(), &test.name)
        .create(&kube::api::PostParams::default(), &preexisting)
        .await
        .expect("someone else's ConfigMap");
    let with_it = vec![
        config_map(&test.name, "a", "mine", json!({"k": "v"})),
        config_map(&test.name, "a", "preexisting", json!({"k": "theirs"})),
    ];

    let changes = env.diff(with_it.clone()).await;
    assert_eq!(Exit::of_diff(&changes), Exit::Differences);
    assert!(diff::render_text(&changes, false).contains("# exists, not ours"));
    let refused = env.apply(with_it.clone(), &options()).await;
    assert!(
        matches!(refused, Err(ApplyError::NotOurs { count: 1, .. })),
        "{refused:?}"
    );
    let untouched = env.config_map("preexisting").await.unwrap();
    assert!(
        !untouched
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(PART_OF_LABEL),
        "nothing was written"
    );

    let mut adopting = options();
    adopting.adopt = true;
    let report = env.apply(with_it, &adopting).await.expect("apply --adopt");
    assert_eq!(report.adopted.len(), 1);

    let mut pruning = options();
    pruning.prune = true;
    let report = env
        .apply(
            vec![config_map(&test.name, "a", "mine", json!({"k": "v"}))],
            &pruning,
        )
        .await
        .expect("prune");
    assert_eq!(report.pruned.len(), 1, "{report:?}");
    assert!(env.config_map("preexisting").await.is_none());
}

#[tokio::test]
async fn two_apps_of_one_name_on_one_namespace_never_share_an_applyset() {
    let test = TestNamespace::new("deploy-same-name").await;
    let x = Env {
        set: ApplySet::new("platform", "local", &test.name).with_app_id(Some("x-app")),
        ..Env::new(&test.name).await
    };
    let y = Env {
        set: ApplySet::new("platform", "local", &test.name).with_app_id(Some("y-app")),
        ..Env::new(&test.name).await
    };
    x.apply(
        vec![config_map(&test.name, "a", "x-config", json!({"k": "x"}))],
        &options(),
    )
    .await
    .expect("app x");
    let mut pruning = options();
    pruning.prune = true;
    let refused = y
        .apply(
            vec![config_map(&test.name, "a", "y-config", json!({"k": "y"}))],
            &pruning,
        )
        .await
        .expect_err("app y is refused");
    let message = refused.to_string();
    assert!(
        message.contains("x-app") && message.contains("y-app"),
        "{message}"
    );
    assert!(
        x.config_map("x-config").await.is_some(),
        "nothing of x was pruned"
    );
    assert!(
        y.config_map("y-config").await.is_none(),
        "nothing of y was written"
    );
}

#[tokio::test]
async fn a_dry_run_reports_what_the_apply_then_does_and_both_agree_with_the_diff() {
    let test = TestNamespace::new("deploy-dry-truth").await;
    let env = Env::new(&test.name).await;
    env.apply(app(&test.name), &options()).await.expect("apply");
    let mut changed: Vec<Object> = app(&test.name)
        .into_iter()
        .filter(|o| o.value["kind"] != "Deployment")
        .collect();
    changed.push(deployment(&test.name, "serving", "serving", 2));
    changed.push(config_map(
        &test.name,
        "serving",
        "added",
        json!({"x": "1"}),
    ));

    let summary = env.diff(changed.clone()).await.summary();
    assert_eq!(
        (summary.create, summary.update, summary.unchanged),
        (1, 1, 4),
        "{summary}"
    );
    let outcomes = |report: &ApplyReport| {
        let mut outcomes: Vec<(String, Outcome)> = report
            .applied
            .iter()
            .map(|(key, outcome)| (key.to_string(), *outcome))
            .collect();
        outcomes.sort_by(|a, b| a.0.cmp(&b.0));
        outcomes
    };
    let mut dry = options();
    dry.dry_run = true;
    let dry_run = env.apply(changed.clone(), &dry).await.expect("the dry run");
    let real = env.apply(changed, &options()).await.expect("the apply");
    assert_eq!(outcomes(&dry_run), outcomes(&real));
    let count = |outcome| real.applied.iter().filter(|(_, o)| *o == outcome).count();
    assert_eq!(
        (
            count(Outcome::Created),
            count(Outcome::Configured),
            count(Outcome::Unchanged)
        ),
        (summary.create, summary.update, summary.unchanged)
    );
}
