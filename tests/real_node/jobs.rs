//! Training jobs on the real node: submitting them (examples from `examples/`, or built here),
//! awaiting their end, and reading their logs the way a user does, with `mlkube logs`.

use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use mlkube::operator::training::framework::TrainingJob;
use serde::de::DeserializeOwned;

use crate::platform;
use crate::support::{TestNamespace, eventually};

/// Long enough for TensorFlow to start and train on two shared cores while other tests run.
pub const TRAINING_TIMEOUT: Duration = Duration::from_secs(600);

/// The job in `examples/<file>`, as written.
pub fn example<J: DeserializeOwned>(file: &str) -> J {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not a job: {e}", path.display()))
}

/// Create `job` in the test's namespace (whatever namespace it names) and await the operator's
/// first condition on it, which proves the operator in the cluster took it.
pub async fn submit<J: TrainingJob>(ns: &TestNamespace, mut job: J) -> (Api<J>, String) {
    platform::app();
    job.meta_mut().namespace = Some(ns.name.clone());
    let name = job.meta().name.clone().expect("a job has a name");
    let jobs = Api::<J>::namespaced(ns.client.clone(), &ns.name);
    jobs.create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("the {} {name} is accepted: {e}", J::FRAMEWORK.kind));
    (jobs, name)
}

/// The job's last condition once it is Succeeded or Failed: (type, message).
pub async fn finished<J: TrainingJob>(jobs: &Api<J>, name: &str) -> (String, String) {
    let kind = J::FRAMEWORK.kind;
    eventually(
        &format!("{kind} {name} to finish"),
        TRAINING_TIMEOUT,
        || async { ended(&jobs.get(name).await.ok()?) },
    )
    .await
}

/// How `job` ended, `Succeeded` or `Failed` (its last condition, true), and that condition's
/// message; `None` while it has not.
pub fn ended<J: TrainingJob>(job: &J) -> Option<(String, String)> {
    let last = job.status()?.conditions.last()?;
    let done = matches!(last.type_.as_str(), "Succeeded" | "Failed") && last.status == "True";
    done.then(|| (last.type_.clone(), last.message.clone().unwrap_or_default()))
}

/// `mlkube logs -n NS <kind>/<name> ARGS...`: its stdout; panics with its stderr on failure.
pub fn logs(ns: &TestNamespace, job: &str, args: &[&str]) -> String {
    let mut all = vec!["logs", "-n", &ns.name, job];
    all.extend_from_slice(args);
    let output = platform::mlkube(platform::app(), &all);
    platform::assert_success(&format!("mlkube {}", all.join(" ")), &output);
    String::from_utf8(output.stdout).expect("logs are UTF-8")
}

/// `mlkube logs -n NS <kind>/<name> ARGS...` of a job that failed: it must exit 3 after the
/// lines; its stdout (the lines) and stderr (the notes on how it ended).
pub fn logs_of_failed(ns: &TestNamespace, job: &str, args: &[&str]) -> (String, String) {
    let mut all = vec!["logs", "-n", &ns.name, job];
    all.extend_from_slice(args);
    let output = platform::mlkube(platform::app(), &all);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert_eq!(
        output.status.code(),
        Some(3),
        "mlkube {} exits 3 for a failed job:\nstdout:\n{stdout}\nstderr:\n{stderr}",
        all.join(" ")
    );
    (stdout, stderr)
}

/// The `metric accuracy=<value>` a replica printed, from `mlkube logs` output: (replica, value).
pub fn accuracies(logs: &str) -> Vec<(String, f64)> {
    logs.lines()
        .filter_map(|line| {
            let (replica, text) = line.split_once(" | ")?;
            let value = text.trim().strip_prefix("metric accuracy=")?;
            Some((replica.trim().to_string(), value.parse().ok()?))
        })
        .collect()
}

#[test]
fn accuracies_are_read_from_tagged_lines() {
    let logs = "worker-0 | epoch 1 loss 0.3\nworker-0 | metric accuracy=0.97\nworker-1 | done\n";
    assert_eq!(accuracies(logs), vec![("worker-0".to_string(), 0.97)]);
}
