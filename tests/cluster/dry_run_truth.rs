//! `apply --dry-run` and `validate` tell what the real apply will find, also of the objects the
//! server cannot judge before the apply created what they need, through the binary against the
//! real control plane: objects in a namespace the apply creates (checked by the server against
//! its schema, and by mlkube along the server's OpenAPI schema), and custom objects whose
//! CustomResourceDefinition comes with the same apply (checked by mlkube against that CRD).
//!
//! Each test has its own app, namespaces and CRD group.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::{Api, Client};

use crate::support::{self, CrdCleanup, TestNamespace, mlkube};

/// The exit code and stderr of `mlkube <args>` in `app`.
fn run(app: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = mlkube(app, args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// Run the binary in `app` and insist it succeeds; its stderr.
fn ok(app: &Path, args: &[&str]) -> String {
    let (code, stderr) = run(app, args);
    assert_eq!(code, Some(0), "mlkube {args:?} failed:\n{stderr}");
    stderr
}

/// `init --empty` of an app in `parent` whose `local` environment's namespace is `namespace`.
fn init_app(parent: &Path, namespace: &str) -> PathBuf {
    let app = parent.join("app");
    let path = app.to_str().expect("a UTF-8 path");
    ok(parent, &["init", path, "--empty", "--namespace", namespace]);
    app
}

/// The one line of `stderr` that names `object`.
fn line_naming<'s>(stderr: &'s str, object: &str) -> &'s str {
    stderr
        .lines()
        .find(|l| l.contains(object))
        .unwrap_or_else(|| panic!("no line names {object}:\n{stderr}"))
}

// ---------------------------------------------------------------------------------------------
// objects in a namespace the apply creates

/// A Deployment with a misspelt field (`spec.replica`), one whose container has no name, and a
/// ConfigMap that is fine.
const TYPOS: &str = r#"
local component = import 'mlkube/component.libsonnet';
local labels = { app: 'typos' };
local deployment(name, spec, container) = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: name, namespace: component.env.namespace },
  spec: spec {
    selector: { matchLabels: labels },
    template: { metadata: { labels: labels }, spec: { containers: [container { image: 'busybox' }] } },
  },
};
[
  deployment('misspelt', { replica: 2 }, { name: 'c' }),
  deployment('unnamed', {}, {}),
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fine', namespace: component.env.namespace }, data: { k: 'v' } },
]
"#;

/// The same objects, corrected.
const CORRECTED: &str = r#"
local component = import 'mlkube/component.libsonnet';
local labels = { app: 'typos' };
[
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'named', namespace: component.env.namespace },
    spec: {
      replicas: 2,
      selector: { matchLabels: labels },
      template: { metadata: { labels: labels }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    },
  },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fine', namespace: component.env.namespace }, data: { k: 'v' } },
]
"#;

#[tokio::test]
async fn a_dry_run_names_a_misspelt_field_and_a_missing_one_in_a_namespace_the_apply_creates() {
    let test = TestNamespace::new("truth-new-ns").await;
    // The environment's namespace does not exist yet (removed on drop all the same).
    let fresh = TestNamespace {
        client: test.client.clone(),
        name: format!("{}-new", test.name),
    };
    let ns = fresh.name.as_str();
    let namespaces = Api::<Namespace>::all(test.client.clone());
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(tmp.path(), ns);
    std::fs::write(app.join("components/typos.jsonnet"), TYPOS).expect("write the component");

    let (code, dry) = run(&app, &["apply", "local", "--dry-run"]);
    assert_eq!(code, Some(2), "{dry}");
    assert!(
        dry.contains("the server rejected 1 object(s) in a dry run, and 1 do not match their schema; nothing was written:"),
        "{dry}"
    );
    let misspelt = line_naming(&dry, &format!("Deployment.apps {ns}/misspelt:"));
    assert!(
        misspelt.contains(".spec.replica: field not declared in schema"),
        "{dry}"
    );
    let unnamed = line_naming(&dry, &format!("Deployment.apps {ns}/unnamed:"));
    let required = "Deployment.apps \"unnamed\" is invalid: \
                    spec.template.spec.containers[0].name: Required value";
    assert!(
        unnamed.ends_with(&format!(
            "{required} (checked against the server's OpenAPI schema)"
        )),
        "{dry}"
    );
    assert!(!dry.contains("/fine:"), "the ConfigMap is fine: {dry}");
    assert!(
        namespaces.get_opt(ns).await.expect("get").is_none(),
        "the dry run wrote nothing"
    );

    // The real apply finds the same once it has created the namespace, in the same words.
    let (code, real) = run(&app, &["apply", "local"]);
    assert_eq!(code, Some(2), "{real}");
    let misspelt = line_naming(&real, &format!("Deployment.apps {ns}/misspelt:"));
    assert!(
        misspelt.contains(".spec.replica: field not declared in schema"),
        "{real}"
    );
    let unnamed = line_naming(&real, &format!("Deployment.apps {ns}/unnamed:"));
    assert!(unnamed.ends_with(required), "{real}");
    namespaces
        .delete(ns, &DeleteParams::background())
        .await
        .expect("delete the namespace the apply created");
    support::eventually(
        "the namespace to be gone",
        std::time::Duration::from_secs(60),
        || async {
            namespaces
                .get_opt(ns)
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;

    // Corrected, the dry run passes and says how far it could check.
    std::fs::write(app.join("components/typos.jsonnet"), CORRECTED).expect("write the component");
    let dry = ok(&app, &["apply", "local", "--dry-run"]);
    assert!(
        dry.contains(&format!(
            "mlkube: 2 object(s) in namespace `{ns}`, which apply creates, were checked against \
             the server's schema only (fields, types, required fields)"
        )),
        "{dry}"
    );
    assert!(!dry.contains("not checked"), "{dry}");
    assert!(namespaces.get_opt(ns).await.expect("get").is_none());
}

// ---------------------------------------------------------------------------------------------
// objects of a CRD that comes with the apply

/// A CRD of the group param `group` whose Widgets require an integer `size` and allow two
/// modes.
const WIDGET_CRD: &str = r#"
local component = import 'mlkube/component.libsonnet';
local group = component.params.group;
[{
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'widgets.' + group },
  spec: {
    group: group,
    scope: 'Namespaced',
    names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [{
      name: 'v1', served: true, storage: true,
      schema: { openAPIV3Schema: {
        type: 'object',
        properties: { spec: {
          type: 'object',
          required: ['size'],
          properties: { size: { type: 'integer' }, mode: { type: 'string', enum: ['fast', 'slow'] } },
        } },
      } },
    }],
  },
}]
"#;

/// A Widget whose size is param `size`.
const WIDGET: &str = r#"
local component = import 'mlkube/component.libsonnet';
[{
  apiVersion: component.params.group + '/v1',
  kind: 'Widget',
  metadata: { name: 'w', namespace: component.env.namespace },
  spec: { size: component.params.size, mode: 'fast' },
}]
"#;

/// The Widget `w` in `ns`, of `group`.
async fn widget(client: &Client, group: &str, ns: &str) -> Option<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", "Widget"));
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource)
        .get_opt("w")
        .await
        .expect("get the Widget")
}

#[tokio::test]
async fn an_object_of_a_crd_the_apply_brings_is_checked_against_that_crd_before_it_exists() {
    let test = TestNamespace::new("truth-crd").await;
    let ns = test.name.as_str();
    let group = format!("{ns}.truth.mlkube.test");
    let crd_name = format!("widgets.{group}");
    let _cleanup = CrdCleanup(crd_name.clone());
    let crds = Api::<CustomResourceDefinition>::all(test.client.clone());
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = init_app(tmp.path(), ns);
    std::fs::write(app.join("components/widget-crd.jsonnet"), WIDGET_CRD).expect("write");
    std::fs::write(app.join("components/widget.jsonnet"), WIDGET).expect("write");
    for component in ["widget-crd", "widget"] {
        let set = ["param", "set", component, "group", &group, "--as-string"];
        ok(&app, &set);
    }
    ok(
        &app,
        &["param", "set", "widget", "size", "two", "--as-string"],
    );

    let wrong_type = "Widget.".to_owned()
        + &group
        + " \"w\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be \
           of type integer: \"string\" (checked against the CustomResourceDefinition in the plan)";
    for verb in [&["validate", "local"][..], &["apply", "local", "--dry-run"]] {
        let (code, stderr) = run(&app, verb);
        assert_eq!(code, Some(2), "{verb:?}: {stderr}");
        let line = line_naming(&stderr, &format!("Widget.{group} {ns}/w"));
        assert!(line.ends_with(&wrong_type), "{verb:?}: {stderr}");
        assert!(
            crds.get_opt(&crd_name).await.expect("get").is_none(),
            "{verb:?} wrote nothing"
        );
    }

    ok(&app, &["param", "set", "widget", "size", "3"]);
    let validated = ok(&app, &["validate", "local"]);
    assert!(
        validated.contains(
            "1 object(s) were checked against the CustomResourceDefinition in the plan only \
             (fields, types, required fields, allowed values)"
        ),
        "{validated}"
    );
    let dry = ok(&app, &["apply", "local", "--dry-run"]);
    assert!(
        dry.contains(
            "mlkube: 1 object(s) were checked against the CustomResourceDefinition in the plan \
             only"
        ),
        "{dry}"
    );
    assert!(crds.get_opt(&crd_name).await.expect("get").is_none());

    ok(&app, &["apply", "local"]);
    let applied = widget(&test.client, &group, ns).await.expect("the Widget");
    assert_eq!(applied.data["spec"]["size"], 3);
}
