//! Shared cluster-scoped objects, `delete` and what a plain `apply` leaves behind, through the
//! binary against the real control plane (issue 24).
//!
//! Each test has its own app(s) and namespaces; a test's CustomResourceDefinition has a group of
//! its own, so tests never share a kind. The one test that renders a shipped component
//! (the volume controller, whose CRD other tests apply too) holds the shared-objects lock.

use std::path::{Path, PathBuf};
use std::process::Output;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::Value;

use crate::support::{
    self, AppsCleanup, CrdCleanup, TestNamespace, lock_shared_cluster_objects, mlkube,
};

/// A component that renders one CRD of its own group, with an annotation from a param, so an
/// environment can change a field of it.
const WIDGETS: &str = r#"local component = import 'mlkube/component.libsonnet';
local group = component.params.group;
[{
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: {
    name: 'widgets.' + group,
    annotations: { 'example.com/revision': std.toString(component.params.revision) },
  },
  spec: {
    group: group,
    scope: 'Namespaced',
    names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [{ name: 'v1', served: true, storage: true,
                 schema: { openAPIV3Schema: { type: 'object' } } }],
  },
}]
"#;

/// A component that renders one ConfigMap named after it.
fn config_component(name: &str) -> String {
    format!(
        "[{{ apiVersion: 'v1', kind: 'ConfigMap', metadata: {{ name: '{name}' }}, \
         data: {{ k: 'v' }} }}]\n"
    )
}

/// Run the binary in `app` and insist it succeeds; its stderr.
fn ok(app: &Path, args: &[&str]) -> String {
    let output = mlkube(app, args);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(
        output.status.code(),
        Some(0),
        "mlkube {args:?} failed:\n{stderr}\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// `init --empty` of an app named `name` in `parent`, its `local` environment on `local` and
/// its `dev` environment on `dev`.
fn init_app(parent: &Path, name: &str, local: &str, dev: &str) -> PathBuf {
    let app = parent.join(name);
    ok(
        parent,
        &[
            "init",
            app.to_str().expect("a UTF-8 path"),
            "--empty",
            "--namespace",
            local,
        ],
    );
    ok(&app, &["env", "set", "dev", "--namespace", dev]);
    app
}

/// The widgets component, of `group`, at revision 1.
fn add_widgets(app: &Path, group: &str) {
    std::fs::write(app.join("components/widgets.jsonnet"), WIDGETS).expect("write the component");
    ok(
        app,
        &["param", "set", "widgets", "group", group, "--as-string"],
    );
    ok(app, &["param", "set", "widgets", "revision", "1"]);
}

async fn crd(name: &str) -> Value {
    let crds = Api::<CustomResourceDefinition>::all(support::client().await);
    let crd = crds.get(name).await.expect("the CRD exists");
    serde_json::to_value(crd).expect("a CRD is JSON")
}

/// The `used-by.mlkube.io/` claims and the `mlkube@` field managers on an object.
fn claims_and_managers(object: &Value) -> (Vec<String>, Vec<String>) {
    let claims = object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("used-by.mlkube.io/"))
        .map(|(k, _)| k.clone())
        .collect();
    let managers = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .filter(|m| m.starts_with("mlkube@"))
        .map(str::to_string)
        .collect();
    (claims, managers)
}

#[tokio::test]
async fn delete_releases_the_claim_on_a_shared_crd_so_the_other_environment_changes_it_freely() {
    let local = TestNamespace::new("shared-release-a").await;
    let dev = TestNamespace::new("shared-release-b").await;
    let group = format!("{}.release.mlkube.test", local.name);
    let name = format!("widgets.{group}");
    let _cleanup = CrdCleanup(name.clone());
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(tmp.path(), "platform", &local.name, &dev.name);
    add_widgets(&app, &group);
    ok(&app, &["apply", "local"]);
    ok(&app, &["apply", "dev"]);
    let (claims, managers) = claims_and_managers(&crd(&name).await);
    assert_eq!((claims.len(), managers.len()), (2, 2), "both claim it");

    let deleted = ok(&app, &["delete", "local", "--yes"]);
    assert!(
        deleted.contains(&format!(
            "released CustomResourceDefinition.apiextensions.k8s.io {name}: other environments \
             still use it; only this environment's claim was removed"
        )),
        "{deleted}"
    );
    assert!(
        !deleted.contains("no longer rendered") && !deleted.contains("nothing applied"),
        "{deleted}"
    );
    let (claims, managers) = claims_and_managers(&crd(&name).await);
    assert_eq!(
        (claims.len(), managers.len()),
        (1, 1),
        "local's claim is gone"
    );

    // dev changes a field both environments had set: no conflict with local's old manager.
    ok(
        &app,
        &["param", "set", "widgets", "revision", "2", "--env", "dev"],
    );
    ok(&app, &["apply", "dev"]);
    assert_eq!(
        crd(&name).await["metadata"]["annotations"]["example.com/revision"],
        "2"
    );

    // The last one out releases its claim too; the CRD stays, unclaimed.
    let deleted = ok(&app, &["delete", "dev", "--yes"]);
    assert!(
        deleted.contains(&format!(
            "released CustomResourceDefinition.apiextensions.k8s.io {name}: no environment uses \
             it any more"
        )) && deleted.contains("never deleted"),
        "{deleted}"
    );
    let left = crd(&name).await;
    assert_eq!(
        claims_and_managers(&left),
        (vec![], vec![]),
        "no claim and no mlkube manager is left on the CRD"
    );
    assert_eq!(left["metadata"]["annotations"]["example.com/revision"], "2");

    // Another environment takes it up again, and sets its own revision without a conflict.
    ok(&app, &["param", "set", "widgets", "revision", "3"]);
    ok(&app, &["apply", "local"]);
    let (claims, _) = claims_and_managers(&crd(&name).await);
    assert_eq!(claims.len(), 1);
    ok(&app, &["delete", "local", "--yes"]);
}

/// What `apply -o json` (or its dry run) says it did to `name`.
fn applied_outcome(output: &Output, name: &str) -> String {
    let data: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("apply -o json printed no JSON ({e}):\n{}", stderr(output)));
    data["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["name"] == name)
        .map(|o| o["outcome"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("{name} is not in {data:#}"))
}

#[tokio::test]
async fn after_delete_a_new_apply_its_dry_run_and_diff_agree_about_the_crd() {
    let local = TestNamespace::new("shared-agree-a").await;
    let dev = TestNamespace::new("shared-agree-b").await;
    let group = format!("{}.agree.mlkube.test", local.name);
    let name = format!("widgets.{group}");
    let _cleanup = CrdCleanup(name.clone());
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(tmp.path(), "platform", &local.name, &dev.name);
    add_widgets(&app, &group);
    ok(&app, &["apply", "local"]);
    ok(&app, &["apply", "dev"]);
    ok(&app, &["delete", "local", "--yes"]);

    let diff = mlkube(&app, &["diff", "local", "-o", "json"]);
    let data: Value = serde_json::from_slice(&diff.stdout)
        .unwrap_or_else(|e| panic!("diff -o json printed no JSON ({e}):\n{}", stderr(&diff)));
    let action = data["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name.as_str())
        .map(|c| c["action"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("{name} is not in {data:#}"));
    let dry_run = applied_outcome(
        &mlkube(&app, &["apply", "local", "--dry-run", "-o", "json"]),
        &name,
    );
    let applied = applied_outcome(&mlkube(&app, &["apply", "local", "-o", "json"]), &name);
    let as_outcome = match action.as_str() {
        "create" => "created",
        "update" => "configured",
        "unchanged" => "unchanged",
        other => panic!("diff says {other} for {name}"),
    };
    assert_eq!(
        (as_outcome, dry_run.as_str()),
        (applied.as_str(), applied.as_str()),
        "diff, the dry run and the apply agree"
    );
    // Then all three see nothing to do.
    let again = mlkube(&app, &["apply", "local", "--dry-run", "-o", "json"]);
    assert_eq!(applied_outcome(&again, &name), "unchanged");
    assert_eq!(mlkube(&app, &["diff", "local"]).status.code(), Some(0));
    ok(&app, &["delete", "local", "--yes"]);
    ok(&app, &["delete", "dev", "--yes"]);
}

#[tokio::test]
async fn two_apps_whose_volume_controllers_have_other_names_share_its_crd_and_storage_class() {
    let _shared = lock_shared_cluster_objects().await;
    let first = TestNamespace::new("shared-apps-a").await;
    let second = TestNamespace::new("shared-apps-b").await;
    let class = format!("kvc-{}", first.name);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let one = init_app(
        tmp.path(),
        "one",
        &first.name,
        &format!("{}-dev", first.name),
    );
    let two = init_app(
        tmp.path(),
        "two",
        &second.name,
        &format!("{}-dev", second.name),
    );
    let storage_class = format!("storageClassName={class}");
    for (app, component) in [(&one, "volumes"), (&two, "kvc")] {
        ok(
            app,
            &[
                "component",
                "add",
                "volume-controller",
                component,
                "--param",
                &storage_class,
            ],
        );
    }
    let _cleanup = AppsCleanup(vec![one.clone(), two.clone()]);

    ok(&one, &["apply", "local", "--no-wait"]);
    ok(&two, &["apply", "local", "--no-wait"]);
    for app in [&one, &two] {
        let diff = mlkube(app, &["diff", "local"]);
        assert_eq!(diff.status.code(), Some(0), "{}", stderr(&diff));
    }
    // Forcing takes nothing from the other app: there is nothing of its own to take.
    ok(&two, &["apply", "local", "--no-wait", "--force-conflicts"]);
    let diff = mlkube(&one, &["diff", "local"]);
    assert_eq!(diff.status.code(), Some(0), "{}", stderr(&diff));

    let classes = Api::<StorageClass>::all(first.client.clone());
    let live = classes.get(&class).await.expect("the StorageClass");
    let labels = live.metadata.labels.unwrap_or_default();
    let own: Vec<(&String, &String)> = labels
        .iter()
        .filter(|(k, _)| !k.starts_with("used-by.mlkube.io/"))
        .collect();
    assert_eq!(
        own,
        [
            (
                &"app.kubernetes.io/managed-by".to_string(),
                &"mlkube".to_string()
            ),
            (
                &"app.kubernetes.io/name".to_string(),
                &"volume-controller".to_string()
            ),
        ],
        "a shared object's labels name neither app nor component"
    );
    let claims: Vec<&String> = labels
        .iter()
        .filter(|(k, _)| k.starts_with("used-by.mlkube.io/"))
        .map(|(_, component)| component)
        .collect();
    assert_eq!(claims.len(), 2, "{claims:?}");
    assert!(claims.contains(&&"volumes".to_string()) && claims.contains(&&"kvc".to_string()));
}

/// Deletes the apps' `local` environments when dropped: their cluster-scoped objects outlive
/// the test namespaces otherwise.
#[tokio::test]
async fn an_app_without_an_id_is_refused_the_inventory_of_another_app_of_its_name() {
    let test = TestNamespace::new("shared-no-id").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir_all(tmp.path().join("new")).unwrap();
    std::fs::create_dir_all(tmp.path().join("old")).unwrap();
    let dev = format!("{}-dev", test.name);
    let new = init_app(&tmp.path().join("new"), "platform", &test.name, &dev);
    let old = init_app(&tmp.path().join("old"), "platform", &test.name, &dev);
    // The older app was made before ids: no `id` in its app.yaml.
    let file = old.join("app.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("id:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, without).unwrap();
    let new_id = std::fs::read_to_string(new.join("app.yaml"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("id: ").map(str::to_string))
        .expect("init gives the app an id");
    for (app, component) in [(&new, "new-config"), (&old, "old-config")] {
        std::fs::write(
            app.join(format!("components/{component}.jsonnet")),
            config_component(component),
        )
        .unwrap();
    }
    ok(&new, &["apply", "local"]);

    let refused = mlkube(&old, &["apply", "local", "--prune", "--yes"]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains(&new_id), "{message}");
    assert!(
        message.contains("hint:") && message.contains("id: "),
        "{message}"
    );
    let configs =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(test.client.clone(), &test.name);
    assert!(configs.get_opt("new-config").await.unwrap().is_some());
    assert!(configs.get_opt("old-config").await.unwrap().is_none());
}

#[tokio::test]
async fn status_after_delete_says_the_environment_was_deleted_and_when() {
    let test = TestNamespace::new("shared-status").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(
        tmp.path(),
        "platform",
        &test.name,
        &format!("{}-dev", test.name),
    );
    std::fs::write(
        app.join("components/settings.jsonnet"),
        config_component("settings"),
    )
    .unwrap();
    ok(&app, &["apply", "local"]);
    ok(&app, &["delete", "local", "--yes"]);

    let status = mlkube(&app, &["status", "local"]);
    let message = stderr(&status);
    assert_eq!(status.status.code(), Some(4), "{message}");
    assert!(
        message.contains("environment `local` was deleted from this cluster at 20"),
        "{message}"
    );
    assert!(!message.contains("never applied"), "{message}");

    // Applied again, it is an environment like any other.
    ok(&app, &["apply", "local"]);
    let status = mlkube(&app, &["status", "local"]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
}

/// The member `name` of `mlkube status <env> -o json`.
fn status_member(app: &Path, env: &str, name: &str) -> Value {
    let output = mlkube(app, &["status", env, "-o", "json"]);
    let data: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("status -o json printed no JSON ({e}):\n{}", stderr(&output)));
    data["members"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not in {data:#}"))
}

#[tokio::test]
async fn status_names_the_environment_that_holds_a_shared_crd_this_one_does_not_claim_yet() {
    let local = TestNamespace::new("shared-held-a").await;
    let dev = TestNamespace::new("shared-held-b").await;
    let group = format!("{}.held.mlkube.test", local.name);
    let name = format!("widgets.{group}");
    let _cleanup = CrdCleanup(name.clone());
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(tmp.path(), "platform", &local.name, &dev.name);
    std::fs::write(
        app.join("components/settings.jsonnet"),
        config_component("settings"),
    )
    .unwrap();
    // dev was applied before the app rendered the CRD; local since.
    ok(&app, &["apply", "dev"]);
    add_widgets(&app, &group);
    ok(&app, &["apply", "local"]);

    let held = status_member(&app, "dev", &name);
    assert_eq!(
        (&held["state"], &held["drift"]),
        (&Value::from("missing"), &Value::from("missing")),
        "{held:#}"
    );
    assert_eq!(
        held["reason"],
        "on the cluster, shared with platform/local, but this environment holds no claim on it",
        "{held:#}"
    );
    assert_eq!(
        held["drift_reason"],
        "`mlkube apply` claims it for this environment too"
    );

    ok(&app, &["apply", "dev"]);
    let claimed = status_member(&app, "dev", &name);
    assert_eq!(claimed["state"], "healthy", "{claimed:#}");
    ok(&app, &["delete", "local", "--yes"]);
    ok(&app, &["delete", "dev", "--yes"]);
}

#[tokio::test]
async fn a_plain_apply_after_component_rm_says_how_many_objects_it_left_and_how_to_prune() {
    let test = TestNamespace::new("shared-left").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(
        tmp.path(),
        "platform",
        &test.name,
        &format!("{}-dev", test.name),
    );
    for component in ["kept", "gone", "also-gone"] {
        std::fs::write(
            app.join(format!("components/{component}.jsonnet")),
            config_component(component),
        )
        .unwrap();
    }
    let first = ok(&app, &["apply", "local"]);
    assert!(!first.contains("no longer rendered"), "{first}");
    ok(&app, &["component", "rm", "gone"]);
    ok(&app, &["component", "rm", "also-gone"]);

    let applied = ok(&app, &["apply", "local"]);
    let lines: Vec<&str> = applied
        .lines()
        .filter(|l| l.contains("no longer rendered"))
        .collect();
    assert_eq!(
        lines,
        [
            "mlkube: 2 object(s) no longer rendered were left on the cluster; `apply --prune` \
          removes them"
        ],
        "{applied}"
    );
    let pruned = ok(&app, &["apply", "local", "--prune", "--yes"]);
    assert!(pruned.contains("2 pruned"), "{pruned}");
    let again = ok(&app, &["apply", "local"]);
    assert!(!again.contains("no longer rendered"), "{again}");
}
