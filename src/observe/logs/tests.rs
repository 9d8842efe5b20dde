//! `logs` against a source in memory: jobs and pods as a test sets them, and log streams the
//! test writes into line by line, so the reading, the merge and every turn of a follow (a pod
//! that appears, a restart, a stream cut short, the end of the job) are checked without a
//! kubelet.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::TryStreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use serde_json::{Value, json};

use super::follow;
use super::jobs::{self, JobRef};
use super::kind::JobKind;
use super::source::{LogSource, LogStream, Refused, StreamOf};
use super::*;
use crate::operator::training::framework::TrainingJob;
use crate::operator::training::frameworks::{pytorch, tensorflow};

type Chunk = std::io::Result<Vec<u8>>;
type Refusal = Box<dyn Fn() -> Refused + Send>;

/// What the next open of a container's log gets.
enum Planned {
    Log(mpsc::UnboundedReceiver<Chunk>),
    Refuse(Refusal),
}

#[derive(Default)]
struct Inner {
    jobs: Vec<Value>,
    pods: Vec<Pod>,
    planned: BTreeMap<(String, String), VecDeque<Planned>>,
    opened: Vec<(String, LogParams)>,
    /// How many times a job was read: a follow reads its jobs once a round.
    job_reads: usize,
}

/// A cluster in memory, as far as logs go.
#[derive(Default, Clone)]
struct Fake(Arc<Mutex<Inner>>);

impl Fake {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_job(&self, job: Value) {
        let mut inner = self.inner();
        inner
            .jobs
            .retain(|j| j["metadata"]["name"] != job["metadata"]["name"]);
        inner.jobs.push(job);
    }

    fn set_pod(&self, pod: Pod) {
        let mut inner = self.inner();
        inner.pods.retain(|p| p.metadata.name != pod.metadata.name);
        inner.pods.push(pod);
    }

    /// The next stream of `pod`'s `container`: the test writes it through the sender, and
    /// dropping the sender ends it.
    fn stream(&self, pod: &str, container: &str) -> mpsc::UnboundedSender<Chunk> {
        let (sender, receiver) = mpsc::unbounded();
        self.plan(pod, container, Planned::Log(receiver));
        sender
    }

    /// The next stream of `pod`'s `container`, already complete with `lines`.
    fn log(&self, pod: &str, container: &str, lines: &[&str]) {
        let sender = self.stream(pod, container);
        for line in lines {
            write(&sender, line);
        }
    }

    fn refuse(&self, pod: &str, container: &str, refusal: Refusal) {
        self.plan(pod, container, Planned::Refuse(refusal));
    }

    fn plan(&self, pod: &str, container: &str, planned: Planned) {
        self.inner()
            .planned
            .entry((pod.into(), container.into()))
            .or_default()
            .push_back(planned);
    }

    /// Every open so far: the pod and the parameters.
    fn opened(&self) -> Vec<(String, LogParams)> {
        self.inner().opened.clone()
    }
}

fn write(sender: &mpsc::UnboundedSender<Chunk>, line: &str) {
    sender
        .unbounded_send(Ok(format!("{line}\n").into_bytes()))
        .expect("the stream is read");
}

impl LogSource for Fake {
    async fn job(&self, job: &JobRef) -> Result<Option<Value>, LogsError> {
        let mut inner = self.inner();
        inner.job_reads += 1;
        Ok(inner
            .jobs
            .iter()
            .find(|j| {
                j["kind"] == job.kind.name()
                    && j["metadata"]["namespace"] == job.namespace.as_str()
                    && j["metadata"]["name"] == job.name.as_str()
            })
            .cloned())
    }

    async fn pods(&self, job: &JobRef) -> Result<Vec<Pod>, LogsError> {
        Ok(self
            .inner()
            .pods
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(job.kind.job_label()))
                    == Some(&job.name)
            })
            .cloned()
            .collect())
    }

    async fn open(&self, of: &StreamOf, params: LogParams) -> Result<LogStream, Refused> {
        let mut inner = self.inner();
        inner.opened.push((of.pod.clone(), params));
        let planned = inner
            .planned
            .get_mut(&(of.pod.clone(), of.container.clone()))
            .and_then(VecDeque::pop_front);
        match planned {
            Some(Planned::Log(receiver)) => Ok(Box::pin(receiver.into_async_read())),
            Some(Planned::Refuse(refusal)) => Err(refusal()),
            None => Ok(Box::pin(futures::io::Cursor::new(Vec::new()))),
        }
    }
}

/// Lines and notes as they were written.
#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<(Vec<String>, Vec<String>)>>);

impl Recorder {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().0.clone()
    }

    fn notes(&self) -> Vec<String> {
        self.0.lock().unwrap().1.clone()
    }
}

impl Output for Recorder {
    fn line(&mut self, line: &str) -> std::io::Result<()> {
        self.0.lock().unwrap().0.push(line.to_string());
        Ok(())
    }

    fn note(&mut self, note: &str) {
        self.0.lock().unwrap().1.push(note.to_string());
    }
}

/// A TFJob in namespace `ml` whose last condition is `condition`, with `workers` workers.
fn tfjob(name: &str, condition: &str, workers: i64) -> Value {
    json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
           "metadata": {"name": name, "namespace": "ml"},
           "spec": {"tfReplicaSpecs": {"Worker": {"replicas": workers}}},
           "status": {"conditions": [{"type": "Created", "status": "True"},
                                     {"type": condition, "status": "True"}]}})
}

fn tf(name: &str) -> JobRef {
    JobRef {
        kind: tensorflow::TFJob::FRAMEWORK.into(),
        namespace: "ml".into(),
        name: name.into(),
    }
}

fn running() -> Value {
    json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
}

fn terminated() -> Value {
    json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
}

fn waiting(reason: &str) -> Value {
    json!({"waiting": {"reason": reason}})
}

/// The pod of replica `{replica_type}-{index}` of job `job`, its `tensorflow` container in
/// `state` after `restarts` restarts.
fn pod(job: &str, replica_type: &str, index: i32, state: Value, restarts: i32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{job}-{replica_type}-{index}"), "namespace": "ml",
                     "uid": format!("uid-{job}-{replica_type}-{index}"),
                     "labels": {"training.kubeflow.org/job-name": job,
                                "training.kubeflow.org/replica-type": replica_type,
                                "training.kubeflow.org/replica-index": index.to_string()}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "tensorflow", "image": "tf:1"}]},
        "status": {"containerStatuses": [{"name": "tensorflow", "image": "tf:1", "imageID": "",
                                          "ready": true, "restartCount": restarts, "state": state}]}
    }))
    .expect("a valid Pod")
}

fn request(jobs: Vec<JobRef>) -> Request {
    Request {
        jobs,
        ..Request::default()
    }
}

async fn read(fake: &Fake, request: &Request) -> (Result<Outcome, LogsError>, Recorder) {
    let recorder = Recorder::default();
    let mut out = recorder.clone();
    let result = logs(fake, request, &mut out, &Cancel::new()).await;
    (result, recorder)
}

#[tokio::test]
async fn the_replicas_lines_are_merged_in_the_order_they_were_written_and_tagged() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 2));
    fake.set_pod(pod("mnist", "ps", 0, running(), 0));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    fake.log(
        "mnist-worker-0",
        "tensorflow",
        &[
            "2026-01-01T10:00:01.5Z step 1",
            "2026-01-01T10:00:03Z step 2",
        ],
    );
    fake.log(
        "mnist-ps-0",
        "tensorflow",
        &[
            "2026-01-01T10:00:00Z listening",
            "2026-01-01T10:00:02Z got 1",
        ],
    );
    let (result, out) = read(&fake, &request(vec![tf("mnist")])).await;
    result.expect("the logs are read");
    assert_eq!(
        out.lines(),
        [
            "ps-0     | listening",
            "worker-0 | step 1",
            "ps-0     | got 1",
            "worker-0 | step 2",
        ]
    );
    let timestamps = Request {
        timestamps: true,
        replicas: vec!["worker-0".into()],
        ..request(vec![tf("mnist")])
    };
    fake.log(
        "mnist-worker-0",
        "tensorflow",
        &["2026-01-01T10:00:01.5Z step 1"],
    );
    let (result, out) = read(&fake, &timestamps).await;
    result.expect("the logs are read");
    assert_eq!(out.lines(), ["worker-0 | 2026-01-01T10:00:01.5Z step 1"]);
}

#[tokio::test]
async fn since_tail_and_previous_reach_the_api_server_and_timestamps_are_always_asked_for() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 1));
    fake.set_pod(pod("mnist", "worker", 0, running(), 2));
    let asked = Request {
        since: Some(Duration::from_secs(300)),
        tail: Some(20),
        previous: true,
        ..request(vec![tf("mnist")])
    };
    let (result, _) = read(&fake, &asked).await;
    result.expect("an empty log is no error");
    let (pod, params) = &fake.opened()[0];
    assert_eq!(pod, "mnist-worker-0");
    assert_eq!(params.container.as_deref(), Some("tensorflow"));
    assert_eq!(params.since_seconds, Some(300));
    assert_eq!(params.tail_lines, Some(20));
    assert!(params.previous && params.timestamps && !params.follow);
}

#[tokio::test]
async fn containers_that_have_not_started_are_noted_and_none_at_all_is_an_error() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 2));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    fake.set_pod(pod("mnist", "worker", 1, waiting("ContainerCreating"), 0));
    fake.log("mnist-worker-0", "tensorflow", &["2026-01-01T10:00:00Z hi"]);
    let (result, out) = read(&fake, &request(vec![tf("mnist")])).await;
    result.expect("worker-0 is read");
    assert_eq!(out.lines(), ["worker-0 | hi"]);
    assert_eq!(
        out.notes(),
        ["worker-1: container tensorflow has not started (ContainerCreating)"]
    );
    let only_waiting = Request {
        replicas: vec!["worker-1".into()],
        ..request(vec![tf("mnist")])
    };
    let error = read(&fake, &only_waiting).await.0.unwrap_err().to_string();
    assert!(
        error.starts_with(
            "there are no logs to read yet: worker-1: container tensorflow has not started \
             (ContainerCreating)\n  hint: follow them with -f"
        ),
        "{error}"
    );
    let previous = Request {
        previous: true,
        ..request(vec![tf("mnist")])
    };
    let error = read(&fake, &previous).await.0.unwrap_err().to_string();
    assert!(
        error.contains("worker-0: container tensorflow has not restarted, so it has no previous"),
        "{error}"
    );
}

#[tokio::test]
async fn a_kubelet_that_cannot_serve_logs_is_an_error_naming_the_node() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 1));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    let of = StreamOf {
        namespace: "ml".into(),
        pod: "mnist-worker-0".into(),
        uid: "u".into(),
        node: "node-1".into(),
        container: "tensorflow".into(),
        label: "worker-0".into(),
    };
    let refused = move || {
        let status = json!({"status": "Failure", "code": 500, "reason": "InternalError",
            "message": "Get \"https://10.0.0.1:10250/containerLogs/ml/mnist-worker-0/tensorflow\": dial tcp 10.0.0.1:10250: connect: connection refused"});
        source::refusal(
            kube::Error::Api(Box::new(serde_json::from_value(status).unwrap())),
            &of,
        )
    };
    fake.refuse("mnist-worker-0", "tensorflow", Box::new(refused));
    let error = read(&fake, &request(vec![tf("mnist")]))
        .await
        .0
        .unwrap_err();
    assert!(matches!(error, LogsError::Kubelet { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with(
            "the kubelet did not serve the logs of worker-0 (pod ml/mnist-worker-0, container \
             tensorflow, node node-1)\n  hint: "
        ),
        "{text}"
    );
}

/// What the API server answers for a pod on a kwok node: its node found no log of it.
fn kwok_refusal(pod: &str) -> Refusal {
    let of = StreamOf {
        namespace: "ml".into(),
        pod: pod.into(),
        uid: "u".into(),
        node: "node-1".into(),
        container: "tensorflow".into(),
        label: pod.trim_start_matches("mnist-").into(),
    };
    let pod = pod.to_string();
    Box::new(move || {
        let status = json!({"status": "Failure", "code": 404, "reason": "NotFound",
            "message": format!("the server could not find the requested resource ( pods/log {pod})"),
            "details": {"name": pod, "kind": "pods/log"}});
        source::refusal(
            kube::Error::Api(Box::new(serde_json::from_value(status).unwrap())),
            &of,
        )
    })
}

#[tokio::test]
async fn a_node_that_serves_no_logs_is_said_so_and_not_taken_for_a_gone_pod() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 2));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    fake.set_pod(pod("mnist", "worker", 1, running(), 0));
    fake.log("mnist-worker-0", "tensorflow", &["2026-01-01T10:00:00Z hi"]);
    fake.refuse(
        "mnist-worker-1",
        "tensorflow",
        kwok_refusal("mnist-worker-1"),
    );
    let (result, out) = read(&fake, &request(vec![tf("mnist")])).await;
    result.expect("worker-0 is read");
    assert_eq!(out.lines(), ["worker-0 | hi"]);
    let unserved = "worker-1: the node `node-1` serves no logs (a simulated node?)";
    assert_eq!(out.notes(), [unserved]);

    fake.refuse(
        "mnist-worker-1",
        "tensorflow",
        kwok_refusal("mnist-worker-1"),
    );
    let only_unserved = Request {
        replicas: vec!["worker-1".into()],
        ..request(vec![tf("mnist")])
    };
    let error = read(&fake, &only_unserved).await.0.unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "there are no logs to read: {unserved}\n  hint: the API server reads"
        )),
        "{error}"
    );
}

#[tokio::test]
async fn following_a_node_that_serves_no_logs_says_so_once_and_does_not_ask_again() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 1));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    for _ in 0..3 {
        fake.refuse(
            "mnist-worker-0",
            "tensorflow",
            kwok_refusal("mnist-worker-0"),
        );
    }
    let (task, out) = start_following(&fake, request_following("mnist"), &Cancel::new());
    let unserved = "worker-0: the node `node-1` serves no logs (a simulated node?)";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while out.notes().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no note came");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A few more rounds, in which a stream cut short would be opened again.
    let reads = fake.inner().job_reads;
    while fake.inner().job_reads < reads + 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the follow stopped listing"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    fake.set_job(tfjob("mnist", "Succeeded", 1));
    ended(task).await.expect("it ends with the job");
    assert_eq!(out.notes(), [unserved]);
    assert_eq!(fake.opened().len(), 1, "the node was asked once");
}

#[tokio::test]
async fn a_job_that_does_not_exist_names_what_was_searched_and_a_job_of_another_kind() {
    let fake = Fake::default();
    let error = read(&fake, &request(vec![tf("mnist")]))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "tfjob mnist not found (searched tfjobs.kubeflow.org in namespace ml)\n  hint: no \
             other kind of training job is called mnist there either"
        ),
        "{error}"
    );
    fake.set_job(
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                        "metadata": {"name": "mnist", "namespace": "ml"}}),
    );
    let error = read(&fake, &request(vec![tf("mnist")]))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(
        error.ends_with(
            "hint: there is a pytorchjob of that name: `mlkube logs -n ml pytorchjob/mnist`"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn jobs_an_environment_renders_but_the_cluster_lacks_say_to_apply_it() {
    let fake = Fake::default();
    let env = Request {
        env: Some("local".into()),
        ..request(vec![tf("a"), tf("b")])
    };
    let error = read(&fake, &env).await.0.unwrap_err().to_string();
    assert_eq!(
        error,
        "tfjob ml/a, tfjob ml/b not found on the cluster\n  hint: the environment renders \
         them: apply it first (`mlkube apply local`)"
    );
    // With one of them there, the other is a note and the lines say which job wrote them.
    fake.set_job(tfjob("a", "Running", 1));
    fake.set_pod(pod("a", "worker", 0, running(), 0));
    fake.log("a-worker-0", "tensorflow", &["2026-01-01T10:00:00Z hi"]);
    let (result, out) = read(&fake, &env).await;
    result.expect("a is read");
    assert_eq!(out.lines(), ["a/worker-0 | hi"]);
    assert_eq!(
        out.notes(),
        ["tfjob ml/b not found on the cluster: not applied yet?"]
    );
}

#[tokio::test]
async fn a_job_without_pods_says_its_state_and_a_missing_replica_lists_the_others() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Created", 2));
    let error = read(&fake, &request(vec![tf("mnist")]))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("tfjob ml/mnist has no pods yet (Created)\n  hint: "),
        "{error}"
    );
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    fake.set_pod(pod("mnist", "worker", 1, running(), 0));
    let missing = Request {
        replicas: vec!["worker-7".into()],
        ..request(vec![tf("mnist")])
    };
    let error = read(&fake, &missing).await.0.unwrap_err().to_string();
    assert!(
        error.starts_with(
            "tfjob ml/mnist has no replica `worker-7`; its replicas are worker-0, worker-1\n  \
             hint: "
        ),
        "{error}"
    );
}

/// Follow `request` on `fake` in a task of its own, polling every 20 ms.
fn start_following(
    fake: &Fake,
    request: Request,
    cancel: &Cancel,
) -> (tokio::task::JoinHandle<Result<(), LogsError>>, Recorder) {
    let recorder = Recorder::default();
    let (fake, mut out, cancel) = (fake.clone(), recorder.clone(), cancel.clone());
    let task = tokio::spawn(async move {
        let found = jobs::find(&fake, &request, &mut out).await?;
        let poll = Duration::from_millis(20);
        follow::follow_every(&fake, &request, &found, &mut out, &cancel, poll)
            .await
            .map(|_| ())
    });
    (task, recorder)
}

/// Wait until the recorder has `line`; panic after five seconds.
async fn until_printed(out: &Recorder, line: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !out.lines().iter().any(|l| l == line) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "`{line}` never came; lines: {:?}, notes: {:?}",
            out.lines(),
            out.notes()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn ended(task: tokio::task::JoinHandle<Result<(), LogsError>>) -> Result<(), LogsError> {
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the follow ends in time")
        .expect("the follow does not panic")
}

#[tokio::test]
async fn following_picks_up_new_pods_and_restarts_and_ends_with_the_job() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 2));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    let first = fake.stream("mnist-worker-0", "tensorflow");
    let asked = Request {
        follow: true,
        tail: Some(10),
        ..request(vec![tf("mnist")])
    };
    let (task, out) = start_following(&fake, asked, &Cancel::new());
    write(&first, "2026-01-01T10:00:00Z w0 starts");
    until_printed(&out, "worker-0 | w0 starts").await;

    // worker-1's pod appears later, waits for its image, then starts.
    fake.set_pod(pod("mnist", "worker", 1, waiting("ContainerCreating"), 0));
    let second = fake.stream("mnist-worker-1", "tensorflow");
    fake.set_pod(pod("mnist", "worker", 1, running(), 0));
    write(&second, "2026-01-01T10:00:05Z w1 starts");
    until_printed(&out, "worker-1 | w1 starts").await;

    // worker-0 restarts: its first stream ends, the new instance is read from its start.
    let restarted = fake.stream("mnist-worker-0", "tensorflow");
    fake.set_pod(pod("mnist", "worker", 0, running(), 1));
    drop(first);
    write(&restarted, "2026-01-01T10:00:09Z w0 again");
    until_printed(&out, "worker-0 | w0 again").await;

    fake.set_job(tfjob("mnist", "Succeeded", 2));
    fake.set_pod(pod("mnist", "worker", 0, terminated(), 1));
    fake.set_pod(pod("mnist", "worker", 1, terminated(), 0));
    drop((second, restarted));
    ended(task).await.expect("the follow ends well");

    let opened = fake.opened();
    let tails: Vec<(&str, Option<i64>, bool)> = opened
        .iter()
        .map(|(pod, p)| (pod.as_str(), p.tail_lines, p.follow))
        .collect();
    assert_eq!(
        tails,
        [
            ("mnist-worker-0", Some(10), true),
            ("mnist-worker-1", None, true),
            ("mnist-worker-0", None, true),
        ],
        "the first listing's containers as asked, the others from their start"
    );
}

#[tokio::test]
async fn a_stream_cut_short_is_opened_again_after_its_last_line_without_repeating_it() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 1));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    fake.log(
        "mnist-worker-0",
        "tensorflow",
        &["2026-01-01T10:00:01Z one", "2026-01-01T10:00:02.7Z two"],
    );
    let again = fake.stream("mnist-worker-0", "tensorflow");
    let (task, out) = start_following(&fake, request_following("mnist"), &Cancel::new());
    until_printed(&out, "worker-0 | two").await;
    // The server sends from the start of the last line's second, so `two` comes again.
    write(&again, "2026-01-01T10:00:02.7Z two");
    write(&again, "2026-01-01T10:00:03Z three");
    until_printed(&out, "worker-0 | three").await;
    fake.set_job(tfjob("mnist", "Succeeded", 1));
    fake.set_pod(pod("mnist", "worker", 0, terminated(), 0));
    drop(again);
    ended(task).await.expect("the follow ends well");
    assert_eq!(
        out.lines(),
        ["worker-0 | one", "worker-0 | two", "worker-0 | three"]
    );
    let since: Vec<Option<String>> = fake.opened()[..2]
        .iter()
        .map(|(_, p)| p.since_time.map(|t| t.to_string()))
        .collect();
    assert_eq!(since, [None, Some("2026-01-01T10:00:02Z".into())]);
}

fn request_following(job: &str) -> Request {
    Request {
        follow: true,
        ..request(vec![tf(job)])
    }
}

#[tokio::test]
async fn following_a_job_without_pods_waits_for_them_and_a_finished_one_is_an_error() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Created", 1));
    let cancel = Cancel::new();
    let (task, out) = start_following(&fake, request_following("mnist"), &cancel);
    let note = "tfjob ml/mnist has no pods yet (Created); waiting for them";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while out.notes() != [note] {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", out.notes());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stream = fake.stream("mnist-worker-0", "tensorflow");
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    write(&stream, "2026-01-01T10:00:00Z hello");
    until_printed(&out, "worker-0 | hello").await;
    cancel.cancel();
    ended(task).await.expect("Ctrl-C ends it well");

    let fake = Fake::default();
    let mut done = tfjob("mnist", "Succeeded", 1);
    done["spec"]["runPolicy"] = json!({"cleanPodPolicy": "All"});
    fake.set_job(done);
    let (task, _) = start_following(&fake, request_following("mnist"), &Cancel::new());
    let error = ended(task).await.unwrap_err().to_string();
    assert!(
        error.starts_with(
            "tfjob ml/mnist has no pods left: it Succeeded and cleanPodPolicy All deleted them"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn following_a_kubelet_that_cannot_serve_logs_ends_with_its_error() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 1));
    fake.set_pod(pod("mnist", "worker", 0, running(), 0));
    fake.refuse(
        "mnist-worker-0",
        "tensorflow",
        Box::new(|| {
            Refused::Failed(LogsError::LogTimeout {
                server: "https://127.0.0.1:6443".into(),
                context: "local".into(),
                replica: "worker-0".into(),
                namespace: "ml".into(),
                pod: "mnist-worker-0".into(),
                node: "node-1".into(),
                timeout: "30s".into(),
            })
        }),
    );
    let (task, _) = start_following(&fake, request_following("mnist"), &Cancel::new());
    let error = ended(task).await.unwrap_err();
    assert!(matches!(error, LogsError::LogTimeout { .. }), "{error:?}");
}

#[test]
fn a_pytorch_job_reads_its_own_container_not_the_init_container() {
    let mut pod = pod("dist", "worker", 0, running(), 0);
    let spec = pod.spec.as_mut().expect("a spec");
    spec.containers[0].name = "pytorch".into();
    spec.init_containers = Some(vec![
        serde_json::from_value(json!({"name": "init-pytorch", "image": "busybox"}))
            .expect("a container"),
    ]);
    let framework = pytorch::PyTorchJob::FRAMEWORK.into();
    let replica = replicas::replica(framework, "dist", &json!({}), &pod);
    let names = |which: &Containers| -> Vec<String> {
        replicas::chosen(&replica, framework, which)
            .iter()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(names(&Containers::Main), ["pytorch"]);
    assert_eq!(names(&Containers::All), ["init-pytorch", "pytorch"]);
    assert_eq!(
        names(&Containers::Named("init-pytorch".into())),
        ["init-pytorch"]
    );
}

#[tokio::test]
async fn a_container_still_running_after_its_job_finished_is_followed_and_said_so() {
    let fake = Fake::default();
    fake.set_job(tfjob("mnist", "Running", 1));
    fake.set_pod(pod("mnist", "ps", 0, running(), 0));
    let ps = fake.stream("mnist-ps-0", "tensorflow");
    let (task, out) = start_following(&fake, request_following("mnist"), &Cancel::new());
    write(&ps, "2026-01-01T10:00:00Z serving");
    until_printed(&out, "ps-0 | serving").await;
    fake.set_job(tfjob("mnist", "Succeeded", 1));
    let told = "tfjob ml/mnist finished; still following ps-0 until its container ends (Ctrl-C \
                to stop)";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !out.notes().iter().any(|n| n == told) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", out.notes());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !task.is_finished(),
        "the parameter server is still followed"
    );
    write(&ps, "2026-01-01T10:00:09Z still serving");
    until_printed(&out, "ps-0 | still serving").await;
    fake.set_pod(pod("mnist", "ps", 0, terminated(), 0));
    drop(ps);
    ended(task)
        .await
        .expect("the follow ends with the container");
}

/// The pod of `worker-0` of `job` that the scheduler could not place: no container statuses.
fn unscheduled(job: &str) -> Pod {
    let mut pod = pod(job, "worker", 0, running(), 0);
    pod.spec.as_mut().expect("a spec").node_name = None;
    pod.status = serde_json::from_value(json!({"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient cpu."}]}))
    .expect("a pod status");
    pod
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_is_named_and_a_follow_ends_with_it() {
    let fake = Fake::default();
    fake.set_job(tfjob("badimg", "Created", 1));
    let message = "failed to pull and unpack image \"tf:1\": not found";
    let state = json!({"waiting": {"reason": "ErrImagePull", "message": message}});
    fake.set_pod(pod("badimg", "worker", 0, state, 0));
    let error = read(&fake, &request(vec![tf("badimg")]))
        .await
        .0
        .unwrap_err();
    let error = error.to_string();
    assert!(
        error.starts_with(&format!(
            "there are no logs to read yet: worker-0: container tensorflow has not started: \
             image tf:1 cannot be pulled: {message} (ErrImagePull)"
        )),
        "{error}"
    );
    assert!(error.contains("hint: waiting will not start it"), "{error}");
    let (task, _) = start_following(&fake, request_following("badimg"), &Cancel::new());
    let error = ended(task).await.unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "worker-0: container tensorflow cannot start: image tf:1 cannot be pulled: {message}"
        )),
        "{error}"
    );
}

#[tokio::test]
async fn a_pod_the_scheduler_cannot_place_says_what_it_lacks_and_a_follow_waits_saying_so() {
    let fake = Fake::default();
    fake.set_job(tfjob("big", "Created", 1));
    fake.set_pod(unscheduled("big"));
    let error = read(&fake, &request(vec![tf("big")])).await.0.unwrap_err();
    let why = "cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu.";
    assert!(
        error.to_string().starts_with(&format!(
            "there are no logs to read yet: worker-0: container tensorflow has not started: {why}"
        )),
        "{error}"
    );
    assert!(
        error.to_string().contains(
            "hint: it starts only once what the message names is fixed (a node with room for its \
             requests"
        ),
        "not told to just follow a pod that waits on room: {error}"
    );
    let cancel = Cancel::new();
    let (task, out) = start_following(&fake, request_following("big"), &cancel);
    let note = format!("worker-0: waiting for container tensorflow to start: {why}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !out.notes().contains(&note) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", out.notes());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!task.is_finished(), "room may come: the follow waits");
    cancel.cancel();
    ended(task).await.expect("Ctrl-C ends it well");
}

/// A TFJob that failed with `message`.
fn failed_tfjob(name: &str, message: &str) -> Value {
    let mut job = tfjob(name, "Failed", 1);
    job["status"]["conditions"][1]["message"] = json!(message);
    job
}

#[tokio::test]
async fn the_logs_of_a_failed_job_end_saying_how_each_replica_ended_and_that_it_failed() {
    let message = "TFJob ml/greedy has failed because 1 Worker replica(s) failed.";
    let oom = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}});
    for follow in [false, true] {
        let fake = Fake::default();
        fake.set_job(failed_tfjob("greedy", message));
        fake.set_pod(pod("greedy", "worker", 0, oom.clone(), 0));
        fake.log("greedy-worker-0", "tensorflow", &[]);
        let asked = Request {
            follow,
            ..request(vec![tf("greedy")])
        };
        let (result, out) = read(&fake, &asked).await;
        let outcome = result.expect("an empty log is read");
        assert_eq!(outcome.failed, ["tfjob ml/greedy"], "follow {follow}");
        assert!(outcome.any_failed());
        assert_eq!(
            out.notes(),
            [
                "worker-0: container tensorflow was OOMKilled (exit code 137)".to_string(),
                format!("tfjob ml/greedy failed: {message}"),
            ],
            "follow {follow}"
        );
    }
    let fake = Fake::default();
    fake.set_job(tfjob("fine", "Succeeded", 1));
    fake.set_pod(pod("fine", "worker", 0, terminated(), 0));
    fake.log(
        "fine-worker-0",
        "tensorflow",
        &["2026-01-01T10:00:00Z done"],
    );
    let (result, out) = read(&fake, &request(vec![tf("fine")])).await;
    assert!(!result.expect("read").any_failed());
    assert!(out.notes().is_empty(), "{:?}", out.notes());
}

/// A Framework `name` in namespace `ml` of TaskRoles `ps` (one Task) and `worker` (two), in
/// FrameworkController's `state`, completed as `completion` (type, code, phrase) when given.
fn framework(name: &str, state: &str, completion: Option<(&str, i64, &str)>) -> Value {
    let attempt_completion = completion.map_or(Value::Null, |(type_name, code, phrase)| {
        json!({"code": code, "phrase": phrase, "diagnostics": "",
               "type": {"name": type_name, "attributes": []},
               "trigger": {"message": "FailedTaskCount 1 has reached MinFailedTaskCount 1 in the TaskRole",
                           "taskRoleName": "worker", "taskIndex": 1}})
    });
    json!({"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
           "metadata": {"name": name, "namespace": "ml"},
           "spec": {"taskRoles": [{"name": "ps", "taskNumber": 1},
                                  {"name": "worker", "taskNumber": 2}]},
           "status": {"startTime": "2026-01-01T00:00:00Z", "runTime": null,
                      "completionTime": null, "state": state,
                      "transitionTime": "2026-01-01T00:00:00Z",
                      "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0,
                                            "retryDelaySec": null},
                      "attemptStatus": {"id": 0, "startTime": "2026-01-01T00:00:00Z",
                                        "runTime": null, "completionTime": null,
                                        "instanceUID": null, "configMapName": format!("{name}-attempt"),
                                        "configMapUID": null,
                                        "completionStatus": attempt_completion,
                                        "taskRoleStatuses": []}}})
}

fn fc(name: &str) -> JobRef {
    JobRef {
        kind: JobKind::Framework,
        namespace: "ml".into(),
        name: name.into(),
    }
}

/// Task `index` of TaskRole `role` of Framework `framework`, as FrameworkController names and
/// labels its pod; its one container is named after the TaskRole.
fn task_pod(framework: &str, role: &str, index: i32, state: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{framework}-{role}-{index}"), "namespace": "ml",
                     "uid": format!("uid-{framework}-{role}-{index}"),
                     "labels": {"FC_FRAMEWORK_NAME": framework, "FC_TASKROLE_NAME": role,
                                "FC_TASK_INDEX": index.to_string()}},
        "spec": {"nodeName": "node-1", "containers": [{"name": role, "image": "busybox"}]},
        "status": {"containerStatuses": [{"name": role, "image": "busybox", "imageID": "",
                                          "ready": true, "restartCount": 0, "state": state}]}
    }))
    .expect("a valid Pod")
}

#[tokio::test]
async fn a_frameworks_tasks_are_tagged_taskrole_and_index_and_a_replica_picks_one() {
    let fake = Fake::default();
    fake.set_job(framework("train", "AttemptRunning", None));
    for (role, index) in [("worker", 1), ("ps", 0), ("worker", 0)] {
        fake.set_pod(task_pod("train", role, index, running()));
    }
    let lines = |at: &str, text: &str| [format!("2026-01-01T10:00:0{at}Z {text}")];
    for _ in 0..2 {
        fake.log(
            "train-ps-0",
            "ps",
            &lines("0", "serving").each_ref().map(String::as_str),
        );
        fake.log(
            "train-worker-0",
            "worker",
            &lines("1", "w0 step 1").each_ref().map(String::as_str),
        );
        fake.log(
            "train-worker-1",
            "worker",
            &lines("2", "metric accuracy=0.9")
                .each_ref()
                .map(String::as_str),
        );
    }
    let (result, out) = read(&fake, &request(vec![fc("train")])).await;
    assert!(!result.expect("the logs are read").any_failed());
    assert_eq!(
        out.lines(),
        [
            "ps-0     | serving",
            "worker-0 | w0 step 1",
            "worker-1 | metric accuracy=0.9"
        ]
    );
    let one = Request {
        replicas: vec!["worker-1".into()],
        ..request(vec![fc("train")])
    };
    let (result, out) = read(&fake, &one).await;
    result.expect("worker-1 is read");
    assert_eq!(out.lines(), ["worker-1 | metric accuracy=0.9"]);
    let (result, _) = read(
        &fake,
        &Request {
            replicas: vec!["chief-0".into()],
            ..request(vec![fc("train")])
        },
    )
    .await;
    let error = result.expect_err("there is no chief").to_string();
    assert!(
        error.starts_with(
            "framework ml/train has no replica `chief-0`; its replicas are ps-0, worker-0, worker-1"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_failed_framework_says_how_its_tasks_ended_and_that_it_failed() {
    let failed = Some(("Failed", 1, "ContainerUnrecognizedFailed"));
    let mut job = framework("train", "Completed", failed);
    job["status"]["attemptStatus"]["taskRoleStatuses"] = json!([
        {"name": "worker", "taskStatuses": [
            {"index": 0, "attemptStatus": {"completionStatus": {"code": -220,
                "phrase": "FrameworkAttemptCompletion",
                "type": {"name": "Failed", "attributes": ["Permanent"]}}}},
            {"index": 1, "attemptStatus": {"completionStatus": {"code": 1,
                "phrase": "ContainerUnrecognizedFailed",
                "type": {"name": "Failed", "attributes": []},
                "pod": {"containers": [{"name": "worker", "code": 1, "reason": "Error"}]}}}}]}
    ]);
    // Followed while it ran: its pod ends failed, then the Framework completes and
    // FrameworkController deletes the pods.
    let fake = Fake::default();
    fake.set_job(framework("train", "AttemptRunning", None));
    fake.set_pod(task_pod("train", "worker", 1, running()));
    let stream = fake.stream("train-worker-1", "worker");
    let asked = Request {
        follow: true,
        ..request(vec![fc("train")])
    };
    let recorder = Recorder::default();
    let mut out = recorder.clone();
    let run = {
        let fake = fake.clone();
        tokio::spawn(async move { logs(&fake, &asked, &mut out, &Cancel::new()).await })
    };
    write(&stream, "2026-01-01T10:00:00Z loss nan");
    until_printed(&recorder, "worker-1 | loss nan").await;
    fake.set_job(job.clone());
    fake.inner().pods.clear();
    drop(stream);
    let outcome = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the follow ends with the Framework")
        .expect("no panic")
        .expect("the follow ends well");
    assert_eq!(outcome.failed, ["framework ml/train"]);
    assert_eq!(
        recorder.notes(),
        [
            "worker-1: container worker exited with code 1, Error (ContainerUnrecognizedFailed)",
            "framework ml/train failed: code 1 (ContainerUnrecognizedFailed); FailedTaskCount 1 \
             has reached MinFailedTaskCount 1 in the TaskRole (Task worker-1)",
        ]
    );
    // Read afterwards: the pods are gone, and so are their logs.
    let (result, _) = read(&fake, &request(vec![fc("train")])).await;
    let error = result.expect_err("no pods are left").to_string();
    assert!(
        error.starts_with(
            "framework ml/train has no pods left: it Failed and its attempt's pods were deleted \
             with the attempt\n  hint: FrameworkController deletes a completed attempt's pods"
        ),
        "{error}"
    );
}
