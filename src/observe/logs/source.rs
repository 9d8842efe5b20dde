//! Where logs come from: the [`LogSource`] seam (read a job, list its pods, open a container's
//! log stream) and its implementation on an API server, [`KubeSource`].
//!
//! The client has no read timeout, as a followed stream may be quiet for hours; instead every
//! request is bounded here by the request timeout until its answer starts (for a log stream:
//! until the kubelet starts sending), so a silent API server or a kubelet it cannot reach is an
//! error naming them, never a hang.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::{AsyncBufRead, AsyncBufReadExt, Stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, LogParams};
use kube::config::KubeConfigOptions;
use kube::{Client, Config};
use serde_json::Value;

use super::{JobRef, LogsError};
use crate::deploy::cluster::{self, ClusterError, Target};

/// A container log as the API server streams it.
pub type LogStream = Pin<Box<dyn AsyncBufRead + Send>>;

/// One container of one replica's pod whose log is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOf {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub container: String,
    /// What its lines are tagged with, `worker-1`.
    pub label: String,
}

/// Why the API server gave no stream for a container.
#[derive(Debug)]
pub enum Refused {
    /// The pod is gone.
    Gone,
    /// The pod is there, but the kubelet of its node has no log of it: kwok's simulated nodes
    /// answer so for every pod, a real kubelet for a pod it does not run (with its words).
    NotServed(Option<String>),
    /// The container has not started, or has no previous instance: the API server's words.
    NotYet(String),
    /// Anything else ends the command with this error.
    Failed(LogsError),
}

/// The calls `logs` makes on a cluster.
pub trait LogSource: Sync {
    /// The job, or `None` when it does not exist.
    fn job(&self, job: &JobRef) -> impl Future<Output = Result<Option<Value>, LogsError>> + Send;

    /// The job's pods, by the operator's job-name label.
    fn pods(&self, job: &JobRef) -> impl Future<Output = Result<Vec<Pod>, LogsError>> + Send;

    /// A container's log.
    fn open(
        &self,
        of: &StreamOf,
        params: LogParams,
    ) -> impl Future<Output = Result<LogStream, Refused>> + Send;
}

/// The lines of a log, without their line ends; bytes that are not UTF-8 are replaced, not
/// an error (a process may write anything).
pub fn lines(log: LogStream) -> impl Stream<Item = std::io::Result<String>> + Send {
    futures::stream::unfold(log, |mut log| async move {
        let mut buffer = Vec::new();
        match log.read_until(b'\n', &mut buffer).await {
            Ok(0) => None,
            Ok(_) => {
                if buffer.last() == Some(&b'\n') {
                    buffer.pop();
                }
                if buffer.last() == Some(&b'\r') {
                    buffer.pop();
                }
                Some((Ok(String::from_utf8_lossy(&buffer).into_owned()), log))
            }
            Err(error) => Some((Err(error), log)),
        }
    })
}

/// An API server, through a client with no read timeout.
pub struct KubeSource {
    client: Client,
    pub context: String,
    pub server: String,
    /// The namespace of the kubeconfig context (`default` when it names none).
    pub namespace: String,
    timeout: Duration,
}

impl KubeSource {
    /// Choose the kubeconfig context for `target` as every cluster verb does, and build a
    /// client for it. Nothing is sent yet.
    pub async fn connect(target: &Target, timeout: Duration) -> Result<KubeSource, LogsError> {
        let (kubeconfig, source_name) = cluster::load_kubeconfig(target.kubeconfig.as_deref())?;
        let chosen = match cluster::choose_context(&kubeconfig, &source_name, target) {
            // A job named on the command line has no environment for the message to name.
            Err(ClusterError::NoContext { source_name, .. }) if target.env.is_empty() => {
                return Err(LogsError::NoContext { source_name });
            }
            other => other?,
        };
        let options = KubeConfigOptions {
            context: Some(chosen.context.clone()),
            ..Default::default()
        };
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|source| ClusterError::Config {
                context: chosen.context.clone(),
                source_name,
                source,
            })?;
        config.connect_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        config.read_timeout = None;
        let namespace = config.default_namespace.clone();
        let client = Client::try_from(config).map_err(|source| ClusterError::Client {
            context: chosen.context.clone(),
            source,
        })?;
        Ok(KubeSource {
            client,
            context: chosen.context,
            server: chosen.server,
            namespace,
            timeout,
        })
    }

    /// `request` bounded by the request timeout.
    async fn bounded<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, LogsError> {
        tokio::time::timeout(self.timeout, request)
            .await
            .map_err(|_| self.timed_out())
    }

    fn timed_out(&self) -> LogsError {
        LogsError::Cluster(ClusterError::Timeout {
            server: self.server.clone(),
            context: self.context.clone(),
            timeout: cluster::flag_duration(self.timeout),
        })
    }
}

impl LogSource for KubeSource {
    async fn job(&self, job: &JobRef) -> Result<Option<Value>, LogsError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &job.namespace, &job.resource());
        // Not `get_opt`: it takes a resource the server does not serve for a missing object.
        match self.bounded(api.get(&job.name)).await? {
            Ok(object) => Ok(serde_json::to_value(object).ok()),
            Err(error) if not_served(&error) => Err(LogsError::KindNotServed {
                job: job.to_string(),
                resource: format!("{}.{}", job.kind.plural(), job.kind.group()),
            }),
            Err(error) if cluster::is_not_found(&error) => Ok(None),
            Err(error) if cluster::timed_out(&error) => Err(self.timed_out()),
            Err(source) => Err(LogsError::ReadJob {
                job: job.to_string(),
                source,
            }),
        }
    }

    async fn pods(&self, job: &JobRef) -> Result<Vec<Pod>, LogsError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &job.namespace);
        let params =
            ListParams::default().labels(&format!("{}={}", job.kind.job_label(), job.name));
        match self.bounded(api.list(&params)).await? {
            Ok(list) => Ok(list.items),
            Err(error) if cluster::timed_out(&error) => Err(self.timed_out()),
            Err(source) => Err(LogsError::ListPods {
                job: job.to_string(),
                source,
            }),
        }
    }

    async fn open(&self, of: &StreamOf, params: LogParams) -> Result<LogStream, Refused> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &of.namespace);
        let timed_out = || {
            Refused::Failed(LogsError::LogTimeout {
                server: self.server.clone(),
                context: self.context.clone(),
                replica: of.label.clone(),
                namespace: of.namespace.clone(),
                pod: of.pod.clone(),
                node: of.node.clone(),
                timeout: cluster::flag_duration(self.timeout),
            })
        };
        match tokio::time::timeout(self.timeout, api.log_stream(&of.pod, &params)).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(log)) => Ok(Box::pin(log)),
            Ok(Err(error)) if cluster::timed_out(&error) => Err(timed_out()),
            Ok(Err(error)) => Err(refusal(error, of)),
        }
    }
}

/// A 404 for the resource rather than for the object: the API server says which object it
/// did not find, and names none when it serves no such resource.
pub fn not_served(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) if status.code == 404 => {
            status.details.as_ref().is_none_or(|d| d.name.is_empty())
        }
        _ => false,
    }
}

/// What an API server's refusal of a log request means.
pub fn refusal(error: kube::Error, of: &StreamOf) -> Refused {
    match &error {
        kube::Error::Api(status) if status.code == 404 && from_the_node(status) => {
            let words = status.details.iter().flat_map(|d| &d.causes);
            Refused::NotServed(
                words
                    .map(|c| c.message.trim())
                    .find(|m| !m.is_empty())
                    .map(str::to_string),
            )
        }
        kube::Error::Api(status) if status.code == 404 => Refused::Gone,
        // "container ... is waiting to start", "previous terminated container ... not found".
        kube::Error::Api(status) if status.code == 400 => Refused::NotYet(status.message.clone()),
        kube::Error::Api(status) if status.code >= 500 => Refused::Failed(LogsError::Kubelet {
            replica: of.label.clone(),
            namespace: of.namespace.clone(),
            pod: of.pod.clone(),
            container: of.container.clone(),
            node: of.node.clone(),
            source: error,
        }),
        _ => Refused::Failed(LogsError::Logs {
            replica: of.label.clone(),
            namespace: of.namespace.clone(),
            pod: of.pod.clone(),
            container: of.container.clone(),
            source: error,
        }),
    }
}

/// A 404 the API server passed on from the kubelet: it names the log (`pods/log`) that was not
/// found, where a pod that does not exist is named as the pod (`pods`).
fn from_the_node(status: &kube::core::Status) -> bool {
    status
        .details
        .as_ref()
        .is_some_and(|d| d.kind == "pods/log")
}

/// The note on a container whose node served no log of it.
pub fn unserved_note(of: &StreamOf, words: Option<&str>) -> String {
    match words {
        None => format!(
            "{}: the node `{}` serves no logs (a simulated node?)",
            of.label, of.node
        ),
        Some(words) => format!(
            "{}: the node `{}` serves no log of pod {}: {words}",
            of.label, of.node, of.pod
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn api(code: u16, message: &str, details: serde_json::Value) -> kube::Error {
        let status = json!({"status": "Failure", "code": code, "reason": "X",
                            "message": message, "details": details});
        kube::Error::Api(Box::new(serde_json::from_value(status).expect("a Status")))
    }

    fn of() -> StreamOf {
        StreamOf {
            namespace: "ml".into(),
            pod: "mnist-worker-0".into(),
            uid: "u".into(),
            node: "node-1".into(),
            container: "tensorflow".into(),
            label: "worker-0".into(),
        }
    }

    #[test]
    fn a_missing_resource_is_told_from_a_missing_object() {
        let object = api(
            404,
            "tfjobs.kubeflow.org \"x\" not found",
            json!({"name": "x"}),
        );
        assert!(!not_served(&object));
        let resource = api(
            404,
            "the server could not find the requested resource",
            json!({}),
        );
        assert!(not_served(&resource));
        assert!(!not_served(&api(403, "forbidden", json!({}))));
    }

    #[test]
    fn a_refused_log_is_a_gone_pod_a_container_not_ready_or_a_kubelet_that_failed() {
        let gone = "pods \"mnist-worker-0\" not found";
        assert!(matches!(
            refusal(
                api(404, gone, json!({"name": "mnist-worker-0", "kind": "pods"})),
                &of()
            ),
            Refused::Gone
        ));
        let waiting = "container \"tensorflow\" in pod \"mnist-worker-0\" is waiting to start";
        assert!(matches!(
            refusal(api(400, waiting, json!({})), &of()),
            Refused::NotYet(message) if message == waiting
        ));
        let dial = "Get \"https://10.0.0.1:10250/containerLogs/...\": dial tcp: i/o timeout";
        assert!(matches!(
            refusal(api(500, dial, json!({})), &of()),
            Refused::Failed(LogsError::Kubelet { ref node, .. }) if node == "node-1"
        ));
        assert!(matches!(
            refusal(api(403, "forbidden", json!({})), &of()),
            Refused::Failed(LogsError::Logs { .. })
        ));
    }

    #[test]
    fn a_404_the_kubelet_gave_is_a_node_that_serves_no_log_not_a_gone_pod() {
        // As the API server passes on kwok's answer: the log, not the pod, was not found.
        let kwok = api(
            404,
            "the server could not find the requested resource ( pods/log mnist-worker-0)",
            json!({"name": "mnist-worker-0", "kind": "pods/log"}),
        );
        let Refused::NotServed(words) = refusal(kwok, &of()) else {
            panic!("a node that serves no logs");
        };
        assert_eq!(words, None);
        assert_eq!(
            unserved_note(&of(), None),
            "worker-0: the node `node-1` serves no logs (a simulated node?)"
        );
        // A real kubelet says why.
        let kubelet = api(
            404,
            "the server could not find the requested resource ( pods/log mnist-worker-0)",
            json!({"name": "mnist-worker-0", "kind": "pods/log", "causes": [
                {"reason": "UnexpectedServerResponse", "message": "pod does not exist"}]}),
        );
        let Refused::NotServed(words) = refusal(kubelet, &of()) else {
            panic!("a node that serves no log of the pod");
        };
        assert_eq!(
            unserved_note(&of(), words.as_deref()),
            "worker-0: the node `node-1` serves no log of pod mnist-worker-0: pod does not exist"
        );
    }
}
