//! The fields a kind requires, from the API server's OpenAPI v3 schemas: the one check of an
//! object that `validate` cannot have from a dry run before the object's namespace exists.
//!
//! A server-side dry run in a namespace that does not exist yet stops at admission, after the
//! server converted the object along its schema (unknown fields and wrong types are reported
//! there, see [`crate::deploy::preflight`]) and before its validation, which is where a missing
//! required field would be found. So those objects are walked here along the schema the server
//! publishes, as kubectl's client-side validation did: each group-version's document
//! (`/openapi/v3/apis/<group>/<version>`, `/openapi/v3/api/v1`) is read once per run, only for
//! the group-versions those objects use.
//!
//! Caveats: only `required` is checked (the server already judged fields and types); a kind no
//! document describes is not checked here, and its objects stay "checked against the schema
//! only".

use std::collections::{BTreeMap, BTreeSet};

use kube::api::GetParams;
use serde_json::{Map, Value};

use crate::deploy::plan::{Desired, Plan};
use crate::deploy::preflight::{Rejection, Validation};

/// Walk the objects `validate` could check against the schema only (their namespace does not
/// exist yet) along the server's schemas, and reject those that lack a required field.
pub async fn check_required(
    client: &kube::Client,
    plan: &Plan,
    validation: &mut Validation,
) -> Result<(), kube::Error> {
    if validation.schema_only.is_empty() {
        return Ok(());
    }
    let desired = |rejection: &Rejection| -> Option<&Desired> {
        plan.objects.iter().find(|d| d.key == rejection.key)
    };
    let api_versions: BTreeSet<String> = validation
        .schema_only
        .iter()
        .filter_map(|r| Some(desired(r)?.api_version.clone()))
        .collect();
    let schemas = fetch(client, &api_versions).await?;
    for rejection in std::mem::take(&mut validation.schema_only) {
        let missing = desired(&rejection)
            .and_then(|d| schemas.missing_required(&d.value))
            .unwrap_or_default();
        if missing.is_empty() {
            validation.schema_only.push(rejection);
            continue;
        }
        let fields: Vec<String> = missing.iter().map(|f| format!("`{f}`")).collect();
        validation.rejected.push(Rejection {
            message: format!("missing required field(s) {}", fields.join(", ")),
            ..rejection
        });
    }
    Ok(())
}

/// The schemas of the group-versions read, by `apiVersion`.
#[derive(Debug, Default)]
pub struct Schemas {
    /// `components.schemas` of each group-version's document.
    documents: BTreeMap<String, Map<String, Value>>,
}

/// Read the documents of `api_versions` (`v1`, `apps/v1`, ...). A group-version the server
/// does not publish is left out; its kinds are not checked.
pub async fn fetch(
    client: &kube::Client,
    api_versions: &BTreeSet<String>,
) -> Result<Schemas, kube::Error> {
    let mut schemas = Schemas::default();
    for api_version in api_versions {
        let (prefix, version) = match api_version.rsplit_once('/') {
            Some((group, version)) => (format!("/openapi/v3/apis/{group}"), version),
            None => ("/openapi/v3/api".to_owned(), api_version.as_str()),
        };
        let request = kube::core::Request::new(prefix)
            .get(version, &GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        let document: Value = match client.request(request).await {
            Ok(document) => document,
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(error) => return Err(error),
        };
        if let Some(components) = document["components"]["schemas"].as_object() {
            schemas
                .documents
                .insert(api_version.clone(), components.clone());
        }
    }
    Ok(schemas)
}

impl Schemas {
    /// The required fields `object` lacks, as paths (`spec.selector`,
    /// `spec.template.spec.containers[0].name`); `None` when no document read describes its
    /// kind.
    pub fn missing_required(&self, object: &Value) -> Option<Vec<String>> {
        let api_version = object["apiVersion"].as_str()?;
        let kind = object["kind"].as_str()?;
        let components = self.documents.get(api_version)?;
        let schema = components
            .values()
            .find(|schema| describes(schema, api_version, kind))?;
        let mut missing = Vec::new();
        walk(components, schema, object, "", &mut missing);
        Some(missing)
    }
}

/// Whether `schema` is the one of `kind` in `api_version`.
fn describes(schema: &Value, api_version: &str, kind: &str) -> bool {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    schema["x-kubernetes-group-version-kind"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|gvk| gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind)
}

/// `schema` with its references followed: `$ref`, and `allOf` of one, as the documents wrap
/// a reference to add a description or a default.
fn resolve<'s>(components: &'s Map<String, Value>, mut schema: &'s Value) -> &'s Value {
    for _ in 0..8 {
        if let Some(reference) = schema["$ref"].as_str() {
            let name = reference.trim_start_matches("#/components/schemas/");
            match components.get(name) {
                Some(target) => schema = target,
                None => return schema,
            }
        } else if let Some([only]) = schema["allOf"].as_array().map(Vec::as_slice) {
            schema = only;
        } else {
            return schema;
        }
    }
    schema
}

/// Walk `value` along `schema`, adding to `missing` each required field it lacks, at `path`.
fn walk(
    components: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    path: &str,
    missing: &mut Vec<String>,
) {
    let schema = resolve(components, schema);
    let field = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    match value {
        Value::Object(fields) => {
            for required in schema["required"].as_array().into_iter().flatten() {
                let name = required.as_str().unwrap_or_default();
                if fields.get(name).is_none_or(Value::is_null) {
                    missing.push(field(name));
                }
            }
            for (name, value) in fields {
                let inner = match &schema["properties"][name] {
                    Value::Null => &schema["additionalProperties"],
                    property => property,
                };
                if inner.is_object() {
                    walk(components, inner, value, &field(name), missing);
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (i, item) in items.iter().enumerate() {
                walk(
                    components,
                    &schema["items"],
                    item,
                    &format!("{path}[{i}]"),
                    missing,
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A document shaped as the server's: a Deployment whose spec requires a selector and a
    /// template, whose containers require a name, and labels as a map of strings.
    fn apps_v1() -> Schemas {
        let components = json!({
            "io.k8s.api.apps.v1.Deployment": {
                "type": "object",
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/meta.ObjectMeta"}]},
                    "spec": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}]},
                },
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
            },
            "io.k8s.api.apps.v1.DeploymentSpec": {
                "type": "object",
                "required": ["selector", "template"],
                "properties": {
                    "selector": {"type": "object"},
                    "template": {"allOf": [{"$ref": "#/components/schemas/core.PodTemplateSpec"}]},
                },
            },
            "core.PodTemplateSpec": {
                "properties": {"spec": {"allOf": [{"$ref": "#/components/schemas/core.PodSpec"}]}},
            },
            "core.PodSpec": {
                "required": ["containers"],
                "properties": {"containers": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/core.Container"}]}}},
            },
            "core.Container": {"required": ["name"], "properties": {"name": {"type": "string"}}},
            "meta.ObjectMeta": {
                "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}},
            },
        });
        let mut schemas = Schemas::default();
        let Value::Object(components) = components else {
            unreachable!("an object literal")
        };
        schemas.documents.insert("apps/v1".into(), components);
        schemas
    }

    #[test]
    fn a_missing_required_field_is_named_by_its_path_down_lists_and_references() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"image": "busybox"}]}}},
        });
        assert_eq!(
            apps_v1().missing_required(&deployment),
            Some(vec![
                "spec.selector".to_owned(),
                "spec.template.spec.containers[1].name".to_owned()
            ])
        );
    }

    #[test]
    fn a_complete_object_lacks_nothing_and_an_unknown_kind_is_not_judged() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "a"}]}}},
        });
        assert_eq!(apps_v1().missing_required(&deployment), Some(Vec::new()));
        let other = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {}});
        assert_eq!(apps_v1().missing_required(&other), None);
        let elsewhere = json!({"apiVersion": "v1", "kind": "Deployment"});
        assert_eq!(apps_v1().missing_required(&elsewhere), None);
    }
}
