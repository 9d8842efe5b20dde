//! The `kvc.kubeflow.org/v1` VolumeManager, as the component's CRD
//! (`crds/volumemanagers.kvc.kubeflow.org.yaml`) defines it and Kubeflow's KVC wrote it.
//!
//! Field names follow upstream's Go types, so a VolumeManager written for KVC reads unchanged.
//! Every field the API server may leave out is optional here: a watch must never choke on one
//! object, and what is missing is reported in the status instead. One addition lives in the
//! status and is optional, so upstream clients ignore it: each volume's own `state`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{HostPathVolumeSource, NFSVolumeSource, NodeAffinity, Toleration};
use kube::CustomResource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The options key that names the Secret with the S3 access key.
pub const CREDENTIALS_SECRET: &str = "awsCredentialsSecretName";
/// The options key of the download's time limit.
pub const DOWNLOAD_TIMEOUT: &str = "timeoutForDataDownload";
/// The options key of the S3 region (default `us-east-1`).
pub const REGION: &str = "region";
/// The longest volume id: a DNS label's length, so that `/data/<id>` is a file name anywhere.
pub const MAX_ID_LENGTH: usize = 63;
/// The most replicas a volume may have: the most nodes Kubernetes supports in one cluster.
pub const MAX_REPLICAS: i64 = 5000;

/// A request for volumes filled from data sources, made available on nodes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kvc.kubeflow.org",
    version = "v1",
    kind = "VolumeManager",
    plural = "volumemanagers",
    namespaced,
    status = "VolumeManagerStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeManagerSpec {
    /// The volumes to provide, one per data source.
    #[serde(default)]
    pub volume_configs: Vec<VolumeConfig>,
    /// Set by upstream's controller; kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// Whether `id` can name the directory that a job mounts its volume at (`/data/<id>`): at most
/// [`MAX_ID_LENGTH`] ASCII letters, digits, `-`, `_` and `.`, and neither `.` nor `..`.
pub fn is_directory_name(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LENGTH
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// One volume: where its data comes from, and on how many nodes it is placed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeConfig {
    /// Names the volume within its VolumeManager; `status.volumes` uses it.
    #[serde(default)]
    pub id: String,
    /// How many distinct nodes hold a copy of the data (never two copies on one node).
    #[serde(default)]
    pub replicas: i64,
    /// `S3`, `S3-Dev`, `NFS` or `Pachyderm`.
    #[serde(default)]
    pub source_type: String,
    #[serde(
        default,
        rename = "endpointURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub endpoint_url: Option<String>,
    #[serde(default, rename = "sourceURL", skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<serde_json::Value>,
    /// Restricts the nodes that may hold the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<Checked<NodeAffinity>>,
    /// Tolerations of the pods that place the data.
    #[serde(default, skip_serializing_if = "Checked::is_empty")]
    pub tolerations: Checked<Vec<Toleration>>,
    /// Labels put on the pods the controller creates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The source's options (see the module constants and docs/data.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

impl VolumeConfig {
    /// The node affinity, when it has the API's shape (the plan fails the volume otherwise).
    pub fn valid_node_affinity(&self) -> Option<&NodeAffinity> {
        self.node_affinity.as_ref()?.get().ok()
    }
}

/// What the controller reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeManagerStatus {
    #[serde(default, deserialize_with = "lenient")]
    pub volumes: Vec<VolumeStatus>,
    /// The state of the whole: Failed if a volume failed, else the least advanced volume's.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub state: Option<State>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub message: Option<String>,
    /// Every node a fetcher was scheduled to, kept after its pod is gone (a lost node's pod is
    /// removed without the controller): the deletion cleans each one's copy, whole or partial.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient"
    )]
    pub nodes_to_clean: Vec<String>,
}

/// One volume's state, and how a pod reads it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStatus {
    #[serde(default)]
    pub id: String,
    /// What a pod mounts to read the data (once Completed).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub volume_source: Option<VolumeSource>,
    /// The nodes that hold (or are getting) the data; a pod that reads it copies this.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub node_affinity: Option<NodeAffinity>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub state: Option<State>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub message: Option<String>,
}

/// A field of a core/v1 type that the CRD once kept unchecked (`x-kubernetes-preserve-unknown-fields`),
/// so an object stored then may hold any shape there. Read as written either way, so that one
/// such object never fails a list or a watch of all the others: the plan fails it alone, with
/// [`Checked::get`]'s message. Written back exactly as it was read.
#[derive(Clone, Debug, PartialEq)]
pub enum Checked<T> {
    Valid(T),
    Invalid {
        value: serde_json::Value,
        error: String,
    },
}

impl<T> Checked<T> {
    /// The typed value, or what is wrong with the one written.
    pub fn get(&self) -> Result<&T, &str> {
        match self {
            Checked::Valid(value) => Ok(value),
            Checked::Invalid { error, .. } => Err(error),
        }
    }
}

impl<T> Checked<Vec<T>> {
    /// The valid entries; none when the list has another shape (the plan has failed it).
    pub fn entries(&self) -> &[T] {
        self.get().map_or(&[], Vec::as_slice)
    }

    fn is_empty(&self) -> bool {
        matches!(self, Checked::Valid(list) if list.is_empty())
    }
}

impl<T: Default> Default for Checked<T> {
    fn default() -> Self {
        Checked::Valid(T::default())
    }
}

impl<T: Serialize> Serialize for Checked<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Checked::Valid(value) => value.serialize(serializer),
            Checked::Invalid { value, .. } => value.serialize(serializer),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(match T::deserialize(&value) {
            Ok(typed) => Checked::Valid(typed),
            Err(e) => Checked::Invalid {
                value,
                error: e.to_string(),
            },
        })
    }
}

/// A status field as written, or its default when the one written has another shape: the status
/// is the controller's own record, which it writes again, and a hand-written one must not fail
/// the watch of every VolumeManager.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(
    deserializer: D,
) -> Result<T, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// A core/v1 VolumeSource, of the kinds this controller reports: a pod copies it into one of
/// its `volumes` under a name of its own.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NFSVolumeSource>,
}

/// How far a volume, or a VolumeManager, is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Waiting for its pods to be scheduled.
    Pending,
    /// Its data is being placed.
    Running,
    /// The data is in place: mount `volumeSource` on a node of `nodeAffinity`.
    Completed,
    /// It cannot be placed; the message says why. One with too few eligible nodes for its
    /// replicas goes on once there are enough.
    Failed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "Pending",
            State::Running => "Running",
            State::Completed => "Completed",
            State::Failed => "Failed",
        }
    }
}
