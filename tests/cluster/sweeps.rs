//! Sweeps of a framework other than TensorFlow against the real control plane: a
//! `pytorch-job-sweep` with a grid and a seeded random search, applied with `mlkube apply` and
//! run to the end by the operator binary and the kwok stages; applied again without renaming a
//! job, grown without running again the jobs that already ran, and ranked by `mlkube status
//! <env> -c <sweep>` from the metrics the jobs report (as annotations: kwok's nodes serve no
//! logs; the real-node tests read them from the logs).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::operator::install_crd;
use crate::operator_identity::{Access, NamespaceOperator, Scope};
use crate::support::{TestNamespace, empty_app, eventually, mlkube, mlkube_ok, stdout};

/// An upper bound only: the kwok stages end a training pod after 5 s; a loaded 2-core machine
/// needs room for the operator and nine jobs.
const TIMEOUT: Duration = Duration::from_secs(180);

fn pytorchjobs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// What shows whether a job ran again: its uid, when it started and finished, and its pods.
#[derive(Debug, PartialEq)]
struct Run {
    uid: String,
    start: Value,
    completion: Value,
    pods: Vec<String>,
}

/// Every PyTorchJob of the namespace by name, once there are `count` and each Succeeded.
async fn await_succeeded(client: &Client, namespace: &str, count: usize) -> BTreeMap<String, Run> {
    let jobs = pytorchjobs(client, namespace);
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), namespace);
    let done = eventually(
        &format!("{count} PyTorchJobs in {namespace} to succeed"),
        TIMEOUT,
        || async {
            let list = jobs.list(&Default::default()).await.ok()?;
            let succeeded = list.items.iter().all(|job| {
                job.data["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().rev().find(|c| c["status"] == "True"))
                    .is_some_and(|c| c["type"] == "Succeeded")
            });
            (list.items.len() == count && succeeded).then_some(list.items)
        },
    )
    .await;
    let mut runs = BTreeMap::new();
    for job in done {
        let name = job.metadata.name.clone().expect("a name");
        let selector = format!("training.kubeflow.org/job-name={name}");
        let mut pod_uids: Vec<String> = pods
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .expect("listing pods")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        pod_uids.sort();
        let run = Run {
            uid: job.metadata.uid.clone().expect("a uid"),
            start: job.data["status"]["startTime"].clone(),
            completion: job.data["status"]["completionTime"].clone(),
            pods: pod_uids,
        };
        runs.insert(name, run);
    }
    runs
}

/// The hyperparameters of each rendered job of `local`, by name.
fn rendered(app: &Path) -> BTreeMap<String, Value> {
    let yaml = stdout(&mlkube_ok(app, &["show", "local", "-c", "sweep"]));
    serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| Value::deserialize(doc).expect("YAML"))
        .filter(|o| o["kind"] == "PyTorchJob")
        .map(|o| {
            let text = o["metadata"]["annotations"]["sweep.mlkube.io/hyperparameters"]
                .as_str()
                .expect("each job carries its combination")
                .to_owned();
            (
                o["metadata"]["name"].as_str().expect("a name").to_owned(),
                serde_json::from_str(&text).expect("JSON"),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_pytorch_sweep_with_a_grid_and_a_random_search_reapplies_and_grows_without_rerunning() {
    let ns = TestNamespace::new("sweeps").await;
    install_crd(&ns.client).await;
    let _operator = NamespaceOperator::start(&ns, Access::scoped(Scope::Namespace)).await;
    let (_dir, app) = empty_app(&ns);
    let app = app.as_path();

    // 2 learning rates x 2 random draws of momentum (log-uniform) and batch size (integer).
    let random = r#"{"count": 2, "seed": 7, "ranges": {"momentum": {"min": 0.5, "max": 0.99, "log": true}, "batchSize": {"min": 16, "max": 256, "integer": true}}}"#;
    stdout(&mlkube_ok(
        app,
        &[
            "component",
            "add",
            "pytorch-job-sweep",
            "sweep",
            "--param",
            r#"grid={"lr": [0.1, 0.01]}"#,
            "--param",
            &format!("random={random}"),
        ],
    ));
    let first = rendered(app);
    assert_eq!(first.len(), 4, "{first:#?}");
    for combination in first.values() {
        let momentum = combination["momentum"].as_f64().expect("a number");
        assert!((0.5..=0.99).contains(&momentum), "{combination}");
        let batch = combination["batchSize"].as_i64().expect("a whole number");
        assert!((16..=256).contains(&batch), "{combination}");
    }
    stdout(&mlkube_ok(app, &["apply", "local", "--timeout", "90s"]));
    let ran = await_succeeded(&ns.client, &ns.name, 4).await;
    assert_eq!(
        ran.keys().collect::<Vec<_>>(),
        first.keys().collect::<Vec<_>>()
    );

    // Applied again, nothing changes: the same names, the same jobs.
    let again: Value =
        serde_json::from_str(&stdout(&mlkube_ok(app, &["apply", "local", "-o", "json"])))
            .expect("JSON");
    assert_eq!(again["summary"]["created"], 0, "{again:#}");
    assert_eq!(again["summary"]["configured"], 0, "{again:#}");
    assert_eq!(rendered(app), first);

    // Grown: a third learning rate and a third draw. The four jobs that ran keep their names
    // and are not run again.
    stdout(&mlkube_ok(
        app,
        &[
            "param",
            "set",
            "sweep",
            "grid",
            r#"{"lr": [0.1, 0.01, 0.001]}"#,
        ],
    ));
    stdout(&mlkube_ok(
        app,
        &[
            "param",
            "set",
            "sweep",
            "random",
            &random.replace(r#""count": 2"#, r#""count": 3"#),
        ],
    ));
    let grown = rendered(app);
    assert_eq!(grown.len(), 9, "{grown:#?}");
    for (name, combination) in &first {
        assert_eq!(grown.get(name), Some(combination), "{name} kept its name");
    }
    let applied: Value = serde_json::from_str(&stdout(&mlkube_ok(
        app,
        &["apply", "local", "-o", "json", "--timeout", "90s"],
    )))
    .expect("JSON");
    assert_eq!(applied["summary"]["created"], 5, "{applied:#}");
    assert_eq!(applied["summary"]["configured"], 0, "{applied:#}");
    let all = await_succeeded(&ns.client, &ns.name, 9).await;
    for (name, run) in &ran {
        assert_eq!(all.get(name), Some(run), "{name} did not run again");
    }

    // The jobs report their accuracy; status ranks them best first.
    let jobs = pytorchjobs(&ns.client, &ns.name);
    let mut expected: Vec<(String, f64)> = Vec::new();
    for (i, name) in all.keys().enumerate() {
        let accuracy = 0.5 + (i as f64 * 7.0 % 9.0) / 20.0;
        let patch = json!({"metadata": {"annotations": {
            "metric.mlkube.io/accuracy": format!("{accuracy}")
        }}});
        jobs.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("annotating the job");
        expected.push((name.clone(), accuracy));
    }
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));

    let output = mlkube(app, &["status", "local", "-c", "sweep", "-o", "json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let ranked: Vec<(String, f64)> = report["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["name"].as_str().expect("a name").to_owned(),
                j["metrics"]["accuracy"].as_f64().expect("an accuracy"),
            )
        })
        .collect();
    assert_eq!(ranked, expected, "{report:#}");
    assert_eq!(report["objective"]["metric"], "accuracy");
    assert_eq!(report["jobs"][0]["metrics_from"], "annotation");
    assert_eq!(report["summary"]["states"]["Succeeded"], 9);
    let best = &report["jobs"][0]["hyperparameters"];
    assert_eq!(
        best, &grown[&expected[0].0],
        "each job shows its combination"
    );

    let text = stdout(&mlkube_ok(app, &["status", "local", "-c", "sweep"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("9 job(s), 9 Succeeded"), "{text}");
    assert!(lines[2].starts_with("JOB"), "{text}");
    assert!(
        lines[3].starts_with(&format!("{} ", expected[0].0)),
        "the best first:\n{text}"
    );

    // A component that renders no training job is refused with a hint.
    stdout(&mlkube_ok(app, &["component", "add", "serving", "serving"]));
    let output = mlkube(app, &["status", "local", "-c", "serving"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("component `serving` renders no training job") && stderr.contains("hint:"),
        "{stderr}"
    );
}

/// Issue 36: an environment that no longer renders (here a sweep's grid emptied by hand, which
/// `param set` now refuses) is still deleted, from its inventory on the cluster: `delete` never
/// renders the app.
#[tokio::test]
async fn an_environment_that_no_longer_renders_is_deleted_from_its_inventory() {
    let ns = TestNamespace::new("sweep-unrendered").await;
    install_crd(&ns.client).await;
    let (_dir, app) = empty_app(&ns);
    let app = app.as_path();
    let grid = r#"grid={"lr": [0.1, 0.01]}"#;
    let add = ["component", "add", "pytorch-job-sweep", "sweep", "--param"];
    mlkube_ok(app, &[&add[..], &[grid]].concat());
    mlkube_ok(app, &["apply", "local", "--no-wait"]);
    let jobs = pytorchjobs(&ns.client, &ns.name);
    let listed = jobs.list(&Default::default()).await.expect("listing");
    assert_eq!(listed.items.len(), 2);

    std::fs::write(
        app.join("environments/local/params.libsonnet"),
        "{ components: { sweep: { grid: {} } } }\n",
    )
    .expect("a hand edit");
    let shown = mlkube(app, &["show", "local"]);
    assert_eq!(shown.status.code(), Some(2), "local no longer renders");

    let deleted = mlkube_ok(app, &["delete", "local", "--yes", "-o", "json"]);
    let report: Value = serde_json::from_slice(&deleted.stdout).expect("JSON");
    assert_eq!(report["summary"]["deleted"], 2, "{report:#}");
    eventually("the sweep's jobs to be gone", TIMEOUT, || async {
        let list = jobs.list(&Default::default()).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await;
}
