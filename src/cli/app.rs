//! The verbs that create and change an app: `init`, `env`, `prototype`, `component`, `param`.
//!
//! The work is [`crate::app`]'s ([`crate::app::init`], [`crate::app::change`]); this module
//! turns the arguments into its calls and prints the outcome. Listings print a table, JSON, YAML
//! or one name per line (`-o text|json|yaml|name`); data goes to stdout and notes to stderr.

use std::io::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use super::exit::{self, Exit};
use super::{
    ComponentCommand, EnvCommand, InitArgs, ListingFormat, ParamCommand, PrototypeCommand,
};
use crate::app::change::{self, EnvironmentChange, NewEnvironment, ParamAssignment};
use crate::app::init::InitOptions;
use crate::app::params::{self, ComponentParams};
use crate::app::prototype::{self, Prototype};
use crate::app::{App, AppError, component_file};
use crate::render::jsonnet::Evaluator;
use crate::render::library;

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

fn print_yaml(value: &Value) {
    print(&serde_yaml::to_string(value).unwrap_or_default());
}

/// What a listing verb found, ready for every `-o` format: a table, a record per row for JSON
/// and YAML, and the name each row is known by.
struct Listing {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    records: Vec<Value>,
    names: Vec<String>,
}

impl Listing {
    fn new(header: &[&str]) -> Listing {
        Listing {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            records: Vec::new(),
            names: Vec::new(),
        }
    }

    /// One row: its name, its table cells, and its record.
    fn push(&mut self, name: String, row: Vec<String>, record: Value) {
        self.names.push(name);
        self.rows.push(row);
        self.records.push(record);
    }

    fn print(self, format: ListingFormat) {
        match format {
            ListingFormat::Text => {
                let header: Vec<&str> = self.header.iter().map(String::as_str).collect();
                print(&table(&header, &self.rows));
            }
            ListingFormat::Json => print_json(&Value::Array(self.records)),
            ListingFormat::Yaml => print_yaml(&Value::Array(self.records)),
            ListingFormat::Name => print(
                &self
                    .names
                    .iter()
                    .map(|n| format!("{n}\n"))
                    .collect::<String>(),
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// init

/// `mlkube init <dir>`.
pub fn init(args: &InitArgs) -> Result<(), AppError> {
    let app = crate::app::init::init(&InitOptions {
        dir: args.dir.clone(),
        namespace: args.namespace.clone(),
        server: args.server.clone(),
        context: args.context.clone(),
        empty: args.empty,
        with_jobs: args.with_jobs,
    })?;
    let dir = args.dir.display();
    eprintln!(
        "Created app `{}` in {dir} with environments local, dev, prod{}.",
        app.name(),
        components_line(&app)
    );
    // A person gets the next step; a script that runs init tells its own story.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("Next: cd {dir} && mlkube show local");
    }
    Ok(())
}

/// ` and components a, b (prototype), ...` of a new app, or nothing for an empty one.
fn components_line(app: &App) -> String {
    let components = app.components().unwrap_or_default();
    if components.is_empty() {
        return String::new();
    }
    let named: Vec<String> = components
        .iter()
        .map(|c| match &c.prototype {
            Some(prototype) if *prototype != c.name => format!("{} ({prototype})", c.name),
            _ => c.name.clone(),
        })
        .collect();
    format!(" and components {}", named.join(", "))
}

// ---------------------------------------------------------------------------------------------
// env

/// `mlkube env list|add|set|rm`.
pub fn env(app_flag: Option<&Path>, command: &EnvCommand) -> Result<(), AppError> {
    let mut app = App::discover(app_flag)?;
    match command {
        EnvCommand::List(list) => env_list(&app, list.output),
        EnvCommand::Add {
            env,
            namespace,
            server,
            context,
        } => {
            let new = NewEnvironment {
                name: env.clone(),
                namespace: namespace.clone(),
                server: server.clone(),
                context: context.clone(),
            };
            let file = change::add_environment(&mut app, &new)?;
            eprintln!("Added environment `{env}`; its overrides go in {file}.");
        }
        EnvCommand::Set {
            env,
            namespace,
            server,
            context,
            name,
        } => {
            let change = EnvironmentChange {
                namespace: namespace.clone(),
                server: server.clone(),
                context: context.clone(),
                name: name.clone(),
            };
            change::set_environment(&mut app, env, &change)?;
            if let Some(new_name) = name.as_deref().filter(|n| n != env) {
                eprintln!(
                    "note: objects already applied as `{env}` carry the label \
                     mlkube.io/environment={env}; delete them before applying `{new_name}`, or \
                     prune will not see them"
                );
            }
        }
        EnvCommand::Rm { env } => {
            change::remove_environment(&mut app, env)?;
            eprintln!("Removed environment `{env}` and its overrides.");
        }
    }
    Ok(())
}

fn env_list(app: &App, format: ListingFormat) {
    let mut listing = Listing::new(&["NAME", "NAMESPACE", "SERVER", "CONTEXT"]);
    for e in app.environments() {
        listing.push(
            e.name.clone(),
            vec![e.name.clone(), e.namespace.clone(), or_dash(e.server.as_ref()), or_dash(e.context.as_ref())],
            json!({"name": e.name, "namespace": e.namespace, "server": e.server, "context": e.context}),
        );
    }
    listing.print(format);
}

// ---------------------------------------------------------------------------------------------
// prototype

/// `mlkube prototype list|describe`.
pub fn prototype(command: &PrototypeCommand) -> Result<(), AppError> {
    // The library does not depend on an app; relative imports resolve from here.
    let evaluator = Evaluator::new(Path::new("."));
    match command {
        PrototypeCommand::List(list) => {
            let mut listing = Listing::new(&["NAME", "DESCRIPTION"]);
            for p in prototype::all(&evaluator)? {
                listing.push(
                    p.name.clone(),
                    vec![p.name.clone(), p.summary().to_owned()],
                    prototype_json(&p),
                );
            }
            listing.print(list.output);
        }
        PrototypeCommand::Describe { prototype, output } => {
            note_old_name(prototype);
            let prototype = prototype::find(&evaluator, prototype)?;
            match output {
                ListingFormat::Json => print_json(&prototype_json(&prototype)),
                ListingFormat::Yaml => print_yaml(&prototype_json(&prototype)),
                ListingFormat::Name => print(&format!("{}\n", prototype.name)),
                ListingFormat::Text => print_prototype(&prototype),
            }
        }
    }
    Ok(())
}

/// When `prototype` is the old name of a renamed one, a note on stderr that says its name now.
fn note_old_name(prototype: &str) {
    if let Some(name) = library::renamed(prototype) {
        eprintln!("note: `{prototype}` is the old name of the `{name}` prototype");
    }
}

/// When `component` names its prototype by the old name `prototype` (an app made before the
/// rename), a note on stderr that says what to rename: it renders the same either way.
fn note_renamed_prototype(component: &str, prototype: &str) {
    if let Some(name) = library::renamed(prototype) {
        eprintln!(
            "note: component `{component}` is of `{prototype}`, the old name of the `{name}` \
             prototype; it renders the same\nhint: to use the new name, set `prototype: {name}` \
             under `{component}` in app.yaml and import `{}` in {}",
            library::prototype_import(name),
            component_file(component),
        );
    }
}

fn print_prototype(prototype: &Prototype) {
    let rows: Vec<Vec<String>> = prototype
        .params
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.rule.summary(),
                p.default.to_string(),
                p.description.clone(),
            ]
        })
        .collect();
    let old_names = match prototype.old_names.as_slice() {
        [] => String::new(),
        names => format!("Old name: {} (still accepted).\n\n", names.join(", ")),
    };
    print(&format!(
        "{}\n\n{}\n\n{old_names}{}",
        prototype.name,
        prototype.description,
        table(&["PARAM", "TYPE", "DEFAULT", "DESCRIPTION"], &rows)
    ));
}

fn prototype_json(prototype: &Prototype) -> Value {
    json!({
        "name": prototype.name,
        "oldNames": prototype.old_names,
        "description": prototype.description,
        "params": prototype.params.iter().map(|p| {
            let mut param = serde_json::Map::new();
            param.insert("name".into(), json!(p.name));
            param.extend(p.rule.to_json());
            param.insert("default".into(), p.default.clone());
            param.insert("description".into(), json!(p.description));
            Value::Object(param)
        }).collect::<Vec<_>>(),
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
        } => {
            note_old_name(prototype);
            let prototype = change::add_component(&mut app, prototype, name, params)?;
            eprintln!(
                "Added component `{name}` ({prototype} prototype) as {}.",
                component_file(name)
            );
        }
        ComponentCommand::List(list) => {
            let mut listing = Listing::new(&["NAME", "PROTOTYPE", "FILE"]);
            let components = app.components()?;
            for c in &components {
                listing.push(
                    c.name.clone(),
                    vec![c.name.clone(), or_dash(c.prototype.as_ref()), c.file()],
                    json!({"name": c.name, "prototype": c.prototype, "file": c.file()}),
                );
            }
            listing.print(list.output);
            // A person reading the table is told of old prototype names; a script is not.
            if list.output == ListingFormat::Text {
                for c in &components {
                    if let Some(prototype) = &c.prototype {
                        note_renamed_prototype(&c.name, prototype);
                    }
                }
            }
        }
        ComponentCommand::Rm { name } => {
            change::remove_component(&mut app, name)?;
            eprintln!("Removed component `{name}` and its parameters.");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// param

/// `mlkube param set|list|diff`; `diff` exits as `diff` does.
pub fn param(app_flag: Option<&Path>, command: &ParamCommand) -> Result<Exit, AppError> {
    let app = App::discover(app_flag)?;
    match command {
        ParamCommand::Set {
            component,
            key,
            value,
            env,
            as_string,
        } => {
            let written = change::set_param(
                &app,
                &ParamAssignment {
                    component: component.clone(),
                    key: key.clone(),
                    value: value.clone(),
                    env: env.clone(),
                    as_string: *as_string,
                },
            )?;
            eprintln!(
                "Set {} = {} in {}.",
                written.field, written.literal, written.file
            );
            if let Some((env, error)) = &written.still_broken {
                note_still_broken(env, error);
            }
            Ok(Exit::Done)
        }
        ParamCommand::List {
            component,
            env,
            output,
        } => {
            param_list(&app, component.as_deref(), env.as_deref(), *output)?;
            Ok(Exit::Done)
        }
        ParamCommand::Diff {
            env_a,
            env_b,
            output,
        } => param_diff(&app, env_a, env_b, *output),
    }
}

/// After a `param set`: an environment it reaches failed to render before and still does.
fn note_still_broken(env: &str, error: &(dyn std::error::Error + 'static)) {
    let mut lines = exit::error_lines(error, false).into_iter();
    let first = lines.next().unwrap_or_default();
    let why = first.strip_prefix("mlkube: error: ").unwrap_or(&first);
    eprintln!("note: environment `{env}` still does not render, as before this change: {why}");
    for line in lines {
        eprintln!("{line}");
    }
    eprintln!("  hint: fix that before `mlkube apply {env}`; `mlkube show {env}` tells the same");
}

fn param_list(
    app: &App,
    component: Option<&str>,
    env: Option<&str>,
    output: ListingFormat,
) -> Result<(), AppError> {
    let environment = env.map(|e| app.environment(e)).transpose()?;
    if let Some(component) = component {
        app.component(component)?;
    }
    let evaluator = Evaluator::new(app.root());
    let resolved = params::resolve(app, &evaluator, environment)?;
    let selected = resolved
        .iter()
        .filter(|c| component.is_none_or(|name| c.component.name == name));
    let mut listing = Listing::new(&["COMPONENT", "PARAM", "VALUE", "SOURCE"]);
    // The environment's own setting, set with `param set global imageRegistry`.
    let registry = params::image_registry_param(app, &evaluator, environment)?;
    if let Some(v) = registry.filter(|_| component.is_none()) {
        let param = params::IMAGE_REGISTRY;
        listing.push(
            format!("global.{param}"),
            vec!["global".into(), param.into(), v.value.to_string(), v.layer.as_str().to_owned()],
            json!({"component": "global", "param": param, "value": v.value, "source": v.layer.as_str()}),
        );
    }
    // What the environment's components added later take in place of their prototypes'
    // defaults, set with `param set defaults`.
    let defaults = params::env_defaults(app, &evaluator, environment)?;
    for (param, value) in defaults.iter().filter(|_| component.is_none()) {
        let source = params::Layer::EnvDefaults.as_str();
        listing.push(
            format!("defaults.{param}"),
            vec![
                "defaults".into(),
                param.clone(),
                value.to_string(),
                source.to_owned(),
            ],
            json!({"component": "defaults", "param": param, "value": value, "source": source}),
        );
    }
    for ComponentParams {
        component, values, ..
    } in selected
    {
        for (param, v) in values {
            listing.push(
                format!("{}.{param}", component.name),
                vec![component.name.clone(), param.clone(), v.value.to_string(), v.layer.as_str().to_owned()],
                json!({"component": component.name, "param": param, "value": v.value, "source": v.layer.as_str()}),
            );
        }
    }
    listing.print(output);
    Ok(())
}

/// The differences, and [`Exit::Differences`] when there are any.
fn param_diff(
    app: &App,
    env_a: &str,
    env_b: &str,
    output: ListingFormat,
) -> Result<Exit, AppError> {
    let differences = params::diff(app, app.environment(env_a)?, app.environment(env_b)?)?;
    let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "-".to_owned(), Value::to_string);
    let header_a = env_a.to_uppercase();
    let header_b = env_b.to_uppercase();
    let mut listing = Listing::new(&["COMPONENT", "PARAM", &header_a, &header_b]);
    for d in &differences {
        listing.push(
            format!("{}.{}", d.component, d.param),
            vec![d.component.clone(), d.param.clone(), show(&d.a), show(&d.b)],
            json!({"component": d.component, "param": d.param, env_a: d.a, env_b: d.b}),
        );
    }
    listing.print(output);
    Ok(if differences.is_empty() {
        Exit::Done
    } else {
        Exit::Differences
    })
}
