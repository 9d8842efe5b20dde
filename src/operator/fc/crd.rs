//! The Framework's CustomResourceDefinition, generated from the types in `api`, checked in as
//! `crds/frameworks.frameworkcontroller.microsoft.com.yaml` so the operator component can
//! embed it. The test `crd_file_matches_the_rust_types` fails when the file drifts; regenerate
//! it with `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::fc::crd`.
//!
//! Beside FrameworkController's schema it has a status subresource (the operator writes only
//! the status, never a user's spec) and printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;

use super::api::Framework;

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
        let rule = serde_json::json!({
            "rule": "self.metadata.name.matches('^[a-z0-9]{1,63}$')",
            "message": "the name joins pod names with '-' (<framework>-<taskrole>-<index>), so it is lower-case letters and digits only, at most 63",
        });
        schema
            .x_kubernetes_validations
            .get_or_insert_with(Vec::new)
            .push(serde_json::from_value(rule).expect("a well-formed validation rule"));
    }
    crd
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
        assert_eq!(role["taskNumber"]["maximum"], 10000.0);
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
