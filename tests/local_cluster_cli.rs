//! `cluster/local-cluster.sh`'s verbs that need no cluster, offline: what they say of a cluster
//! that is not up. What they do with one that is up, the cluster tests prove.

use std::path::Path;
use std::process::{Command, Output};

/// `cluster/local-cluster.sh ARGS` for a cluster whose state directory is `dir` (empty: no
/// cluster was ever started there) on a port no test uses.
fn local_cluster(dir: &Path, args: &[&str]) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/local-cluster.sh"))
        .args(args)
        .env("MLKUBE_CLUSTER_DIR", dir)
        .env("MLKUBE_CLUSTER_PORT", "19943")
        .env_remove("MLKUBE_CLUSTER_NODE")
        .output()
        .expect("cluster/local-cluster.sh runs")
}

#[test]
fn env_of_a_cluster_that_is_not_up_fails_saying_how_to_start_it_and_prints_nothing_to_eval() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = local_cluster(dir.path(), &["env"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "",
        "nothing for `eval` to export"
    );
    let dir = dir.path().display();
    assert!(
        stderr.contains(&format!("no local cluster is up in {dir} (port 19943)"))
            && stderr.contains("hint: start it: ")
            && stderr.contains("local-cluster.sh up"),
        "says which cluster is not up and how to start it: {stderr}"
    );
}
