//! `apply --adopt` against the real control plane: an adopted object becomes what the app
//! renders, and `diff` says beforehand which fields go and who wrote them.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use mlkube::cli::exit::Exit;
use mlkube::deploy::apply;
use mlkube::deploy::cluster::KubeCluster;
use mlkube::deploy::diff::{self, DiffOptions};
use mlkube::deploy::inventory::adopt::RemovedField;
use mlkube::deploy::inventory::applyset::ApplySet;
use mlkube::deploy::inventory::plan::{self, Plan};
use mlkube::render::manifest::Manifest;
use serde_json::json;

use crate::deploy::{config_map, options};
use crate::support::{self, TestNamespace};

#[tokio::test]
async fn adopting_removes_the_fields_the_render_lacks_and_diff_names_their_writer() {
    let test = TestNamespace::new("adopt-fields").await;
    let client = support::client().await;
    let cluster = KubeCluster::with_client(client.clone(), "test".into(), "local".into())
        .await
        .expect("discovery on the test cluster");
    // As `kubectl create configmap settings --from-literal=a=1 --from-literal=b=2` writes it.
    let theirs: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings"}, "data": {"a": "1", "b": "2"}}))
    .unwrap();
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &test.name);
    let params = PostParams {
        field_manager: Some("kubectl-create".into()),
        ..PostParams::default()
    };
    config_maps
        .create(&params, &theirs)
        .await
        .expect("someone else's ConfigMap");
    let set = ApplySet::new("t", &test.name, &test.name);
    let objects = vec![config_map(&test.name, "a", "settings", json!({"a": "1"}))];
    let plan: Plan = plan::plan(&Manifest { objects }, &set, &[]).expect("a valid plan");

    let changes = diff::diff(&cluster, &plan, DiffOptions::default())
        .await
        .expect("diff");
    let text = diff::render_text(&changes, false);
    assert_eq!(Exit::of_diff(&changes), Exit::Differences, "{text}");
    let removed: Vec<&RemovedField> = changes.changes.iter().flat_map(|c| &c.removed).collect();
    assert_eq!(removed.len(), 1, "{text}");
    assert_eq!(removed[0].field, "data.b");
    assert_eq!(removed[0].managers, ["kubectl-create"]);
    assert!(
        text.contains("# adopting removes data.b (written by kubectl-create)"),
        "{text}"
    );
    assert!(text.contains("\n-  b: '2'\n"), "{text}");

    let mut dry_run = options();
    dry_run.adopt = true;
    dry_run.dry_run = true;
    let report = apply::apply(&cluster, &plan, &dry_run)
        .await
        .expect("apply --adopt --dry-run");
    let fields: Vec<(&str, &str)> = report
        .removed_fields
        .iter()
        .map(|(key, removal)| (key.name.as_str(), removal.field.as_str()))
        .collect();
    assert_eq!(fields, [("settings", "data.b")]);
    let untouched = config_maps.get("settings").await.expect("the ConfigMap");
    assert!(
        untouched.data.unwrap_or_default().contains_key("b"),
        "a dry run writes nothing"
    );

    let mut adopting = options();
    adopting.adopt = true;
    let report = apply::apply(&cluster, &plan, &adopting)
        .await
        .expect("apply --adopt");
    assert_eq!(report.adopted.len(), 1, "{report:?}");
    let adopted = config_maps.get("settings").await.expect("the ConfigMap");
    assert_eq!(
        adopted.data.unwrap_or_default(),
        [("a".to_string(), "1".to_string())].into()
    );

    let again = diff::diff(&cluster, &plan, DiffOptions::default())
        .await
        .expect("the second diff");
    assert_eq!(
        Exit::of_diff(&again),
        Exit::Done,
        "{}",
        diff::render_text(&again, false)
    );
}
