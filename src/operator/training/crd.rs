//! The CustomResourceDefinitions, generated from the types in `api` and `frameworks`.
//!
//! `crds/<plural>.kubeflow.org.yaml` is each framework's, checked in so the `training-operator`
//! prototype can embed them. The test `crd_files_match_the_rust_types` fails when a file
//! drifts from the types; regenerate them with
//! `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::training::crd`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, JSON, JSONSchemaProps,
    JSONSchemaPropsOrBool,
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

/// A framework's CRD: kube's derive output with the framework's printer columns, and the rules that need what the types alone do
/// not know: the object's name (only a rule at the root of the schema sees it), which must also
/// leave room in the pods' and services' names for the replica type and index, and the
/// framework's container, which every replica's pod template must have.
pub fn definition_of<J: TrainingJob + CustomResourceExt>() -> CustomResourceDefinition {
    let mut crd = J::crd();
    for version in &mut crd.spec.versions {
        version.additional_printer_columns = Some(printer_columns(J::FRAMEWORK));
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        *schema = with_whole_sentences(schema);
        default_run_policy(schema);
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
        if J::CONTAINER_REQUIRED
            && let Some(template) = pod_spec_schema(schema, specs)
        {
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

/// How k8s-openapi's description of a resource quantity starts: a page of Go documentation
/// with a grammar whose layout its generator lost, which `kubectl explain` shows as one block.
const QUANTITY_DESCRIPTION_START: &str = "Quantity is a fixed-point representation of a number.";
/// What the CRDs say instead.
const QUANTITY_DESCRIPTION: &str = "An amount of a resource: a number with an optional suffix, \
    such as `500m` (half a CPU), `2Gi` (two gibibytes) or `1e3`.";

/// The schema with each description's paragraphs on one line each. Descriptions come from doc
/// comments, wrapped at 100 columns; `kubectl explain` wraps them again, so the comment's line
/// breaks would cut its sentences in the middle.
fn with_whole_sentences(schema: &JSONSchemaProps) -> JSONSchemaProps {
    let mut value = serde_json::to_value(schema).expect("a schema serialises to JSON");
    join_description_lines(&mut value);
    serde_json::from_value(value).expect("a schema with other descriptions is still a schema")
}

fn join_description_lines(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                match field {
                    serde_json::Value::String(text) if key == "description" => {
                        *text = if text.starts_with(QUANTITY_DESCRIPTION_START) {
                            QUANTITY_DESCRIPTION.to_owned()
                        } else {
                            paragraphs_on_one_line(text)
                        };
                    }
                    _ => join_description_lines(field),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(join_description_lines),
        _ => {}
    }
}

/// `text` with the line breaks inside each paragraph turned into spaces; blank lines between
/// paragraphs, and lines that start a list item, stay.
fn paragraphs_on_one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines().map(str::trim_end) {
        let starts_item = line.starts_with("- ") || line.starts_with("* ");
        if out.is_empty() || out.ends_with('\n') {
            out.push_str(line);
        } else if line.is_empty() {
            out.push_str("\n\n");
        } else if starts_item {
            out.push('\n');
            out.push_str(line);
        } else {
            out.push(' ');
            out.push_str(line.trim_start());
        }
    }
    out
}

/// What `kubectl get` shows of every job: its state, its age, then the framework's
/// `replica_columns`, each the number of replicas of one type. A replica type's key may be
/// written in any letter case and the operator normalises it only in memory, as upstream does,
/// so a column reads the key as it is usually written: `Worker`, `WORKER` or `worker`.
fn printer_columns(framework: &Framework) -> Vec<CustomResourceColumnDefinition> {
    let column = |name: &str, type_: &str, json_path: String| CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path,
        ..CustomResourceColumnDefinition::default()
    };
    let mut columns = vec![
        column("State", "string", ".status.conditions[-1:].type".to_owned()),
        column("Age", "date", ".metadata.creationTimestamp".to_owned()),
    ];
    for (name, rtype) in framework.replica_columns {
        let mut spellings = vec![
            rtype.key().to_owned(),
            rtype.key().to_uppercase(),
            rtype.lower().to_owned(),
        ];
        spellings.dedup();
        let keys: Vec<String> = spellings.iter().map(|k| format!("'{k}'")).collect();
        // A JSONPath union: the API server shows the first of them the job has.
        let path = format!(
            ".spec.{}[{}].replicas",
            framework.replica_specs_field,
            keys.join(",")
        );
        columns.push(column(name, "integer", path));
    }
    columns
}

/// The defaults of `spec.runPolicy`: `suspend` is false, as in upstream's CRDs, and a job
/// written without a run policy gets one (`{suspend: false}`), so that Kubeflow's Python SDK,
/// whose models require `runPolicy`, reads every job. The default means what the absent field
/// meant, and the API server applies it on reading too, so jobs stored before read the same.
fn default_run_policy(root: &mut JSONSchemaProps) {
    let run_policy = root
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("spec"))
        .and_then(|spec| spec.properties.as_mut())
        .and_then(|p| p.get_mut("runPolicy"))
        .expect("every job's spec has a runPolicy");
    run_policy.default = Some(JSON(serde_json::json!({})));
    let suspend = run_policy
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("suspend"))
        .expect("a runPolicy has suspend");
    suspend.default = Some(JSON(serde_json::json!(false)));
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
        "# Generated from src/operator/training/api.rs and frameworks/; do not edit. Regenerate with\n\
         # `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::training::crd`.\n{body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::operator::training::{frameworks, registry};

    #[test]
    fn crd_files_match_the_rust_types() {
        for registered in &registry::ALL {
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
                "{file} differs from the Rust types in src/operator/training/api.rs and frameworks/;\n\
                 hint: regenerate it with `MLKUBE_UPDATE_CRDS=1 cargo test --lib operator::training::crd` and review the diff"
            );
        }
        assert_eq!(CRD_PATH, path_of(&frameworks::tensorflow::TENSORFLOW));
    }

    /// Every description of `schema` with where it is, e.g. `.spec.runPolicy`.
    fn descriptions(value: &serde_json::Value, at: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, field) in map {
                    match field {
                        serde_json::Value::String(text) if key == "description" => {
                            out.push((at.to_owned(), text.clone()));
                        }
                        _ if key == "properties" => {
                            for (name, property) in field.as_object().into_iter().flatten() {
                                descriptions(property, &format!("{at}.{name}"), out);
                            }
                        }
                        _ => descriptions(field, &format!("{at}[{key}]"), out),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                items.iter().for_each(|item| descriptions(item, at, out));
            }
            _ => {}
        }
    }

    /// Whether a paragraph of a description is whole sentences on one line (or a list whose
    /// items each have a line): it starts as a sentence does and ends as one does.
    fn is_whole_paragraph(paragraph: &str) -> bool {
        let text = paragraph.trim();
        // Kubernetes' own descriptions start with the field's name: `matchExpressions is ...`.
        let starts = text.starts_with(|c: char| c.is_alphanumeric() || "`(".contains(c));
        let ends = text.ends_with(['.', ':', ')', '?']) || text.ends_with(".\"");
        let lines_are_items = text.lines().skip(1).all(|l| l.starts_with("- "));
        starts && ends && lines_are_items
    }

    #[test]
    fn every_crd_field_description_is_whole_sentences() {
        for registered in &registry::ALL {
            let crd = (registered.crd)();
            for version in &crd.spec.versions {
                let schema = version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref());
                let schema = serde_json::to_value(schema).unwrap();
                let mut found = Vec::new();
                descriptions(&schema, "", &mut found);
                assert!(found.len() > 20, "{}: {found:?}", registered.framework.kind);
                for (at, text) in found {
                    assert!(
                        !text.is_empty() && text.split("\n\n").all(is_whole_paragraph),
                        "{} {at}: the description is not whole sentences, one paragraph a line: {text:?}",
                        registered.framework.kind
                    );
                }
            }
        }
    }

    #[test]
    fn line_breaks_inside_a_paragraph_become_spaces() {
        assert_eq!(
            paragraphs_on_one_line(
                "Policies that apply to the job,\nall of it.\n\nMore:\n- one\n- two"
            ),
            "Policies that apply to the job, all of it.\n\nMore:\n- one\n- two"
        );
    }

    #[test]
    fn every_crd_defaults_a_run_policy_that_is_not_suspended() {
        for registered in &registry::ALL {
            let crd = serde_json::to_value((registered.crd)()).unwrap();
            let run_policy = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                ["spec"]["properties"]["runPolicy"];
            let kind = registered.framework.kind;
            assert_eq!(run_policy["default"], serde_json::json!({}), "{kind}");
            assert_eq!(
                run_policy["properties"]["suspend"]["default"],
                serde_json::json!(false),
                "{kind}"
            );
        }
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

    #[test]
    fn replica_columns_read_the_key_in_its_usual_spellings() {
        let crd = definition();
        let paths: Vec<_> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.json_path.as_str())
            .collect();
        assert_eq!(
            paths[2..],
            [
                ".spec.tfReplicaSpecs['Worker','WORKER','worker'].replicas",
                ".spec.tfReplicaSpecs['PS','ps'].replicas",
            ]
        );
    }
}
