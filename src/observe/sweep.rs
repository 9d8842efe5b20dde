//! The results of a sweep: each training job a component renders (a sweep's, or a single job)
//! with its hyperparameters, its state on the cluster and the final metrics it reported, ranked
//! best first. `mlkube status <env> -c <component>` prints it.
//!
//! How a job reports a metric, in the order they are looked for:
//! - an annotation `metric.mlkube.io/<name>: "<value>"` on the job, written by whatever knows
//!   the result (`kubectl annotate`, a step after training, a controller);
//! - else, once the job Succeeded, a line `metric <name>=<value>` in the log of its lead
//!   replica (the pod the operator labels `training.kubeflow.org/job-role=master`: the Chief or
//!   Master, else worker 0), read through [`crate::observe::logs`]; the last such line of a name
//!   wins.
//!
//! Expected flow: take the rendered training jobs of the component with their combinations
//! (the annotation `sweep.mlkube.io/hyperparameters`, none for a single job), read each job
//! from the cluster and take its metrics, up to [`CONCURRENCY`] jobs at once and each job's
//! result in its rendered place, then rank the jobs ([`rank`]) by the
//! objective: the annotation `sweep.mlkube.io/objective` (`{"metric": ..., "goal": "maximize"
//! or "minimize"}`), or the first metric name any job reported, highest first.
//!
//! A Framework (FrameworkController's) is one of these jobs: its state is told in the same
//! words (Succeeded, Failed, Running, ...) from its status, and a failed one's note is its
//! completion status.
//!
//! Caveats: a job whose pods its `cleanPodPolicy` deleted has no log left to read, nor has a
//! completed Framework (FrameworkController deletes the pods of a completed attempt), whose
//! metrics are then reported as annotations; the sweep
//! prototypes keep no pods by default only when the job prototype does not (`cleanPodPolicy:
//! None` keeps them). kwok's simulated nodes serve no logs (the note says so), so there only
//! annotations report.
//! A log that cannot be read is a note on its job, never an error of the whole report.

// Errors end the report: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use serde_json::Value;

use crate::deploy::cluster::CONCURRENCY;
use crate::deploy::health::blocked;
use crate::observe::logs::jobs::{self, JobRef};
use crate::observe::logs::outcome;
use crate::observe::logs::{self, JobKind, LogSource, LogsError, Output, Request};
use crate::operator::training::engine::build::LABEL_JOB_ROLE;

pub const COMBINATION_ANNOTATION: &str = "sweep.mlkube.io/hyperparameters";
pub const OBJECTIVE_ANNOTATION: &str = "sweep.mlkube.io/objective";
/// A metric reported as an annotation: `metric.mlkube.io/accuracy: "0.98"`.
pub const METRIC_ANNOTATION_PREFIX: &str = "metric.mlkube.io/";
/// A metric reported in the lead replica's log: `metric accuracy=0.98`.
pub const METRIC_LINE_PREFIX: &str = "metric ";

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Goal {
    Maximize,
    Minimize,
}

/// The metric the jobs are ranked by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Objective {
    pub metric: String,
    pub goal: Goal,
    /// Declared by the sweep (its `objective` param), not guessed from the first metric.
    pub declared: bool,
}

/// Where a job's metrics came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricSource {
    Annotation,
    Log,
}

/// One job of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepJob {
    pub kind: String,
    pub name: String,
    pub hyperparameters: BTreeMap<String, Value>,
    /// The job's last condition (`Succeeded`, `Running`, ...), `Missing` when it is not on the
    /// cluster, `Pending` before the operator gave it a condition.
    pub state: String,
    pub metrics: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_from: Option<MetricSource>,
    /// Why there is no metric, when it is not obvious (a log that could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SweepJob {
    pub fn succeeded(&self) -> bool {
        self.state == "Succeeded"
    }
}

/// A component's jobs, best first.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub component: String,
    pub objective: Option<Objective>,
    pub jobs: Vec<SweepJob>,
}

impl Sweep {
    /// Every job succeeded.
    pub fn all_succeeded(&self) -> bool {
        self.jobs.iter().all(SweepJob::succeeded)
    }

    /// How many jobs are in each state, in the order states first appear.
    pub fn states(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for job in &self.jobs {
            match counts.iter_mut().find(|(state, _)| *state == job.state) {
                Some((_, n)) => *n += 1,
                None => counts.push((job.state.clone(), 1)),
            }
        }
        counts
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(
        "component `{component}` renders no training job in environment `{env}`\n  hint: -c \
         lists the jobs of a sweep (or of a training job) with their metrics; `mlkube status \
         {env}` shows every object"
    )]
    NoJobs { component: String, env: String },
    #[error("{job}: the annotation {COMBINATION_ANNOTATION} is not a JSON object: {text}")]
    BadCombination { job: String, text: String },
    #[error(transparent)]
    Logs(#[from] LogsError),
}

/// The jobs `rendered` (the component's objects as rendered) holds, read from `source`, with
/// their metrics, best first.
pub async fn sweep(
    source: &impl LogSource,
    component: &str,
    env: &str,
    namespace: &str,
    rendered: &[Value],
) -> Result<Sweep, SweepError> {
    let declared = rendered.iter().find_map(declared_objective);
    let mut combinations = Vec::new();
    for object in rendered {
        if let Some(job) = jobs::rendered(object, namespace) {
            let hyperparameters = combination(&job, object)?;
            combinations.push((job, hyperparameters));
        }
    }
    if combinations.is_empty() {
        return Err(SweepError::NoJobs {
            component: component.to_string(),
            env: env.to_string(),
        });
    }
    // A log is read through the kubelet of its node, which may take a while: several jobs at
    // once, in the rendered order.
    let mut found: Vec<SweepJob> = futures::stream::iter(
        combinations
            .into_iter()
            .map(|(job, hyperparameters)| read_job(source, job, hyperparameters)),
    )
    .buffered(CONCURRENCY)
    .try_collect()
    .await?;
    let objective = declared.or_else(|| first_metric(&found));
    rank(&mut found, objective.as_ref());
    Ok(Sweep {
        component: component.to_string(),
        objective,
        jobs: found,
    })
}

/// A job as the cluster has it (state `Missing` when the cluster lacks it), with its metrics.
async fn read_job(
    source: &impl LogSource,
    job: JobRef,
    hyperparameters: BTreeMap<String, Value>,
) -> Result<SweepJob, SweepError> {
    let live = source.job(&job).await?;
    let live = live.as_ref();
    let mut result = SweepJob {
        kind: job.kind.name().to_string(),
        name: job.name.clone(),
        hyperparameters,
        state: match live {
            None => "Missing".into(),
            Some(object) => jobs::condition(object).unwrap_or("Pending").to_string(),
        },
        metrics: BTreeMap::new(),
        metrics_from: None,
        note: None,
    };
    let Some(live) = live else {
        return Ok(result);
    };
    let annotated = metrics_in_annotations(live);
    if !annotated.is_empty() {
        result.metrics = annotated;
        result.metrics_from = Some(MetricSource::Annotation);
    } else if result.succeeded() {
        match metrics_in_log(source, &job, live).await {
            Ok(metrics) if metrics.is_empty() => {
                result.note = Some("its lead replica logged no `metric <name>=<value>`".into());
            }
            Ok(metrics) => {
                result.metrics = metrics;
                result.metrics_from = Some(MetricSource::Log);
            }
            // A cluster that stops answering ends the report; a log that cannot be read is
            // this job's note.
            Err(error @ LogsError::Cluster(_)) => return Err(error.into()),
            // Without the headline: "worker-0: the node `kwok-node-0` serves no logs (...)".
            Err(LogsError::NotServed { reasons }) => result.note = Some(reasons),
            Err(error) => result.note = Some(first_line(&error.to_string())),
        }
    } else if jobs::finished(live) {
        result.note = Some(format!("failed: {}", outcome::failed_message(live)));
    } else {
        result.note = blocked(source, &job).await?;
    }
    Ok(result)
}

/// Why a job that has not finished does not run, if one of its pods says (`pod mnist-worker-0
/// cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu.`).
async fn blocked(source: &impl LogSource, job: &JobRef) -> Result<Option<String>, SweepError> {
    let pods = match source.pods(job).await {
        Ok(pods) => pods,
        Err(error @ LogsError::Cluster(_)) => return Err(error.into()),
        Err(_) => return Ok(None),
    };
    Ok(pods
        .iter()
        .filter_map(|pod| serde_json::to_value(pod).ok())
        .find_map(|pod| blocked::pod_blocked(&pod))
        .map(|blocked| blocked.text))
}

/// The metrics in the log of the job's lead replica.
async fn metrics_in_log(
    source: &impl LogSource,
    job: &JobRef,
    live: &Value,
) -> Result<BTreeMap<String, f64>, LogsError> {
    let pods = source.pods(job).await?;
    let Some(lead) = lead_of(job, live, &pods) else {
        return Err(jobs::no_pods(job, live));
    };
    let request = Request {
        jobs: vec![job.clone()],
        replicas: vec![lead],
        ..Request::default()
    };
    // The job and its pods, as read above: the log reader need not read them again.
    let found = [jobs::Found {
        job: job.clone(),
        object: live.clone(),
        pods,
    }];
    let mut collected = Collected::default();
    logs::read::read(source, &request, &found, &mut collected).await?;
    Ok(collected.metrics)
}

/// The lines of a log, as the metrics in them.
#[derive(Default)]
struct Collected {
    metrics: BTreeMap<String, f64>,
}

impl Output for Collected {
    fn line(&mut self, line: &str) -> std::io::Result<()> {
        // `worker-0 | text`: the replica's label, then the line as the container wrote it.
        let text = line.split_once(" | ").map_or(line, |(_, text)| text);
        if let Some((name, value)) = parse_metric_line(text) {
            self.metrics.insert(name, value);
        }
        Ok(())
    }

    fn note(&mut self, _note: &str) {}
}

/// The pod whose log carries the job's result: of a Framework, Task 0 of its first TaskRole
/// when it has a pod; else [`lead_pod`].
fn lead_of(job: &JobRef, live: &Value, pods: &[Pod]) -> Option<String> {
    let first_task = match job.kind {
        JobKind::Framework => JobKind::Framework.planned(live).into_iter().next(),
        JobKind::Training(_) => None,
    };
    first_task
        .map(|task| format!("{}-{task}", job.name))
        .filter(|pod| pods.iter().any(|p| p.metadata.name.as_ref() == Some(pod)))
        .or_else(|| lead_pod(pods))
}

/// The pod whose log carries the job's result: the one the operator labels as the job's
/// master role, else the first by name.
pub fn lead_pod(pods: &[Pod]) -> Option<String> {
    let role = |pod: &&Pod| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(LABEL_JOB_ROLE))
            .is_some_and(|role| role == "master")
    };
    let mut sorted: Vec<&Pod> = pods.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    sorted
        .iter()
        .copied()
        .find(role)
        .or(sorted.first().copied())
        .and_then(|pod| pod.metadata.name.clone())
}

/// `metric accuracy=0.98` as (`accuracy`, 0.98). The name is letters, digits and `_-./`; the
/// value a finite number; anything else is not a metric line.
pub fn parse_metric_line(text: &str) -> Option<(String, f64)> {
    let rest = text.trim().strip_prefix(METRIC_LINE_PREFIX)?;
    let (name, value) = rest.split_once('=')?;
    let name = name.trim();
    let valid_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let value: f64 = value.trim().parse().ok()?;
    (valid_name && value.is_finite()).then(|| (name.to_string(), value))
}

/// The metrics a job carries as `metric.mlkube.io/<name>` annotations; one whose value is not
/// a number is left out.
pub fn metrics_in_annotations(job: &Value) -> BTreeMap<String, f64> {
    let Some(annotations) = job["metadata"]["annotations"].as_object() else {
        return BTreeMap::new();
    };
    annotations
        .iter()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(METRIC_ANNOTATION_PREFIX)?;
            let value: f64 = value.as_str()?.trim().parse().ok()?;
            value.is_finite().then(|| (name.to_string(), value))
        })
        .collect()
}

/// The hyperparameters of a rendered job, from its annotation; none for a job that is no
/// sweep's.
fn combination(job: &JobRef, object: &Value) -> Result<BTreeMap<String, Value>, SweepError> {
    let Some(text) = object["metadata"]["annotations"][COMBINATION_ANNOTATION].as_str() else {
        return Ok(BTreeMap::new());
    };
    serde_json::from_str(text).map_err(|_| SweepError::BadCombination {
        job: job.to_string(),
        text: text.to_string(),
    })
}

/// The objective a rendered job declares.
pub fn declared_objective(object: &Value) -> Option<Objective> {
    let text = object["metadata"]["annotations"][OBJECTIVE_ANNOTATION].as_str()?;
    let declared: Value = serde_json::from_str(text).ok()?;
    Some(Objective {
        metric: declared["metric"].as_str()?.to_string(),
        goal: match declared["goal"].as_str() {
            Some("minimize") => Goal::Minimize,
            _ => Goal::Maximize,
        },
        declared: true,
    })
}

/// Without a declared objective: the first metric name (in name order) any job reported,
/// highest first.
fn first_metric(jobs: &[SweepJob]) -> Option<Objective> {
    jobs.iter()
        .flat_map(|job| job.metrics.keys())
        .min()
        .map(|metric| Objective {
            metric: metric.clone(),
            goal: Goal::Maximize,
            declared: false,
        })
}

/// Best first: the jobs that reported the objective's metric by its goal, then the others;
/// ties and the others by name.
pub fn rank(jobs: &mut [SweepJob], objective: Option<&Objective>) {
    let key = |job: &SweepJob| objective.and_then(|o| job.metrics.get(&o.metric).copied());
    jobs.sort_by(|a, b| {
        let by_metric = match (key(a), key(b)) {
            (Some(x), Some(y)) => match objective.map(|o| o.goal) {
                Some(Goal::Minimize) => x.total_cmp(&y),
                _ => y.total_cmp(&x),
            },
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_metric.then_with(|| a.name.cmp(&b.name))
    });
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use kube::api::LogParams;
    use serde_json::json;

    use super::*;
    use crate::observe::logs::source::{LogStream, Refused, StreamOf};

    fn job(name: &str, state: &str, metrics: &[(&str, f64)]) -> SweepJob {
        SweepJob {
            kind: "XGBoostJob".into(),
            name: name.into(),
            hyperparameters: BTreeMap::new(),
            state: state.into(),
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            metrics_from: None,
            note: None,
        }
    }

    fn names(jobs: &[SweepJob]) -> Vec<&str> {
        jobs.iter().map(|j| j.name.as_str()).collect()
    }

    #[test]
    fn a_metric_line_is_a_name_and_a_finite_number_after_metric() {
        assert_eq!(
            parse_metric_line("metric accuracy=0.9800"),
            Some(("accuracy".into(), 0.98))
        );
        assert_eq!(
            parse_metric_line("  metric val/loss = 1.5e-3 "),
            Some(("val/loss".into(), 0.0015))
        );
        for not_one in [
            "test accuracy 0.9800 (450 held-out digits)",
            "metric accuracy",
            "metric accuracy=high",
            "metric accuracy=NaN",
            "metric accuracy=inf",
            "metric =0.5",
            "metric two words=0.5",
            "metrics accuracy=0.5",
            "a metric accuracy=0.5",
        ] {
            assert_eq!(parse_metric_line(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn the_last_metric_line_of_a_name_wins_and_the_replica_tag_is_taken_off() {
        let mut collected = Collected::default();
        for line in [
            "master-0 | epoch 1 loss 0.5",
            "master-0 | metric accuracy=0.91",
            "master-0 | metric loss=0.2",
            "master-0 | metric accuracy=0.95",
        ] {
            collected.line(line).unwrap();
        }
        assert_eq!(
            collected.metrics,
            BTreeMap::from([("accuracy".into(), 0.95), ("loss".into(), 0.2)])
        );
    }

    #[test]
    fn annotations_report_metrics_and_other_annotations_or_bad_values_are_left_out() {
        let object = json!({"metadata": {"annotations": {
            "metric.mlkube.io/accuracy": "0.97",
            "metric.mlkube.io/loss": "n/a",
            "sweep.mlkube.io/hyperparameters": "{}",
        }}});
        assert_eq!(
            metrics_in_annotations(&object),
            BTreeMap::from([("accuracy".into(), 0.97)])
        );
        assert!(metrics_in_annotations(&json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn the_best_comes_first_by_the_goal_and_jobs_without_the_metric_last() {
        let mut jobs = vec![
            job("c", "Running", &[]),
            job("a", "Succeeded", &[("accuracy", 0.90)]),
            job("b", "Succeeded", &[("accuracy", 0.97)]),
            job("d", "Succeeded", &[("loss", 0.1)]),
            job("e", "Succeeded", &[("accuracy", 0.90)]),
        ];
        let objective = first_metric(&jobs).expect("a metric was reported");
        assert_eq!(
            objective,
            Objective {
                metric: "accuracy".into(),
                goal: Goal::Maximize,
                declared: false
            }
        );
        rank(&mut jobs, Some(&objective));
        assert_eq!(names(&jobs), ["b", "a", "e", "c", "d"]);

        let loss = Objective {
            metric: "loss".into(),
            goal: Goal::Minimize,
            declared: true,
        };
        let mut jobs = vec![
            job("x", "Succeeded", &[("loss", 0.3)]),
            job("y", "Succeeded", &[("loss", 0.1)]),
            job("z", "Failed", &[]),
        ];
        rank(&mut jobs, Some(&loss));
        assert_eq!(names(&jobs), ["y", "x", "z"]);

        let mut unranked = vec![job("b", "Running", &[]), job("a", "Pending", &[])];
        rank(&mut unranked, None);
        assert_eq!(names(&unranked), ["a", "b"]);
    }

    #[test]
    fn a_declared_objective_is_read_from_the_rendered_annotation() {
        let object = json!({"metadata": {"annotations": {
            OBJECTIVE_ANNOTATION: r#"{"goal":"minimize","metric":"loss"}"#
        }}});
        assert_eq!(
            declared_objective(&object),
            Some(Objective {
                metric: "loss".into(),
                goal: Goal::Minimize,
                declared: true
            })
        );
        assert_eq!(declared_objective(&json!({"metadata": {}})), None);
    }

    fn pod(name: &str, master: bool) -> Pod {
        let mut labels = BTreeMap::new();
        if master {
            labels.insert(LABEL_JOB_ROLE.to_string(), "master".to_string());
        }
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.labels = Some(labels);
        pod
    }

    #[test]
    fn the_lead_is_the_master_role_else_the_first_pod() {
        let pods = [pod("j-worker-0", false), pod("j-master-0", true)];
        assert_eq!(lead_pod(&pods).as_deref(), Some("j-master-0"));
        let workers = [pod("j-worker-1", false), pod("j-worker-0", false)];
        assert_eq!(lead_pod(&workers).as_deref(), Some("j-worker-0"));
        assert_eq!(lead_pod(&[]), None);
    }

    /// A cluster of succeeded TFJobs, each with one worker whose log takes 100 ms to open and
    /// says `metric accuracy=<index>/100`; it counts the opens in flight.
    #[derive(Default)]
    struct SlowLogs {
        in_flight: AtomicUsize,
        most_in_flight: AtomicUsize,
    }

    impl LogSource for SlowLogs {
        async fn job(&self, job: &JobRef) -> Result<Option<Value>, LogsError> {
            Ok(Some(json!({
                "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
                "metadata": {"name": job.name, "namespace": job.namespace},
                "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1}}},
                "status": {"conditions": [{"type": "Succeeded", "status": "True"}]},
            })))
        }

        async fn pods(&self, job: &JobRef) -> Result<Vec<Pod>, LogsError> {
            let pod = json!({
                "metadata": {"name": format!("{}-worker-0", job.name), "namespace": job.namespace,
                             "uid": format!("uid-{}", job.name),
                             "labels": {"training.kubeflow.org/job-name": job.name,
                                        "training.kubeflow.org/replica-type": "worker",
                                        "training.kubeflow.org/replica-index": "0"}},
                "spec": {"nodeName": "node-1",
                         "containers": [{"name": "tensorflow", "image": "tf:1"}]},
                "status": {"containerStatuses": [{"name": "tensorflow", "image": "tf:1",
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0}}}]},
            });
            Ok(vec![serde_json::from_value(pod).expect("a valid Pod")])
        }

        async fn open(&self, of: &StreamOf, _: LogParams) -> Result<LogStream, Refused> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let index = of
                .pod
                .trim_start_matches("job-")
                .trim_end_matches("-worker-0");
            let log = format!("2026-01-01T00:00:00Z metric accuracy=0.{index:0>2}\n");
            Ok(Box::pin(futures::io::Cursor::new(log.into_bytes())))
        }
    }

    #[tokio::test]
    async fn the_logs_of_a_sweeps_jobs_are_read_several_at_a_time_within_the_bound() {
        let rendered: Vec<Value> = (0..50)
            .map(|i| {
                json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
                             "metadata": {"name": format!("job-{i:02}")}})
            })
            .collect();
        let source = SlowLogs::default();
        let found = sweep(&source, "s", "local", "ml", &rendered)
            .await
            .expect("every log is read");
        let most = source.most_in_flight.load(Ordering::SeqCst);
        assert!(
            most > 1 && most <= CONCURRENCY,
            "{most} logs read at once; between 2 and {CONCURRENCY} expected"
        );
        assert_eq!(found.jobs.len(), 50);
        // Each job has its own log's metric, so the reads were not mixed up; best first.
        for (rank, job) in found.jobs.iter().enumerate() {
            let index = 49 - rank;
            assert_eq!(job.name, format!("job-{index:02}"));
            assert_eq!(
                job.metrics["accuracy"],
                format!("0.{index:0>2}").parse::<f64>().unwrap()
            );
        }
    }

    /// Frameworks in memory: each with its status, its pods (TaskRole `worker`, then `aux`)
    /// and the one line of each pod's log.
    #[derive(Default)]
    struct Frameworks {
        objects: BTreeMap<String, Value>,
        pods: BTreeMap<String, Vec<(String, String)>>,
    }

    impl Frameworks {
        fn add(&mut self, name: &str, completion: Option<&str>, metric: Option<&str>) {
            let state = if completion.is_some() {
                "Completed"
            } else {
                "AttemptRunning"
            };
            let mut object = json!({
                "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"taskRoles": [{"name": "worker", "taskNumber": 1},
                                       {"name": "aux", "taskNumber": 1}]},
                "status": {"state": state, "attemptStatus": {"completionStatus": null}}});
            if let Some(type_name) = completion {
                let code = if type_name == "Failed" { 1 } else { 0 };
                object["status"]["attemptStatus"]["completionStatus"] = json!({
                    "code": code, "phrase": if code == 1 { "ContainerUnrecognizedFailed" } else { "Succeeded" },
                    "type": {"name": type_name, "attributes": []}, "diagnostics": ""});
            }
            if let Some(value) = metric {
                object["metadata"]["annotations"] = json!({"metric.mlkube.io/accuracy": value});
            }
            self.objects.insert(name.into(), object);
        }
    }

    impl LogSource for Frameworks {
        async fn job(&self, job: &JobRef) -> Result<Option<Value>, LogsError> {
            assert_eq!(job.kind, JobKind::Framework);
            Ok(self.objects.get(&job.name).cloned())
        }

        async fn pods(&self, job: &JobRef) -> Result<Vec<Pod>, LogsError> {
            let pods = self.pods.get(&job.name).cloned().unwrap_or_default();
            Ok(pods
                .iter()
                .map(|(task, _)| {
                    let (role, index) = task.split_once('-').expect("role-index");
                    serde_json::from_value(json!({
                        "metadata": {"name": format!("{}-{task}", job.name), "namespace": "ml",
                                     "uid": format!("uid-{}-{task}", job.name),
                                     "labels": {"FC_FRAMEWORK_NAME": job.name,
                                                "FC_TASKROLE_NAME": role, "FC_TASK_INDEX": index}},
                        "spec": {"nodeName": "node-1",
                                 "containers": [{"name": role, "image": "busybox"}]},
                        "status": {"containerStatuses": [{"name": role, "image": "busybox",
                            "imageID": "", "ready": false, "restartCount": 0,
                            "state": {"terminated": {"exitCode": 0}}}]},
                    }))
                    .expect("a valid Pod")
                })
                .collect())
        }

        async fn open(&self, of: &StreamOf, _: LogParams) -> Result<LogStream, Refused> {
            let (job, task) = of.pod.split_once('-').expect("job-task");
            let line = &self.pods[job]
                .iter()
                .find(|(t, _)| t == task)
                .expect("a task")
                .1;
            let log = format!("2026-01-01T00:00:00Z {line}\n");
            Ok(Box::pin(futures::io::Cursor::new(log.into_bytes())))
        }
    }

    #[tokio::test]
    async fn a_framework_sweep_is_ranked_by_the_metrics_its_frameworks_report() {
        let mut source = Frameworks::default();
        source.add("sweepa", Some("Succeeded"), Some("0.8"));
        source.add("sweepb", Some("Succeeded"), None);
        // Task 0 of the first TaskRole leads, though another sorts first by name.
        source.pods.insert(
            "sweepb".into(),
            vec![
                ("aux-0".into(), "metric accuracy=0.1".into()),
                ("worker-0".into(), "metric accuracy=0.9".into()),
            ],
        );
        source.add("sweepc", Some("Failed"), None);
        source.add("sweepd", None, None);
        source.add("sweepe", Some("Succeeded"), None);
        let rendered: Vec<Value> = ["sweepa", "sweepb", "sweepc", "sweepd", "sweepe"]
            .iter()
            .map(|name| {
                json!({"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
                       "metadata": {"name": name}})
            })
            .collect();
        let found = sweep(&source, "sweep", "local", "ml", &rendered)
            .await
            .expect("the sweep is read");
        let shown: Vec<(&str, &str, Option<f64>, Option<&str>)> = found
            .jobs
            .iter()
            .map(|j| {
                let note = j.note.as_deref();
                (
                    j.name.as_str(),
                    j.state.as_str(),
                    j.metrics.get("accuracy").copied(),
                    note,
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("sweepb", "Succeeded", Some(0.9), None),
                ("sweepa", "Succeeded", Some(0.8), None),
                (
                    "sweepc",
                    "Failed",
                    None,
                    Some("failed: code 1 (ContainerUnrecognizedFailed)")
                ),
                ("sweepd", "Running", None, None),
                (
                    "sweepe",
                    "Succeeded",
                    None,
                    Some(
                        "framework ml/sweepe has no pods left: it Succeeded and its attempt's \
                         pods were deleted with the attempt"
                    )
                ),
            ]
        );
        assert_eq!(found.jobs[0].kind, "Framework");
        assert_eq!(found.jobs[0].metrics_from, Some(MetricSource::Log));
        assert_eq!(found.jobs[1].metrics_from, Some(MetricSource::Annotation));
    }

    #[test]
    fn states_are_counted_in_the_order_they_first_appear() {
        let sweep = Sweep {
            component: "s".into(),
            objective: None,
            jobs: vec![
                job("a", "Succeeded", &[]),
                job("b", "Running", &[]),
                job("c", "Succeeded", &[]),
            ],
        };
        assert_eq!(
            sweep.states(),
            [("Succeeded".to_string(), 2), ("Running".to_string(), 1)]
        );
        assert!(!sweep.all_succeeded());
    }
}
