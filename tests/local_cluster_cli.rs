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

/// An executable `bin/NAME` that runs the shell text `text`: a stand-in for a tool on PATH.
fn stand_in(bin: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).expect("a bin directory");
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{text}\n")).expect("a stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// On a machine where nothing of mlkube ran before, the cache directory does not exist yet:
/// installing the real node's packages creates it for its log rather than failing to write it.
/// `id` and `apt-get` are stand-ins on PATH, so the test needs neither root nor a network.
#[test]
fn installing_the_real_nodes_packages_on_a_fresh_machine_creates_the_cache_for_its_log() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bin = dir.path().join("bin");
    stand_in(&bin, "id", "echo 0");
    stand_in(&bin, "apt-get", "echo \"apt-get $*\"");
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

/// `bash -c SCRIPT` in the repository with image/progress.sh sourced, a `say` that prints to
/// stderr, and `sleep 60` (the ticker's minute) taking 0.1 s; its stderr goes to `log`.
fn with_fast_minutes(dir: &Path, script: &str, log: &Path) -> std::process::ExitStatus {
    let bin = dir.join("bin");
    stand_in(
        &bin,
        "sleep",
        "[ \"$1\" = 60 ] && exec /bin/sleep 0.1\nexec /bin/sleep \"$@\"",
    );
    let prelude = "say() { echo \"say: $*\" >&2; }; source image/progress.sh; ";
    Command::new("bash")
        .args(["-c", &format!("{prelude}{script}")])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .stderr(std::fs::File::create(log).expect("a log"))
        .status()
        .expect("bash runs")
}

fn still_running_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .expect("the log")
        .lines()
        .filter(|l| l.starts_with("say: the build: still running ("))
        .count()
}

/// A step that takes minutes says so every minute while it runs, and nothing once it ended:
/// also when the step ends the whole script (a build that dies), where the ticker would
/// otherwise go on alone.
#[test]
fn a_long_step_says_every_minute_that_it_still_runs_and_stops_when_the_script_ends() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("ran.log");
    let status = with_fast_minutes(dir.path(), "with_progress 'the build' /bin/sleep 1", &log);
    assert!(status.success());
    assert!(
        still_running_lines(&log) >= 3,
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );

    let log = dir.path().join("died.log");
    let script =
        "dies() { /bin/sleep 0.5; exit 7; }; with_progress 'the build' dies; echo not reached";
    let status = with_fast_minutes(dir.path(), script, &log);
    assert_eq!(status.code(), Some(7));
    let said = still_running_lines(&log);
    assert!(said >= 1, "it said so while it ran");
    // Ten of the ticker's minutes after the script ended: nothing more said, but for a tick
    // that had looked just before the end.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let later = still_running_lines(&log);
    assert!(
        later <= said + 1,
        "the ticker went on after the script ended: {said} lines, then {later}"
    );
}
