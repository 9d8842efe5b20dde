//! Parameters: from the params files to the values each component is rendered with.
//!
//! Precedence, lowest first: the prototype's default < `defaults` of
//! `environments/<env>/params.libsonnet` < `components.<c>` of `components/params.libsonnet`
//! < its `global` < `global` of the environment's params file < its `components.<c>`. A
//! `global` value applies to the components whose prototype declares that parameter (and to
//! every hand-written component). A `defaults` value applies to the components whose prototype
//! declares it, in place of the prototype's default: an environment sizes the components added
//! later (a 2-core local node asks less CPU of each job) without overriding what the app sets
//! for one of them, as its `global` would. Only an environment has `defaults`; a hand-written
//! component, which has no prototype defaults, takes none. Values of components made from a
//! prototype are checked against it: an unknown name or a value of the wrong type is an error
//! naming the component, the parameter and the file that set it.
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
    /// The environment's `defaults`, in place of the prototype's.
    EnvDefaults,
    Component,
    Global,
    EnvGlobal,
    EnvComponent,
}

impl Layer {
    /// A block that reaches every component (`global`, `defaults`): a param the prototype does
    /// not declare is passed over, not refused.
    fn is_shared(self) -> bool {
        matches!(self, Layer::Global | Layer::EnvGlobal | Layer::EnvDefaults)
    }

    /// The block of a params file that sets values of this layer, for errors.
    fn block(self) -> Block {
        match self {
            Layer::Global | Layer::EnvGlobal => Block::Global,
            Layer::EnvDefaults => Block::Defaults,
            _ => Block::Component,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Default => "default",
            Layer::EnvDefaults => "env defaults",
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

/// A params file, evaluated: `{ global: {...}, components: { <name>: {...} } }`, and for an
/// environment's, `defaults: {...}`.
#[derive(Debug, Clone, Default)]
pub struct ParamsFile {
    pub file: String,
    pub global: Map<String, Value>,
    /// Only in an environment's file: in place of the prototypes' defaults.
    pub defaults: Map<String, Value>,
    pub components: Map<String, Value>,
}

impl ParamsFile {
    /// Evaluate a params file of the app; a missing file is an empty one.
    pub fn read(app: &App, evaluator: &Evaluator, file: &str) -> Result<ParamsFile, AppError> {
        if !app.has_file(file) {
            return Ok(ParamsFile {
                file: file.to_owned(),
                ..ParamsFile::default()
            });
        }
        let value = evaluator
            .evaluate(file)
            .map_err(|source| AppError::Evaluate {
                file: file.to_owned(),
                source,
            })?;
        ParamsFile::parse(file, value)
    }

    /// The blocks of an evaluated params file, each checked for its shape.
    fn parse(file: &str, value: Value) -> Result<ParamsFile, AppError> {
        let Value::Object(mut top) = value else {
            return Err(shape_error(file, "the file must evaluate to an object"));
        };
        if file == PARAMS_FILE && top.contains_key("defaults") {
            return Err(app_wide_defaults());
        }
        let params = ParamsFile {
            file: file.to_owned(),
            global: object_block(file, &mut top, "global")?,
            defaults: object_block(file, &mut top, "defaults")?,
            components: object_block(file, &mut top, "components")?,
        };
        if let Some((name, _)) = params.components.iter().find(|(_, v)| !v.is_object()) {
            return Err(shape_error(
                file,
                &format!("`components.{name}` must be an object"),
            ));
        }
        if let Some(field) = top.keys().next() {
            return Err(shape_error(file, &format!("unexpected field `{field}`")));
        }
        Ok(params)
    }

    fn component(&self, name: &str) -> Option<&Map<String, Value>> {
        self.components.get(name).and_then(Value::as_object)
    }
}

/// A top-level block of a params file, `{}` when it is missing or null.
fn object_block(
    file: &str,
    top: &mut Map<String, Value>,
    block: &str,
) -> Result<Map<String, Value>, AppError> {
    match top.remove(block) {
        Some(Value::Object(values)) => Ok(values),
        None | Some(Value::Null) => Ok(Map::new()),
        Some(_) => Err(shape_error(file, &format!("`{block}` must be an object"))),
    }
}

/// A params file that is not of the shape `{ global, components }` (and an environment's
/// `defaults`).
fn shape_error(file: &str, problem: &str) -> AppError {
    AppError::Invalid(format!(
        "{file}: {problem}\nhint: a params file evaluates to {{ global: {{ <param>: <value> }}, \
         components: {{ <component>: {{ <param>: <value> }} }} }}; an environment's may also \
         have defaults: {{ <param>: <value> }}"
    ))
}

/// `defaults` in `components/params.libsonnet`: they are an environment's.
fn app_wide_defaults() -> AppError {
    AppError::Invalid(format!(
        "{PARAMS_FILE}: `defaults` belong in an environment's params file: they replace the \
         prototypes' defaults in that environment, below every value of {PARAMS_FILE}\nhint: \
         move the block to environments/<env>/params.libsonnet (`mlkube param set defaults \
         <param> <value> --env <env>`); for a value every component of every environment \
         takes, use `global`"
    ))
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

/// The component being resolved, in which environment, and its prototype.
#[derive(Clone, Copy)]
struct Target<'a> {
    component: &'a str,
    env: Option<&'a str>,
    prototype: Option<&'a Prototype>,
}

fn merge(
    component: &str,
    env: Option<&str>,
    prototype: Option<&Prototype>,
    app_params: &ParamsFile,
    env_params: Option<&ParamsFile>,
) -> Result<IndexMap<String, ParamValue>, AppError> {
    let target = Target {
        component,
        env,
        prototype,
    };
    let mut values = defaults(prototype);
    for (file, map, layer) in layers(component, app_params, env_params) {
        // A hand-written component has no prototype defaults for `defaults` to replace.
        if layer == Layer::EnvDefaults && prototype.is_none() {
            continue;
        }
        for (name, value) in map.into_iter().flatten() {
            if takes(target, file, layer, name, value)? {
                let value = value.clone();
                values.insert(name.clone(), ParamValue { value, layer });
            }
        }
    }
    Ok(values)
}

/// Whether `target` takes `name = value` from `layer` of `file`: not `imageRegistry` of a
/// `global`, nor a param its prototype does not declare from a shared block; an error for
/// `name`, for a param a component's block sets that the prototype does not declare, and for a
/// value of the wrong type.
fn takes(
    target: Target<'_>,
    file: &ParamsFile,
    layer: Layer,
    name: &str,
    value: &Value,
) -> Result<bool, AppError> {
    if layer.block() == Block::Global && name == IMAGE_REGISTRY {
        return Ok(false);
    }
    if name == "name" {
        return Err(AppError::Invalid(format!(
            "{}: `name` cannot be set; it is always the component's name",
            file.file
        )));
    }
    let Some(prototype) = target.prototype else {
        return Ok(true);
    };
    let Some(spec) = prototype.param(name) else {
        if layer.is_shared() {
            return Ok(false);
        }
        return Err(unknown_param(target.component, prototype, name, &file.file));
    };
    let source = ValueSource {
        env: target.env,
        file: Some(&file.file),
        block: layer.block(),
        describe: None,
    };
    check_value(target.component, spec, value, source)?;
    Ok(true)
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
    let mut layers = Vec::new();
    if let Some(env_params) = env_params {
        layers.push((env_params, Some(&env_params.defaults), Layer::EnvDefaults));
    }
    layers.extend([
        (
            app_params,
            app_params.component(component),
            Layer::Component,
        ),
        (app_params, Some(&app_params.global), Layer::Global),
    ]);
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

/// The block of a params file a value is set in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Block {
    /// `components.<c>`, or a value given for one component.
    #[default]
    Component,
    Global,
    Defaults,
}

impl Block {
    /// How an error names a param of this block.
    fn describe_param(self) -> &'static str {
        match self {
            Block::Component => "param",
            Block::Global => "global param",
            Block::Defaults => "default for param",
        }
    }
}

/// Where a checked value came from, for the error that names it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ValueSource<'a> {
    /// The environment it is set for or rendered in; `None` for the app-wide params.
    pub env: Option<&'a str>,
    /// The params file that set it, for values read from one.
    pub file: Option<&'a str>,
    /// The block that set it (or that `param set global|defaults` sets).
    pub block: Block,
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
    check_value_of(&format!("component `{component}`"), spec, value, source)
}

/// [`check_value`] for a value that `subject` takes, e.g. "the tf-job prototype".
pub(crate) fn check_value_of(
    subject: &str,
    spec: &prototype::ParamSpec,
    value: &Value,
    source: ValueSource<'_>,
) -> Result<(), AppError> {
    let Err(mismatch) = spec.check(value) else {
        return Ok(());
    };
    let mut message = subject.to_owned();
    if let Some(env) = source.env {
        message.push_str(&format!(" (environment `{env}`)"));
    }
    message.push_str(&format!(
        ": {} `{}` must be {}, got {value}",
        source.block.describe_param(),
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

/// The `defaults` of `env`'s params file (none without an environment), for the listings:
/// what the components it adds later take in place of their prototypes' defaults.
pub fn env_defaults(
    app: &App,
    evaluator: &Evaluator,
    env: Option<&Environment>,
) -> Result<Map<String, Value>, AppError> {
    match env {
        Some(env) => Ok(ParamsFile::read(app, evaluator, &env.params_file())?.defaults),
        None => Ok(Map::new()),
    }
}

/// The parameters whose values differ between environments `a` and `b`: the environment's own
/// settings first (`global.imageRegistry`, then `defaults`), then by component.
pub fn diff(app: &App, a: &Environment, b: &Environment) -> Result<Vec<ParamDifference>, AppError> {
    let evaluator = Evaluator::new(app.root());
    let mut differences = registry_difference(app, &evaluator, a, b)?;
    differences.extend(defaults_differences(
        &env_defaults(app, &evaluator, Some(a))?,
        &env_defaults(app, &evaluator, Some(b))?,
    ));
    let resolved_a = resolve(app, &evaluator, Some(a))?;
    let resolved_b = resolve(app, &evaluator, Some(b))?;
    for (ca, cb) in resolved_a.iter().zip(&resolved_b) {
        differences.extend(component_differences(ca, cb));
    }
    Ok(differences)
}

/// `global.imageRegistry`, when `a` and `b` pull their images from different registries.
fn registry_difference(
    app: &App,
    evaluator: &Evaluator,
    a: &Environment,
    b: &Environment,
) -> Result<Vec<ParamDifference>, AppError> {
    let registry = |env| -> Result<Option<Value>, AppError> {
        Ok(image_registry_param(app, evaluator, Some(env))?.map(|p| p.value))
    };
    let (registry_a, registry_b) = (registry(a)?, registry(b)?);
    if registry_a == registry_b {
        return Ok(Vec::new());
    }
    Ok(vec![ParamDifference {
        component: "global".into(),
        param: IMAGE_REGISTRY.into(),
        a: registry_a,
        b: registry_b,
    }])
}

/// The `defaults` two environments set differently, as rows of the pseudo-component
/// `defaults`.
fn defaults_differences(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<ParamDifference> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| a.get(*key) != b.get(*key))
        .map(|key| ParamDifference {
            component: "defaults".into(),
            param: key.clone(),
            a: a.get(key).cloned(),
            b: b.get(key).cloned(),
        })
        .collect()
}

/// The params of one component that differ between two environments.
fn component_differences(ca: &ComponentParams, cb: &ComponentParams) -> Vec<ParamDifference> {
    let mut keys: Vec<&String> = ca.values.keys().collect();
    keys.extend(cb.values.keys().filter(|k| !ca.values.contains_key(*k)));
    let mut differences = Vec::new();
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
    differences
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::app::param_type::ValueRule;

    /// A prototype declaring `cpuRequest` (a quantity, default 500m) and `replicas` (1).
    fn job_prototype() -> Prototype {
        let spec = |name: &str, rule: Value, default: Value| prototype::ParamSpec {
            name: name.to_owned(),
            rule: ValueRule::parse(rule.as_object().unwrap()).unwrap(),
            default,
            description: String::new(),
        };
        Prototype {
            name: "job".into(),
            old_names: Vec::new(),
            description: "A job.".into(),
            params: vec![
                spec("cpuRequest", json!({"type": "quantity"}), json!("500m")),
                spec("replicas", json!({"type": "integer"}), json!(1)),
            ],
        }
    }

    fn file(name: &str, value: Value) -> ParamsFile {
        ParamsFile::parse(name, value).unwrap()
    }

    /// `train`'s values with the app's and local's params files, and the layer of each.
    fn resolved(app: Value, local: Value) -> Vec<(String, Value, Layer)> {
        let app = file(PARAMS_FILE, app);
        let local = file("environments/local/params.libsonnet", local);
        let prototype = job_prototype();
        merge("train", Some("local"), Some(&prototype), &app, Some(&local))
            .unwrap()
            .into_iter()
            .map(|(name, v)| (name, v.value, v.layer))
            .collect()
    }

    fn cpu(resolved: &[(String, Value, Layer)]) -> (Value, Layer) {
        let (_, value, layer) = resolved.iter().find(|(n, ..)| n == "cpuRequest").unwrap();
        (value.clone(), *layer)
    }

    #[test]
    fn env_defaults_replace_only_the_prototypes_defaults() {
        let defaults = json!({"defaults": {"cpuRequest": "100m", "unknown": 1}});
        let none = json!({});
        let one = resolved(none.clone(), defaults.clone());
        assert_eq!(cpu(&one), (json!("100m"), Layer::EnvDefaults));
        assert_eq!(
            one.len(),
            2,
            "a default no prototype declares is passed over"
        );
        let layers = [
            (
                json!({"components": {"train": {"cpuRequest": "2"}}}),
                none.clone(),
                Layer::Component,
            ),
            (
                json!({"global": {"cpuRequest": "2"}}),
                none.clone(),
                Layer::Global,
            ),
            (
                none.clone(),
                json!({"global": {"cpuRequest": "2"}}),
                Layer::EnvGlobal,
            ),
            (
                none.clone(),
                json!({"components": {"train": {"cpuRequest": "2"}}}),
                Layer::EnvComponent,
            ),
        ];
        for (app, mut local, layer) in layers {
            local["defaults"] = defaults["defaults"].clone();
            assert_eq!(cpu(&resolved(app, local)), (json!("2"), layer), "{layer}");
        }
        assert_eq!(
            cpu(&resolved(none.clone(), none)),
            (json!("500m"), Layer::Default)
        );
    }

    #[test]
    fn env_defaults_are_checked_and_skip_hand_written_components() {
        let app = file(PARAMS_FILE, json!({}));
        let local = file(
            "environments/local/params.libsonnet",
            json!({"defaults": {"replicas": "two"}}),
        );
        let prototype = job_prototype();
        let error = merge("train", Some("local"), Some(&prototype), &app, Some(&local))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("default for param `replicas` must be")
                && error.contains("(set in environments/local/params.libsonnet)"),
            "{error}"
        );
        let hand_written = merge("web", Some("local"), None, &app, Some(&local)).unwrap();
        assert!(hand_written.is_empty(), "{hand_written:?}");
    }

    #[test]
    fn defaults_are_an_environments_and_an_object() {
        let app_wide = ParamsFile::parse(PARAMS_FILE, json!({"defaults": {}})).unwrap_err();
        assert!(
            app_wide
                .to_string()
                .contains("belong in an environment's params file"),
            "{app_wide}"
        );
        let env_file = "environments/local/params.libsonnet";
        let shape = ParamsFile::parse(env_file, json!({"defaults": [1]})).unwrap_err();
        assert!(
            shape
                .to_string()
                .starts_with(&format!("{env_file}: `defaults` must be an object")),
            "{shape}"
        );
    }
}
