//! `cluster/local-cluster.sh`'s verbs that need no cluster, offline: what they say of a cluster
//! that is not up, and what its scripts do first on a machine where nothing of mlkube ran
//! before. What they do with one that is up, the cluster tests prove.

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

/// On a machine where nothing of mlkube ran before, the cache directory does not exist yet:
/// installing the real node's packages creates it for its log rather than failing to write it.
/// `id` and `apt-get` are stand-ins on PATH, so the test needs neither root nor a network.
#[test]
fn installing_the_real_nodes_packages_on_a_fresh_machine_creates_the_cache_for_its_log() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("a bin directory");
    for (name, text) in [("id", "echo 0"), ("apt-get", "echo \"apt-get $*\"")] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{text}\n")).expect("a stand-in");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let cache = dir.path().join("never-made/mlkube");
    let script = "say() { echo \"say: $*\"; }; die() { echo \"die: $*\"; exit 1; }; \
                  source cluster/node/host.sh; REAL_TOOLS=(no-such-tool-here:the-package); \
                  require_real_node_host";
    let output = Command::new("bash")
        .args(["-c", script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CACHE_ROOT", &cache)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stdout: {stdout}");
    let log = std::fs::read_to_string(cache.join("apt.log")).expect("apt.log in the new cache");
    assert!(
        log.contains("apt-get install -y -qq the-package"),
        "the log holds apt-get's output: {log}"
    );
}
