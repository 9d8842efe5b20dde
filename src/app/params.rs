//! Parameters: from the params files to the values each component is rendered with.
//!
//! Precedence, lowest first: the prototype's default < `components.<c>` of
//! `components/params.libsonnet` < its `global` < `global` of
//! `environments/<env>/params.libsonnet` < its `components.<c>`. A `global` value applies to
//! the components whose prototype declares that parameter (and to every hand-written
//! component). Values of components made from a prototype are checked against it: an unknown
//! name or a value of the wrong type is an error naming the component, the parameter and the
//! file that set it.
//!
//! One `global` value is the environment's, not a component's: `imageRegistry`
//! ([`IMAGE_REGISTRY`], read by [`image_registry`]), the registry every platform image of the
//! environment is pulled from. No component sees it among its params; the render points the
//! images at it ([`crate::render::images`]).

use std::collections::HashMap;
use std::fmt;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::prototype::{self, Prototype};
use super::{App, AppError, ComponentEntry, Environment, PARAMS_FILE};
use crate::render::images::ImageRegistry;
use crate::render::jsonnet::Evaluator;

/// The `global` param that points an environment's platform images at a registry.
pub const IMAGE_REGISTRY: &str = "imageRegistry";

/// Where a value came from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    Default,
    Component,
    Global,
    EnvGlobal,
    EnvComponent,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Default => "default",
            Layer::Component => "component",
            Layer::Global => "global",
            Layer::EnvGlobal => "env global",
            Layer::EnvComponent => "env",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parameter's value and the layer that set it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamValue {
    pub value: Value,
    pub layer: Layer,
}

/// One component's parameters, as one environment (or the app alone) sees them.
#[derive(Debug, Clone)]
pub struct ComponentParams {
    pub component: ComponentEntry,
    pub prototype: Option<Prototype>,
    pub values: IndexMap<String, ParamValue>,
}

impl ComponentParams {
    /// What `import 'mlkube/component.libsonnet'` gives the component: its name, its params
    /// (with `name`), and the environment.
    pub fn context(&self, env: &Environment) -> Value {
        let mut params: Map<String, Value> = self
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        params.insert("name".into(), Value::String(self.component.name.clone()));
        serde_json::json!({
            "name": self.component.name,
            "params": params,
            "env": { "name": env.name, "namespace": env.namespace, "server": env.server },
        })
    }
}

/// A params file, evaluated: `{ global: {...}, components: { <name>: {...} } }`.
#[derive(Debug, Clone, Default)]
pub struct ParamsFile {
    pub file: String,
    pub global: Map<String, Value>,
    pub components: Map<String, Value>,
}

impl ParamsFile {
    /// Evaluate a params file of the app; a missing file is an empty one.
    pub fn read(app: &App, evaluator: &Evaluator, file: &str) -> Result<ParamsFile, AppError> {
        let mut params = ParamsFile {
            file: file.to_owned(),
            ..ParamsFile::default()
        };
        if !app.has_file(file) {
            return Ok(params);
        }
        let value = evaluator
            .evaluate(file)
            .map_err(|source| AppError::Evaluate {
                file: file.to_owned(),
                source,
            })?;
        let shape = |problem: &str| {
            AppError::Invalid(format!(
                "{file}: {problem}\nhint: a params file evaluates to {{ global: {{ <param>: \
                 <value> }}, components: {{ <component>: {{ <param>: <value> }} }} }}"
            ))
        };
        let Value::Object(mut top) = value else {
            return Err(shape("the file must evaluate to an object"));
        };
        match top.remove("global") {
            Some(Value::Object(global)) => params.global = global,
            None | Some(Value::Null) => {}
            Some(_) => return Err(shape("`global` must be an object")),
        }
        match top.remove("components") {
            Some(Value::Object(components)) => {
                if let Some((name, _)) = components.iter().find(|(_, v)| !v.is_object()) {
                    return Err(shape(&format!("`components.{name}` must be an object")));
                }
                params.components = components;
            }
            None | Some(Value::Null) => {}
            Some(_) => return Err(shape("`components` must be an object")),
        }
        if let Some(field) = top.keys().next() {
            return Err(shape(&format!("unexpected field `{field}`")));
        }
        Ok(params)
    }

    fn component(&self, name: &str) -> Option<&Map<String, Value>> {
        self.components.get(name).and_then(Value::as_object)
    }
}

/// Resolve every component's parameters for `env` (or, without one, from the app's own params
/// file alone), sorted by component name.
pub fn resolve(
    app: &App,
    evaluator: &Evaluator,
    env: Option<&Environment>,
) -> Result<Vec<ComponentParams>, AppError> {
    let components = app.components()?;
    let app_params = ParamsFile::read(app, evaluator, PARAMS_FILE)?;
    let env_params = match env {
        Some(env) => Some(ParamsFile::read(app, evaluator, &env.params_file())?),
        None => None,
    };
    for file in std::iter::once(&app_params).chain(env_params.as_ref()) {
        if let Some(name) = file
            .components
            .keys()
            .find(|name| !components.iter().any(|c| &&c.name == name))
        {
            return Err(AppError::Invalid(format!(
                "{} sets params of `{name}`, which is not a component; the app has: {}\nhint: \
                 remove that block, or add the component",
                file.file,
                components
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }

    let mut prototypes: HashMap<String, Prototype> = HashMap::new();
    let mut resolved = Vec::with_capacity(components.len());
    for component in components {
        let prototype = match &component.prototype {
            Some(name) => Some(match prototypes.get(name) {
                Some(p) => p.clone(),
                None => {
                    let p = prototype::of_component(evaluator, &component.name, name)?;
                    prototypes.insert(name.clone(), p.clone());
                    p
                }
            }),
            None => None,
        };
        let values = merge(
            &component.name,
            env.map(|e| e.name.as_str()),
            prototype.as_ref(),
            &app_params,
            env_params.as_ref(),
        )?;
        resolved.push(ComponentParams {
            component,
            prototype,
            values,
        });
    }
    Ok(resolved)
}

fn merge(
    component: &str,
    env: Option<&str>,
    prototype: Option<&Prototype>,
    app_params: &ParamsFile,
    env_params: Option<&ParamsFile>,
) -> Result<IndexMap<String, ParamValue>, AppError> {
    let mut values = defaults(prototype);
    let empty = Map::new();
    for (file, map, layer) in layers(component, app_params, env_params) {
        let global = matches!(layer, Layer::Global | Layer::EnvGlobal);
        for (name, value) in map.unwrap_or(&empty) {
            if global && name == IMAGE_REGISTRY {
                continue;
            }
            if name == "name" {
                return Err(AppError::Invalid(format!(
                    "{}: `name` cannot be set; it is always the component's name",
                    file.file
                )));
            }
            if let Some(prototype) = prototype {
                match prototype.param(name) {
                    None if global => continue,
                    None => {
                        return Err(unknown_param(component, prototype, name, &file.file));
                    }
                    Some(spec) => check_value(
                        component,
                        spec,
                        value,
                        ValueSource {
                            env,
                            file: Some(&file.file),
                            global,
                            describe: None,
                        },
                    )?,
                }
            }
            values.insert(
                name.clone(),
                ParamValue {
                    value: value.clone(),
                    layer,
                },
            );
        }
    }
    Ok(values)
}

/// The registry `env`'s platform images are pulled from: `global.imageRegistry` of its params
/// file, else of the app's (`None` when neither sets it, or sets it to null).
pub fn image_registry(
    app: &App,
    evaluator: &Evaluator,
    env: &Environment,
) -> Result<Option<ImageRegistry>, AppError> {
    let Some((file, setting)) = image_registry_setting(app, evaluator, Some(env))? else {
        return Ok(None);
    };
    parse_image_registry(&setting.value)
        .map_err(|problem| AppError::ImageRegistry { file, problem })
}

/// `imageRegistry` as `env` (or, without one, the app alone) sees it, and the layer that set
/// it, for the listings.
pub fn image_registry_param(
    app: &App,
    evaluator: &Evaluator,
    env: Option<&Environment>,
) -> Result<Option<ParamValue>, AppError> {
    Ok(image_registry_setting(app, evaluator, env)?.map(|(_, setting)| setting))
}

/// `imageRegistry` of the environment's params file, else of the app's, with the file.
fn image_registry_setting(
    app: &App,
    evaluator: &Evaluator,
    env: Option<&Environment>,
) -> Result<Option<(String, ParamValue)>, AppError> {
    let mut files = Vec::new();
    if let Some(env) = env {
        let file = ParamsFile::read(app, evaluator, &env.params_file())?;
        files.push((file, Layer::EnvGlobal));
    }
    files.push((
        ParamsFile::read(app, evaluator, PARAMS_FILE)?,
        Layer::Global,
    ));
    Ok(files.into_iter().find_map(|(file, layer)| {
        let value = file.global.get(IMAGE_REGISTRY)?.clone();
        Some((file.file, ParamValue { value, layer }))
    }))
}

/// An `imageRegistry` value: a registry and path, or null for none.
pub(crate) fn parse_image_registry(value: &Value) -> Result<Option<ImageRegistry>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => ImageRegistry::parse(text)
            .map(Some)
            .map_err(|e| e.to_string()),
        other => Err(format!(
            "{other} is not a registry and path; give a string such as '127.0.0.1:5000/mlkube',              or null for none"
        )),
    }
}

/// The prototype's defaults: the lowest layer, which the params files override.
fn defaults(prototype: Option<&Prototype>) -> IndexMap<String, ParamValue> {
    let mut values: IndexMap<String, ParamValue> = IndexMap::new();
    if let Some(prototype) = prototype {
        for spec in &prototype.params {
            values.insert(
                spec.name.clone(),
                ParamValue {
                    value: spec.default.clone(),
                    layer: Layer::Default,
                },
            );
        }
    }
    values
}

/// A params file, its values for one component (`None` when it has none) and their layer.
type LayerValues<'a> = (&'a ParamsFile, Option<&'a Map<String, Value>>, Layer);

/// The params files' values for `component`, each with the file that holds it and its layer,
/// lowest precedence first, so that a later one overrides an earlier one.
fn layers<'a>(
    component: &str,
    app_params: &'a ParamsFile,
    env_params: Option<&'a ParamsFile>,
) -> Vec<LayerValues<'a>> {
    let mut layers = vec![
        (
            app_params,
            app_params.component(component),
            Layer::Component,
        ),
        (app_params, Some(&app_params.global), Layer::Global),
    ];
    if let Some(env_params) = env_params {
        layers.push((env_params, Some(&env_params.global), Layer::EnvGlobal));
        layers.push((
            env_params,
            env_params.component(component),
            Layer::EnvComponent,
        ));
    }
    layers
}

/// Where a checked value came from, for the error that names it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ValueSource<'a> {
    /// The environment it is set for or rendered in; `None` for the app-wide params.
    pub env: Option<&'a str>,
    /// The params file that set it, for values read from one.
    pub file: Option<&'a str>,
    /// Set in a `global` block (or with `param set global`).
    pub global: bool,
    /// `mlkube prototype describe <prototype>` is suggested (for values from the command line).
    pub describe: Option<&'a str>,
}

/// Check `value` against `spec`; the error names the component, the environment, the param and
/// what it may be.
pub(crate) fn check_value(
    component: &str,
    spec: &prototype::ParamSpec,
    value: &Value,
    source: ValueSource<'_>,
) -> Result<(), AppError> {
    let Err(mismatch) = spec.check(value) else {
        return Ok(());
    };
    let mut message = format!("component `{component}`");
    if let Some(env) = source.env {
        message.push_str(&format!(" (environment `{env}`)"));
    }
    message.push_str(&format!(
        ": {}param `{}` must be {}, got {value}",
        if source.global { "global " } else { "" },
        spec.name,
        mismatch.expected
    ));
    if let Some(file) = source.file {
        message.push_str(&format!(" (set in {file})"));
    }
    let from_command_line = source.file.is_none() && source.describe.is_some();
    let json = from_command_line
        .then(|| json_hint(spec.kind(), value))
        .flatten();
    if let Some(hint) = mismatch.hint.or(json) {
        message.push_str(&format!("\nhint: {hint}"));
    }
    if let Some(prototype) = source.describe {
        message.push_str(&format!(
            "\nhint: `mlkube prototype describe {prototype}` lists the params and types"
        ));
    }
    Err(AppError::Invalid(message))
}

/// For a list or an object given on the command line as text that is not JSON (`FOO=1`,
/// Python's `{'FOO': '1'}`): how to write it.
fn json_hint(kind: prototype::ParamType, value: &Value) -> Option<String> {
    let text = value.as_str()?;
    let example = match kind {
        prototype::ParamType::Object => r#"'{"NAME": "value"}'"#,
        prototype::ParamType::Array => r#"'["--first", "--second"]'"#,
        _ => return None,
    };
    let quotes = if text.starts_with(['{', '[']) && text.contains('\'') {
        ", whose strings take double quotes,"
    } else {
        ""
    };
    Some(format!(
        "write it as JSON{quotes} in single quotes for the shell, e.g. {example}"
    ))
}

pub(crate) fn unknown_param(
    component: &str,
    prototype: &Prototype,
    name: &str,
    file: &str,
) -> AppError {
    AppError::Invalid(format!(
        "component `{component}` ({} prototype) has no param `{name}` (set in {file}); it has: \
         {}\nhint: `mlkube prototype describe {}` lists them with their types",
        prototype.name,
        prototype.param_names().join(", "),
        prototype.name
    ))
}

/// A parameter whose value differs between two environments; `None` where one has no such
/// parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDifference {
    pub component: String,
    pub param: String,
    pub a: Option<Value>,
    pub b: Option<Value>,
}

/// The parameters whose values differ between environments `a` and `b`, by component.
pub fn diff(app: &App, a: &Environment, b: &Environment) -> Result<Vec<ParamDifference>, AppError> {
    let evaluator = Evaluator::new(app.root());
    let resolved_a = resolve(app, &evaluator, Some(a))?;
    let resolved_b = resolve(app, &evaluator, Some(b))?;
    let mut differences = Vec::new();
    let registry = |env| -> Result<Option<Value>, AppError> {
        Ok(image_registry_param(app, &evaluator, Some(env))?.map(|p| p.value))
    };
    let (registry_a, registry_b) = (registry(a)?, registry(b)?);
    if registry_a != registry_b {
        differences.push(ParamDifference {
            component: "global".into(),
            param: IMAGE_REGISTRY.into(),
            a: registry_a,
            b: registry_b,
        });
    }
    for (ca, cb) in resolved_a.iter().zip(&resolved_b) {
        let mut keys: Vec<&String> = ca.values.keys().collect();
        keys.extend(cb.values.keys().filter(|k| !ca.values.contains_key(*k)));
        for key in keys {
            let va = ca.values.get(key).map(|v| &v.value);
            let vb = cb.values.get(key).map(|v| &v.value);
            if va != vb {
                differences.push(ParamDifference {
                    component: ca.component.name.clone(),
                    param: key.clone(),
                    a: va.cloned(),
                    b: vb.cloned(),
                });
            }
        }
    }
    Ok(differences)
}
