//! Walking an object along a structural schema, as the API server would judge it: the check
//! mlkube makes itself of the objects the server cannot judge before an apply has created what
//! they need (see [`crate::deploy::checks::preflight`]). Where the schemas come from is not this
//! module's business: the server's OpenAPI v3 documents are read by
//! [`crate::deploy::checks::openapi`], a CustomResourceDefinition's schema is taken from the plan.
//!
//! Two depths. Along the server's schema of a kind it serves, only the required fields are
//! judged: the server has already converted the object along that schema (unknown fields,
//! wrong types) before it found the object's namespace missing. Along the `openAPIV3Schema` of a
//! CustomResourceDefinition that comes with the apply, everything a structural schema says of
//! an object's shape: unknown fields (allowed under `x-kubernetes-preserve-unknown-fields` and
//! `additionalProperties`), the types (`string`, `integer`, `number`, `boolean`, `object`,
//! `array`, `x-kubernetes-int-or-string`), required fields and `enum`.
//!
//! Messages read as the server's: the field's path, then `Required value`, `field not declared
//! in schema`, `Invalid value: ...` or `Unsupported value: ...`, gathered into
//! `Kind.group "name" is invalid: ...`.
//!
//! Caveats: value validations (patterns, bounds, formats, CEL rules) and the metadata of the
//! object are left to the server; a `null` is taken as absent, as the server drops it before
//! validating.

use std::fmt;

use serde_json::{Map, Value};

use crate::deploy::cluster::key::Key;

/// How much of a schema is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Only the required fields (the server judged the rest already).
    Required,
    /// Fields, types, required fields and allowed values.
    Shape,
}

/// A schema and the definitions its `$ref`s point into (`components.schemas` of an OpenAPI
/// document; none for a CRD's schema).
#[derive(Debug, Clone, Copy)]
pub struct Schema<'s> {
    pub root: &'s Value,
    pub definitions: Option<&'s Map<String, Value>>,
}

/// One field of an object that its schema does not allow.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// `spec.template.spec.containers[0].name`.
    pub path: String,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// A required field is absent (or null).
    Required,
    /// A field the schema does not declare.
    Unknown,
    /// The value is not of the schema's type: `expected` as the server names it (`integer`,
    /// `integer,string`), `found` the value's JSON type.
    Type {
        expected: String,
        found: &'static str,
    },
    /// A value the schema's `enum` does not list.
    Unsupported { value: Value, allowed: Vec<Value> },
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        match &self.problem {
            Problem::Required => write!(f, "{path}: Required value"),
            Problem::Unknown => write!(f, "{path}: field not declared in schema"),
            Problem::Type { expected, found } => write!(
                f,
                "{path}: Invalid value: \"{found}\": {path} in body must be of type {expected}: \
                 \"{found}\""
            ),
            Problem::Unsupported { value, allowed } => {
                let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
                write!(
                    f,
                    "{path}: Unsupported value: {value}: supported values: {}",
                    allowed.join(", ")
                )
            }
        }
    }
}

/// The server's words for an object with these field errors: `Kind.group "name" is invalid:
/// <error>`, or `[<error>, <error>]` for several.
pub fn invalid(key: &Key, errors: &[FieldError]) -> String {
    let kind = if key.group.is_empty() {
        key.kind.clone()
    } else {
        format!("{}.{}", key.kind, key.group)
    };
    let errors: Vec<String> = errors.iter().map(FieldError::to_string).collect();
    let listed = match errors.as_slice() {
        [one] => one.clone(),
        several => format!("[{}]", several.join(", ")),
    };
    format!("{kind} \"{}\" is invalid: {listed}", key.name)
}

/// The fields of `object` that `schema` does not allow, judged to `depth`, in the order they
/// are met.
pub fn check(schema: Schema<'_>, object: &Value, depth: Depth) -> Vec<FieldError> {
    let no_definitions = Map::new();
    let mut walker = Walker {
        definitions: schema.definitions.unwrap_or(&no_definitions),
        depth,
        errors: Vec::new(),
    };
    walker.value(schema.root, object, "");
    walker.errors
}

struct Walker<'s> {
    definitions: &'s Map<String, Value>,
    depth: Depth,
    errors: Vec<FieldError>,
}

impl<'s> Walker<'s> {
    fn value(&mut self, schema: &'s Value, value: &Value, path: &str) {
        let schema = resolve(self.definitions, schema);
        if value.is_null() {
            return;
        }
        if self.depth == Depth::Shape {
            if let Some(expected) = wrong_type(schema, value) {
                let found = json_type(value);
                self.push(path, Problem::Type { expected, found });
                return;
            }
            if let Some(allowed) = schema["enum"].as_array()
                && !allowed.contains(value)
            {
                let (value, allowed) = (value.clone(), allowed.clone());
                self.push(path, Problem::Unsupported { value, allowed });
            }
        }
        match value {
            Value::Object(fields) => self.object(schema, fields, path),
            Value::Array(items) if schema["items"].is_object() => {
                for (i, item) in items.iter().enumerate() {
                    self.value(&schema["items"], item, &format!("{path}[{i}]"));
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, schema: &'s Value, fields: &Map<String, Value>, path: &str) {
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap_or_default();
            if fields.get(name).is_none_or(Value::is_null) {
                self.push(&field(path, name), Problem::Required);
            }
        }
        // An object's own apiVersion, kind and metadata are the server's to judge.
        let resource = path.is_empty() || schema["x-kubernetes-embedded-resource"] == true;
        for (name, value) in fields {
            let own = matches!(name.as_str(), "apiVersion" | "kind" | "metadata");
            if resource && own && self.depth == Depth::Shape {
                continue;
            }
            let inner = match &schema["properties"][name] {
                Value::Null => &schema["additionalProperties"],
                property => property,
            };
            if inner.is_object() {
                self.value(inner, value, &field(path, name));
            } else if self.depth == Depth::Shape && !open(schema) {
                self.push(&field(path, name), Problem::Unknown);
            }
        }
    }

    fn push(&mut self, path: &str, problem: Problem) {
        let path = path.to_owned();
        self.errors.push(FieldError { path, problem });
    }
}

fn field(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// Whether an object of `schema` may have fields it does not declare.
fn open(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
        || schema["additionalProperties"] == true
        || (schema["type"].is_null() && schema["properties"].is_null())
}

/// The type `schema` expects when `value` is not of it, as the server names it.
fn wrong_type(schema: &Value, value: &Value) -> Option<String> {
    if schema["x-kubernetes-int-or-string"] == true {
        let fits = value.is_string() || is_integer(value);
        return (!fits).then(|| "integer,string".to_owned());
    }
    let expected = schema["type"].as_str()?;
    let fits = match expected {
        "string" => value.is_string(),
        "integer" => is_integer(value),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    };
    (!fits).then(|| expected.to_owned())
}

/// A whole number, also when written as `2.0` (Jsonnet's numbers are all floating point).
fn is_integer(value: &Value) -> bool {
    value.as_i64().is_some()
        || value.as_u64().is_some()
        || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// The JSON type of `value` as the server names it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(value) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `schema` with its references followed: `$ref`, and `allOf` of one, as the server's documents
/// wrap a reference to add a description or a default.
fn resolve<'s>(definitions: &'s Map<String, Value>, mut schema: &'s Value) -> &'s Value {
    for _ in 0..8 {
        if let Some(reference) = schema["$ref"].as_str() {
            let name = reference.trim_start_matches("#/components/schemas/");
            match definitions.get(name) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Definitions shaped as the server's document: a Deployment whose spec requires a
    /// selector and a template, whose containers require a name, and labels as a map.
    fn apps_v1() -> Value {
        json!({
            "io.k8s.api.apps.v1.Deployment": {
                "type": "object",
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/meta.ObjectMeta"}]},
                    "spec": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}]},
                },
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
        })
    }

    fn paths(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(FieldError::to_string).collect()
    }

    fn along_apps_v1(object: &Value) -> Vec<String> {
        let document = apps_v1();
        let definitions = document.as_object().expect("an object literal");
        let root = &definitions["io.k8s.api.apps.v1.Deployment"];
        let schema = Schema {
            root,
            definitions: Some(definitions),
        };
        paths(&check(schema, object, Depth::Required))
    }

    #[test]
    fn a_missing_required_field_is_named_by_its_path_down_lists_and_references() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"image": "busybox"}]}}},
        });
        assert_eq!(
            along_apps_v1(&deployment),
            [
                "spec.selector: Required value",
                "spec.template.spec.containers[1].name: Required value"
            ]
        );
    }

    #[test]
    fn along_the_servers_schema_only_required_fields_are_judged() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"labels": {"app": 3}},
            "spec": {"selector": {}, "replica": 2, "template": {"spec": {"containers": [{"name": "a"}]}}},
        });
        assert_eq!(along_apps_v1(&deployment), Vec::<String>::new());
    }

    /// A CRD's schema: a spec that requires `size`, with each type, an enum, a map, a free
    /// object and an embedded resource.
    fn widget_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer"},
                        "ratio": {"type": "number"},
                        "on": {"type": "boolean"},
                        "mode": {"type": "string", "enum": ["fast", "slow"]},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                            "properties": {"data": {"type": "object"}}},
                    },
                },
            },
        })
    }

    fn along_widget(spec: Value) -> Vec<String> {
        let schema = widget_schema();
        let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}}, "spec": spec});
        let schema = Schema {
            root: &schema,
            definitions: None,
        };
        paths(&check(schema, &object, Depth::Shape))
    }

    #[test]
    fn a_conforming_custom_object_passes_with_open_maps_free_objects_and_embedded_resources() {
        let spec = json!({
            "size": 2.0, "ratio": 0.5, "on": true, "mode": "slow", "port": "http",
            "tags": ["a"], "labels": {"x": "y"}, "free": {"any": {"thing": 1}},
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}},
        });
        assert_eq!(along_widget(spec), Vec::<String>::new());
        assert_eq!(
            along_widget(json!({"size": 1, "port": 80})),
            Vec::<String>::new()
        );
    }

    #[test]
    fn unknown_fields_wrong_types_missing_fields_and_unlisted_values_read_as_the_servers() {
        let spec = json!({"sise": 2, "ratio": "x", "on": "yes", "mode": "medium", "port": true,
            "tags": [1], "labels": {"a": 1}, "template": {"extra": 1}});
        assert_eq!(
            along_widget(spec),
            [
                "spec.size: Required value",
                "spec.sise: field not declared in schema",
                "spec.ratio: Invalid value: \"string\": spec.ratio in body must be of type number: \"string\"",
                "spec.on: Invalid value: \"string\": spec.on in body must be of type boolean: \"string\"",
                "spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\"",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.tags[0]: Invalid value: \"integer\": spec.tags[0] in body must be of type string: \"integer\"",
                "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                "spec.template.extra: field not declared in schema",
            ]
        );
        assert_eq!(
            along_widget(json!({"size": 1.5})),
            [
                "spec.size: Invalid value: \"number\": spec.size in body must be of type integer: \"number\""
            ]
        );
    }

    #[test]
    fn a_field_outside_the_spec_and_a_null_are_judged_as_the_server_does() {
        let schema = widget_schema();
        let schema = Schema {
            root: &schema,
            definitions: None,
        };
        let object = json!({"kind": "Widget", "spec": {"size": null}, "status": {}});
        assert_eq!(
            paths(&check(schema, &object, Depth::Shape)),
            [
                "spec.size: Required value",
                "status: field not declared in schema"
            ]
        );
    }

    #[test]
    fn the_message_gathers_the_errors_as_the_server_does() {
        let key = Key {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("ml".into()),
            name: "d".into(),
        };
        let required = |path: &str| FieldError {
            path: path.into(),
            problem: Problem::Required,
        };
        assert_eq!(
            invalid(&key, &[required("spec.selector")]),
            "Deployment.apps \"d\" is invalid: spec.selector: Required value"
        );
        let core = Key {
            group: String::new(),
            kind: "Service".into(),
            ..key
        };
        assert_eq!(
            invalid(&core, &[required("spec.a"), required("spec.b")]),
            "Service \"d\" is invalid: [spec.a: Required value, spec.b: Required value]"
        );
    }
}
