//! The prototypes of the embedded library: what `prototype list/describe` shows and what
//! `param set` and rendering check parameters against.
//!
//! A prototype is a library file `<name>.libsonnet` that evaluates to an object with `name`,
//! `description`, `params` (`{ <param>: { type, default, description } }`) and a `render`
//! function; other library files (helpers) are not prototypes. A renamed prototype is found by
//! its old name too (`library::RENAMED`), so apps that name it so keep working.

use serde_json::Value;

use super::AppError;
use crate::render::jsonnet::Evaluator;
use crate::render::library;

pub use super::param_type::{Mismatch, ParamType, ValueRule};

/// One declared parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    /// Its type and the rules beyond it (bounds, allowed values).
    pub rule: ValueRule,
    /// `null` means unset, and then `null` is an accepted value.
    pub default: Value,
    pub description: String,
}

impl ParamSpec {
    pub fn kind(&self) -> ParamType {
        self.rule.kind
    }

    /// Whether `value` may be this parameter's value; if not, what it must be.
    pub fn check(&self, value: &Value) -> Result<(), Mismatch> {
        if value.is_null() && self.default.is_null() {
            return Ok(());
        }
        self.rule.check(value).map_err(|mismatch| Mismatch {
            expected: if self.default.is_null() {
                format!("{} or null", mismatch.expected)
            } else {
                mismatch.expected
            },
            hint: mismatch.hint,
        })
    }

    pub fn accepts(&self, value: &Value) -> bool {
        self.check(value).is_ok()
    }
}

/// A prototype of the embedded library.
#[derive(Debug, Clone, PartialEq)]
pub struct Prototype {
    pub name: String,
    /// The names it had before it was renamed; each still finds it.
    pub old_names: Vec<&'static str>,
    pub description: String,
    pub params: Vec<ParamSpec>,
}

impl Prototype {
    /// The first line of the description.
    pub fn summary(&self) -> &str {
        self.description.lines().next().unwrap_or_default()
    }

    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }

    pub fn param_names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name.clone()).collect()
    }
}

/// Load the library file `<name>.libsonnet` as a prototype; `None` if it is a helper.
fn load(evaluator: &Evaluator, name: &str) -> Result<Option<Prototype>, AppError> {
    let file = library::prototype_import(name);
    let evaluate_error = |source| AppError::Evaluate {
        file: file.clone(),
        source,
    };
    let fields = match evaluator.fields(&file) {
        Ok(fields) => fields,
        // A library file that is not an object cannot be a prototype.
        Err(error) if error.message.starts_with("expected an object") => return Ok(None),
        Err(error) => return Err(evaluate_error(error)),
    };
    if !evaluator
        .is_function(&fields, "render")
        .map_err(evaluate_error)?
    {
        return Ok(None);
    }
    let invalid = |problem: &str| AppError::Invalid(format!("prototype {file}: {problem}"));
    let text = |field: &str| -> Result<String, AppError> {
        match evaluator
            .field_json(&fields, field)
            .map_err(evaluate_error)?
        {
            Some(Value::String(s)) => Ok(s),
            _ => Err(invalid(&format!("`{field}` must be a string"))),
        }
    };
    // The file name is the prototype's name (it is what components import); `name` is checked.
    if text("name")? != name {
        return Err(invalid(&format!(
            "`name` must be `{name}`, the file's name"
        )));
    }
    let description = text("description")?;
    let params = match evaluator
        .field_json(&fields, "params")
        .map_err(evaluate_error)?
    {
        Some(Value::Object(params)) => params,
        None => serde_json::Map::new(),
        Some(_) => return Err(invalid("`params` must be an object")),
    };
    Ok(Some(Prototype {
        name: name.to_owned(),
        old_names: library::old_names(name),
        description: description.trim_end().to_owned(),
        params: param_specs(params, &invalid)?,
    }))
}

/// The specs of a prototype's `params` object, each checked to be a rule its default obeys;
/// `invalid` makes the error that names the prototype's file.
fn param_specs(
    params: serde_json::Map<String, Value>,
    invalid: &dyn Fn(&str) -> AppError,
) -> Result<Vec<ParamSpec>, AppError> {
    let mut specs = Vec::with_capacity(params.len());
    for (param, spec) in params {
        let Value::Object(spec) = spec else {
            return Err(invalid(&format!("param `{param}` must be an object")));
        };
        let rule =
            ValueRule::parse(&spec).map_err(|e| invalid(&format!("param `{param}`: {e}")))?;
        let spec = ParamSpec {
            rule,
            default: spec.get("default").cloned().unwrap_or(Value::Null),
            description: spec
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: param,
        };
        if let Err(mismatch) = spec.check(&spec.default) {
            return Err(invalid(&format!(
                "the default of `{}` must be {}",
                spec.name, mismatch.expected
            )));
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// Every prototype of the library, sorted by name.
pub fn all(evaluator: &Evaluator) -> Result<Vec<Prototype>, AppError> {
    let mut prototypes = Vec::new();
    for name in library::libsonnet_files() {
        if let Some(prototype) = load(evaluator, name)? {
            prototypes.push(prototype);
        }
    }
    Ok(prototypes)
}

/// The prototype `component` names in app.yaml; an unknown one says which component named it.
pub fn of_component(
    evaluator: &Evaluator,
    component: &str,
    prototype: &str,
) -> Result<Prototype, AppError> {
    find(evaluator, prototype).map_err(|error| match error {
        AppError::UnknownPrototype { name, known } => AppError::UnknownComponentPrototype {
            component: component.to_owned(),
            prototype: name,
            known,
        },
        other => other,
    })
}

/// The prototype called `name`, now or before a rename; an unknown name lists the known ones.
pub fn find(evaluator: &Evaluator, name: &str) -> Result<Prototype, AppError> {
    let current = library::renamed(name).unwrap_or(name);
    if library::libsonnet_files().contains(&current)
        && let Some(prototype) = load(evaluator, current)?
    {
        return Ok(prototype);
    }
    Err(AppError::UnknownPrototype {
        name: name.to_owned(),
        known: all(evaluator)?.into_iter().map(|p| p.name).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_name_finds_the_renamed_prototype() {
        let evaluator = Evaluator::new(std::path::Path::new("."));
        for (old, name) in library::RENAMED {
            let prototype = find(&evaluator, old).unwrap();
            assert_eq!(prototype, find(&evaluator, name).unwrap());
            assert_eq!(prototype.name, *name);
            assert_eq!(prototype.old_names, [*old]);
        }
        let names: Vec<String> = all(&evaluator)
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert!(names.contains(&"serving".to_owned()), "{names:?}");
        assert!(!names.contains(&"tf-serving".to_owned()), "{names:?}");
    }
}
