//! Which param a value the API server rejected came from: the server names the field and the
//! value (`spec.replicas: Invalid value: -1: ...`), the app knows the component's params.

use serde_json::Value;

use crate::app::App;
use crate::app::params::{self, ComponentParams};
use crate::render::jsonnet::Evaluator;

use super::settings::Deployment;

/// A `hint:` line for each param of the component whose value in `env` is exactly a value the
/// server's `message` calls invalid, or names a ConfigMap or Secret the message says is not
/// found (the name itself or its first part: `objectStore` names `<store>-endpoint`); `None`
/// when no param has one of them.
pub fn param_hint(message: &str, params: &ComponentParams, env: &str) -> Option<String> {
    let rejected = invalid_values(message);
    let missing = missing_names(message);
    let component = &params.component.name;
    let set = |name: &str| format!("`mlkube param set {component} {name} <value> --env {env}`");
    let lines: Vec<String> = params
        .values
        .iter()
        .filter_map(|(name, param)| {
            if rejected.iter().any(|value| value.is(&param.value)) {
                return Some(format!(
                    "hint: the value comes from param `{name}` of component `{component}` \
                     (environment `{env}`): {}",
                    set(name)
                ));
            }
            let (kind, missing) = missing
                .iter()
                .find(|(_, m)| names(&param.value, m) && closest(params, m) == Some(name))?;
            Some(format!(
                "hint: the {kind} `{missing}` is named after param `{name}` of component \
                 `{component}` (environment `{env}`), which may name what is not there: {}",
                set(name)
            ))
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Whether a param's value names `missing`: it is the name, or the name's first part before a
/// `-`. Of several params that do, [`closest`] picks one.
fn names(value: &Value, missing: &str) -> bool {
    let Some(value) = value.as_str().filter(|v| !v.is_empty()) else {
        return false;
    };
    missing == value
        || missing
            .strip_prefix(value)
            .is_some_and(|rest| rest.starts_with('-'))
}

/// The param whose value names `missing` most closely (the longest value that names it).
fn closest<'p>(params: &'p ComponentParams, missing: &str) -> Option<&'p String> {
    params
        .values
        .iter()
        .filter(|(_, p)| names(&p.value, missing))
        .max_by_key(|(_, p)| p.value.as_str().map_or(0, str::len))
        .map(|(name, _)| name)
}

/// The ConfigMaps and Secrets a kubelet's or API server's `message` says are not found
/// (`configmap "x" not found`, `secrets "y" not found`), as (kind, name).
fn missing_names(message: &str) -> Vec<(&'static str, &str)> {
    const KINDS: [(&str, &str); 4] = [
        ("configmap \"", "ConfigMap"),
        ("configmaps \"", "ConfigMap"),
        ("secret \"", "Secret"),
        ("secrets \"", "Secret"),
    ];
    KINDS
        .iter()
        .flat_map(|(mark, kind)| {
            message.match_indices(mark).filter_map(move |(at, _)| {
                let rest = &message[at + mark.len()..];
                let end = rest.find('"')?;
                rest[end..]
                    .starts_with("\" not found")
                    .then(|| (*kind, &rest[..end]))
            })
        })
        .collect()
}

/// The hint naming a param for a component's rejection message, from the environment's
/// resolved params; `None` for `--manifest` or an app that cannot be read again.
pub fn param_hinter(
    deployment: &Deployment,
) -> Option<impl Fn(&str, &str) -> Option<String> + use<>> {
    let app = App::load(deployment.dir.as_deref()?).ok()?;
    let env = app.environment(&deployment.target.env).ok()?.name.clone();
    let evaluator = Evaluator::new(app.root());
    let resolved = params::resolve(&app, &evaluator, app.environment(&env).ok()).ok()?;
    Some(move |component: &str, message: &str| {
        resolved
            .iter()
            .find(|p| p.component.name == component)
            .and_then(|p| param_hint(message, p, &env))
    })
}

/// A value as the server quotes it: a string in double quotes, anything else bare.
enum Rejected<'m> {
    Text(&'m str),
    Bare(&'m str),
}

impl Rejected<'_> {
    fn is(&self, value: &Value) -> bool {
        match (self, value) {
            (Rejected::Text(text), Value::String(string)) => string == text,
            (Rejected::Bare(bare), Value::Number(_) | Value::Bool(_)) => {
                serde_json::from_str::<Value>(bare).is_ok_and(|bare| bare == *value)
            }
            _ => false,
        }
    }
}

/// Every value after `Invalid value: ` in the server's message, up to the next `: `.
fn invalid_values(message: &str) -> Vec<Rejected<'_>> {
    const MARK: &str = "Invalid value: ";
    message
        .match_indices(MARK)
        .filter_map(|(at, _)| {
            let rest = &message[at + MARK.len()..];
            let value = &rest[..rest.find(": ")?];
            Some(
                match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                    Some(text) => Rejected::Text(text),
                    None => Rejected::Bare(value),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;
    use serde_json::json;

    use super::*;
    use crate::app::ComponentEntry;
    use crate::app::params::{Layer, ParamValue};

    fn mnist(values: &[(&str, Value)]) -> ComponentParams {
        ComponentParams {
            component: ComponentEntry {
                name: "mnist".into(),
                prototype: None,
            },
            prototype: None,
            values: values
                .iter()
                .map(|(name, value)| {
                    let value = ParamValue {
                        value: value.clone(),
                        layer: Layer::EnvComponent,
                    };
                    (name.to_string(), value)
                })
                .collect::<IndexMap<_, _>>(),
        }
    }

    fn hint_for(param: &str) -> String {
        format!(
            "hint: the value comes from param `{param}` of component `mnist` (environment \
             `prod`): `mlkube param set mnist {param} <value> --env prod`"
        )
    }

    #[test]
    fn a_config_map_or_secret_not_found_names_the_param_it_is_named_after() {
        let params = mnist(&[
            ("objectStore", json!("object-stor")),
            ("objectStoreCredentials", json!("keys")),
            ("image", json!("object")),
        ]);
        let message = "pod mnist-worker-0: container tensorflow: CreateContainerConfigError: \
                       configmap \"object-stor-endpoint\" not found";
        assert_eq!(
            param_hint(message, &params, "prod").as_deref(),
            Some(
                "hint: the ConfigMap `object-stor-endpoint` is named after param `objectStore` of \
                 component `mnist` (environment `prod`), which may name what is not there: \
                 `mlkube param set mnist objectStore <value> --env prod`"
            )
        );
        let message = "CreateContainerConfigError: secret \"keys\" not found";
        let hint = param_hint(message, &params, "prod").unwrap_or_default();
        assert!(
            hint.starts_with(
                "hint: the Secret `keys` is named after param `objectStoreCredentials`"
            ),
            "{hint}"
        );
        let found = "configmap \"object-stor-endpoint\" is being deleted";
        assert_eq!(param_hint(found, &params, "prod"), None);
    }

    #[test]
    fn a_number_the_server_rejects_names_its_param() {
        let params = mnist(&[("image", json!("mnist:1")), ("replicas", json!(-1))]);
        let message = "Deployment.apps \"mnist\" is invalid: spec.replicas: Invalid value: -1: \
                       must be greater than or equal to 0";
        assert_eq!(
            param_hint(message, &params, "prod"),
            Some(hint_for("replicas"))
        );
    }

    #[test]
    fn a_quoted_string_the_server_rejects_names_its_param() {
        let params = mnist(&[("memoryRequest", json!("1Gb")), ("cpu", json!("1"))]);
        let message = "Deployment.apps \"mnist\" is invalid: spec.template.spec.containers[0].\
                       resources.requests[memory]: Invalid value: \"1Gb\": quantities must match \
                       the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
        assert_eq!(
            param_hint(message, &params, "prod"),
            Some(hint_for("memoryRequest"))
        );
    }

    #[test]
    fn every_invalid_value_of_a_list_of_field_errors_is_looked_up() {
        let params = mnist(&[("port", json!(70000)), ("policy", json!("Sometimes"))]);
        let message = "Service \"mnist\" is invalid: [spec.ports[0].port: Invalid value: 70000: \
                       must be between 1 and 65535, inclusive, spec.sessionAffinity: Unsupported \
                       value: \"x\", metadata.labels: Invalid value: \"Sometimes\": a valid label \
                       must be an empty string or consist of alphanumeric characters]";
        assert_eq!(
            param_hint(message, &params, "prod"),
            Some(format!("{}\n{}", hint_for("port"), hint_for("policy")))
        );
    }

    #[test]
    fn a_value_two_params_share_names_both() {
        let params = mnist(&[
            ("workers", json!(-1)),
            ("image", json!("mnist:1")),
            ("replicas", json!(-1)),
        ]);
        let message = "Deployment.apps \"mnist\" is invalid: spec.replicas: Invalid value: -1: \
                       must be greater than or equal to 0";
        assert_eq!(
            param_hint(message, &params, "prod"),
            Some(format!("{}\n{}", hint_for("workers"), hint_for("replicas")))
        );
    }

    #[test]
    fn no_param_with_the_value_and_no_value_give_no_hint() {
        let params = mnist(&[("replicas", json!(1)), ("name", json!("-1"))]);
        let invalid = "Deployment.apps \"mnist\" is invalid: spec.replicas: Invalid value: -1: \
                       must be greater than or equal to 0";
        assert_eq!(param_hint(invalid, &params, "prod"), None);
        let required = "Deployment.apps \"mnist\" is invalid: spec.template.spec.containers: \
                        Required value";
        assert_eq!(param_hint(required, &params, "prod"), None);
    }
}
