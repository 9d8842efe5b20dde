//! The prototypes of the embedded library: what `prototype list/describe` shows and what
//! `param set` and rendering check parameters against.
//!
//! A prototype is a library file `<name>.libsonnet` that evaluates to an object with `name`,
//! `description`, `params` (`{ <param>: { type, default, description } }`) and a `render`
//! function; other library files (helpers) are not prototypes.

use serde_json::Value;

use super::AppError;
use crate::render::jsonnet::Evaluator;
use crate::render::library;

/// The types a prototype parameter can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl ParamType {
    fn parse(name: &str) -> Option<ParamType> {
        Some(match name {
            "string" => ParamType::String,
            "integer" => ParamType::Integer,
            "number" => ParamType::Number,
            "boolean" => ParamType::Boolean,
            "array" => ParamType::Array,
            "object" => ParamType::Object,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
        }
    }

    /// Whether `value` is of this type (`null` is checked by the caller, against the default).
    pub fn accepts(self, value: &Value) -> bool {
        match self {
            ParamType::String => value.is_string(),
            ParamType::Integer => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            ParamType::Number => value.is_number(),
            ParamType::Boolean => value.is_boolean(),
            ParamType::Array => value.is_array(),
            ParamType::Object => value.is_object(),
        }
    }
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    pub kind: ParamType,
    /// `null` means unset, and then `null` is an accepted value.
    pub default: Value,
    pub description: String,
}

impl ParamSpec {
    pub fn accepts(&self, value: &Value) -> bool {
        (value.is_null() && self.default.is_null()) || self.kind.accepts(value)
    }
}

/// A prototype of the embedded library.
#[derive(Debug, Clone, PartialEq)]
pub struct Prototype {
    pub name: String,
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
    let mut specs = Vec::with_capacity(params.len());
    for (param, spec) in params {
        let kind = spec["type"]
            .as_str()
            .and_then(ParamType::parse)
            .ok_or_else(|| {
                invalid(&format!(
                    "param `{param}` needs a type: string, integer, number, boolean, array or \
                     object"
                ))
            })?;
        let spec = ParamSpec {
            kind,
            default: spec.get("default").cloned().unwrap_or(Value::Null),
            description: spec["description"].as_str().unwrap_or_default().to_owned(),
            name: param,
        };
        if !spec.accepts(&spec.default) {
            return Err(invalid(&format!(
                "the default of `{}` is not a {}",
                spec.name,
                kind.as_str()
            )));
        }
        specs.push(spec);
    }
    Ok(Some(Prototype {
        name: name.to_owned(),
        description: description.trim_end().to_owned(),
        params: specs,
    }))
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

/// The prototype called `name`; an unknown name lists the known ones.
pub fn find(evaluator: &Evaluator, name: &str) -> Result<Prototype, AppError> {
    if library::libsonnet_files().contains(&name)
        && let Some(prototype) = load(evaluator, name)?
    {
        return Ok(prototype);
    }
    Err(AppError::UnknownPrototype {
        name: name.to_owned(),
        known: all(evaluator)?.into_iter().map(|p| p.name).collect(),
    })
}
