//! The Jsonnet evaluator, as the rest of mlkube sees it: evaluate a file of the app or of the
//! embedded library to JSON, and turn jrsonnet's errors into `file:line:column: message`, with
//! [`locate`] filling in the location jrsonnet leaves out of some runtime errors.
//!
//! One [`Evaluator`] serves one rendering: every file is parsed and evaluated at most once, so
//! a prototype shared by several components costs one evaluation, and the environment's params
//! are read once for all components.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use jrsonnet_evaluator::error::ErrorKind;
use jrsonnet_evaluator::trace::PathResolver;
use jrsonnet_evaluator::{Error as JrError, Span, State, Val};
use serde_json::{Map, Number, Value};

use crate::render::library::{ComponentContexts, Resolver};
use crate::render::locate::{self, Step};

/// A Jsonnet syntax or runtime error, located in the file the user can open.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonnetError {
    /// `file:line:column` of the innermost frame that has a location.
    pub location: Option<String>,
    /// The evaluator's message, e.g. `runtime error: boom`.
    pub message: String,
    /// The stack, innermost first, as `file:line:column: description` lines.
    pub trace: Vec<String>,
    /// The field of the evaluated file's output that was being rendered, e.g. `data.msg`.
    pub field: Option<String>,
}

impl fmt::Display for JsonnetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(location) => write!(f, "{location}: {}", self.message)?,
            None => write!(f, "{}", self.message)?,
        }
        for frame in &self.trace {
            write!(f, "\n    at {frame}")?;
        }
        if let Some(field) = &self.field {
            write!(f, "\n    while rendering the field {field}")?;
        }
        Ok(())
    }
}

impl std::error::Error for JsonnetError {}

impl From<JrError> for JsonnetError {
    fn from(error: JrError) -> Self {
        let syntax_location = match error.error() {
            ErrorKind::ImportSyntaxError { error, .. } => Some(span_location(&error.location)),
            _ => None,
        };
        let mut trace = Vec::new();
        for frame in &error.trace().0 {
            let desc = frame.desc.trim();
            match (&frame.location, desc.is_empty()) {
                (Some(span), true) => trace.push(span_location(span)),
                (Some(span), false) => trace.push(format!("{}: {desc}", span_location(span))),
                (None, false) => trace.push(desc.to_owned()),
                (None, true) => {}
            }
        }
        let frame_location = error
            .trace()
            .0
            .iter()
            .find_map(|frame| frame.location.as_ref().map(span_location));
        let message = match error.error() {
            // jrsonnet's own text suggests a `--max-stack` flag that mlkube does not have.
            ErrorKind::StackOverflow => {
                "stack overflow: calls nested too deep (a function that calls itself without \
                 end?)"
                    .to_owned()
            }
            ErrorKind::NoSuchField(field, similar) => no_such_field(field, similar),
            other => other.to_string().trim_end().to_owned(),
        };
        let mut trace = shorten(trace);
        // A parse error's only frame repeats its location.
        if syntax_location.is_some() {
            trace.clear();
        }
        JsonnetError {
            location: syntax_location.or(frame_location),
            message,
            trace,
            field: None,
        }
    }
}

/// "no such field `greeting`; did you mean `greetings`?"
fn no_such_field(field: &str, similar: &[jrsonnet_evaluator::IStr]) -> String {
    let quoted: Vec<String> = similar.iter().map(|name| format!("`{name}`")).collect();
    match quoted.split_last() {
        None => format!("no such field `{field}`"),
        Some((last, [])) => format!("no such field `{field}`; did you mean {last}?"),
        Some((last, others)) => format!(
            "no such field `{field}`; did you mean {} or {last}?",
            others.join(", ")
        ),
    }
}

/// `error` of evaluating `file` (whose text is `source`) while rendering its output field
/// `path`, with a location where jrsonnet gave none, or a better one for a missing field: its
/// read in the innermost frame's file (or the evaluated one), preferring a read inside the
/// definition of the failing field; else that definition; else at least the file.
fn located(error: JrError, file: &str, source: &str, path: &[Step]) -> JsonnetError {
    let innermost = error
        .trace()
        .0
        .iter()
        .find_map(|frame| frame.location.clone());
    let missing = match error.error() {
        ErrorKind::NoSuchField(field, _) => Some(field.to_string()),
        _ => None,
    };
    let mut located = JsonnetError::from(error);
    if !path.is_empty() {
        located.field = Some(locate::path_text(path));
    }
    let definition = locate::field_definition(source, path);
    let at = |name: &str, text: &str, offset: usize| {
        let (line, column) = locate::line_column(text, offset);
        format!("{name}:{line}:{column}")
    };
    if let Some(field) = missing {
        let (name, text) = match &innermost {
            Some(span) => (source_name(span), span.0.code()),
            None => (file.to_owned(), source),
        };
        let mut reads = locate::field_reads(text, &field);
        if name == file
            && let Some(definition) = &definition
            && reads.iter().any(|read| definition.value.contains(read))
        {
            reads.retain(|read| definition.value.contains(read));
        }
        if reads.len() == 1 || (innermost.is_none() && !reads.is_empty()) {
            located.location = Some(at(&name, text, reads[0]));
            return located;
        }
    }
    // Some messages name their place themselves (a missing import names the importing line).
    let placed = located.message.contains(&format!("{file}:"));
    if located.location.is_none() && !placed {
        located.location = Some(match definition {
            Some(definition) => at(file, source, definition.key),
            None => file.to_owned(),
        });
    }
    located
}

/// The most frames a trace prints; a deep recursion would otherwise print hundreds.
const TRACE_LINES: usize = 8;

/// A trace with runs of one frame folded into one line, cut to [`TRACE_LINES`].
fn shorten(trace: Vec<String>) -> Vec<String> {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for frame in trace {
        match runs.last_mut() {
            Some((last, count)) if *last == frame => *count += 1,
            _ => runs.push((frame, 1)),
        }
    }
    let total = runs.len();
    let mut lines: Vec<String> = runs
        .into_iter()
        .take(TRACE_LINES)
        .map(|(frame, count)| match count {
            1 => frame,
            _ => format!("{frame} ({count} times)"),
        })
        .collect();
    if total > TRACE_LINES {
        lines.push(format!("... {} more", total - TRACE_LINES));
    }
    lines
}

/// `file:line:column` of the start of a span, the file named as the resolver named it.
fn span_location(span: &Span) -> String {
    let [start] = span.0.map_source_locations(&[span.1]);
    format!("{}:{}:{}", source_name(span), start.line, start.column)
}

/// The file of a span, named as the resolver named it.
fn source_name(span: &Span) -> String {
    let name = span.0.source_path().to_string();
    match name.strip_prefix("virtual:") {
        Some(name) => name.to_owned(),
        None => name,
    }
}

/// Evaluates the files of one app (and the embedded library) for one rendering.
pub struct Evaluator {
    state: State,
    contexts: ComponentContexts,
}

impl Evaluator {
    pub fn new(app_root: &Path) -> Self {
        Evaluator::with_staged(app_root, BTreeMap::new())
    }

    /// An evaluator that reads `staged` (path relative to the app -> text) in place of those
    /// files on disk: the app as an edit not written yet would leave it.
    pub fn with_staged(app_root: &Path, staged: BTreeMap<String, String>) -> Self {
        let contexts = ComponentContexts::default();
        let stdlib = jrsonnet_stdlib::ContextInitializer::new(PathResolver::Absolute);
        let resolver = Resolver::new(app_root, contexts.clone()).with_staged(staged);
        let mut builder = State::builder();
        builder
            .import_resolver(resolver)
            .context_initializer(stdlib);
        Evaluator {
            state: builder.build(),
            contexts,
        }
    }

    /// Make `import 'mlkube/component.libsonnet'` in `components/<component>.jsonnet` evaluate
    /// to `context`.
    pub fn set_component_context(&self, component: &str, context: &Value) {
        self.contexts
            .borrow_mut()
            .insert(component.to_owned(), context.to_string());
    }

    /// Evaluate a file named relative to the app (`components/a.jsonnet`) or by its `mlkube/`
    /// name, to JSON.
    pub fn evaluate(&self, name: &str) -> Result<Value, JsonnetError> {
        let _entered = self.state.try_enter();
        let mut path = Vec::new();
        let result = self
            .state
            .import_resolved(Resolver::source(name))
            .and_then(|value| to_json(&value, &mut path));
        result.map_err(
            |error| match self.state.import_resolved_str(Resolver::source(name)) {
                Ok(source) => located(error, name, &source, &path),
                Err(_) => JsonnetError::from(error),
            },
        )
    }

    /// Evaluate a file and give back its top-level fields, hidden ones included, unevaluated
    /// until asked for with [`Fields::json`]. Prototypes use this: their `render` is a function.
    pub fn fields(&self, name: &str) -> Result<Fields, JsonnetError> {
        let _entered = self.state.try_enter();
        let value = self.state.import_resolved(Resolver::source(name))?;
        match value {
            Val::Obj(object) => Ok(Fields { object }),
            other => Err(JsonnetError {
                location: Some(format!("{name}:1:1")),
                message: format!("expected an object, got {}", other.value_type()),
                trace: Vec::new(),
                field: None,
            }),
        }
    }

    /// Whether a field of an evaluated object exists and is a function.
    pub fn is_function(&self, fields: &Fields, field: &str) -> Result<bool, JsonnetError> {
        let _entered = self.state.try_enter();
        Ok(matches!(
            fields.object.get(field.into())?,
            Some(Val::Func(_))
        ))
    }

    /// One field of an evaluated object, as JSON; `None` if it is absent.
    pub fn field_json(&self, fields: &Fields, field: &str) -> Result<Option<Value>, JsonnetError> {
        let _entered = self.state.try_enter();
        match fields.object.get(field.into())? {
            Some(value) => Ok(Some(to_json(&value, &mut Vec::new())?)),
            None => Ok(None),
        }
    }
}

/// The top-level object of an evaluated file.
pub struct Fields {
    object: jrsonnet_evaluator::ObjValue,
}

/// Manifest a Jsonnet value as JSON, keeping the evaluator's error (and its location) when a
/// field fails to evaluate; `path` is then left at the failing field.
fn to_json(value: &Val, path: &mut Vec<Step>) -> jrsonnet_evaluator::Result<Value> {
    Ok(match value {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Str(s) => Value::String(s.clone().into_flat().to_string()),
        Val::Num(n) => number(n.get()),
        Val::Arr(array) => {
            let mut items = Vec::with_capacity(array.len() as usize);
            for (index, item) in array.iter().enumerate() {
                path.push(Step::Index(index));
                items.push(to_json(&item?, path)?);
                path.pop();
            }
            Value::Array(items)
        }
        Val::Obj(object) => {
            object.run_assertions()?;
            let mut map = Map::new();
            for (key, field) in object.iter() {
                path.push(Step::Key(key.to_string()));
                map.insert(key.to_string(), to_json(&field?, path)?);
                path.pop();
            }
            Value::Object(map)
        }
        Val::Func(_) => {
            return Err(ErrorKind::RuntimeError(
                "a function cannot be rendered as JSON (is a `(...)` call missing?)".into(),
            )
            .into());
        }
    })
}

/// Jsonnet numbers are doubles; whole ones print as integers, as `jsonnet` does.
fn number(n: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= EXACT {
        #[allow(clippy::cast_possible_truncation)]
        Value::Number(Number::from(n as i64))
    } else {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn evaluates_to_json_with_integers_kept_whole() {
        let dir = app(&[(
            "components/a.jsonnet",
            "{ n: 1 + 1, f: 0.5, s: 'x', h:: 3 }",
        )]);
        let value = Evaluator::new(dir.path())
            .evaluate("components/a.jsonnet")
            .unwrap();
        assert_eq!(value.to_string(), r#"{"f":0.5,"n":2,"s":"x"}"#);
    }

    #[test]
    fn runtime_error_names_file_line_and_column() {
        let dir = app(&[(
            "components/a.jsonnet",
            "{\n  a: 1,\n  b: error 'boom',\n}\n",
        )]);
        let error = Evaluator::new(dir.path())
            .evaluate("components/a.jsonnet")
            .unwrap_err();
        assert_eq!(error.location.as_deref(), Some("components/a.jsonnet:3:6"));
        assert_eq!(error.message, "runtime error: boom");
    }

    fn evaluate_error(source: &str) -> JsonnetError {
        let dir = app(&[("components/a.jsonnet", source)]);
        Evaluator::new(dir.path())
            .evaluate("components/a.jsonnet")
            .unwrap_err()
    }

    #[test]
    fn a_missing_field_names_where_it_is_read_and_the_fields_nearby() {
        let error = evaluate_error(
            "local config = { greetings: 'hi', name: 'x' };\n{\n  kind: 'ConfigMap',\n  \
             data: { msg: config.greeting },\n}\n",
        );
        assert_eq!(error.location.as_deref(), Some("components/a.jsonnet:4:23"));
        assert_eq!(
            error.message,
            "no such field `greeting`; did you mean `greetings`?"
        );
        assert_eq!(error.field.as_deref(), Some("data.msg"));
    }

    #[test]
    fn a_missing_field_read_in_a_local_function_names_the_read_not_the_call() {
        let error =
            evaluate_error("local get(x) = x.greeting;\n{\n  a: { b: get({ c: 1 }) },\n}\n");
        assert_eq!(error.location.as_deref(), Some("components/a.jsonnet:1:18"));
        assert_eq!(error.message, "no such field `greeting`");
        assert!(
            error.trace[0].starts_with("components/a.jsonnet:3:14: function <get> call"),
            "{error}"
        );
    }

    #[test]
    fn of_several_reads_of_a_missing_field_the_one_in_the_failing_field_is_named() {
        let error = evaluate_error(
            "local c = { a: 1, f():: c.nope };\n{\n  x: { y: c.a },\n  z: [1, { w: c.nope }],\n}\n",
        );
        assert_eq!(error.location.as_deref(), Some("components/a.jsonnet:4:17"));
        assert_eq!(error.field.as_deref(), Some("z[1].w"));
    }

    #[test]
    fn a_runtime_error_without_a_location_names_the_field_being_rendered() {
        let error = evaluate_error(
            "{\n  kind: 'ConfigMap',\n  data: {\n    ok: 'yes',\n    msg: 'a' - 1,\n  },\n}\n",
        );
        assert_eq!(error.location.as_deref(), Some("components/a.jsonnet:5:5"));
        assert_eq!(
            error.message,
            "binary operation string - number is not implemented"
        );
        assert_eq!(error.field.as_deref(), Some("data.msg"));
        let error = evaluate_error("{\n  items: [1, 2][5],\n}\n");
        assert_eq!(error.location.as_deref(), Some("components/a.jsonnet:2:3"));
    }

    #[test]
    fn syntax_error_names_file_line_and_column() {
        let dir = app(&[("components/a.jsonnet", "{\n  a: 1\n  b: 2,\n}\n")]);
        let error = Evaluator::new(dir.path())
            .evaluate("components/a.jsonnet")
            .unwrap_err();
        let location = error.location.clone().unwrap();
        assert!(location.starts_with("components/a.jsonnet:3:"), "{error}");
        assert!(error.message.starts_with("syntax error"), "{error}");
    }

    #[test]
    fn endless_recursion_is_a_short_error_without_a_flag_mlkube_lacks() {
        let dir = app(&[(
            "components/a.jsonnet",
            "local f(n) = f(n + 1) + 1;\n{ a: f(0) }\n",
        )]);
        let error = Evaluator::new(dir.path())
            .evaluate("components/a.jsonnet")
            .unwrap_err();
        assert!(error.message.starts_with("stack overflow"), "{error}");
        assert!(!error.to_string().contains("max-stack"), "{error}");
        assert!(error.trace.len() <= TRACE_LINES + 1, "{error}");
        assert!(error.trace[0].ends_with(" times)"), "{error}");
    }

    #[test]
    fn component_context_is_importable_from_the_component_only() {
        let dir = app(&[(
            "components/web.jsonnet",
            "local c = import 'mlkube/component.libsonnet'; { n: c.params.replicas }",
        )]);
        let evaluator = Evaluator::new(dir.path());
        evaluator.set_component_context("web", &serde_json::json!({"params": {"replicas": 3}}));
        let value = evaluator.evaluate("components/web.jsonnet").unwrap();
        assert_eq!(value, serde_json::json!({"n": 3}));
    }
}
