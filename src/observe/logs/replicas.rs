//! A job's pods as replicas: their names (`worker-1`), the labels their lines carry, which ones
//! `--replica` keeps, and which of their containers are read. Pure.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde_json::Value;

use super::jobs::Found;
use super::kind::JobKind;
use super::source::StreamOf;
use super::{Containers, LogsError, Request};
use crate::deploy::health::blocked::{self, Blocked};

/// One pod of a job, as the logs see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Replica {
    /// Its job's place in the jobs found.
    pub job_index: usize,
    /// The job's name.
    pub job: String,
    /// `worker-1`: the pod's name without `{job}-`.
    pub name: String,
    /// `worker`, from the replica-type label (a Framework's: its TaskRole).
    pub replica_type: String,
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    /// The node it runs on, `-` before it is scheduled.
    pub node: String,
    /// Init containers first, each list in the pod's order.
    pub containers: Vec<Container>,
    /// Sorts replicas as the framework lists its replica types (a Framework its TaskRoles),
    /// then by index.
    order: (usize, i64),
}

/// A container of a replica's pod and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub name: String,
    pub init: bool,
    pub state: State,
    /// How many times it restarted: its instance.
    pub restarts: i32,
    /// Why it has not started, when more than its start holds it (its pod cannot be scheduled,
    /// its image cannot be pulled, it crashes).
    pub blocked: Option<Blocked>,
    /// How it ended, now or before its last restart, when it did not succeed.
    pub ended: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not started: the kubelet's reason (`ContainerCreating`, `ImagePullBackOff`, ...).
    Waiting(String),
    Running,
    Terminated,
}

impl State {
    /// Whether the container has logs to read.
    pub fn started(&self) -> bool {
        !matches!(self, State::Waiting(_))
    }
}

/// Every pod of every job as a replica, in the order the jobs came, then by replica type (as
/// the framework lists them) and index.
pub fn replicas(found: &[Found]) -> Vec<Replica> {
    let mut all: Vec<(usize, Replica)> = found
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            f.pods.iter().map(move |pod| {
                let replica = Replica {
                    job_index: i,
                    ..replica(f.job.kind, &f.job.name, &f.object, pod)
                };
                (i, replica)
            })
        })
        .collect();
    all.sort_by(|(a_job, a), (b_job, b)| (a_job, a.order, &a.name).cmp(&(b_job, b.order, &b.name)));
    all.into_iter().map(|(_, r)| r).collect()
}

/// A pod of job `job` (as the cluster has it, `object`) as a replica.
pub fn replica(kind: JobKind, job: &str, object: &Value, pod: &Pod) -> Replica {
    let meta = &pod.metadata;
    let pod_name = meta.name.clone().unwrap_or_default();
    let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).cloned();
    let (type_label, index_label) = kind.replica_labels();
    let replica_type = label(type_label).unwrap_or_default();
    let index = label(index_label).and_then(|i| i.parse::<i64>().ok());
    let rank = kind.rank(&replica_type, object);
    let name = match pod_name.strip_prefix(&format!("{job}-")) {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        // An adopted pod named otherwise: its labels tell the replica, else its own name.
        _ => match &index {
            Some(index) if !replica_type.is_empty() => format!("{replica_type}-{index}"),
            _ => pod_name.clone(),
        },
    };
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let main = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let init_statuses = status.and_then(|s| s.init_container_statuses.as_deref());
    let main_statuses = status.and_then(|s| s.container_statuses.as_deref());
    let value = serde_json::to_value(pod).unwrap_or_default();
    let containers = init
        .iter()
        .map(|c| container(&c.name, true, init_statuses, &value))
        .chain(
            main.iter()
                .map(|c| container(&c.name, false, main_statuses, &value)),
        )
        .collect();
    Replica {
        job_index: 0,
        job: job.to_string(),
        name,
        replica_type,
        namespace: meta.namespace.clone().unwrap_or_default(),
        pod: pod_name,
        uid: meta.uid.clone().unwrap_or_default(),
        node: spec
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| "-".into()),
        containers,
        order: (rank, index.unwrap_or(i64::MAX)),
    }
}

fn container(
    name: &str,
    init: bool,
    statuses: Option<&[ContainerStatus]>,
    pod: &Value,
) -> Container {
    let status = statuses.unwrap_or_default().iter().find(|s| s.name == name);
    let state = status.and_then(|s| s.state.as_ref());
    let state = match state {
        Some(s) if s.running.is_some() => State::Running,
        Some(s) if s.terminated.is_some() => State::Terminated,
        Some(s) => State::Waiting(
            s.waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .unwrap_or_else(|| "waiting".into()),
        ),
        None => State::Waiting("no status yet".into()),
    };
    Container {
        name: name.to_string(),
        init,
        state,
        restarts: status.map_or(0, |s| s.restart_count),
        blocked: blocked::container_blocked(pod, name),
        ended: blocked::container_status(pod, name).and_then(blocked::ended),
    }
}

impl Container {
    /// Why it has not started, after `has not started`: ` (ContainerCreating)`, or `: <what
    /// blocks it>`.
    pub fn waiting_for(&self) -> String {
        match (&self.blocked, &self.state) {
            (Some(blocked), _) => format!(": {}", blocked.text),
            (None, State::Waiting(reason)) => format!(" ({reason})"),
            (None, _) => String::new(),
        }
    }
}

/// The label of a replica's lines: `worker-1`, `{job}/worker-1` when several jobs are read,
/// and `/{container}` after it when several containers of a pod are.
pub fn label(replica: &Replica, several_jobs: bool, container: Option<&str>) -> String {
    let mut label = if several_jobs {
        format!("{}/{}", replica.job, replica.name)
    } else {
        replica.name.clone()
    };
    if let Some(container) = container {
        label.push('/');
        label.push_str(container);
    }
    label
}

/// Whether `--replica wanted` names this replica: its name, its type, its pod, or
/// `{job}/{name}`.
pub fn matches(replica: &Replica, wanted: &str) -> bool {
    wanted == replica.name
        || wanted == replica.replica_type
        || wanted == replica.pod
        || wanted
            .split_once('/')
            .is_some_and(|(job, name)| job == replica.job && name == replica.name)
}

/// Whether the replica is one that `--replica` asked for (all when it asked for none).
pub fn wanted(replica: &Replica, wanted: &[String]) -> bool {
    wanted.is_empty() || wanted.iter().any(|w| matches(replica, w))
}

/// The replicas a job's spec asks for, `worker-0` ... as their pods will be named, so that a
/// `--follow` may wait for one that has no pod yet.
pub fn planned(kind: JobKind, object: &Value) -> Vec<String> {
    kind.planned(object)
}

/// The replicas `--replica` keeps. Each name must match one of them, or (following) one the
/// jobs' specs plan; otherwise the error lists those that exist.
pub fn pick(
    all: Vec<Replica>,
    wanted_names: &[String],
    found: &[Found],
    follow: bool,
) -> Result<Vec<Replica>, LogsError> {
    for w in wanted_names {
        let exists = all.iter().any(|r| matches(r, w));
        let planned = follow
            && found.iter().any(|f| {
                let planned = planned(f.job.kind, &f.object);
                planned.iter().any(|p| {
                    p == w
                        || p.rsplit_once('-').is_some_and(|(t, _)| t == w)
                        || *w == format!("{}/{p}", f.job.name)
                })
            });
        if !exists && !planned {
            let mut existing: Vec<String> = all
                .iter()
                .map(|r| label(r, found.len() > 1, None))
                .collect();
            existing.dedup();
            return Err(LogsError::NoSuchReplica {
                jobs: describe(found),
                wanted: w.clone(),
                existing: if existing.is_empty() {
                    "none yet".into()
                } else {
                    existing.join(", ")
                },
                podless: podless_note(&podless(&existing, found)),
            });
        }
    }
    Ok(all
        .into_iter()
        .filter(|r| wanted(r, wanted_names))
        .collect())
}

/// The replicas the jobs' specs plan that have no pod now (labelled as `existing` are).
fn podless(existing: &[String], found: &[Found]) -> Vec<String> {
    let several = found.len() > 1;
    (found.iter())
        .flat_map(|f| {
            let planned = planned(f.job.kind, &f.object).into_iter();
            planned.map(move |p| match several {
                true => format!("{}/{p}", f.job.name),
                false => p,
            })
        })
        .filter(|p| !existing.contains(p))
        .collect()
}

/// `; worker-1 of the spec has no pod now ...`, or nothing when every planned replica has one.
fn podless_note(podless: &[String]) -> String {
    match podless {
        [] => String::new(),
        [one] => format!("; {one} of the spec has no pod now (deleted, or not made yet)"),
        many => format!(
            "; {} of the spec have no pod now (deleted, or not made yet)",
            many.join(", ")
        ),
    }
}

/// `tfjob ml/mnist`, or the jobs one after the other.
pub fn describe(found: &[Found]) -> String {
    let names: Vec<String> = found.iter().map(|f| f.job.to_string()).collect();
    names.join(", ")
}

/// The containers of a replica to read: the framework's own container (else, and for a
/// Framework, the pod's first), the one named, or all of them.
pub fn chosen<'r>(replica: &'r Replica, kind: JobKind, which: &Containers) -> Vec<&'r Container> {
    let main = || replica.containers.iter().filter(|c| !c.init);
    match which {
        Containers::Main => main()
            .find(|c| Some(c.name.as_str()) == kind.container())
            .or_else(|| main().next())
            .into_iter()
            .collect(),
        Containers::Named(name) => replica
            .containers
            .iter()
            .filter(|c| c.name == *name)
            .collect(),
        Containers::All => replica.containers.iter().collect(),
    }
}

/// A `--container` that no pod has is an error naming those they have.
pub fn check_container(
    replicas: &[Replica],
    which: &Containers,
    found: &[Found],
) -> Result<(), LogsError> {
    let Containers::Named(name) = which else {
        return Ok(());
    };
    if replicas.is_empty()
        || replicas
            .iter()
            .any(|r| r.containers.iter().any(|c| c.name == *name))
    {
        return Ok(());
    }
    let mut have: Vec<&str> = replicas
        .iter()
        .flat_map(|r| r.containers.iter().map(|c| c.name.as_str()))
        .collect();
    have.sort_unstable();
    have.dedup();
    Err(LogsError::NoSuchContainer {
        jobs: describe(found),
        container: name.clone(),
        have: have.join(", "),
    })
}

/// The containers to read of the replicas `--replica` keeps, each as the stream to open, with
/// where it stands now.
pub fn targets(
    replicas: &[Replica],
    found: &[Found],
    request: &Request,
) -> Vec<(StreamOf, Container)> {
    let several_jobs = request.jobs.len() > 1;
    let per_container = request.containers == Containers::All;
    replicas
        .iter()
        .filter(|r| wanted(r, &request.replicas))
        .flat_map(|r| {
            let kind = found[r.job_index].job.kind;
            chosen(r, kind, &request.containers)
                .into_iter()
                .map(move |c| {
                    let of = StreamOf {
                        namespace: r.namespace.clone(),
                        pod: r.pod.clone(),
                        uid: r.uid.clone(),
                        node: r.node.clone(),
                        container: c.name.clone(),
                        label: label(r, several_jobs, per_container.then_some(c.name.as_str())),
                    };
                    (of, c.clone())
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::operator::training::framework::TrainingJob;
    use crate::operator::training::frameworks::tensorflow::TFJob;

    fn pod(name: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": name, "labels": labels},
            "spec": {"containers": [{"name": "sidecar", "image": "s"},
                                    {"name": "tensorflow", "image": "t"}]}
        }))
        .expect("a Pod")
    }

    fn labels(replica_type: &str, index: i64) -> serde_json::Value {
        json!({"training.kubeflow.org/job-name": "mnist",
               "training.kubeflow.org/replica-type": replica_type,
               "training.kubeflow.org/replica-index": index.to_string()})
    }

    fn found(pods: Vec<Pod>) -> Found {
        Found {
            job: super::super::JobRef {
                kind: TFJob::FRAMEWORK.into(),
                namespace: "ml".into(),
                name: "mnist".into(),
            },
            object: json!({"spec": {"tfReplicaSpecs": {"PS": {"replicas": 1},
                                                       "Worker": {"replicas": 3}}}}),
            pods,
        }
    }

    #[test]
    fn a_replica_is_its_pod_name_without_the_job_and_sorts_by_type_then_index() {
        let jobs = [found(vec![
            pod("mnist-worker-10", labels("worker", 10)),
            pod("mnist-worker-2", labels("worker", 2)),
            pod("mnist-chief-0", labels("chief", 0)),
            pod("adopted", labels("ps", 0)),
        ])];
        let names: Vec<String> = replicas(&jobs).into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["chief-0", "ps-0", "worker-2", "worker-10"]);
    }

    #[test]
    fn the_label_names_the_job_when_several_are_read_and_the_container_when_several_are() {
        let replica = replica(
            TFJob::FRAMEWORK.into(),
            "mnist",
            &json!({}),
            &pod("mnist-worker-1", labels("worker", 1)),
        );
        assert_eq!(label(&replica, false, None), "worker-1");
        assert_eq!(label(&replica, true, None), "mnist/worker-1");
        assert_eq!(
            label(&replica, true, Some("sidecar")),
            "mnist/worker-1/sidecar"
        );
        assert_eq!(prefix_of(&replica), "worker-1");
    }

    fn prefix_of(replica: &Replica) -> String {
        label(replica, false, None)
    }

    #[test]
    fn a_replica_is_picked_by_its_name_type_pod_or_job_and_name() {
        let replica = replica(
            TFJob::FRAMEWORK.into(),
            "mnist",
            &json!({}),
            &pod("mnist-worker-1", labels("worker", 1)),
        );
        for name in ["worker-1", "worker", "mnist-worker-1", "mnist/worker-1"] {
            assert!(matches(&replica, name), "{name}");
        }
        for name in ["worker-0", "ps", "other/worker-1", "1"] {
            assert!(!matches(&replica, name), "{name}");
        }
    }

    #[test]
    fn a_missing_replica_lists_those_there_unless_following_one_the_spec_plans() {
        let jobs = [found(vec![pod("mnist-worker-0", labels("worker", 0))])];
        let all = replicas(&jobs);
        let error = pick(all.clone(), &["worker-2".into()], &jobs, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "tfjob ml/mnist has no replica `worker-2`; its replicas are worker-0; ps-0, \
                 worker-1, worker-2 of the spec have no pod now (deleted, or not made yet)\n"
            ),
            "{error}"
        );
        let one_gone = [Found {
            object: json!({"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}}),
            ..found(vec![pod("mnist-worker-0", labels("worker", 0))])
        }];
        let error = pick(replicas(&one_gone), &["chief".into()], &one_gone, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "tfjob ml/mnist has no replica `chief`; its replicas are worker-0; worker-1 of \
                 the spec has no pod now (deleted, or not made yet)\n"
            ),
            "{error}"
        );
        assert_eq!(
            pick(all.clone(), &["worker-2".into()], &jobs, true)
                .expect("worker-2 is planned")
                .len(),
            0
        );
        assert!(pick(all.clone(), &["ps".into()], &jobs, true).is_ok());
        assert!(pick(all, &["evaluator-0".into()], &jobs, true).is_err());
        assert_eq!(
            planned(TFJob::FRAMEWORK.into(), &jobs[0].object),
            ["ps-0", "worker-0", "worker-1", "worker-2"]
        );
    }

    #[test]
    fn the_frameworks_container_is_read_and_a_container_no_pod_has_is_an_error() {
        let jobs = [found(vec![pod("mnist-worker-0", labels("worker", 0))])];
        let all = replicas(&jobs);
        let main: Vec<&str> = chosen(&all[0], TFJob::FRAMEWORK.into(), &Containers::Main)
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(main, ["tensorflow"]);
        assert!(check_container(&all, &Containers::Named("sidecar".into()), &jobs).is_ok());
        let error = check_container(&all, &Containers::Named("nope".into()), &jobs)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "no pod of tfjob ml/mnist has a container `nope`; they have sidecar, tensorflow\n"
            ),
            "{error}"
        );
        // Before a pod has a status, its containers wait.
        assert_eq!(
            all[0].containers[1].state,
            State::Waiting("no status yet".into())
        );
    }
}
