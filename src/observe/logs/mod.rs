//! `mlkube logs`: the container logs of training jobs' replicas, every line tagged with the
//! replica that wrote it (`worker-1 | ...`; `{job}/worker-1 | ...` when several jobs are read).
//!
//! Expected flow: read each job (its kind's resource in its namespace) and list its pods by the
//! operator's `training.kubeflow.org/job-name` label; name each pod's replica, the pod's name
//! without `{job}-` ([`replicas`]); keep the replicas asked for; then read the chosen container
//! of each through the API server, which gets it from the kubelet of the pod's node. Every
//! stream asks for the kubelet's timestamps: without `--follow` the streams are read together
//! and merged by them, so lines come in the order they were written ([`read`]); with it, lines
//! are printed as they arrive, the pods are listed again every second, a pod that appears is
//! followed once its container starts, a container that restarts is followed again from its new
//! start, and it ends when every job has finished and every stream has ended, or at the
//! caller's [`Cancel`] ([`follow`]). The timestamps are printed only when asked for.
//!
//! Everything that decides (kinds, replica names, which replicas and containers, when to open a
//! stream, the merge order, the messages) is pure and tested with a source in memory; the
//! cluster is behind [`LogSource`], and [`source::KubeSource`] is the only part that talks to
//! an API server. Nothing is printed here: lines and notes go to an [`Output`].
//!
//! Errors, each with a hint: a kind that is not a training job's, a job that does not exist
//! (naming what was searched), a job without pods (with its state), a replica or container that
//! does not exist (listing those that do), a kubelet that does not serve logs (naming the node),
//! an API server that does not answer within the request timeout.
//!
//! Caveats: kwok's simulated nodes serve no logs. A finished job whose pods keep running
//! (`cleanPodPolicy: None` and a parameter server that never exits) is followed until Ctrl-C.
//! A stream cut short while its container still runs is opened again from the second of its
//! last line, and lines of that second already printed are skipped by their timestamps.

// Errors end the run: what matters is the fields they carry for the message, not their size.
#![allow(clippy::result_large_err)]

pub mod follow;
pub mod jobs;
pub mod kind;
pub mod outcome;
pub mod read;
pub mod replicas;
pub mod source;
#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::LogParams;

use crate::deploy::cluster::ClusterError;
use crate::deploy::cluster::cancel::Cancel;

pub use jobs::JobRef;
pub use kind::JobKind;
pub use outcome::Outcome;
pub use source::LogSource;

/// Which containers of each replica's pod to read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Containers {
    /// The framework's own container (`tensorflow`, `pytorch`, ...), else the pod's first.
    #[default]
    Main,
    /// The container of this name.
    Named(String),
    /// Every container, init containers first.
    All,
}

/// What to read and how, as the command line asked.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub jobs: Vec<JobRef>,
    /// Replicas to keep: `worker-0`, a replica type (`worker`), a pod's name, or
    /// `{job}/worker-0`; empty keeps every one.
    pub replicas: Vec<String>,
    pub containers: Containers,
    pub follow: bool,
    /// The previous instance of each container (one that restarted), not the current one.
    pub previous: bool,
    /// Only lines newer than this.
    pub since: Option<Duration>,
    /// Only the last lines of each container, this many.
    pub tail: Option<i64>,
    /// Print the kubelet's timestamp before each line.
    pub timestamps: bool,
    /// The environment the jobs were rendered from, for hints; `None` for `KIND/NAME`.
    pub env: Option<String>,
}

impl Request {
    /// The log parameters of a container's first stream: what the user asked for, with the
    /// timestamps every stream carries.
    fn first_params(&self, container: &str) -> LogParams {
        LogParams {
            container: Some(container.to_string()),
            follow: self.follow,
            previous: self.previous,
            since_seconds: self.since.map(|s| s.as_secs().max(1) as i64),
            tail_lines: self.tail,
            timestamps: true,
            ..LogParams::default()
        }
    }
}

/// Where the logs go: lines to the data stream, notes (what is waited for, what is skipped) to
/// the messages.
pub trait Output: Send {
    /// One line of logs, prefixed, without its newline.
    fn line(&mut self, line: &str) -> std::io::Result<()>;
    /// A message for the user, without `mlkube: `.
    fn note(&mut self, note: &str);
}

#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error(
        "`{kind}` is not a kind of training job\n  hint: name the job as KIND/NAME, KIND one of \
         {kinds} (or its plural, e.g. tfjobs/mnist)"
    )]
    UnknownKind { kind: String, kinds: String },
    #[error(
        "`{target}` is not KIND/NAME\n  hint: name a training job as KIND/NAME, e.g. \
         tfjob/mnist"
    )]
    BadTarget { target: String },
    #[error("{job} not found ({searched})\n  hint: {hint}")]
    JobNotFound {
        job: String,
        searched: String,
        hint: String,
    },
    #[error(
        "{jobs} not found on the cluster\n  hint: the environment renders {them}: apply it first \
         (`mlkube apply {env}`)"
    )]
    NotApplied {
        jobs: String,
        them: &'static str,
        env: String,
    },
    #[error(
        "the cluster does not serve {resource}, so there is no {job}\n  hint: apply the \
         training-job CRDs first (a component of the training-operator prototype has them)"
    )]
    KindNotServed { job: String, resource: String },
    #[error("{job} has no pods {state}\n  hint: {hint}")]
    NoPods {
        job: String,
        state: String,
        hint: &'static str,
    },
    #[error("none of the jobs has pods: {each}\n  hint: {hint}")]
    NoPodsInAny { each: String, hint: &'static str },
    #[error(
        "{jobs} has no replica `{wanted}`; its replicas are {existing}{podless}\n  hint: pass one \
         of them to --replica, or a replica type (e.g. worker) for all of that type"
    )]
    NoSuchReplica {
        jobs: String,
        wanted: String,
        existing: String,
        /// The replicas of the spec that have no pod now, said after `existing`.
        podless: String,
    },
    #[error(
        "no pod of {jobs} has a container `{container}`; they have {have}\n  hint: pass one of \
         them to --container, or --all-containers"
    )]
    NoSuchContainer {
        jobs: String,
        container: String,
        have: String,
    },
    #[error(
        "{reasons}\n  hint: the job cannot get past it; fix what the message names, then apply \
         again"
    )]
    Stuck { reasons: String },
    #[error("there are no logs to read yet: {reasons}\n  hint: {hint}")]
    NothingToRead { reasons: String, hint: &'static str },
    #[error(
        "there are no logs to read: {reasons}\n  hint: the API server reads a container's log \
         from the kubelet of the pod's node; kwok's simulated nodes run no containers and serve \
         none"
    )]
    NotServed { reasons: String },
    #[error(
        "the kubelet did not serve the logs of {replica} (pod {namespace}/{pod}, container \
         {container}, node {node})\n  hint: the API server reads container logs from the kubelet \
         of the pod's node: is it running and reachable from the API server? (kwok's simulated \
         nodes serve no logs)"
    )]
    Kubelet {
        replica: String,
        namespace: String,
        pod: String,
        container: String,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the API server {server} (context `{context}`) did not start sending the logs of \
         {replica} (pod {namespace}/{pod}, node {node}) within {timeout}\n  hint: it reads them \
         from the kubelet of node {node}: is that kubelet running and reachable from the API \
         server? --request-timeout allows longer"
    )]
    LogTimeout {
        server: String,
        context: String,
        replica: String,
        namespace: String,
        pod: String,
        node: String,
        timeout: String,
    },
    #[error("cannot read {job}")]
    ReadJob {
        job: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot list the pods of {job}")]
    ListPods {
        job: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read the logs of {replica} (pod {namespace}/{pod}, container {container})")]
    Logs {
        replica: String,
        namespace: String,
        pod: String,
        container: String,
        #[source]
        source: kube::Error,
    },
    #[error("the logs of {replica} (pod {namespace}/{pod}, container {container}) broke off")]
    Stream {
        replica: String,
        namespace: String,
        pod: String,
        container: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "kubeconfig {source_name} has no current context\n  hint: pass --context NAME, or set \
         one with `kubectl config use-context NAME`"
    )]
    NoContext { source_name: String },
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("cannot write the logs to stdout")]
    Output(#[source] std::io::Error),
}

/// Read the logs `request` asks for from `source` into `out`, until they end (or, following,
/// until every job has finished and its streams have ended, or `cancel` comes); then note how
/// the containers that did not succeed ended and which jobs failed ([`outcome`]).
pub async fn logs(
    source: &impl LogSource,
    request: &Request,
    out: &mut dyn Output,
    cancel: &Cancel,
) -> Result<Outcome, LogsError> {
    let found = jobs::find(source, request, out).await?;
    let last = if request.follow {
        follow::follow(source, request, &found, out, cancel).await?
    } else {
        read::read(source, request, &found, out).await?;
        found
    };
    Ok(outcome::report(&last, request, out))
}

/// A line of logs as the kubelet sends it with timestamps: the time and the rest.
pub fn split_timestamp(line: &str) -> (Option<Timestamp>, &str) {
    match line.split_once(' ') {
        Some((stamp, rest)) => match stamp.parse::<Timestamp>() {
            Ok(time) => (Some(time), rest),
            Err(_) => (None, line),
        },
        None => match line.parse::<Timestamp>() {
            // An empty line: the kubelet sends its timestamp alone.
            Ok(time) => (Some(time), ""),
            Err(_) => (None, line),
        },
    }
}

/// `worker-1 | text`, the label padded to `width` so the text of every replica lines up.
pub fn prefixed(label: &str, width: usize, text: &str) -> String {
    format!("{label:<width$} | {text}")
}

/// Writes the lines of every stream, tagged, their labels padded to the widest seen so far.
struct Printer {
    width: usize,
    timestamps: bool,
}

impl Printer {
    fn new(timestamps: bool) -> Printer {
        Printer {
            width: 0,
            timestamps,
        }
    }

    fn widen(&mut self, label: &str) {
        self.width = self.width.max(label.len());
    }

    /// Print a line as the kubelet sent it (with its timestamp); `false` once the reader went
    /// away (a closed pipe, as `mlkube logs ... | head`), which ends the command quietly.
    fn print(&mut self, out: &mut dyn Output, label: &str, line: &str) -> Result<bool, LogsError> {
        let text = if self.timestamps {
            line
        } else {
            split_timestamp(line).1
        };
        match out.line(&prefixed(label, self.width, text)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(error) => Err(LogsError::Output(error)),
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_kubelet_timestamp_is_split_from_its_line_and_a_line_without_one_is_left_alone() {
        let (time, rest) = split_timestamp("2026-01-01T10:00:00.123456789Z step 1 of 10");
        assert_eq!(
            time.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T10:00:00.123456789Z")
        );
        assert_eq!(rest, "step 1 of 10");
        assert_eq!(split_timestamp("2026-01-01T10:00:00Z").1, "");
        assert_eq!(split_timestamp("no time here"), (None, "no time here"));
    }

    #[test]
    fn labels_are_padded_so_the_text_lines_up() {
        assert_eq!(prefixed("ps-0", 8, "x"), "ps-0     | x");
        assert_eq!(prefixed("worker-10", 8, "x"), "worker-10 | x");
    }
}
