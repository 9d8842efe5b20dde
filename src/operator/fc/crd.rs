//! The Framework's CustomResourceDefinition, generated from the types in `api`, checked in as
//! `crds/frameworks.frameworkcontroller.microsoft.com.yaml` so the operator component can
//! embed it. The test `crd_file_matches_the_rust_types` fails when the file drifts; regenerate
//! it with `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::fc::crd`.
//!
//! Beside FrameworkController's schema it has a status subresource (the operator writes only
//! the status, never a user's spec), printer columns, and the rules FrameworkController lacks:
//! TaskRole names unique, at most [`api::MAX_TASK_ROLES`] TaskRoles and [`api::MAX_TASKS`]
//! Tasks in all (the controller checks them again, for a Framework admitted without them).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;

use super::api::{self, Framework};

/// Where the generated CRD lives in the repository.
pub const CRD_PATH: &str = "crds/frameworks.frameworkcontroller.microsoft.com.yaml";

/// The Framework CRD.
pub fn definition() -> CustomResourceDefinition {
    let mut crd = Framework::crd();
    for version in &mut crd.spec.versions {
        version.additional_printer_columns = Some(vec![
            column("State", "string", ".status.state"),
            column("Attempt", "integer", ".status.attemptStatus.id"),
            column("Age", "date", ".metadata.creationTimestamp"),
        ]);
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        *schema = without_defaults(schema);
        validate(
            schema,
            "self.metadata.name.matches('^[a-z0-9]{1,63}$')",
            "the name joins pod names with '-' (<framework>-<taskrole>-<index>), so it is lower-case letters and digits only, at most 63",
        );
        let roles = (schema.properties.as_mut())
            .and_then(|p| p.get_mut("spec")?.properties.as_mut()?.get_mut("taskRoles"));
        if let Some(roles) = roles {
            task_role_rules(roles);
        }
    }
    crd
}

/// What the controller checks again (`check`), said at admission: TaskRole names unique (their
/// pods' names would clash) and the Tasks in all within the bound (the status holds them all).
fn task_role_rules(roles: &mut JSONSchemaProps) {
    // Static messages: a messageExpression naming the duplicate or the sum is estimated far
    // over the API server's cost budget.
    validate(
        roles,
        "self.all(r, self.exists_one(s, s.name == r.name))",
        "TaskRole names must be unique: pods are named <framework>-<taskrole>-<index>, so two TaskRoles of one name would share pods; give every TaskRole a name of its own",
    );
    let max = api::MAX_TASKS;
    validate(
        roles,
        &format!("self.map(r, has(r.taskNumber) ? r.taskNumber : 0).sum() <= {max}"),
        &format!(
            "the taskNumbers of all TaskRoles add up to more than {max}, the most Tasks a Framework may have (its status holds every Task and must fit in one object); split the job into Frameworks of at most {max} Tasks"
        ),
    );
}

/// Add the CEL rule `rule` to `schema`, refused with `message`.
fn validate(schema: &mut JSONSchemaProps, rule: &str, message: &str) {
    add_rule(
        schema,
        serde_json::json!({ "rule": rule, "message": message }),
    );
}

fn add_rule(schema: &mut JSONSchemaProps, rule: serde_json::Value) {
    schema
        .x_kubernetes_validations
        .get_or_insert_with(Vec::new)
        .push(serde_json::from_value(rule).expect("a well-formed validation rule"));
}

/// The schema without the defaults serde's `default` put there: FrameworkController defaults
/// nothing (the manual asks for every field), so neither does the API server; and with each
/// description on one line.
fn without_defaults(schema: &JSONSchemaProps) -> JSONSchemaProps {
    fn walk(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.remove("default");
                for (key, field) in map.iter_mut() {
                    match field {
                        serde_json::Value::String(text) if key == "description" => {
                            *text = text.replace('\n', " ");
                        }
                        _ => walk(field),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(schema).expect("a schema serialises to JSON");
    walk(&mut value);
    serde_json::from_value(value).expect("a schema without defaults is still a schema")
}

fn column(name: &str, type_: &str, path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: path.to_owned(),
        ..CustomResourceColumnDefinition::default()
    }
}

/// The CRD file's text.
pub fn yaml() -> String {
    let body = serde_yaml::to_string(&definition()).expect("a CRD serialises to YAML");
    format!(
        "# Generated from src/operator/fc/api.rs; do not edit. Regenerate with\n\
         # `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::fc::crd`.\n{body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_file_matches_the_rust_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CRD_PATH);
        let generated = yaml();
        if std::env::var_os("MLKUBE_UPDATE_CRDS").is_some() {
            std::fs::write(&path, &generated).expect("write the CRD file");
            return;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "{CRD_PATH} differs from the Rust types in src/operator/fc/api.rs;\n\
             hint: regenerate it with `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::fc::crd` and review the diff"
        );
    }

    #[test]
    fn the_schema_refuses_what_framework_controller_refuses() {
        let crd = serde_json::to_value(definition()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let role = &spec["properties"]["taskRoles"]["items"]["properties"];
        assert_eq!(role["name"]["pattern"], "^[a-z0-9]{1,63}$");
        assert_eq!(role["taskNumber"]["maximum"], f64::from(api::MAX_TASKS));
        assert_eq!(role["name"]["maxLength"], 63);
        let roles = &spec["properties"]["taskRoles"];
        assert_eq!(roles["maxItems"], api::MAX_TASK_ROLES);
        let rules: Vec<&str> = (roles["x-kubernetes-validations"].as_array().unwrap().iter())
            .map(|r| r["rule"].as_str().unwrap())
            .collect();
        assert_eq!(
            rules,
            [
                "self.all(r, self.exists_one(s, s.name == r.name))",
                "self.map(r, has(r.taskNumber) ? r.taskNumber : 0).sum() <= 800"
            ]
        );
        assert!(
            !crd.to_string().contains("\"default\""),
            "nothing is defaulted"
        );
        assert_eq!(role["taskNumber"]["minimum"], 0.0);
        assert_eq!(
            spec["properties"]["executionType"]["enum"],
            serde_json::json!(["Start", "Create", "Stop"])
        );
        assert_eq!(
            spec["properties"]["retryPolicy"]["properties"]["maxRetryCount"]["minimum"],
            -2.0
        );
    }
}
