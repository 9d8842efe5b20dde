//! The verbs that create and change an app: `init`, `env`, `prototype`, `component`, `param`.
//!
//! Each verb checks everything it can before it writes anything, and edits the params files in
//! place ([`crate::app::edit`]) so hand edits and comments survive. Listings print a table, or JSON
//! with `-o json`; data goes to stdout and notes to stderr.

use std::io::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use super::{ComponentCommand, EnvCommand, InitArgs, ListFormat, ParamCommand, PrototypeCommand};
use crate::app::edit;
use crate::app::params::{self, ComponentParams};
use crate::app::prototype::{self, ParamType, Prototype};
use crate::app::{
    App, AppError, Environment, PARAMS_FILE, check_name, component_file, env_params_file,
};
use crate::render::jsonnet::Evaluator;
use crate::render::library;

/// The components `init` adds (name, prototype), each from one prototype of the library.
const DEFAULT_COMPONENTS: &[(&str, &str)] = &[
    ("mnist", "tf-serving"),
    ("notebook-hub", "notebook-hub"),
    ("tf-job-operator", "tf-job-operator"),
    ("volume-controller", "volume-controller"),
];

const DEFAULT_NAMESPACE: &str = "kubeflow";

const APP_PARAMS_TEMPLATE: &str = "\
// Parameters of this app's components, shared by every environment.
//
// Precedence, lowest first: the prototype's default < `components.<name>` below < `global`
// below < environments/<env>/params.libsonnet (its `global`, then its `components.<name>`).
// `global` applies to every component whose prototype declares that parameter.
// `mlkube param set` edits this file in place; hand edits and comments are kept.
{
  global: {},
  components: {},
}
";

fn env_params_template(env: &str) -> String {
    format!(
        "// Overrides for the `{env}` environment: `global` applies to every component that \
         declares\n// the parameter, `components.<name>` to one component. `mlkube param set \
         <component> <key>\n// <value> --env {env}` edits this file in place.\n{{\n  global: \
         {{}},\n  components: {{}},\n}}\n"
    )
}

fn component_template(name: &str, prototype: &str) -> String {
    format!(
        "// The `{name}` component: an instance of the {prototype} prototype\n\
         // (`mlkube prototype describe {prototype}` lists its parameters).\n\
         // Its parameters are set in components/params.libsonnet and, per environment, in\n\
         // environments/<env>/params.libsonnet; `mlkube param list {name} --env <env>` shows them.\n\
         local component = import '{component_import}';\n\
         \n\
         (import '{prototype_import}').render(component.params, component.env)\n",
        component_import = library::COMPONENT_IMPORT,
        prototype_import = library::prototype_import(prototype),
    )
}

fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

fn print_json(value: &Value) {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    print(&text);
}

/// Rows as aligned columns, separated by two spaces.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn or_dash(value: Option<&String>) -> String {
    value.cloned().unwrap_or_else(|| "-".to_owned())
}

// ---------------------------------------------------------------------------------------------
// init

/// `mlkube init <dir>`.
pub fn init(args: &InitArgs) -> Result<(), AppError> {
    let dir = &args.dir;
    if let Ok(mut entries) = std::fs::read_dir(dir)
        && entries.next().is_some()
    {
        return Err(AppError::Invalid(format!(
            "{} exists and is not empty\nhint: pick a new directory; init never overwrites files",
            dir.display()
        )));
    }
    let name = app_name(dir)?;
    let namespace = args.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    check_name("namespace", namespace)?;
    if args.server.is_some() && args.context.is_some() {
        return Err(AppError::Invalid(
            "pass --server or --context, not both".into(),
        ));
    }
    let mut app = App::new(dir, &name);
    for (env, suffix) in [("local", ""), ("dev", "-dev"), ("prod", "-prod")] {
        app.environments_mut().push(Environment {
            name: env.to_owned(),
            namespace: format!("{namespace}{suffix}"),
            server: args.server.clone(),
            context: args.context.clone(),
        });
    }
    let mut params = APP_PARAMS_TEMPLATE.to_owned();
    if !args.empty {
        let evaluator = Evaluator::new(dir);
        for (component, prototype) in DEFAULT_COMPONENTS {
            prototype::find(&evaluator, prototype)?;
            app.record_component(component, prototype);
            params =
                edit::set_field(&params, &["components", component], "{}").map_err(|source| {
                    AppError::Edit {
                        file: PARAMS_FILE.into(),
                        source,
                    }
                })?;
        }
    }

    app.write(PARAMS_FILE, &params)?;
    for env in app.environments() {
        let text = match library::default_environment_params(&env.name) {
            Some(shipped) if !args.empty => shipped.to_owned(),
            _ => env_params_template(&env.name),
        };
        app.write(&env.params_file(), &text)?;
    }
    if !args.empty {
        for (component, prototype) in DEFAULT_COMPONENTS {
            app.write(
                &component_file(component),
                &component_template(component, prototype),
            )?;
        }
    }
    app.save()?;
    eprintln!(
        "Created app `{}` in {} with environments local, dev, prod{}.\nNext: cd {} && mlkube show local",
        app.name(),
        dir.display(),
        if args.empty {
            ""
        } else {
            " and one component of each prototype"
        },
        dir.display()
    );
    Ok(())
}

/// The app's name, from its directory; it becomes the `app.kubernetes.io/part-of` label.
fn app_name(dir: &Path) -> Result<String, AppError> {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let name = absolute
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(name)
    } else {
        Err(AppError::Invalid(format!(
            "the directory name `{name}` cannot name the app (it becomes a label value)\nhint: \
             use letters, digits, `-`, `_` and `.`, at most 63, e.g. `ml-platform`"
        )))
    }
}

// ---------------------------------------------------------------------------------------------
// env

/// `mlkube env list|add|set|rm`.
pub fn env(app_flag: Option<&Path>, command: &EnvCommand) -> Result<(), AppError> {
    let mut app = App::discover(app_flag)?;
    match command {
        EnvCommand::List(list) => {
            env_list(&app, list.output);
            Ok(())
        }
        EnvCommand::Add {
            env,
            namespace,
            server,
            context,
        } => {
            check_name("environment", env)?;
            if app.environment(env).is_ok() {
                return Err(AppError::Invalid(format!(
                    "environment `{env}` already exists\nhint: change it with `mlkube env set {env}`"
                )));
            }
            let namespace = namespace.clone().unwrap_or_else(|| env.clone());
            check_name("namespace", &namespace)?;
            let environment = Environment {
                name: env.clone(),
                namespace,
                server: server.clone(),
                context: context.clone(),
            };
            let file = environment.params_file();
            app.environments_mut().push(environment);
            if !app.root().join(&file).exists() {
                app.write(&file, &env_params_template(env))?;
            }
            app.save()?;
            eprintln!("Added environment `{env}`; its overrides go in {file}.");
            Ok(())
        }
        EnvCommand::Set {
            env,
            namespace,
            server,
            context,
            name,
        } => env_set(
            &mut app,
            env,
            namespace.as_deref(),
            server.as_deref(),
            context.as_deref(),
            name.as_deref(),
        ),
        EnvCommand::Rm { env } => {
            app.environment(env)?;
            app.environments_mut().retain(|e| &e.name != env);
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
            eprintln!("Removed environment `{env}` and its overrides.");
            Ok(())
        }
    }
}

fn env_list(app: &App, format: ListFormat) {
    match format {
        ListFormat::Json => print_json(&Value::Array(
            app.environments()
                .iter()
                .map(|e| json!({"name": e.name, "namespace": e.namespace, "server": e.server, "context": e.context}))
                .collect(),
        )),
        ListFormat::Text => {
            let rows: Vec<Vec<String>> = app
                .environments()
                .iter()
                .map(|e| vec![e.name.clone(), e.namespace.clone(), or_dash(e.server.as_ref()), or_dash(e.context.as_ref())])
                .collect();
            print(&table(&["NAME", "NAMESPACE", "SERVER", "CONTEXT"], &rows));
        }
    }
}

fn env_set(
    app: &mut App,
    env: &str,
    namespace: Option<&str>,
    server: Option<&str>,
    context: Option<&str>,
    new_name: Option<&str>,
) -> Result<(), AppError> {
    app.environment(env)?;
    if let Some(namespace) = namespace {
        check_name("namespace", namespace)?;
    }
    if server.is_some_and(|s| !s.is_empty()) && context.is_some_and(|c| !c.is_empty()) {
        return Err(AppError::Invalid(
            "pass --server or --context, not both: an environment is pinned to one".into(),
        ));
    }
    if let Some(new_name) = new_name {
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
    if let Some(namespace) = namespace {
        environment.namespace = namespace.to_owned();
    }
    // An environment is pinned to a server or a context; setting one clears the other, and an
    // empty value unpins.
    if let Some(server) = server {
        environment.server = (!server.is_empty()).then(|| server.to_owned());
        environment.context = None;
    }
    if let Some(context) = context {
        environment.context = (!context.is_empty()).then(|| context.to_owned());
        environment.server = None;
    }
    if let Some(new_name) = new_name.filter(|n| *n != env) {
        let from = root.join("environments").join(env);
        let to = root.join("environments").join(new_name);
        if from.exists() {
            std::fs::rename(&from, &to).map_err(|source| AppError::Write { path: to, source })?;
        }
        environment.name = new_name.to_owned();
        eprintln!(
            "note: objects already applied as `{env}` carry the label mlkube.io/environment={env}; \
             delete them before applying `{new_name}`, or prune will not see them"
        );
    }
    app.save()
}

// ---------------------------------------------------------------------------------------------
// prototype

/// `mlkube prototype list|describe`.
pub fn prototype(command: &PrototypeCommand) -> Result<(), AppError> {
    // The library does not depend on an app; relative imports resolve from here.
    let evaluator = Evaluator::new(Path::new("."));
    match command {
        PrototypeCommand::List(list) => {
            let prototypes = prototype::all(&evaluator)?;
            match list.output {
                ListFormat::Json => {
                    print_json(&Value::Array(
                        prototypes.iter().map(prototype_json).collect(),
                    ));
                }
                ListFormat::Text => {
                    let rows: Vec<Vec<String>> = prototypes
                        .iter()
                        .map(|p| vec![p.name.clone(), p.summary().to_owned()])
                        .collect();
                    print(&table(&["NAME", "DESCRIPTION"], &rows));
                }
            }
        }
        PrototypeCommand::Describe { prototype, output } => {
            let prototype = prototype::find(&evaluator, prototype)?;
            match output {
                ListFormat::Json => print_json(&prototype_json(&prototype)),
                ListFormat::Text => {
                    let rows: Vec<Vec<String>> = prototype
                        .params
                        .iter()
                        .map(|p| {
                            vec![
                                p.name.clone(),
                                p.kind.as_str().to_owned(),
                                p.default.to_string(),
                                p.description.clone(),
                            ]
                        })
                        .collect();
                    print(&format!(
                        "{}\n\n{}\n\n{}",
                        prototype.name,
                        prototype.description,
                        table(&["PARAM", "TYPE", "DEFAULT", "DESCRIPTION"], &rows)
                    ));
                }
            }
        }
    }
    Ok(())
}

fn prototype_json(prototype: &Prototype) -> Value {
    json!({
        "name": prototype.name,
        "description": prototype.description,
        "params": prototype.params.iter().map(|p| json!({
            "name": p.name,
            "type": p.kind.as_str(),
            "default": p.default,
            "description": p.description,
        })).collect::<Vec<_>>(),
    })
}

// ---------------------------------------------------------------------------------------------
// component

/// `mlkube component add|list|rm`.
pub fn component(app_flag: Option<&Path>, command: &ComponentCommand) -> Result<(), AppError> {
    let mut app = App::discover(app_flag)?;
    match command {
        ComponentCommand::Add {
            prototype,
            name,
            params,
        } => component_add(&mut app, prototype, name, params),
        ComponentCommand::List(list) => {
            let components = app.components()?;
            match list.output {
                ListFormat::Json => print_json(&Value::Array(
                    components
                        .iter()
                        .map(
                            |c| json!({"name": c.name, "prototype": c.prototype, "file": c.file()}),
                        )
                        .collect(),
                )),
                ListFormat::Text => {
                    let rows: Vec<Vec<String>> = components
                        .iter()
                        .map(|c| vec![c.name.clone(), or_dash(c.prototype.as_ref()), c.file()])
                        .collect();
                    print(&table(&["NAME", "PROTOTYPE", "FILE"], &rows));
                }
            }
            Ok(())
        }
        ComponentCommand::Rm { name } => component_rm(&mut app, name),
    }
}

fn component_add(
    app: &mut App,
    prototype: &str,
    name: &str,
    params: &[String],
) -> Result<(), AppError> {
    check_name("component", name)?;
    if name == "global" {
        return Err(AppError::Invalid(
            "`global` cannot name a component: `mlkube param set global ...` sets a value for \
             every component"
                .into(),
        ));
    }
    if app.components()?.iter().any(|c| c.name == name) {
        return Err(AppError::Invalid(format!(
            "component `{name}` already exists ({})\nhint: pick another name; several instances \
             of one prototype are fine",
            component_file(name)
        )));
    }
    let evaluator = Evaluator::new(app.root());
    let prototype = prototype::find(&evaluator, prototype)?;
    let mut values = Vec::with_capacity(params.len());
    for param in params {
        let Some((key, raw)) = param.split_once('=') else {
            return Err(AppError::Invalid(format!(
                "--param `{param}` is not key=value, e.g. --param modelName=mnist"
            )));
        };
        let spec = prototype
            .param(key)
            .ok_or_else(|| params::unknown_param(name, &prototype, key, "--param"))?;
        let value = parse_value(raw, false, std::slice::from_ref(&spec.kind));
        if !spec.accepts(&value) {
            return Err(AppError::Invalid(format!(
                "component `{name}`: param `{key}` must be {}, got {value}",
                params::type_phrase(spec)
            )));
        }
        values.push((key.to_owned(), value));
    }

    let mut text = read_or(app, PARAMS_FILE, APP_PARAMS_TEMPLATE)?;
    text = edit_file(PARAMS_FILE, &text, &["components", name], Some("{}"))?;
    for (key, value) in &values {
        text = edit_file(
            PARAMS_FILE,
            &text,
            &["components", name, key],
            Some(&edit::literal(value)),
        )?;
    }
    app.write(PARAMS_FILE, &text)?;
    app.write(
        &component_file(name),
        &component_template(name, &prototype.name),
    )?;
    app.record_component(name, &prototype.name);
    app.save()?;
    eprintln!(
        "Added component `{name}` ({} prototype) as {}.",
        prototype.name,
        component_file(name)
    );
    Ok(())
}

fn component_rm(app: &mut App, name: &str) -> Result<(), AppError> {
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
    app.save()?;
    eprintln!("Removed component `{name}` and its parameters.");
    Ok(())
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
/// boolean), else a string; always a string with `--as-string` or for a string-typed param.
fn parse_value(raw: &str, as_string: bool, declared: &[ParamType]) -> Value {
    let string_param = !declared.is_empty() && declared.iter().all(|t| *t == ParamType::String);
    if as_string || string_param {
        return Value::String(raw.to_owned());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

// ---------------------------------------------------------------------------------------------
// param

/// `mlkube param set|list|diff`.
pub fn param(app_flag: Option<&Path>, command: &ParamCommand) -> Result<(), AppError> {
    let app = App::discover(app_flag)?;
    match command {
        ParamCommand::Set {
            component,
            key,
            value,
            env,
            as_string,
        } => param_set(&app, component, key, value, env.as_deref(), *as_string),
        ParamCommand::List {
            component,
            env,
            output,
        } => {
            let environment = env.as_deref().map(|e| app.environment(e)).transpose()?;
            if let Some(component) = component {
                app.component(component)?;
            }
            let evaluator = Evaluator::new(app.root());
            let resolved = params::resolve(&app, &evaluator, environment)?;
            let selected: Vec<&ComponentParams> = resolved
                .iter()
                .filter(|c| {
                    component
                        .as_ref()
                        .is_none_or(|name| &c.component.name == name)
                })
                .collect();
            match output {
                ListFormat::Json => print_json(&Value::Array(
                    selected
                        .iter()
                        .flat_map(|c| {
                            c.values.iter().map(|(param, v)| {
                                json!({"component": c.component.name, "param": param, "value": v.value, "source": v.layer.as_str()})
                            })
                        })
                        .collect(),
                )),
                ListFormat::Text => {
                    let rows: Vec<Vec<String>> = selected
                        .iter()
                        .flat_map(|c| {
                            c.values.iter().map(|(param, v)| {
                                vec![c.component.name.clone(), param.clone(), v.value.to_string(), v.layer.as_str().to_owned()]
                            })
                        })
                        .collect();
                    print(&table(&["COMPONENT", "PARAM", "VALUE", "SOURCE"], &rows));
                }
            }
            Ok(())
        }
        ParamCommand::Diff {
            env_a,
            env_b,
            output,
        } => {
            let a = app.environment(env_a)?;
            let b = app.environment(env_b)?;
            let evaluator_a = Evaluator::new(app.root());
            let evaluator_b = Evaluator::new(app.root());
            let resolved_a = params::resolve(&app, &evaluator_a, Some(a))?;
            let resolved_b = params::resolve(&app, &evaluator_b, Some(b))?;
            let mut rows = Vec::new();
            for (ca, cb) in resolved_a.iter().zip(&resolved_b) {
                let mut keys: Vec<&String> = ca.values.keys().collect();
                keys.extend(cb.values.keys().filter(|k| !ca.values.contains_key(*k)));
                for key in keys {
                    let va = ca.values.get(key).map(|v| &v.value);
                    let vb = cb.values.get(key).map(|v| &v.value);
                    if va != vb {
                        rows.push((
                            ca.component.name.clone(),
                            key.clone(),
                            va.cloned(),
                            vb.cloned(),
                        ));
                    }
                }
            }
            match output {
                ListFormat::Json => print_json(&Value::Array(
                    rows.iter()
                        .map(|(c, k, va, vb)| json!({"component": c, "param": k, env_a.clone(): va, env_b.clone(): vb}))
                        .collect(),
                )),
                ListFormat::Text => {
                    let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "-".to_owned(), Value::to_string);
                    let rows: Vec<Vec<String>> = rows
                        .iter()
                        .map(|(c, k, va, vb)| vec![c.clone(), k.clone(), show(va), show(vb)])
                        .collect();
                    let header_a = env_a.to_uppercase();
                    let header_b = env_b.to_uppercase();
                    print(&table(&["COMPONENT", "PARAM", &header_a, &header_b], &rows));
                }
            }
            Ok(())
        }
    }
}

fn param_set(
    app: &App,
    component: &str,
    key: &str,
    raw: &str,
    env: Option<&str>,
    as_string: bool,
) -> Result<(), AppError> {
    let file = match env {
        Some(env) => app.environment(env)?.params_file(),
        None => PARAMS_FILE.to_owned(),
    };
    if key == "name" {
        return Err(AppError::Invalid(
            "`name` cannot be set; it is always the component's name".into(),
        ));
    }
    let evaluator = Evaluator::new(app.root());
    let path: Vec<&str>;
    let value;
    if component == "global" {
        // A global value must suit every component whose prototype declares the key.
        let resolved = params::resolve(app, &evaluator, None)?;
        let specs: Vec<_> = resolved
            .iter()
            .filter_map(|c| c.prototype.as_ref()?.param(key))
            .collect();
        let hand_written = resolved.iter().any(|c| c.prototype.is_none());
        if specs.is_empty() && !hand_written {
            return Err(AppError::Invalid(format!(
                "no component declares a param `{key}`, so a global value would change nothing\n\
                 hint: `mlkube param list` shows the params of every component"
            )));
        }
        let kinds: Vec<ParamType> = specs.iter().map(|s| s.kind).collect();
        value = parse_value(raw, as_string, &kinds);
        if let Some(spec) = specs.iter().find(|s| !s.accepts(&value)) {
            return Err(AppError::Invalid(format!(
                "global param `{key}` must be {}, got {value}",
                params::type_phrase(spec)
            )));
        }
        path = vec!["global", key];
    } else {
        let entry = app.component(component)?;
        value = match &entry.prototype {
            Some(prototype_name) => {
                let prototype = prototype::find(&evaluator, prototype_name)?;
                let spec = prototype.param(key).ok_or_else(|| {
                    params::unknown_param(component, &prototype, key, "the command line")
                })?;
                let value = parse_value(raw, as_string, std::slice::from_ref(&spec.kind));
                if !spec.accepts(&value) {
                    return Err(AppError::Invalid(format!(
                        "component `{component}`: param `{key}` must be {}, got {value}\nhint: \
                         `mlkube prototype describe {prototype_name}` lists the params and types",
                        params::type_phrase(spec)
                    )));
                }
                value
            }
            None => parse_value(raw, as_string, &[]),
        };
        path = vec!["components", component, key];
    }
    let template = match env {
        Some(env) => env_params_template(env),
        None => APP_PARAMS_TEMPLATE.to_owned(),
    };
    let text = read_or(app, &file, &template)?;
    let text = edit_file(&file, &text, &path, Some(&edit::literal(&value)))?;
    app.write(&file, &text)?;
    eprintln!(
        "Set {} = {} in {file}.",
        path[1..].join("."),
        edit::literal(&value)
    );
    Ok(())
}
