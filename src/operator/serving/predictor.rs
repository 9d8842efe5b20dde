//! The pod a predictor's revision runs, as KServe builds it: the runtime's serving container
//! with the model's container fields over it (args appended, env merged by name), the
//! runtime's `{{.Name}}`-style placeholders filled from the InferenceService, the runtime's
//! pod fields under the predictor's own, and the model from `storageUri` in `/mnt/models`.
//! Pure: the store's credentials come in as env already read from the ServiceAccount.
//!
//! Storage: `s3://bucket/prefix` is fetched by a `storage-initializer` init container (the
//! serving image's `mlkube_serving.fetch`) into an emptyDir; `pvc://claim/path` mounts the
//! claim read-only at `/mnt/models` (the path as subPath). Other schemes are refused, naming
//! the supported ones.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::api::{InferenceService, ServingRuntimeSpec};

/// Where the serving container reads the model.
pub const MODEL_DIR: &str = "/mnt/models";
/// The name of the serving container, as KServe names it.
pub const SERVING_CONTAINER: &str = "kserve-container";
/// The label every predictor pod carries: the InferenceService's name.
pub const ISVC_LABEL: &str = "serving.kserve.io/inferenceservice";
/// The label of the revision a pod belongs to.
pub const REVISION_LABEL: &str = "serving.mlkube.io/revision";
/// The label of the hash of the pod template a revision runs.
pub const HASH_LABEL: &str = "serving.mlkube.io/template-hash";
const PROVISION_VOLUME: &str = "kserve-provision-location";
const PVC_VOLUME: &str = "kserve-pvc-source";

/// Why a predictor's pod cannot be built; each message names the field to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PredictorError {
    #[error(
        "the predictor has neither model nor containers: give predictor.model (modelFormat and \
         storageUri) or predictor.containers"
    )]
    Empty,
    #[error("runtime {runtime} has no containers: give it one named {SERVING_CONTAINER}")]
    RuntimeWithoutContainer { runtime: String },
    #[error(
        "storageUri {uri:?} is not supported here: use s3://bucket/prefix (the platform's object \
         store) or pvc://claim/path"
    )]
    UnsupportedStorage { uri: String },
    #[error("storageUri {uri:?} is not {form}")]
    MalformedStorage { uri: String, form: &'static str },
    #[error(
        "{place} uses placeholder {placeholder}, which is not filled here: use {{{{.Name}}}}, \
         {{{{.Namespace}}}}, {{{{.Labels.KEY}}}} or {{{{.Annotations.KEY}}}}"
    )]
    Placeholder { place: String, placeholder: String },
    #[error("the predictor's pod is not a pod: {detail}; correct the field it names")]
    NotAPod { detail: String },
}

/// What a revision's pod is built from.
pub struct Inputs<'a> {
    pub isvc: &'a InferenceService,
    /// The selected runtime's name and spec (a model predictor), or none (custom containers).
    pub runtime: Option<(&'a str, &'a ServingRuntimeSpec)>,
    /// The image of the storage initializer: the serving image with `mlkube_serving.fetch`.
    pub storage_image: &'a str,
    /// The store's endpoint and keys for the storage initializer, from the ServiceAccount.
    pub store_env: &'a [EnvVar],
}

/// A revision's pod template (without the revision's own label) and the hash that names it.
pub struct Built {
    pub template: PodTemplateSpec,
    pub hash: String,
}

/// Build the pod template a revision of `inputs.isvc` runs.
pub fn build(inputs: &Inputs) -> Result<Built, PredictorError> {
    let predictor = &inputs.isvc.spec.predictor;
    let (mut containers, runtime_pod) = match (&predictor.model, inputs.runtime) {
        (Some(model), Some((name, runtime))) => {
            let server = serving_container(name, runtime, &model.container)?;
            let sidecars = (runtime.containers.iter())
                .filter(|c| c.get("name").and_then(Value::as_str) != server_name(runtime))
                .cloned();
            let containers: Vec<Value> = std::iter::once(server).chain(sidecars).collect();
            (containers, runtime.pod.clone())
        }
        _ => match &predictor.containers {
            Some(containers) if !containers.is_empty() => (containers.clone(), BTreeMap::new()),
            _ => return Err(PredictorError::Empty),
        },
    };
    let uri = (predictor.model.as_ref()).and_then(|m| m.storage_uri.as_deref());
    let storage = uri.map(storage).transpose()?;
    for container in &mut containers {
        *container = filled(container, inputs.isvc)?;
    }
    let mut pod = pod_fields(&runtime_pod, &predictor.pod);
    if let Some(storage) = &storage {
        mount_model(&mut pod, &mut containers, storage, inputs);
    }
    pod.insert("containers".into(), Value::Array(containers));
    if let Some(account) = &predictor.service_account_name {
        pod.insert("serviceAccountName".into(), json!(account));
    }
    let template = json!({
        "metadata": { "labels": pod_labels(inputs), "annotations": runtime_annotations(inputs) },
        "spec": pod,
    });
    let hash = hex_prefix(&template);
    let template: PodTemplateSpec =
        serde_json::from_value(template).map_err(|e| PredictorError::NotAPod {
            detail: e.to_string(),
        })?;
    Ok(Built { template, hash })
}

/// The name of the runtime's serving container: `kserve-container`, else its first one's.
fn server_name(runtime: &ServingRuntimeSpec) -> Option<&str> {
    let names = || {
        runtime
            .containers
            .iter()
            .filter_map(|c| c.get("name")?.as_str())
    };
    names()
        .find(|n| *n == SERVING_CONTAINER)
        .or_else(|| names().next())
}

/// The runtime's serving container with the model's fields over it: args appended, env merged
/// by name, objects (resources, securityContext) merged key by key, every other field replaced;
/// named `kserve-container`.
fn serving_container(
    name: &str,
    runtime: &ServingRuntimeSpec,
    model: &BTreeMap<String, Value>,
) -> Result<Value, PredictorError> {
    let server = server_name(runtime);
    let base = (runtime.containers.iter())
        .find(|c| c.get("name").and_then(Value::as_str) == server)
        .ok_or_else(|| PredictorError::RuntimeWithoutContainer {
            runtime: name.to_owned(),
        })?;
    let mut merged = base.as_object().cloned().unwrap_or_default();
    for (key, value) in model {
        let joined = match (key.as_str(), merged.get(key)) {
            ("args", Some(Value::Array(before))) => {
                let after = value.as_array().cloned().unwrap_or_default();
                Value::Array(before.iter().cloned().chain(after).collect())
            }
            ("env", Some(Value::Array(before))) => merged_by_name(before, value),
            (_, Some(before)) => merged_objects(before, value),
            (_, None) => value.clone(),
        };
        merged.insert(key.clone(), joined);
    }
    merged.insert("name".into(), json!(SERVING_CONTAINER));
    Ok(Value::Object(merged))
}

/// `after` over `before`: objects merged key by key (as a strategic merge patch merges maps,
/// so a model's `resources.requests` keeps the runtime's limits), anything else replaced.
fn merged_objects(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            let mut merged = before.clone();
            for (key, value) in after {
                let joined = match merged.get(key) {
                    Some(old) => merged_objects(old, value),
                    None => value.clone(),
                };
                merged.insert(key.clone(), joined);
            }
            Value::Object(merged)
        }
        _ => after.clone(),
    }
}

/// `before` with each entry of `after` replacing the one of its name, or appended.
fn merged_by_name(before: &[Value], after: &Value) -> Value {
    let mut list = before.to_vec();
    for entry in after.as_array().into_iter().flatten() {
        match (list.iter_mut())
            .find(|e| e.get("name").is_some() && e.get("name") == entry.get("name"))
        {
            Some(slot) => *slot = entry.clone(),
            None => list.push(entry.clone()),
        }
    }
    Value::Array(list)
}

/// `container` with its placeholders filled from the InferenceService's metadata.
fn filled(container: &Value, isvc: &InferenceService) -> Result<Value, PredictorError> {
    let text = container.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start..].find("}}") else {
            break;
        };
        let placeholder = &rest[start..start + end + 2];
        out.push_str(&rest[..start]);
        let value =
            placeholder_value(placeholder, isvc).ok_or_else(|| PredictorError::Placeholder {
                place: format!(
                    "container {}",
                    container
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("(unnamed)")
                ),
                placeholder: placeholder.to_owned(),
            })?;
        // The value goes inside a JSON string: escaped as one.
        let quoted = Value::String(value).to_string();
        out.push_str(&quoted[1..quoted.len() - 1]);
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).map_err(|e| PredictorError::NotAPod {
        detail: e.to_string(),
    })
}

/// What `{{.Name}}`, `{{.Namespace}}`, `{{.Labels.k}}`, `{{.Annotations.k}}` or
/// `{{index .Annotations "k"}}` stands for; `None` for any other.
fn placeholder_value(placeholder: &str, isvc: &InferenceService) -> Option<String> {
    let inner = placeholder
        .trim_start_matches("{{")
        .trim_end_matches("}}")
        .trim();
    let meta = &isvc.metadata;
    let lookup = |map: &Option<BTreeMap<String, String>>, key: &str| {
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    let indexed = |map: &str| {
        let rest = inner.strip_prefix("index .")?.strip_prefix(map)?.trim();
        Some(rest.trim_matches('"').to_owned())
    };
    match inner {
        ".Name" => meta.name.clone(),
        ".Namespace" => meta.namespace.clone(),
        _ => {
            if let Some(key) = inner.strip_prefix(".Labels.") {
                lookup(&meta.labels, key)
            } else if let Some(key) = inner.strip_prefix(".Annotations.") {
                lookup(&meta.annotations, key)
            } else if let Some(key) = indexed("Labels") {
                lookup(&meta.labels, &key)
            } else {
                lookup(&meta.annotations, &indexed("Annotations")?)
            }
        }
    }
}

/// Where a model is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    S3 { uri: String },
    Pvc { claim: String, path: String },
}

/// The storage `uri` names.
pub fn storage(uri: &str) -> Result<Storage, PredictorError> {
    if let Some(rest) = uri.strip_prefix("s3://") {
        let (bucket, _) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(PredictorError::MalformedStorage {
                uri: uri.to_owned(),
                form: "s3://bucket/prefix",
            });
        }
        return Ok(Storage::S3 {
            uri: uri.to_owned(),
        });
    }
    if let Some(rest) = uri.strip_prefix("pvc://") {
        let (claim, path) = rest.split_once('/').unwrap_or((rest, ""));
        if claim.is_empty() {
            return Err(PredictorError::MalformedStorage {
                uri: uri.to_owned(),
                form: "pvc://claim/path",
            });
        }
        let path = path.trim_matches('/').to_owned();
        return Ok(Storage::Pvc {
            claim: claim.to_owned(),
            path,
        });
    }
    Err(PredictorError::UnsupportedStorage {
        uri: uri.to_owned(),
    })
}

/// The runtime's pod fields with the predictor's over them (volumes merged by name).
fn pod_fields(
    runtime: &BTreeMap<String, Value>,
    predictor: &BTreeMap<String, Value>,
) -> Map<String, Value> {
    // The runtime's own fields that are not pod fields.
    const NOT_POD: [&str; 12] = [
        "supportedModelFormats",
        "multiModel",
        "disabled",
        "protocolVersions",
        "workerSpec",
        "grpcEndpoint",
        "grpcDataEndpoint",
        "httpDataEndpoint",
        "replicas",
        "storageHelper",
        "builtInAdapter",
        "labels",
    ];
    // The predictor's own fields that are not pod fields.
    const NOT_POD_PREDICTOR: [&str; 8] = [
        "timeout",
        "logger",
        "batcher",
        "minReplicas",
        "containerConcurrency",
        "deploymentStrategy",
        "annotations",
        "labels",
    ];
    let mut pod: Map<String, Value> = (runtime.iter())
        .filter(|(k, _)| !NOT_POD.contains(&k.as_str()) && k.as_str() != "annotations")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in predictor {
        if NOT_POD_PREDICTOR.contains(&key.as_str()) || key.starts_with("scale") || key == "name" {
            continue;
        }
        let merged = match (key.as_str(), pod.get(key)) {
            ("volumes", Some(Value::Array(before))) => merged_by_name(before, value),
            _ => value.clone(),
        };
        pod.insert(key.clone(), merged);
    }
    pod
}

/// Put the model at `/mnt/models` in the serving container: fetched by an init container, or
/// the claim mounted.
fn mount_model(
    pod: &mut Map<String, Value>,
    containers: &mut [Value],
    storage: &Storage,
    inputs: &Inputs,
) {
    let (volume, mount) = match storage {
        Storage::S3 { uri } => {
            let initializer = json!({
                "name": "storage-initializer",
                "image": inputs.storage_image,
                "command": ["python3", "-m", "mlkube_serving.fetch", "--uri", uri, "--dest", MODEL_DIR],
                "env": inputs.store_env,
                "volumeMounts": [{ "name": PROVISION_VOLUME, "mountPath": MODEL_DIR }],
                "resources": { "requests": { "cpu": "100m", "memory": "100Mi" }, "limits": { "memory": "1Gi" } },
                // The serving image's user; it writes only the model's volume (and /tmp, none).
                "securityContext": {
                    "runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true, "capabilities": { "drop": ["ALL"] },
                    "seccompProfile": { "type": "RuntimeDefault" },
                },
            });
            push(pod, "initContainers", initializer);
            (
                json!({ "name": PROVISION_VOLUME, "emptyDir": {} }),
                json!({ "name": PROVISION_VOLUME, "mountPath": MODEL_DIR, "readOnly": true }),
            )
        }
        Storage::Pvc { claim, path } => (
            json!({ "name": PVC_VOLUME, "persistentVolumeClaim": { "claimName": claim, "readOnly": true } }),
            json!({ "name": PVC_VOLUME, "mountPath": MODEL_DIR, "subPath": path, "readOnly": true }),
        ),
    };
    push(pod, "volumes", volume);
    if let Some(Value::Object(server)) = containers.first_mut() {
        let mounts = server.entry("volumeMounts").or_insert_with(|| json!([]));
        if let Value::Array(mounts) = mounts {
            mounts.push(mount);
        }
    }
}

fn push(pod: &mut Map<String, Value>, key: &str, value: Value) {
    if let Value::Array(list) = pod.entry(key).or_insert_with(|| json!([])) {
        list.push(value);
    }
}

/// The labels every pod of the predictor carries: the runtime's, then KServe's.
fn pod_labels(inputs: &Inputs) -> BTreeMap<String, String> {
    let runtime = (inputs.runtime)
        .and_then(|(_, r)| r.pod.get("labels"))
        .and_then(|l| serde_json::from_value::<BTreeMap<String, String>>(l.clone()).ok())
        .unwrap_or_default();
    let name = inputs.isvc.metadata.name.clone().unwrap_or_default();
    runtime
        .into_iter()
        .chain([
            (ISVC_LABEL.to_owned(), name.clone()),
            ("component".to_owned(), "predictor".to_owned()),
            ("app".to_owned(), format!("isvc.{name}-predictor")),
        ])
        .collect()
}

fn runtime_annotations(inputs: &Inputs) -> BTreeMap<String, String> {
    let mut annotations = (inputs.runtime)
        .and_then(|(_, r)| r.pod.get("annotations"))
        .and_then(|l| serde_json::from_value::<BTreeMap<String, String>>(l.clone()).ok())
        .unwrap_or_default();
    if let Some((name, _)) = inputs.runtime {
        annotations.insert("serving.kserve.io/runtime".into(), name.to_owned());
    }
    annotations
}

/// The first eight hex digits of the SHA-256 of `value`'s JSON.
pub fn hex_prefix(value: &Value) -> String {
    let digest = Sha256::digest(value.to_string().as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::serving::api::{
        InferenceServiceSpec, ModelFormat, ModelSpec, PredictorSpec,
    };

    fn isvc(model: ModelSpec) -> InferenceService {
        let mut isvc = InferenceService::new(
            "digits",
            InferenceServiceSpec {
                predictor: PredictorSpec {
                    model: Some(model),
                    ..PredictorSpec::default()
                },
                ..InferenceServiceSpec::default()
            },
        );
        isvc.metadata.namespace = Some("team-a".into());
        isvc
    }

    fn runtime() -> ServingRuntimeSpec {
        serde_json::from_value(json!({
            "supportedModelFormats": [{ "name": "xgboost", "autoSelect": true }],
            "containers": [{
                "name": "kserve-container",
                "image": "mlkube/serving:0.1.0",
                "args": ["--name", "{{.Name}}", "--model-dir", "/mnt/models"],
                "env": [{ "name": "A", "value": "1" }, { "name": "NS", "value": "{{.Namespace}}" }],
                "resources": { "requests": { "cpu": "1", "memory": "1Gi" }, "limits": { "memory": "2Gi" } },
            }],
            "nodeSelector": { "kind": "cpu" },
        }))
        .unwrap()
    }

    fn model(uri: &str, container: Value) -> ModelSpec {
        ModelSpec {
            model_format: Some(ModelFormat {
                name: "xgboost".into(),
                version: None,
            }),
            storage_uri: Some(uri.into()),
            container: serde_json::from_value(container).unwrap(),
            ..ModelSpec::default()
        }
    }

    fn built(
        isvc: &InferenceService,
        runtime: &ServingRuntimeSpec,
    ) -> Result<Built, PredictorError> {
        build(&Inputs {
            isvc,
            runtime: Some(("mlserver", runtime)),
            storage_image: "mlkube/serving:0.1.0",
            store_env: &[],
        })
    }

    #[test]
    fn the_model_fields_go_over_the_runtime_container_and_placeholders_are_filled() {
        let runtime = runtime();
        let isvc = isvc(model(
            "s3://models/digits/1",
            json!({
                "args": ["--extra"],
                "env": [{ "name": "A", "value": "2" }],
                "resources": { "requests": { "memory": "256Mi" } },
            }),
        ));
        let built = built(&isvc, &runtime).unwrap();
        let pod = serde_json::to_value(&built.template).unwrap();
        let server = &pod["spec"]["containers"][0];
        assert_eq!(
            server["args"],
            json!(["--name", "digits", "--model-dir", "/mnt/models", "--extra"])
        );
        assert_eq!(
            server["env"],
            json!([{ "name": "A", "value": "2" }, { "name": "NS", "value": "team-a" }])
        );
        assert_eq!(pod["spec"]["nodeSelector"], json!({ "kind": "cpu" }));
        assert_eq!(
            server["resources"],
            json!({ "requests": { "cpu": "1", "memory": "256Mi" }, "limits": { "memory": "2Gi" } })
        );
        let init = &pod["spec"]["initContainers"][0];
        assert_eq!(
            init["command"],
            json!([
                "python3",
                "-m",
                "mlkube_serving.fetch",
                "--uri",
                "s3://models/digits/1",
                "--dest",
                "/mnt/models"
            ])
        );
        assert_eq!(server["volumeMounts"][0]["mountPath"], "/mnt/models");
        assert_eq!(pod["metadata"]["labels"][ISVC_LABEL], "digits");
        assert_eq!(built.hash.len(), 8);
    }

    #[test]
    fn a_claim_is_mounted_at_the_model_directory_and_other_schemes_are_refused() {
        let runtime = runtime();
        let pvc = built(&isvc(model("pvc://models/digits/1/", json!({}))), &runtime).unwrap();
        let pod = serde_json::to_value(&pvc.template).unwrap();
        assert_eq!(
            pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "models"
        );
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][0]["subPath"],
            "digits/1"
        );
        assert!(pod["spec"].get("initContainers").is_none());
        let gs = built(&isvc(model("gs://bucket/model", json!({}))), &runtime)
            .err()
            .unwrap();
        assert!(gs.to_string().contains("use s3://bucket/prefix"), "{gs}");
    }

    #[test]
    fn an_unknown_placeholder_is_refused_naming_it() {
        let mut runtime = runtime();
        runtime.containers[0]["args"] = json!(["{{.Spec.Whatever}}"]);
        let error = built(&isvc(model("s3://models/x", json!({}))), &runtime)
            .err()
            .unwrap();
        assert!(error.to_string().contains("{{.Spec.Whatever}}"), "{error}");
    }

    #[test]
    fn the_hash_changes_with_the_model_and_not_with_the_canary_share() {
        let runtime = runtime();
        let one = isvc(model("s3://models/digits/1", json!({})));
        let mut canary = one.clone();
        canary.spec.predictor.canary_traffic_percent = Some(10);
        let two = isvc(model("s3://models/digits/2", json!({})));
        let hash = |i: &InferenceService| built(i, &runtime).unwrap().hash;
        assert_eq!(hash(&one), hash(&canary));
        assert_ne!(hash(&one), hash(&two));
    }
}
