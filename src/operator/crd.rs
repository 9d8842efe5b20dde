//! The CustomResourceDefinitions, generated from the types in `api` and `frameworks`.
//!
//! `crds/<plural>.kubeflow.org.yaml` is each framework's, checked in so the `tf-job-operator`
//! component can embed them. The test `crd_files_match_the_rust_types` fails when a file
//! drifts from the types; regenerate them with
//! `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::crd`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use super::framework::{Framework, TrainingJob};
use super::frameworks::tensorflow::TFJob;

/// Where the generated CRD lives in the repository.
pub const CRD_PATH: &str = "crds/tfjobs.kubeflow.org.yaml";

/// The TFJob CRD.
pub fn definition() -> CustomResourceDefinition {
    definition_of::<TFJob>()
}

/// A framework's CRD: kube's derive output plus the rules that need what the types alone do
/// not know: the object's name (only a rule at the root of the schema sees it), which must also
/// leave room in the pods' and services' names for the replica type and index, and the
/// framework's container, which every replica's pod template must have.
pub fn definition_of<J: TrainingJob + CustomResourceExt>() -> CustomResourceDefinition {
    let mut crd = J::crd();
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        add_rule(
            schema,
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",
            "the name must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, at most 63 characters",
        );
        let specs = J::FRAMEWORK.replica_specs_field;
        add_rule(
            schema,
            &format!(
                "self.spec.{specs}.all(k, size(self.metadata.name) + size(k) + size(string((has(self.spec.{specs}[k].replicas) ? self.spec.{specs}[k].replicas : 1) - 1)) + 2 <= 63)"
            ),
            "the name is too long for its pods and services, named <name>-<replica type>-<index>: at most 63 characters",
        );
        if let Some(template) = pod_spec_schema(schema, specs) {
            let container = J::FRAMEWORK.container;
            add_rule(
                template,
                &format!("self.containers.exists(c, c.name == '{container}')"),
                &format!("one container must be named `{container}`"),
            );
        }
    }
    crd
}

fn add_rule(schema: &mut JSONSchemaProps, rule: &str, message: &str) {
    let rule = serde_json::json!({ "rule": rule, "message": message });
    let rule = serde_json::from_value(rule).expect("a well-formed validation rule");
    schema
        .x_kubernetes_validations
        .get_or_insert_with(Vec::new)
        .push(rule);
}

/// The schema of `spec.<replica_specs>[*].template.spec`.
fn pod_spec_schema<'a>(
    root: &'a mut JSONSchemaProps,
    replica_specs: &str,
) -> Option<&'a mut JSONSchemaProps> {
    let replica = root
        .properties
        .as_mut()?
        .get_mut("spec")?
        .properties
        .as_mut()?
        .get_mut(replica_specs)?
        .additional_properties
        .as_mut()?;
    let JSONSchemaPropsOrBool::Schema(replica) = replica else {
        return None;
    };
    replica
        .properties
        .as_mut()?
        .get_mut("template")?
        .properties
        .as_mut()?
        .get_mut("spec")
}

/// Where a framework's generated CRD lives in the repository.
pub fn path_of(framework: &Framework) -> String {
    format!("crds/{}.kubeflow.org.yaml", framework.plural)
}

/// The TFJob CRD as the YAML document checked in at [`CRD_PATH`].
pub fn yaml() -> String {
    yaml_of(&definition())
}

/// A CRD as the YAML document checked in under `crds/`.
pub fn yaml_of(crd: &CustomResourceDefinition) -> String {
    let body = serde_yaml::to_string(crd).expect("a CRD serialises to YAML");
    format!(
        "# Generated from src/operator/api.rs and frameworks/; do not edit. Regenerate with\n\
         # `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::crd`.\n{body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::operator::frameworks;

    #[test]
    fn crd_files_match_the_rust_types() {
        for registered in &frameworks::ALL {
            let file = path_of(registered.framework);
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&file);
            let generated = yaml_of(&(registered.crd)());
            if std::env::var_os("MLKUBE_UPDATE_CRDS").is_some() {
                std::fs::write(&path, &generated).expect("write the CRD file");
                continue;
            }
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == generated,
                "{file} differs from the Rust types in src/operator/api.rs and frameworks/;\n\
                 hint: regenerate it with `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::crd` and review the diff"
            );
        }
        assert_eq!(CRD_PATH, path_of(&frameworks::tensorflow::TENSORFLOW));
    }

    #[test]
    fn pytorch_crd_has_state_and_age_columns_and_scales_workers() {
        let crd = definition_of::<frameworks::pytorch::PyTorchJob>();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("pytorchjobs.kubeflow.org")
        );
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["State", "Age"]);
        let scale = version
            .subresources
            .as_ref()
            .and_then(|s| s.scale.as_ref())
            .expect("a scale subresource");
        assert_eq!(
            scale.spec_replicas_path,
            ".spec.pytorchReplicaSpecs.Worker.replicas"
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
