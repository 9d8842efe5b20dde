//! What happened when, for the closing report, and the census of each task's live pods taken
//! all along.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Events, each at its time since the start.
pub struct Timeline {
    start: Instant,
    marks: Vec<(Duration, String)>,
}

impl Timeline {
    pub fn start() -> Self {
        Timeline {
            start: Instant::now(),
            marks: Vec::new(),
        }
    }

    pub fn mark(&mut self, what: &str) {
        self.mark_at(what, Instant::now());
    }

    pub fn mark_at(&mut self, what: &str, at: Instant) {
        self.marks.push((at - self.start, what.to_string()));
    }

    /// One line per event, in order of time: `+  42.1 s  node NotReady`.
    pub fn report(&self) -> String {
        let mut marks = self.marks.clone();
        marks.sort();
        let lines: Vec<String> = marks
            .iter()
            .map(|(at, what)| format!("+{:7.1} s  {what}", at.as_secs_f64()))
            .collect();
        format!("node-loss timeline:\n{}", lines.join("\n"))
    }
}

/// The task a pod runs, from the labels of the operator that made it: a training job's
/// replica, a Framework's task, or a VolumeManager's fetcher of one replica.
pub fn task_of(pod: &Pod) -> Option<String> {
    let labels = pod.metadata.labels.as_ref()?;
    let get = |key: &str| labels.get(key).map(String::as_str);
    if let Some(job) = get("training.kubeflow.org/job-name") {
        let kind = get("training.kubeflow.org/replica-type")?;
        let index = get("training.kubeflow.org/replica-index")?;
        return Some(format!("job {job} {kind}-{index}"));
    }
    if get("kvc.kubeflow.org/role") == Some("fetch") {
        let volume = get("kvc.kubeflow.org/volume")?;
        let replica = get("kvc.kubeflow.org/replica")?;
        return Some(format!("fill {volume} replica {replica}"));
    }
    let framework = get("FC_FRAMEWORK_NAME")?;
    let role = get("FC_TASKROLE_NAME")?;
    let index = get("FC_TASK_INDEX")?;
    Some(format!("framework {framework} {role}-{index}"))
}

/// Pods that may run a container: Pending or Running, whether being deleted or not (a pod
/// being deleted on a lost node may still run).
fn may_run(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Pending" | "Running"))
}

/// The most pods that may run at once per task, counted every 200 ms until stopped.
pub struct Census {
    most: Arc<Mutex<BTreeMap<String, usize>>>,
    task: JoinHandle<()>,
}

impl Census {
    pub fn start(pods: Api<Pod>) -> Self {
        let most = Arc::new(Mutex::new(BTreeMap::new()));
        let shared = most.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    record(&shared, &list.items);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Census { most, task }
    }

    pub fn stop(self) -> BTreeMap<String, usize> {
        self.task.abort();
        self.most.lock().expect("the census").clone()
    }
}

fn record(most: &Mutex<BTreeMap<String, usize>>, pods: &[Pod]) {
    let mut now: BTreeMap<String, usize> = BTreeMap::new();
    for task in pods.iter().filter(|p| may_run(p)).filter_map(task_of) {
        *now.entry(task).or_default() += 1;
    }
    let mut most = most.lock().expect("the census");
    for (task, count) in now {
        let seen = most.entry(task).or_default();
        *seen = (*seen).max(count);
    }
}
