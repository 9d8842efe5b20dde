//! MPI on the real node: an MPIJob's Launcher gets kubectl from the kubectl-delivery image, and
//! its `mpirun` starts one rank on each of two Workers through the operator's `kubexec.sh`; the
//! ranks all-reduce their gradients over the pod network (`examples/mpi-digits.yaml`, its two
//! Workers pinned to two nodes, so the all-reduce crosses a node boundary).

use mlkube::operator::training::frameworks::mpi::MPIJob;

use crate::jobs::{accuracies, example, finished, logs, submit};
use crate::spread::{assert_ran_apart, spread_apart};
use crate::support::TestNamespace;

#[tokio::test]
async fn an_mpijob_runs_mpirun_across_two_workers_to_succeeded() {
    let ns = TestNamespace::new("real-mpi").await;
    let job = spread_apart(example::<MPIJob>("mpi-digits.yaml"), "Worker");
    let (jobs, name) = submit(&ns, job).await;
    let (state, message) = finished(&jobs, &name).await;
    let logs = logs(&ns, &format!("mpijob/{name}"), &[]);
    assert_eq!(state, "Succeeded", "{message}\nlogs:\n{logs}");
    let nodes = assert_ran_apart::<MPIJob>(&ns, &name, "worker").await;
    eprintln!(
        "mpi-digits.yaml: workers on {nodes:?}; accuracies {:?}",
        accuracies(&logs)
    );

    // mpirun passes every rank's output to the Launcher's log: one rank ran on each Worker.
    for (rank, worker) in [(0, "worker-0"), (1, "worker-1")] {
        let ran = format!("rank {rank} of 2 on {name}-{worker}:");
        assert!(
            logs.lines()
                .any(|l| l.starts_with("launcher") && l.contains(&ran)),
            "no `{ran}` in the launcher's log:\n{logs}"
        );
    }
    // Rank 0 reported once, from a model trained on both shards.
    let reported = accuracies(&logs);
    assert_eq!(reported.len(), 1, "one metric, from rank 0; logs:\n{logs}");
    assert_eq!(
        reported[0].0, "launcher",
        "mpirun's output is the Launcher's"
    );
    assert!(
        reported[0].1 >= 0.9,
        "accuracy {} below 0.9; logs:\n{logs}",
        reported[0].1
    );
}
