//! The objects a FrameworkAttempt is made of: its ConfigMap, which owns its pods, and one pod
//! per Task, named, labelled, annotated and given the `FC_*` environment as
//! FrameworkController does, so a Framework (and a Service selecting its pods) written for it
//! works unchanged.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use super::api::{Framework, FrameworkStatus, TaskRoleSpec, TaskRoleStatus, TaskStatus};

pub const FRAMEWORK_NAMESPACE: &str = "FC_FRAMEWORK_NAMESPACE";
pub const FRAMEWORK_NAME: &str = "FC_FRAMEWORK_NAME";
pub const TASKROLE_NAME: &str = "FC_TASKROLE_NAME";
pub const TASK_INDEX: &str = "FC_TASK_INDEX";
pub const CONFIGMAP_NAME: &str = "FC_CONFIGMAP_NAME";
pub const POD_NAME: &str = "FC_POD_NAME";
pub const FRAMEWORK_UID: &str = "FC_FRAMEWORK_UID";
pub const FRAMEWORK_ATTEMPT_ID: &str = "FC_FRAMEWORK_ATTEMPT_ID";
pub const FRAMEWORK_ATTEMPT_INSTANCE_UID: &str = "FC_FRAMEWORK_ATTEMPT_INSTANCE_UID";
pub const CONFIGMAP_UID: &str = "FC_CONFIGMAP_UID";
pub const TASKROLE_UID: &str = "FC_TASKROLE_UID";
pub const TASK_UID: &str = "FC_TASK_UID";
pub const TASK_ATTEMPT_ID: &str = "FC_TASK_ATTEMPT_ID";
pub const POD_UID: &str = "FC_POD_UID";
pub const TASK_ATTEMPT_INSTANCE_UID: &str = "FC_TASK_ATTEMPT_INSTANCE_UID";

/// The ConfigMap of every attempt of `framework`.
pub fn config_map_name(framework: &str) -> String {
    format!("{framework}-attempt")
}

/// The pod of every attempt of a Task.
pub fn pod_name(framework: &str, role: &str, index: i32) -> String {
    format!("{framework}-{role}-{index}")
}

/// Why a Task's pod cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the pod template of TaskRole {role} is not a pod template")]
    Template {
        role: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the Framework has no TaskRole {role} or no status for its Task {index}")]
    NoTask { role: String, index: i32 },
}

fn controller_of<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.name_any(),
        uid: owner.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The current attempt's ConfigMap: no data, owned by the Framework, deleted in the
/// foreground (so it outlives every pod it owns).
pub fn config_map(framework: &Framework, status: &FrameworkStatus) -> ConfigMap {
    let name = framework.name_any();
    let cm_name = config_map_name(&name);
    let annotations = BTreeMap::from([
        (
            FRAMEWORK_NAMESPACE.to_owned(),
            framework.namespace().unwrap_or_default(),
        ),
        (FRAMEWORK_NAME.to_owned(), name.clone()),
        (CONFIGMAP_NAME.to_owned(), cm_name.clone()),
        (
            FRAMEWORK_UID.to_owned(),
            framework.uid().unwrap_or_default(),
        ),
        (
            FRAMEWORK_ATTEMPT_ID.to_owned(),
            status.attempt_status.id.to_string(),
        ),
    ]);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(cm_name),
            namespace: framework.namespace(),
            labels: Some(BTreeMap::from([(FRAMEWORK_NAME.to_owned(), name)])),
            annotations: Some(annotations),
            owner_references: Some(vec![controller_of(framework)]),
            finalizers: Some(vec!["foregroundDeletion".to_owned()]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// The template's JSON with the `{{FC_...}}` placeholders replaced, as plain text, so they work
/// in any string of it.
fn with_placeholders(template: &serde_json::Value, values: &[(&str, String)]) -> String {
    let mut text = template.to_string();
    for (name, value) in values {
        text = text.replace(&format!("{{{{{name}}}}}"), value);
    }
    text
}

/// The pod of Task `index` of TaskRole `role` in the current attempt; `config_map` is the
/// attempt's ConfigMap (its UID recorded in `status`).
pub fn pod(
    framework: &Framework,
    status: &FrameworkStatus,
    config_map: &ConfigMap,
    role: &str,
    index: i32,
) -> Result<Pod, BuildError> {
    let (spec, role_status, task) = task_of(framework, status, role, index)?;
    let names = names(framework, config_map, role, index);
    let text = with_placeholders(&spec.task.pod, &names);
    let template: PodTemplateSpec =
        serde_json::from_str(&text).map_err(|source| BuildError::Template {
            role: role.to_owned(),
            source,
        })?;
    let attempt = &status.attempt_status;
    let mut values = names;
    values.extend([
        (FRAMEWORK_UID, framework.uid().unwrap_or_default()),
        (FRAMEWORK_ATTEMPT_ID, attempt.id.to_string()),
        (
            FRAMEWORK_ATTEMPT_INSTANCE_UID,
            attempt.instance_uid.clone().unwrap_or_default(),
        ),
        (CONFIGMAP_UID, config_map.uid().unwrap_or_default()),
        (TASKROLE_UID, role_status.instance_uid.clone()),
        (TASK_UID, task.instance_uid.clone()),
        (TASK_ATTEMPT_ID, task.attempt_status.id.to_string()),
    ]);
    let labels = [
        (FRAMEWORK_NAME, framework.name_any()),
        (TASKROLE_NAME, role.to_owned()),
        (TASK_INDEX, index.to_string()),
    ];
    let metadata = pod_metadata(
        template.metadata.unwrap_or_default(),
        &values,
        labels,
        config_map,
    );
    let mut spec = template.spec.unwrap_or_default();
    prepend_environment(&mut spec, &environment(values, task.attempt_status.id));
    Ok(Pod {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

/// The spec of TaskRole `role`, its status and the status of its Task `index`.
fn task_of<'a>(
    framework: &'a Framework,
    status: &'a FrameworkStatus,
    role: &str,
    index: i32,
) -> Result<(&'a TaskRoleSpec, &'a TaskRoleStatus, &'a TaskStatus), BuildError> {
    let no_task = || BuildError::NoTask {
        role: role.to_owned(),
        index,
    };
    let spec = (framework.spec.task_roles.iter())
        .find(|r| r.name == role)
        .ok_or_else(no_task)?;
    let role_status = (status.attempt_status.task_role_statuses.iter())
        .find(|r| r.name == role)
        .ok_or_else(no_task)?;
    let task = (role_status.task_statuses.iter())
        .find(|t| t.index == index)
        .ok_or_else(no_task)?;
    Ok((spec, role_status, task))
}

/// The `{{FC_...}}` placeholders a pod template may use, with their values: the first of the
/// pod's `FC_*` annotations and variables.
fn names(
    framework: &Framework,
    config_map: &ConfigMap,
    role: &str,
    index: i32,
) -> Vec<(&'static str, String)> {
    let name = framework.name_any();
    vec![
        (
            FRAMEWORK_NAMESPACE,
            framework.namespace().unwrap_or_default(),
        ),
        (FRAMEWORK_NAME, name.clone()),
        (TASKROLE_NAME, role.to_owned()),
        (TASK_INDEX, index.to_string()),
        (CONFIGMAP_NAME, config_map.name_any()),
        (POD_NAME, pod_name(&name, role, index)),
    ]
}

/// Every (init) container gets `env` before its own, and keeps its logs' tail as its
/// termination message unless it says otherwise.
fn prepend_environment(spec: &mut k8s_openapi::api::core::v1::PodSpec, env: &[EnvVar]) {
    let init = spec.init_containers.iter_mut().flatten();
    for container in spec.containers.iter_mut().chain(init) {
        let mut all = env.to_vec();
        all.extend(container.env.take().unwrap_or_default());
        container.env = Some(all);
        container
            .termination_message_policy
            .get_or_insert_with(|| "FallbackToLogsOnError".to_owned());
    }
}

/// The template's metadata with the pod's name and namespace, the `FC_*` annotations (which
/// win over the template's) and labels, and the ConfigMap appended to its owners.
fn pod_metadata(
    mut metadata: ObjectMeta,
    values: &[(&str, String)],
    labels: [(&str, String); 3],
    config_map: &ConfigMap,
) -> ObjectMeta {
    let value = |key: &str| {
        (values.iter())
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    };
    metadata.name = value(POD_NAME);
    metadata.namespace = value(FRAMEWORK_NAMESPACE);
    let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in values {
        annotations.insert((*key).to_owned(), value.clone());
    }
    let all = metadata.labels.get_or_insert_with(BTreeMap::new);
    for (key, value) in labels {
        all.insert(key.to_owned(), value);
    }
    (metadata.owner_references.get_or_insert_with(Vec::new)).push(controller_of(config_map));
    metadata
}

/// The 15 `FC_*` variables every container gets first, so its own can refer to them.
fn environment(values: Vec<(&str, String)>, task_attempt_id: i32) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = values
        .into_iter()
        .map(|(name, value)| EnvVar {
            name: name.to_owned(),
            value: Some(value),
            value_from: None,
        })
        .collect();
    env.push(EnvVar {
        name: POD_UID.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: "metadata.uid".to_owned(),
            }),
            ..EnvVarSource::default()
        }),
    });
    env.push(EnvVar {
        name: TASK_ATTEMPT_INSTANCE_UID.to_owned(),
        value: Some(format!("{task_attempt_id}_$({POD_UID})")),
        value_from: None,
    });
    env
}
