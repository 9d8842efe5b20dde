//! Real training: each framework the training image holds trains its example from `examples/`,
//! distributed across its replicas from the environment the operator injects, to Succeeded, and
//! its lead replica's log, read with `mlkube logs`, carries its accuracy. The examples run as
//! written but for one thing: their two workers are pinned to two nodes, so the training crosses
//! a node boundary over the pod network, and reaches the same accuracy as on one node.

use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::jax::JAXJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use mlkube::operator::training::frameworks::xgboost::XGBoostJob;

use crate::jobs::{accuracies, example, finished, logs, submit};
use crate::spread::{assert_ran_apart, spread_apart};
use crate::support::TestNamespace;

/// Train `file`'s job, its `spread` replicas (e.g. `Worker`, two of them) on two nodes if given,
/// and return its logs, as `mlkube logs` prints them, once it Succeeded.
async fn train<J: TrainingJob>(file: &str, prefix: &str, spread: Option<&str>) -> String {
    let ns = TestNamespace::new(prefix).await;
    let mut job = example::<J>(file);
    if let Some(replica) = spread {
        job = spread_apart(job, replica);
    }
    let (jobs, name) = submit(&ns, job).await;
    let (state, message) = finished(&jobs, &name).await;
    let kind = J::FRAMEWORK.kind.to_lowercase();
    let logs = logs(&ns, &format!("{kind}/{name}"), &[]);
    assert_eq!(state, "Succeeded", "{file}: {message}\nlogs:\n{logs}");
    if let Some(replica) = spread {
        let nodes = assert_ran_apart::<J>(&ns, &name, &replica.to_lowercase()).await;
        eprintln!(
            "{file}: {replica}s on {nodes:?}; accuracies {:?}",
            accuracies(&logs)
        );
    }
    logs
}

/// The lead replica reported one accuracy, and the model learnt something real.
fn assert_trained(logs: &str, lead: &str, at_least: f64) {
    let reported = accuracies(logs);
    assert_eq!(
        reported.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        [lead],
        "only the lead replica reports the metric; logs:\n{logs}"
    );
    assert!(
        reported[0].1 >= at_least,
        "accuracy {} below {at_least}; logs:\n{logs}",
        reported[0].1
    );
}

#[tokio::test]
async fn a_tfjob_of_two_workers_trains_with_multi_worker_mirrored_strategy() {
    let logs = train::<TFJob>("tf-digits.yaml", "real-tf", Some("Worker")).await;
    assert_trained(&logs, "worker-0", 0.85);
    // Both workers took part: each logged its place in the TF_CONFIG cluster.
    for replica in ["worker-0", "worker-1"] {
        assert!(
            logs.lines().any(|l| l.starts_with(replica)),
            "no log of {replica}:\n{logs}"
        );
    }
}

#[tokio::test]
async fn a_jaxjob_of_two_processes_trains_with_jax_distributed() {
    let logs = train::<JAXJob>("jax-digits.yaml", "real-jax", Some("Worker")).await;
    assert_trained(&logs, "worker-0", 0.85);
    assert!(
        logs.lines().any(|l| l.starts_with("worker-1")),
        "no log of worker-1:\n{logs}"
    );
}

#[tokio::test]
async fn an_xgboostjob_of_a_master_and_a_worker_trains_with_its_tracker() {
    let logs = train::<XGBoostJob>("xgboost-digits.yaml", "real-xgb", None).await;
    assert_trained(&logs, "master-0", 0.85);
    assert!(
        logs.lines().any(|l| l.starts_with("worker-0")),
        "no log of worker-0:\n{logs}"
    );
}
