//! A sweep of real training jobs: the app `examples/xgboost-sweep`, as shipped, applied with
//! `mlkube apply` into a namespace of the test's own; its four XGBoostJobs train on the digits
//! with the operator the platform runs, and `mlkube status local -c sweep` reads each Master's
//! `metric accuracy=<value>` from its log and ranks the jobs by it, best first.

use std::path::Path;

use kube::Api;
use kube::api::ListParams;
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;
use serde_json::Value;

use crate::jobs::finished;
use crate::platform::{self, assert_success, mlkube};
use crate::support::TestNamespace;

/// Copy the example app, file by file, into `to`.
fn copy_app(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("the example app is a directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            std::fs::create_dir_all(&target).expect("creating a directory");
            copy_app(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copying a file");
        }
    }
}

#[tokio::test]
async fn the_example_sweep_trains_four_xgboost_jobs_and_status_ranks_their_accuracy() {
    platform::app();
    let ns = TestNamespace::new("real-sweep").await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path();
    copy_app(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/xgboost-sweep"),
        app,
    );
    let output = mlkube(app, &["env", "set", "local", "--namespace", &ns.name]);
    assert_success("mlkube env set local --namespace", &output);
    let output = mlkube(app, &["apply", "local", "--no-wait"]);
    assert_success("mlkube apply local", &output);

    let jobs = Api::<XGBoostJob>::namespaced(ns.client.clone(), &ns.name);
    let names: Vec<String> = jobs
        .list(&ListParams::default())
        .await
        .expect("listing the XGBoostJobs")
        .items
        .into_iter()
        .filter_map(|job| job.metadata.name)
        .collect();
    assert_eq!(names.len(), 4, "2 rounds x 2 depths: {names:?}");
    for name in &names {
        let (state, message) = finished(&jobs, name).await;
        assert_eq!(state, "Succeeded", "{name}: {message}");
    }

    let output = mlkube(app, &["status", "local", "-c", "sweep", "-o", "json"]);
    assert_success("mlkube status local -c sweep -o json", &output);
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["objective"]["metric"], "accuracy", "{report:#}");
    assert_eq!(report["objective"]["declared"], true, "{report:#}");
    let ranked: Vec<(f64, &Value)> = report["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| {
            assert_eq!(job["state"], "Succeeded", "{job:#}");
            assert_eq!(job["metrics_from"], "log", "{job:#}");
            let accuracy = job["metrics"]["accuracy"]
                .as_f64()
                .unwrap_or_else(|| panic!("no accuracy: {job:#}"));
            (accuracy, &job["hyperparameters"])
        })
        .collect();
    assert_eq!(ranked.len(), 4, "{report:#}");
    assert!(
        ranked.windows(2).all(|w| w[0].0 >= w[1].0),
        "best first: {report:#}"
    );
    // The grid changes what is learnt: 30 rounds of depth 4 beat 2 rounds of stumps.
    let accuracy_of = |rounds: i64, depth: i64| {
        ranked
            .iter()
            .find(|(_, h)| h["rounds"] == rounds && h["maxDepth"] == depth)
            .map(|(a, _)| *a)
            .unwrap_or_else(|| panic!("no job of rounds {rounds}, depth {depth}: {report:#}"))
    };
    assert!(accuracy_of(30, 4) > accuracy_of(2, 1) + 0.05, "{report:#}");
    assert!(accuracy_of(30, 4) >= 0.85, "{report:#}");

    let output = mlkube(app, &["status", "local", "-c", "sweep"]);
    assert_success("mlkube status local -c sweep", &output);
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1], "best first: highest accuracy first (the sweep's objective)",
        "{text}"
    );
    assert!(lines[2].starts_with("JOB "), "{text}");
    assert!(
        lines[3].contains(&format!("{}", ranked[0].0)),
        "the best job first:\n{text}"
    );
}
