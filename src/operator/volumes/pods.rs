//! The pods the volume controller creates: a fetcher per replica of an S3 volume, which copies
//! the objects into a directory of its node, and a cleaner per node once the VolumeManager is
//! deleted, which removes that node's directory. Both run mlkube's own image (the operator's),
//! as `mlkube volume-fetch` and `mlkube volume-clean`.
//!
//! A VolumeManager's data lives on each node under `<root>/<its uid>/<volume>`: the uid keeps
//! a VolumeManager created again under the same name from meeting the old one's data, and one
//! directory per VolumeManager lets the cleaner remove all of it at once.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::api::{VolumeConfig, VolumeManager};
use super::source::S3Source;

/// The label that marks the controller's pods, `fetch` or `clean`; the pod watch selects it.
pub const ROLE: &str = "kvc.kubeflow.org/role";
/// The uid of the VolumeManager a pod works for.
pub const OWNER_UID: &str = "kvc.kubeflow.org/volume-manager-uid";
/// The volume a fetcher places, as [`slug`] names it.
pub const VOLUME: &str = "kvc.kubeflow.org/volume";
/// Which replica of its volume a fetcher places.
pub const REPLICA: &str = "kvc.kubeflow.org/replica";
pub const FETCH: &str = "fetch";
/// `--volume-image`'s default: this build's own operator image (image/build.sh).
pub const DEFAULT_IMAGE: &str = concat!("mlkube/mlkube:", env!("CARGO_PKG_VERSION"));
pub const CLEAN: &str = "clean";

/// Where fetchers mount their VolumeManager's directory, and cleaners the root.
const MOUNT: &str = "/kvc";
/// The environment variables the fetcher reads the access key from, and the Secret keys they
/// are taken from: KVC's own names first, then the AWS CLI's.
pub const CREDENTIAL_KEYS: [(&str, &str); 4] = [
    ("KVC_AWS_ACCESS_KEY_ID", "awsAccessKeyID"),
    ("KVC_AWS_SECRET_ACCESS_KEY", "awsSecretAccessKey"),
    ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
    ("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
];

/// Where the data goes, which image places it, and which Secrets fetchers may be given, from
/// the operator's flags.
#[derive(Clone, Debug)]
pub struct Placement {
    /// The directory on each node under which VolumeManagers' data lives.
    pub root: String,
    /// The image with the mlkube binary, for fetchers and cleaners.
    pub image: String,
    /// The Secrets a VolumeManager may name for its access key (`--volume-secrets`): the store
    /// credentials the namespace was granted. `None`: any Secret of the namespace.
    pub secrets: Option<Vec<String>>,
}

/// A volume id as it may appear in names and labels: itself when it already is a DNS label of
/// at most 20 characters, else its safe characters and a hash (two ids never meet).
pub fn slug(id: &str) -> String {
    let safe: String = id
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let safe = safe.trim_matches('-');
    if safe == id && !id.is_empty() && id.len() <= 20 {
        return id.to_owned();
    }
    let short: String = safe.chars().take(12).collect();
    let short = short.trim_end_matches('-');
    if short.is_empty() {
        format!("v{}", hash8(id))
    } else {
        format!("{short}-{}", hash8(id))
    }
}

/// The first 8 hex digits of `text`'s SHA-256.
pub fn hash8(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The directory on a node that holds `vm`'s data.
pub fn manager_dir(placement: &Placement, vm: &VolumeManager) -> String {
    format!(
        "{}/{}",
        placement.root.trim_end_matches('/'),
        vm.uid().unwrap_or_default()
    )
}

/// The directory on a node that holds one volume of `vm`.
pub fn volume_dir(placement: &Placement, vm: &VolumeManager, slug: &str) -> String {
    format!("{}/{slug}", manager_dir(placement, vm))
}

/// A child's name: `<vm>-<suffix>`, the VolumeManager's name shortened where it would be long.
fn child_name(vm: &VolumeManager, suffix: &str) -> String {
    let name = vm.name_any();
    let keep: String = name.chars().take(200).collect();
    format!("{keep}-{suffix}")
}

/// The name of the fetcher of replica `replica` of the volume `slug`.
pub fn fetcher_name(vm: &VolumeManager, slug: &str, replica: i64) -> String {
    child_name(vm, &format!("{slug}-{replica}"))
}

/// The name of the cleaner of `node`.
pub fn cleaner_name(vm: &VolumeManager, node: &str) -> String {
    child_name(vm, &format!("clean-{}", hash8(node)))
}

/// The labels and owner every child of `vm` carries.
fn metadata(
    vm: &VolumeManager,
    name: String,
    mut labels: BTreeMap<String, String>,
) -> serde_json::Value {
    labels.insert(OWNER_UID.to_owned(), vm.uid().unwrap_or_default());
    let owner = vm.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = Some(true);
        o
    });
    json!({
        "name": name,
        "namespace": vm.namespace(),
        "labels": labels,
        "ownerReferences": owner.into_iter().collect::<Vec<_>>(),
    })
}

/// The container's security: root (hostPath directories belong to root) without any
/// capability, privilege escalation or writable root filesystem.
fn security() -> serde_json::Value {
    json!({
        "runAsUser": 0,
        "runAsNonRoot": false,
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": { "drop": ["ALL"] },
    })
}

/// The fetcher of replica `replica` of `config`'s volume, from `source`. Replicas of one
/// volume repel each other, so each lands on another node. The error says why the entry makes
/// no valid pod.
pub fn fetcher(
    placement: &Placement,
    vm: &VolumeManager,
    config: &VolumeConfig,
    source: &S3Source,
    replica: i64,
) -> Result<Pod, String> {
    let slug = slug(&config.id);
    let mut labels = config.labels.clone();
    labels.insert(ROLE.to_owned(), FETCH.to_owned());
    labels.insert(VOLUME.to_owned(), slug.clone());
    labels.insert(REPLICA.to_owned(), replica.to_string());
    let siblings = json!({ "matchLabels": {
        OWNER_UID: vm.uid().unwrap_or_default(), VOLUME: slug, ROLE: FETCH,
    }});
    let mut affinity = json!({ "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
        { "labelSelector": siblings, "topologyKey": "kubernetes.io/hostname" },
    ]}});
    if let Some(node_affinity) = config.valid_node_affinity() {
        affinity["nodeAffinity"] = json!(node_affinity);
    }
    let env: Vec<_> = CREDENTIAL_KEYS
        .iter()
        .map(|(var, key)| {
            json!({ "name": var, "valueFrom": { "secretKeyRef": {
                "name": source.secret, "key": key, "optional": true,
            }}})
        })
        .collect();
    let timeout = source.timeout.as_secs();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(vm, fetcher_name(vm, &slug, replica), labels),
        "spec": {
            "restartPolicy": "Never",
            // The fetcher keeps its own time; this ends a pod that hangs past it anyway.
            "activeDeadlineSeconds": timeout + 60,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "affinity": affinity,
            "tolerations": config.tolerations.entries(),
            "containers": [{
                "name": "fetch",
                "image": placement.image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/usr/local/bin/mlkube", "volume-fetch"],
                "args": [
                    "--endpoint", source.endpoint,
                    "--bucket", source.bucket,
                    "--prefix", source.prefix,
                    "--region", source.region,
                    "--secret", source.secret,
                    "--timeout", format!("{timeout}s"),
                    "--dest", format!("{MOUNT}/{slug}"),
                ],
                "env": env,
                "volumeMounts": [{ "name": "data", "mountPath": MOUNT }],
                "resources": { "requests": { "cpu": "50m", "memory": "32Mi" } },
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "securityContext": security(),
            }],
            "volumes": [{ "name": "data", "hostPath": {
                "path": manager_dir(placement, vm), "type": "DirectoryOrCreate",
            }}],
        },
    });
    serde_json::from_value(pod).map_err(|e| format!("makes no valid fetcher pod: {e}"))
}

/// The cleaner that removes `vm`'s directory from `node`. Bound to the node by name, past the
/// scheduler and any taint, since the data is there whatever the node's state. The error says
/// why no valid pod could be made (a node name written into the status by hand).
pub fn cleaner(placement: &Placement, vm: &VolumeManager, node: &str) -> Result<Pod, String> {
    let labels = BTreeMap::from([(ROLE.to_owned(), CLEAN.to_owned())]);
    let uid = vm.uid().unwrap_or_default();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(vm, cleaner_name(vm, node), labels),
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "tolerations": [{ "operator": "Exists" }],
            "containers": [{
                "name": "clean",
                "image": placement.image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/usr/local/bin/mlkube", "volume-clean"],
                "args": [format!("{MOUNT}/{uid}")],
                "volumeMounts": [{ "name": "root", "mountPath": MOUNT }],
                "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } },
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "securityContext": security(),
            }],
            "volumes": [{ "name": "root", "hostPath": {
                "path": placement.root, "type": "DirectoryOrCreate",
            }}],
        },
    });
    serde_json::from_value(pod).map_err(|e| format!("makes no valid cleaner pod: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_the_id_when_it_is_a_short_dns_label() {
        assert_eq!(slug("digits"), "digits");
        assert_eq!(slug("train-1"), "train-1");
        let odd = slug("Train Data/2026");
        assert!(odd.starts_with("train-data-2-"), "{odd}");
        assert_ne!(slug("a_b"), slug("a.b"));
        assert!(slug("___").starts_with('v'));
        assert!(slug(&"x".repeat(100)).len() <= 21);
    }
}
