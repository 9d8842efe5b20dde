//! The app on disk: `app.yaml`, `components/`, `environments/<env>/params.libsonnet`.
//!
//! ```text
//! app.yaml                              name, environments (namespace, server|context),
//!                                       components (which prototype each instance is of)
//! components/<name>.jsonnet             one file per component; any file here is a component
//! components/params.libsonnet           { global: {...}, components: { <name>: {...} } }
//! environments/<env>/params.libsonnet   the same shape: that environment's overrides; and
//!                                       defaults: {...}, below every value the app sets
//! ```
//!
//! This module loads and saves that layout, resolves parameters and renders an environment
//! ([`render`]) through the Jsonnet evaluator of [`crate::render`], creates a new app
//! ([`init`]) and makes the edits of the `env`, `component` and `param` verbs ([`change`]); the
//! command line only parses their arguments and prints what they did.

pub mod change;
mod check;
pub mod edit;
pub mod init;
pub mod param_type;
pub mod params;
pub mod prototype;
pub mod render;
pub mod template;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::render::jsonnet::Evaluator;

/// The app's settings file.
pub const APP_FILE: &str = "app.yaml";
/// The app-wide params file, relative to the app root.
pub const PARAMS_FILE: &str = "components/params.libsonnet";

/// An environment the app deploys to: a namespace, optionally pinned to a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    pub name: String,
    pub namespace: String,
    pub server: Option<String>,
    pub context: Option<String>,
}

impl Environment {
    /// Where this environment's overrides live, relative to the app root.
    pub fn params_file(&self) -> String {
        env_params_file(&self.name)
    }
}

pub fn env_params_file(env: &str) -> String {
    format!("environments/{env}/params.libsonnet")
}

/// A component of the app: a `components/<name>.jsonnet` file, and the prototype it is an
/// instance of when `component add` made it (a hand-written one has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentEntry {
    pub name: String,
    pub prototype: Option<String>,
}

impl ComponentEntry {
    pub fn file(&self) -> String {
        component_file(&self.name)
    }
}

pub fn component_file(name: &str) -> String {
    format!("components/{name}.jsonnet")
}

/// `app.yaml` as written on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppFile {
    name: String,
    /// Tells this app from another of the same name on one cluster; `init` makes one up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default)]
    environments: IndexMap<String, EnvironmentSpec>,
    #[serde(default)]
    components: IndexMap<String, ComponentSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvironmentSpec {
    namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ComponentSpec {
    prototype: String,
}

impl AppFile {
    /// What the verbs check when they write these settings, checked again for hand edits.
    fn check(&self) -> Result<(), AppError> {
        check_name("app", &self.name)?;
        for (env, spec) in &self.environments {
            check_name("environment", env)?;
            check_name("namespace", &spec.namespace)?;
            if let Some(server) = &spec.server {
                check_server(server)?;
            }
        }
        Ok(())
    }
}

/// Why the app could not be found, read or changed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(
        "no {APP_FILE} in {} or any directory above it\nhint: run `mlkube init <dir>` to create \
         an app, or pass --app <dir>", start.display()
    )]
    NotFound { start: PathBuf },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a valid app file", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("unknown environment `{name}`; the app has: {}", known.join(", "))]
    UnknownEnvironment { name: String, known: Vec<String> },
    #[error("unknown component `{name}`; the app has: {}", list_or_none(known))]
    UnknownComponent { name: String, known: Vec<String> },
    #[error("unknown prototype `{name}`; the library has: {}", known.join(", "))]
    UnknownPrototype { name: String, known: Vec<String> },
    #[error(
        "component `{component}` in {APP_FILE} names the prototype `{prototype}`, which the \
         library does not have; it has: {}\nhint: fix `prototype:` of `{component}` in \
         {APP_FILE}, or remove its entry to render components/{component}.jsonnet as a \
         hand-written component", known.join(", ")
    )]
    UnknownComponentPrototype {
        component: String,
        prototype: String,
        known: Vec<String>,
    },
    #[error("{} has an invalid setting", path.display())]
    Setting {
        path: PathBuf,
        #[source]
        source: Box<AppError>,
    },
    #[error(
        "component `{name}` is listed in {APP_FILE} but {file} is missing\nhint: restore the \
         file, or run `mlkube component rm {name}`"
    )]
    MissingComponentFile { name: String, file: String },
    #[error("cannot evaluate {file}")]
    Evaluate {
        file: String,
        #[source]
        source: crate::render::jsonnet::JsonnetError,
    },
    #[error("cannot change {file}")]
    Edit {
        file: String,
        #[source]
        source: edit::EditError,
    },
    #[error("`imageRegistry` in {file}: {problem}")]
    ImageRegistry { file: String, problem: String },
    #[error("{0}")]
    Invalid(String),
    /// An edit refused before anything is written: with it, an environment would not render.
    #[error(
        "{edit} would break {}: {problem}\nhint: nothing was written; {hint}",
        check::environments_text(environments)
    )]
    WouldNotRender {
        edit: String,
        environments: Vec<String>,
        problem: String,
        hint: String,
        #[source]
        source: Option<Box<render::RenderError>>,
    },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "no components yet (add one with `mlkube component add <prototype> <name>`)".to_owned()
    } else {
        names.join(", ")
    }
}

/// An app loaded from disk.
#[derive(Debug, Clone)]
pub struct App {
    root: PathBuf,
    name: String,
    id: Option<String>,
    environments: Vec<Environment>,
    components: IndexMap<String, ComponentSpec>,
    /// Files read and rendered in place of those on disk, by path relative to the root: an
    /// edit being checked before it is written ([`App::staging`]).
    staged: BTreeMap<String, String>,
}

impl App {
    /// A new app in `dir` with no environments or components yet (nothing is written).
    pub fn new(dir: &Path, name: &str) -> App {
        App {
            root: dir.to_owned(),
            name: name.to_owned(),
            id: Some(crate::random::id()),
            environments: Vec::new(),
            components: IndexMap::new(),
            staged: BTreeMap::new(),
        }
    }

    /// Load the app whose `app.yaml` is in `dir`.
    pub fn load(dir: &Path) -> Result<App, AppError> {
        let path = dir.join(APP_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| AppError::Read {
            path: path.clone(),
            source,
        })?;
        let file: AppFile = serde_yaml::from_str(&text).map_err(|source| AppError::Parse {
            path: path.clone(),
            source,
        })?;
        file.check().map_err(|source| AppError::Setting {
            path,
            source: Box::new(source),
        })?;
        let environments = file
            .environments
            .into_iter()
            .map(|(name, spec)| Environment {
                name,
                namespace: spec.namespace,
                server: spec.server,
                context: spec.context,
            })
            .collect();
        Ok(App {
            root: dir.to_owned(),
            name: file.name,
            id: file.id,
            environments,
            components: file.components,
            staged: BTreeMap::new(),
        })
    }

    /// The app named by `--app`, or else the nearest ancestor of the current directory that
    /// holds `app.yaml`.
    pub fn discover(app_flag: Option<&Path>) -> Result<App, AppError> {
        if let Some(dir) = app_flag {
            return App::load(dir);
        }
        let start = std::env::current_dir().map_err(|source| AppError::Read {
            path: PathBuf::from("."),
            source,
        })?;
        let mut dir = start.as_path();
        loop {
            if dir.join(APP_FILE).is_file() {
                return App::load(dir);
            }
            match dir.parent() {
                Some(parent) => dir = parent,
                None => return Err(AppError::NotFound { start }),
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The app's id, when `app.yaml` has one (apps made before ids have none).
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn environments(&self) -> &[Environment] {
        &self.environments
    }

    /// The environment called `name`; an unknown name lists the known ones.
    pub fn environment(&self, name: &str) -> Result<&Environment, AppError> {
        self.environments
            .iter()
            .find(|env| env.name == name)
            .ok_or_else(|| AppError::UnknownEnvironment {
                name: name.to_owned(),
                known: self.environments.iter().map(|e| e.name.clone()).collect(),
            })
    }

    /// This app as it would be with `files` (path relative to the root -> text) written:
    /// reading, resolving and rendering it see them, and nothing is written.
    pub(crate) fn staging(&self, files: impl IntoIterator<Item = (String, String)>) -> App {
        let mut app = self.clone();
        app.staged.extend(files);
        app
    }

    /// A Jsonnet evaluator of this app's files (and the staged ones).
    pub fn evaluator(&self) -> Evaluator {
        Evaluator::with_staged(&self.root, self.staged.clone())
    }

    /// Whether the app has `file` (relative to the root), on disk or staged.
    pub(crate) fn has_file(&self, file: &str) -> bool {
        self.staged.contains_key(file) || self.root.join(file).is_file()
    }

    /// Every component, sorted by name: each `components/<name>.jsonnet`, and each component
    /// `app.yaml` lists (whose file must then exist).
    pub fn components(&self) -> Result<Vec<ComponentEntry>, AppError> {
        let dir = self.root.join("components");
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|entry| {
                    let file = entry.file_name().to_str()?.to_owned();
                    file.strip_suffix(".jsonnet").map(str::to_owned)
                })
                .collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(AppError::Read { path: dir, source }),
        };
        let staged = self.staged.keys().filter_map(|file| {
            let name = file.strip_prefix("components/")?.strip_suffix(".jsonnet")?;
            (!name.contains('/')).then(|| name.to_owned())
        });
        for name in staged {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        for (name, _) in &self.components {
            if !names.contains(name) {
                return Err(AppError::MissingComponentFile {
                    name: name.clone(),
                    file: component_file(name),
                });
            }
        }
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| ComponentEntry {
                prototype: self
                    .components
                    .get(&name)
                    .map(|spec| spec.prototype.clone()),
                name,
            })
            .collect())
    }

    /// The component called `name`; an unknown name lists the known ones.
    pub fn component(&self, name: &str) -> Result<ComponentEntry, AppError> {
        let components = self.components()?;
        let known = components.iter().map(|c| c.name.clone()).collect();
        components
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| AppError::UnknownComponent {
                name: name.to_owned(),
                known,
            })
    }

    pub(crate) fn environments_mut(&mut self) -> &mut Vec<Environment> {
        &mut self.environments
    }

    pub(crate) fn record_component(&mut self, name: &str, prototype: &str) {
        self.components.insert(
            name.to_owned(),
            ComponentSpec {
                prototype: prototype.to_owned(),
            },
        );
    }

    pub(crate) fn forget_component(&mut self, name: &str) {
        self.components.shift_remove(name);
    }

    /// `app.yaml` as text: a short header, then the settings.
    pub(crate) fn app_file_text(&self) -> Result<String, AppError> {
        let file = AppFile {
            name: self.name.clone(),
            id: self.id.clone(),
            environments: self
                .environments
                .iter()
                .map(|env| {
                    let spec = EnvironmentSpec {
                        namespace: env.namespace.clone(),
                        server: env.server.clone(),
                        context: env.context.clone(),
                    };
                    (env.name.clone(), spec)
                })
                .collect(),
            components: self.components.clone(),
        };
        let yaml = serde_yaml::to_string(&file).map_err(|source| AppError::Parse {
            path: self.root.join(APP_FILE),
            source,
        })?;
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# An mlkube app. Environments pin a namespace and optionally a cluster (server URL or\n\
             # kubeconfig context); components name the prototype each instance was made from.\n\
             # Parameters live in components/params.libsonnet and environments/<env>/."
        );
        text.push_str(&yaml);
        Ok(text)
    }

    /// Write `app.yaml`.
    pub fn save(&self) -> Result<(), AppError> {
        write_file(&self.root.join(APP_FILE), &self.app_file_text()?)
    }

    /// Read a file of the app, by its path relative to the root (staged, else on disk).
    pub fn read(&self, file: &str) -> Result<String, AppError> {
        if let Some(text) = self.staged.get(file) {
            return Ok(text.clone());
        }
        let path = self.root.join(file);
        std::fs::read_to_string(&path).map_err(|source| AppError::Read { path, source })
    }

    /// Write a file of the app, by its path relative to the root.
    pub fn write(&self, file: &str, text: &str) -> Result<(), AppError> {
        write_file(&self.root.join(file), text)
    }
}

/// Write a file through a temporary sibling and a rename, so a failure leaves the old file.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), AppError> {
    let write_error = |source| AppError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(write_error)?;
    }
    let temporary = path.with_extension("mlkube-tmp");
    std::fs::write(&temporary, text).map_err(write_error)?;
    std::fs::rename(&temporary, path).map_err(write_error)
}

/// Names of the app, its environments, components and namespaces become file names, object
/// names and label values, so each must be a DNS-1123 label.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), AppError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(AppError::Invalid(format!(
            "`{name}` is not a valid {what} name: it is used in object names and labels, so it \
             must be a DNS-1123 label\nhint: use lowercase letters, digits and `-` \
             (at most 63, starting and ending with a letter or digit), e.g. `mnist-v2`"
        )))
    }
}

/// An API server URL, as a kubeconfig's `server`: `https://` or `http://` (in any case), then a
/// host and an optional port. Gives it as it is stored: scheme and host in lowercase (both are
/// case-insensitive) and without a lone trailing `/`.
pub(crate) fn check_server(server: &str) -> Result<String, AppError> {
    let invalid = || {
        AppError::Invalid(format!(
            "`{server}` is not an API server URL\nhint: give https:// (or http://) with a host \
             and an optional port, e.g. https://10.0.0.1:6443, or pin a kubeconfig context \
             with --context"
        ))
    };
    let (scheme, rest) = server.split_once("://").ok_or_else(invalid)?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(invalid());
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (host, port) = split_port(authority);
    let host_ok = !host.is_empty()
        && !host.contains('@')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '[' | ']' | ':'));
    if !host_ok || port.is_some_and(|p| p.is_empty() || p.parse::<u16>().is_err()) {
        return Err(invalid());
    }
    let path = if path == "/" { "" } else { path };
    Ok(format!(
        "{scheme}://{}{path}",
        authority.to_ascii_lowercase()
    ))
}

/// `host` and `port` of `host:port`, `[v6]:port` or a bare host.
fn split_port(authority: &str) -> (&str, Option<&str>) {
    if let Some(end) = authority.find(']') {
        let (host, rest) = authority.split_at(end + 1);
        return (host, rest.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::{check_name, check_server};

    #[test]
    fn server_urls_need_a_scheme_and_a_host() {
        for good in [
            "https://10.0.0.1:6443",
            "https://api.example.com",
            "http://127.0.0.1:8080/",
            "https://[::1]:6443",
        ] {
            assert!(check_server(good).is_ok(), "{good}");
        }
        for (given, stored) in [
            (
                "HTTPS://API.Example.com:6443/",
                "https://api.example.com:6443",
            ),
            ("Http://10.0.0.1:8080", "http://10.0.0.1:8080"),
            ("https://[::1]:6443/k8s/", "https://[::1]:6443/k8s/"),
        ] {
            assert_eq!(check_server(given).unwrap(), stored);
        }
        for bad in [
            "not a url",
            "api.example.com:6443",
            "https://",
            "https://:6443",
            "ftp://a.example.com",
            "https://a.example.com:port",
            "https://a b.example.com",
        ] {
            assert!(check_server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_dns_1123_labels() {
        assert!(check_name("app", "ml-platform2").is_ok());
        for bad in ["Bad_App!", "ml.platform", "-ml", "ml-", "", &"a".repeat(64)] {
            assert!(check_name("app", bad).is_err(), "{bad}");
        }
    }
}
