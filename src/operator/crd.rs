//! The TFJob CustomResourceDefinition, generated from the types in `api`.
//!
//! `crds/tfjobs.kubeflow.org.yaml` is this function's output, checked in so the
//! `tf-job-operator` component can embed it. The test `crd_file_matches_the_rust_types` fails
//! when the file drifts from the types; regenerate it with
//! `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::crd`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::api::TFJob;

/// Where the generated CRD lives in the repository.
pub const CRD_PATH: &str = "crds/tfjobs.kubeflow.org.yaml";

/// The CRD: kube's derive output plus the rule on the object's name, which only a rule at the
/// root of the schema can see.
pub fn definition() -> CustomResourceDefinition {
    let mut crd = TFJob::crd();
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let rule = serde_json::json!({
            "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",
            "message": "the name must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, at most 63 characters"
        });
        let rule = serde_json::from_value(rule).expect("a well-formed validation rule");
        schema
            .x_kubernetes_validations
            .get_or_insert_with(Vec::new)
            .push(rule);
    }
    crd
}

/// The CRD as the YAML document checked in at [`CRD_PATH`].
pub fn yaml() -> String {
    let body = serde_yaml::to_string(&definition()).expect("a CRD serialises to YAML");
    format!(
        "# Generated from src/operator/api.rs; do not edit. Regenerate with\n\
         # `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::crd`.\n{body}"
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
            "{CRD_PATH} differs from the Rust types in src/operator/api.rs;\n\
             hint: regenerate it with `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::crd` and review the diff"
        );
    }

    #[test]
    fn crd_has_status_subresource_and_printer_columns() {
        let crd = definition();
        assert_eq!(crd.metadata.name.as_deref(), Some("tfjobs.kubeflow.org"));
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["State", "Age", "Workers", "PS"]);
    }
}
