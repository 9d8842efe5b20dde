//! The edits `env`, `component` and `param` make to an app: each checks everything it can
//! before it writes anything, and edits the params files in place ([`super::edit`]) so hand
//! edits and comments survive.

use serde_json::Value;

use super::check;
use super::params::{self, Block, ValueSource, unknown_param};
use super::prototype::{self, ParamType};
use super::render::RenderError;
use super::{
    App, AppError, Environment, PARAMS_FILE, check_name, check_server, component_file, edit,
    env_params_file, template,
};
use crate::render::jsonnet::Evaluator;

// ---------------------------------------------------------------------------------------------
// environments

/// A new environment: its name, and its namespace (default: the name) and cluster pin.
#[derive(Debug, Clone, Default)]
pub struct NewEnvironment {
    pub name: String,
    pub namespace: Option<String>,
    pub server: Option<String>,
    pub context: Option<String>,
}

/// Add an environment; gives the params file its overrides go in.
pub fn add_environment(app: &mut App, new: &NewEnvironment) -> Result<String, AppError> {
    let env = &new.name;
    check_name("environment", env)?;
    if app.environment(env).is_ok() {
        return Err(AppError::Invalid(format!(
            "environment `{env}` already exists\nhint: change it with `mlkube env set {env}`"
        )));
    }
    let namespace = new.namespace.clone().unwrap_or_else(|| env.clone());
    check_name("namespace", &namespace)?;
    let server = new.server.as_deref().map(check_server).transpose()?;
    let environment = Environment {
        name: env.clone(),
        namespace,
        server,
        context: new.context.clone(),
    };
    let file = environment.params_file();
    app.environments_mut().push(environment);
    if !app.root().join(&file).exists() {
        app.write(&file, &template::env_params(env))?;
    }
    app.save()?;
    Ok(file)
}

/// What `env set` changes; `None` leaves a setting as it is, an empty server or context unpins.
#[derive(Debug, Clone, Default)]
pub struct EnvironmentChange {
    pub namespace: Option<String>,
    pub server: Option<String>,
    pub context: Option<String>,
    /// A new name for the environment.
    pub name: Option<String>,
}

/// Change an environment's namespace, cluster pin or name.
pub fn set_environment(
    app: &mut App,
    env: &str,
    change: &EnvironmentChange,
) -> Result<(), AppError> {
    app.environment(env)?;
    if let Some(namespace) = &change.namespace {
        check_name("namespace", namespace)?;
    }
    let non_empty = |value: &Option<String>| value.as_deref().is_some_and(|v| !v.is_empty());
    let server = match change.server.as_deref() {
        Some("") => Some(None),
        Some(server) => Some(Some(check_server(server)?)),
        None => None,
    };
    if non_empty(&change.server) && non_empty(&change.context) {
        return Err(AppError::Invalid(
            "pass --server or --context, not both: an environment is pinned to one".into(),
        ));
    }
    if let Some(new_name) = &change.name {
        check_name("environment", new_name)?;
        if new_name != env && app.environment(new_name).is_ok() {
            return Err(AppError::Invalid(format!(
                "environment `{new_name}` already exists"
            )));
        }
    }
    let root = app.root().to_owned();
    let environment = app
        .environments_mut()
        .iter_mut()
        .find(|e| e.name == env)
        .ok_or_else(|| AppError::Invalid(format!("unknown environment `{env}`")))?;
    if let Some(namespace) = &change.namespace {
        environment.namespace.clone_from(namespace);
    }
    // An environment is pinned to a server or a context; setting one clears the other, and an
    // empty value unpins.
    if let Some(server) = server {
        environment.server = server;
        environment.context = None;
    }
    if let Some(context) = &change.context {
        environment.context = (!context.is_empty()).then(|| context.clone());
        environment.server = None;
    }
    if let Some(new_name) = change.name.as_deref().filter(|n| *n != env) {
        let from = root.join("environments").join(env);
        let to = root.join("environments").join(new_name);
        if from.exists() {
            std::fs::rename(&from, &to).map_err(|source| AppError::Write { path: to, source })?;
        }
        environment.name = new_name.to_owned();
    }
    app.save()
}

/// Remove an environment and its overrides file.
pub fn remove_environment(app: &mut App, env: &str) -> Result<(), AppError> {
    app.environment(env)?;
    app.environments_mut().retain(|e| e.name != env);
    let file = app.root().join(env_params_file(env));
    app.save()?;
    if file.exists() {
        std::fs::remove_file(&file).map_err(|source| AppError::Write {
            path: file.clone(),
            source,
        })?;
    }
    if let Some(dir) = file.parent() {
        // Only removed when empty: other files there are the user's.
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// components

/// Add `name` as an instance of `prototype`, with `key=value` parameters; gives the
/// prototype's name.
pub fn add_component(
    app: &mut App,
    prototype: &str,
    name: &str,
    params: &[String],
) -> Result<String, AppError> {
    check_name("component", name)?;
    reserved_name(name)?;
    if app.components()?.iter().any(|c| c.name == name) {
        return Err(AppError::Invalid(format!(
            "component `{name}` already exists ({})\nhint: pick another name; several instances \
             of one prototype are fine",
            component_file(name)
        )));
    }
    let evaluator = Evaluator::new(app.root());
    let prototype = prototype::find(&evaluator, prototype)?;
    let values = component_values(&prototype, name, params)?;

    let mut text = read_or(app, PARAMS_FILE, template::APP_PARAMS)?;
    text = edit_file(PARAMS_FILE, &text, &["components", name], Some("{}"))?;
    for (key, value) in &values {
        text = edit_file(
            PARAMS_FILE,
            &text,
            &["components", name, key],
            Some(&edit::literal(value)),
        )?;
    }
    let file = template::component(name, &prototype.name);
    component_renders(app, name, &prototype.name, &text, &file)?;
    app.write(PARAMS_FILE, &text)?;
    app.write(&component_file(name), &file)?;
    app.record_component(name, &prototype.name);
    app.save()?;
    Ok(prototype.name)
}

/// Refuse the names `param set` gives its blocks: `global` and `defaults`.
fn reserved_name(name: &str) -> Result<(), AppError> {
    let what = match name {
        "global" => "sets a value for every component",
        DEFAULTS => "sets an environment's defaults",
        _ => return Ok(()),
    };
    Err(AppError::Invalid(format!(
        "`{name}` cannot name a component: `mlkube param set {name} ...` {what}"
    )))
}

/// Refuse a new component that would not render, with the params given, in every environment.
fn component_renders(
    app: &App,
    name: &str,
    prototype: &str,
    params_text: &str,
    component_text: &str,
) -> Result<(), AppError> {
    let mut after = app.staging([
        (PARAMS_FILE.to_owned(), params_text.to_owned()),
        (component_file(name), component_text.to_owned()),
    ]);
    after.record_component(name, prototype);
    let hint = |prototype: &str, param: &str| {
        format!(
            "give `{param}` a value that renders with `--param {param}=<value>`; `mlkube \
             prototype describe {prototype}` says what it takes"
        )
    };
    let reach = check::Reach {
        edit: format!("adding component `{name}` ({prototype})"),
        environments: app.environments().iter().map(|e| e.name.clone()).collect(),
        components: vec![name.to_owned()],
        hint: &hint,
    };
    check::keeps_rendering(app, &after, &reach)
}

/// `--param key=value` arguments as checked values of the prototype's parameters.
fn component_values(
    prototype: &prototype::Prototype,
    name: &str,
    params: &[String],
) -> Result<Vec<(String, Value)>, AppError> {
    let mut values = Vec::with_capacity(params.len());
    for param in params {
        let Some((key, raw)) = param.split_once('=') else {
            return Err(AppError::Invalid(format!(
                "--param `{param}` is not key=value, e.g. --param modelName=mnist"
            )));
        };
        let spec = prototype
            .param(key)
            .ok_or_else(|| unknown_param(name, prototype, key, "--param"))?;
        let value = parse_value(raw, false, &[spec.kind()]);
        let source = ValueSource {
            describe: Some(&prototype.name),
            ..ValueSource::default()
        };
        params::check_value(name, spec, &value, source)?;
        values.push((key.to_owned(), value));
    }
    Ok(values)
}

/// Remove a component, its file and its parameters in every params file.
pub fn remove_component(app: &mut App, name: &str) -> Result<(), AppError> {
    app.component(name)?;
    let mut files = vec![PARAMS_FILE.to_owned()];
    files.extend(app.environments().iter().map(Environment::params_file));
    // Compute every edit first, so a file mlkube cannot edit changes nothing.
    let mut edits = Vec::new();
    for file in files {
        if !app.root().join(&file).is_file() {
            continue;
        }
        let text = app.read(&file)?;
        if let Some(new_text) =
            edit::remove_field(&text, &["components", name]).map_err(|source| AppError::Edit {
                file: file.clone(),
                source,
            })?
        {
            edits.push((file, new_text));
        }
    }
    for (file, text) in &edits {
        app.write(file, text)?;
    }
    let path = app.root().join(component_file(name));
    if path.exists() {
        std::fs::remove_file(&path).map_err(|source| AppError::Write { path, source })?;
    }
    app.forget_component(name);
    app.save()
}

fn read_or(app: &App, file: &str, template: &str) -> Result<String, AppError> {
    if app.root().join(file).is_file() {
        app.read(file)
    } else {
        Ok(template.to_owned())
    }
}

fn edit_file(
    file: &str,
    text: &str,
    path: &[&str],
    value: Option<&str>,
) -> Result<String, AppError> {
    let result = match value {
        Some(value) => edit::set_field(text, path, value),
        None => edit::remove_field(text, path).map(|t| t.unwrap_or_else(|| text.to_owned())),
    };
    result.map_err(|source| AppError::Edit {
        file: file.to_owned(),
        source,
    })
}

/// A value from the command line: JSON when it parses (numbers stay numbers, `true` is a
/// boolean), else a string; always a string with `--as-string`, and for a string-typed param
/// unless it is `null` (the param set back to unset, where it takes null).
fn parse_value(raw: &str, as_string: bool, declared: &[ParamType]) -> Value {
    if as_string {
        return Value::String(raw.to_owned());
    }
    let string_param = !declared.is_empty() && declared.iter().all(|t| t.is_text());
    if string_param && raw != "null" {
        return Value::String(raw.to_owned());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

// ---------------------------------------------------------------------------------------------
// parameters

/// What `param set` calls `defaults`: an environment's values in place of the prototypes'
/// defaults, unless a component has that name (made before the name was taken).
pub const DEFAULTS: &str = "defaults";

/// A `param set`: a component's parameter (or a `global` one, or an environment's default),
/// app-wide or for one environment.
#[derive(Debug, Clone, Default)]
pub struct ParamAssignment {
    /// A component's name, `global`, or `defaults`.
    pub component: String,
    pub key: String,
    /// The value as typed; JSON unless `as_string` or the parameter is a string.
    pub value: String,
    pub env: Option<String>,
    pub as_string: bool,
}

/// What a `param set` wrote: `key` (or `component.key`) = `literal`, in `file`.
#[derive(Debug)]
pub struct ParamWritten {
    pub file: String,
    pub field: String,
    pub literal: String,
    /// An environment the param reaches that still does not render, as before the edit (a
    /// value that breaks one is refused), and why.
    pub still_broken: Option<(String, RenderError)>,
}

/// Set a parameter, checked against the prototypes that declare it.
pub fn set_param(app: &App, assignment: &ParamAssignment) -> Result<ParamWritten, AppError> {
    let ParamAssignment { component, key, .. } = assignment;
    let env = assignment.env.as_deref();
    let file = match env {
        Some(env) => app.environment(env)?.params_file(),
        None => PARAMS_FILE.to_owned(),
    };
    if key == "name" {
        return Err(AppError::Invalid(
            "`name` cannot be set; it is always the component's name".into(),
        ));
    }
    let block = addressed(app, assignment)?;
    let path = match block {
        Block::Global => vec!["global", key.as_str()],
        Block::Defaults => vec![DEFAULTS, key.as_str()],
        Block::Component => vec!["components", component.as_str(), key.as_str()],
    };
    let value = checked_value(app, assignment, block)?;
    let template = match env {
        Some(env) => template::env_params(env),
        None => template::APP_PARAMS.to_owned(),
    };
    let text = read_or(app, &file, &template)?;
    let literal = edit::literal(&value);
    let text = edit_file(&file, &text, &path, Some(&literal))?;
    let edit = format!("`{component}.{key} = {literal}`");
    let still_broken = param_renders(app, assignment, block, edit, (&file, &text))?;
    app.write(&file, &text)?;
    // `global`'s values are named as the component's are; a default by its block.
    let field = if block == Block::Defaults {
        &path[..]
    } else {
        &path[1..]
    };
    Ok(ParamWritten {
        file,
        field: field.join("."),
        literal,
        still_broken,
    })
}

/// The block a `param set` writes to: `global`, an environment's `defaults` (which need
/// `--env`), or a component's; a component named `defaults` keeps its name.
fn addressed(app: &App, assignment: &ParamAssignment) -> Result<Block, AppError> {
    match assignment.component.as_str() {
        "global" => Ok(Block::Global),
        DEFAULTS if !app.components()?.iter().any(|c| c.name == DEFAULTS) => match assignment.env {
            Some(_) => Ok(Block::Defaults),
            None => Err(AppError::Invalid(format!(
                "`defaults` are an environment's: they replace the prototypes' defaults there, \
                 and {PARAMS_FILE} has none\nhint: mlkube param set defaults {} <value> --env \
                 <env>",
                assignment.key
            ))),
        },
        _ => Ok(Block::Component),
    }
}

/// The value of a `param set`, read from the command line and checked for the block it goes
/// in.
fn checked_value(app: &App, assignment: &ParamAssignment, block: Block) -> Result<Value, AppError> {
    let evaluator = Evaluator::new(app.root());
    let ParamAssignment {
        component,
        key,
        value: raw,
        as_string,
        ..
    } = assignment;
    let env = assignment.env.as_deref();
    match block {
        Block::Global => global_value(app, &evaluator, key, raw, *as_string, env),
        Block::Defaults => default_value(&evaluator, key, raw, *as_string, env),
        Block::Component => component_value(app, &evaluator, component, key, raw, *as_string, env),
    }
}

/// Refuse a value that would stop a component it reaches rendering, in an environment it
/// reaches: the component's (every component's, for `global` and `defaults`), in its
/// environment or in all. Give the first of those environments that did not render before and
/// still does not.
fn param_renders(
    app: &App,
    assignment: &ParamAssignment,
    block: Block,
    edit: String,
    (file, text): (&str, &str),
) -> Result<Option<(String, RenderError)>, AppError> {
    let after = app.staging([(file.to_owned(), text.to_owned())]);
    let environments = match &assignment.env {
        Some(env) => vec![env.clone()],
        None => app.environments().iter().map(|e| e.name.clone()).collect(),
    };
    let components = match block {
        Block::Component => vec![assignment.component.clone()],
        Block::Global | Block::Defaults => app.components()?.into_iter().map(|c| c.name).collect(),
    };
    let hint = |prototype: &str, param: &str| {
        format!("`mlkube prototype describe {prototype}` says what `{param}` takes")
    };
    let reach = check::Reach {
        edit,
        environments,
        components,
        hint: &hint,
    };
    check::keeps_rendering(app, &after, &reach)?;
    Ok(check::still_broken(&after, &reach))
}

/// A default must suit every prototype of the library that declares the key: it reaches the
/// components made from them, those added later too.
fn default_value(
    evaluator: &Evaluator,
    key: &str,
    raw: &str,
    as_string: bool,
    env: Option<&str>,
) -> Result<Value, AppError> {
    let prototypes = prototype::all(evaluator)?;
    let specs: Vec<_> = prototypes
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.param(key)?)))
        .collect();
    if specs.is_empty() {
        return Err(AppError::Invalid(format!(
            "no prototype declares a param `{key}`, so a default would change nothing\nhint: \
             `mlkube prototype describe <prototype>` lists a prototype's params"
        )));
    }
    let kinds: Vec<ParamType> = specs.iter().map(|(_, s)| s.kind()).collect();
    let value = parse_value(raw, as_string, &kinds);
    for (prototype, spec) in specs {
        let source = ValueSource {
            env,
            block: Block::Defaults,
            ..ValueSource::default()
        };
        let subject = format!("the {prototype} prototype");
        params::check_value_of(&subject, spec, &value, source)?;
    }
    Ok(value)
}

/// A global value must suit every component whose prototype declares the key.
fn global_value(
    app: &App,
    evaluator: &Evaluator,
    key: &str,
    raw: &str,
    as_string: bool,
    env: Option<&str>,
) -> Result<Value, AppError> {
    if key == params::IMAGE_REGISTRY {
        return image_registry_value(raw, env);
    }
    let resolved = params::resolve(app, evaluator, None)?;
    let specs: Vec<_> = resolved
        .iter()
        .filter_map(|c| Some((c.component.name.as_str(), c.prototype.as_ref()?.param(key)?)))
        .collect();
    let hand_written = resolved.iter().any(|c| c.prototype.is_none());
    if specs.is_empty() && !hand_written {
        return Err(AppError::Invalid(format!(
            "no component declares a param `{key}`, so a global value would change nothing\n\
             hint: `mlkube param list` shows the params of every component"
        )));
    }
    let kinds: Vec<ParamType> = specs.iter().map(|(_, s)| s.kind()).collect();
    let value = parse_value(raw, as_string, &kinds);
    for (component, spec) in specs {
        let source = ValueSource {
            env,
            block: Block::Global,
            ..ValueSource::default()
        };
        params::check_value(component, spec, &value, source)?;
    }
    Ok(value)
}

/// An `imageRegistry` value: the registry and path as typed (`null` for none), checked.
fn image_registry_value(raw: &str, env: Option<&str>) -> Result<Value, AppError> {
    let value = match raw {
        "null" => Value::Null,
        text => Value::String(text.to_owned()),
    };
    params::parse_image_registry(&value).map_err(|problem| AppError::ImageRegistry {
        file: env.map_or_else(|| PARAMS_FILE.to_owned(), env_params_file),
        problem,
    })?;
    Ok(value)
}

/// A component's value, checked against its prototype (a hand-written component has none).
fn component_value(
    app: &App,
    evaluator: &Evaluator,
    component: &str,
    key: &str,
    raw: &str,
    as_string: bool,
    env: Option<&str>,
) -> Result<Value, AppError> {
    if key == params::IMAGE_REGISTRY {
        return Err(AppError::Invalid(format!(
            "`{key}` is an environment's, not a component's\nhint: mlkube param set global {key} \
             <registry>/<path> --env <env>"
        )));
    }
    let entry = app.component(component)?;
    let Some(prototype_name) = &entry.prototype else {
        return Ok(parse_value(raw, as_string, &[]));
    };
    let prototype = prototype::of_component(evaluator, component, prototype_name)?;
    let spec = prototype
        .param(key)
        .ok_or_else(|| unknown_param(component, &prototype, key, "the command line"))?;
    let value = parse_value(raw, as_string, &[spec.kind()]);
    let source = ValueSource {
        env,
        describe: Some(prototype_name),
        ..ValueSource::default()
    };
    params::check_value(component, spec, &value, source)?;
    Ok(value)
}
