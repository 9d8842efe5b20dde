//! The component library embedded in the binary, and how Jsonnet finds files.
//!
//! The repo's `components/` (prototypes and helpers), `crds/` and `environments/` folders are
//! compiled in with `include_dir`, so an app needs no vendored copies. Jsonnet sees them under a
//! fixed prefix: `import 'mlkube/serving.libsonnet'` reads `components/serving.libsonnet`,
//! `importstr 'mlkube/crds/<file>'` reads `crds/<file>`.
//!
//! A prototype that was renamed keeps its old name ([`RENAMED`]): `mlkube/tf-serving.libsonnet`
//! is `mlkube/serving.libsonnet`, the same file, so an app made before the rename (its app.yaml
//! and its component files name the old one) renders exactly as it did.
//!
//! One more name under the prefix is not a file: `import 'mlkube/component.libsonnet'`, from
//! `components/<name>.jsonnet`, gives that component `{ name, params, env }` for the environment
//! being rendered. That is how a component reads its parameters without boilerplate.
//!
//! Every file Jsonnet sees is named by a path relative to the app (`components/mnist.jsonnet`) or
//! by its `mlkube/` name, so error messages point at what the user can open.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component as PathPart, Path, PathBuf};
use std::rc::Rc;

use include_dir::{Dir, include_dir};
use jrsonnet_evaluator::error::ErrorKind;
use jrsonnet_evaluator::{AsPathLike, ImportResolver, ResolvePath, SourcePath, SourceVirtual};
use jrsonnet_gcmodule::Acyclic;

static COMPONENTS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/components");
static CRDS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/crds");
static ENVIRONMENTS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/environments");

/// The import prefix of the embedded library.
pub const PREFIX: &str = "mlkube/";

/// The import that gives a component its parameters and environment.
pub const COMPONENT_IMPORT: &str = "mlkube/component.libsonnet";

/// The prototypes that were renamed, (old name, name): the old name is an alias, in app.yaml,
/// on the command line and in imports, for the prototype's file under its name.
pub const RENAMED: &[(&str, &str)] = &[
    // It serves MLServer too, and XGBoost models.
    ("tf-serving", "serving"),
    // It runs the seven kubeflow.org/v1 jobs and FrameworkController's Framework: the operator's
    // `training` controllers, as Kubeflow's own training-operator succeeded its tf-operator.
    ("tf-job-operator", "training-operator"),
];

/// The name of the prototype `old` names, when `old` is the name it had before a rename.
pub fn renamed(old: &str) -> Option<&'static str> {
    RENAMED
        .iter()
        .find(|(before, _)| *before == old)
        .map(|(_, name)| *name)
}

/// The old names of the prototype `name`, from before its renames.
pub fn old_names(name: &str) -> Vec<&'static str> {
    RENAMED
        .iter()
        .filter(|(_, now)| *now == name)
        .map(|(before, _)| *before)
        .collect()
}

/// Where a prototype lives under the import prefix.
pub fn prototype_import(prototype: &str) -> String {
    format!("{PREFIX}{prototype}.libsonnet")
}

/// The contents of an embedded file, by its name under the prefix (`serving.libsonnet`,
/// `crds/tfjobs.kubeflow.org.yaml`).
pub fn file(path: &str) -> Option<&'static [u8]> {
    match path.strip_prefix("crds/") {
        Some(crd) => CRDS.get_file(crd),
        None => COMPONENTS.get_file(path),
    }
    .map(|file| file.contents())
}

/// The top-level `.libsonnet` files of the library, sorted: prototypes and shared helpers.
/// Which of them are prototypes is known only by evaluating them (a prototype has `render`).
pub fn libsonnet_files() -> Vec<&'static str> {
    let mut names: Vec<&str> = COMPONENTS
        .files()
        .filter_map(|file| file.path().to_str())
        .filter_map(|path| path.strip_suffix(".libsonnet"))
        .collect();
    names.sort_unstable();
    names
}

/// The shipped `environments/<env>/params.libsonnet`, copied into a new app by `init`.
pub fn default_environment_params(env: &str) -> Option<&'static str> {
    ENVIRONMENTS
        .get_file(format!("{env}/params.libsonnet"))
        .and_then(|file| file.contents_utf8())
}

/// What `mlkube/component.libsonnet` evaluates to, per component, as JSON text. The renderer
/// fills it before it evaluates the component.
pub type ComponentContexts = Rc<RefCell<HashMap<String, String>>>;

/// Resolves and loads every file Jsonnet imports while rendering an app.
///
/// Files are named (as `SourceVirtual`) by their path relative to the app root, or by their
/// `mlkube/` name; relative imports resolve against the importing file, then against the app's
/// `lib/` and `vendor/` folders, as ksonnet's jpaths did.
#[derive(Acyclic)]
pub struct Resolver {
    app_root: PathBuf,
    contexts: ComponentContexts,
    /// Files of the app read from here instead of the disk, by their path relative to the
    /// app: an edit not written yet.
    staged: BTreeMap<String, String>,
}

impl Resolver {
    pub fn new(app_root: &Path, contexts: ComponentContexts) -> Self {
        Resolver {
            app_root: app_root.to_owned(),
            contexts,
            staged: BTreeMap::new(),
        }
    }

    /// The same resolver, reading `staged` (path relative to the app -> text) in place of
    /// those files on disk.
    pub fn with_staged(mut self, staged: BTreeMap<String, String>) -> Self {
        self.staged = staged;
        self
    }

    fn app_has(&self, name: &str) -> bool {
        self.staged.contains_key(name) || self.app_root.join(name).is_file()
    }

    /// The name Jsonnet reports for a file, e.g. `components/mnist.jsonnet`.
    pub fn source(name: &str) -> SourcePath {
        SourcePath::new(SourceVirtual(name.into()))
    }

    fn resolve_name(&self, from: &str, path: &str) -> Result<String, ErrorKind> {
        if path == COMPONENT_IMPORT {
            let component = from
                .strip_prefix("components/")
                .and_then(|file| file.strip_suffix(".jsonnet"))
                .filter(|name| !name.contains('/'));
            return match component {
                Some(component) => Ok(format!("{COMPONENT_IMPORT}#{component}")),
                None => Err(ErrorKind::RuntimeError(
                    format!(
                        "{COMPONENT_IMPORT} can only be imported by a component file \
                         (components/<name>.jsonnet), not by {from}; pass params on to helpers"
                    )
                    .into(),
                )),
            };
        }
        if let Some(library_path) = path.strip_prefix(PREFIX) {
            return self.library_name(library_path, path);
        }
        if Path::new(path).is_absolute() {
            return Ok(path.to_owned());
        }
        let join = |dir: &str| {
            if dir.is_empty() {
                normalize(path)
            } else {
                normalize(&format!("{dir}/{path}"))
            }
        };
        if let Some(from_library) = from.strip_prefix(PREFIX) {
            let dir = from_library.rsplit_once('/').map_or("", |(dir, _)| dir);
            let joined = join(dir).ok_or_else(|| {
                ErrorKind::RuntimeError(
                    format!("{path} (imported by {from}) is outside the mlkube library").into(),
                )
            })?;
            return self.library_name(&joined, path);
        }
        let dir = from.rsplit_once('/').map_or("", |(dir, _)| dir);
        let candidates: Vec<String> = [join(dir), join("lib"), join("vendor")]
            .into_iter()
            .flatten()
            .collect();
        if let Some(name) = candidates.iter().find(|name| self.app_has(name)) {
            return Ok(name.clone());
        }
        Err(ErrorKind::ImportCallbackError(self.not_found(
            from,
            path,
            &candidates,
        )))
    }

    /// What a missing import says: where it is, what was asked for, and where it was looked for.
    fn not_found(&self, from: &str, path: &str, candidates: &[String]) -> String {
        let at = std::fs::read_to_string(self.app_root.join(from))
            .ok()
            .and_then(|text| import_position(&text, path))
            .map_or_else(
                || from.to_owned(),
                |(line, column)| format!("{from}:{line}:{column}"),
            );
        format!(
            "{at}: cannot find the import `{path}`; looked for {} in the app {}\nhint: fix the \
             path (relative to the importing file), or put the file in the app's lib/ or vendor/ \
             folder",
            candidates.join(", "),
            self.app_root.display()
        )
    }

    fn library_name(&self, library_path: &str, asked: &str) -> Result<String, ErrorKind> {
        let renamed = library_path
            .strip_suffix(".libsonnet")
            .and_then(renamed)
            .map(|name| format!("{name}.libsonnet"));
        let library_path = renamed.as_deref().unwrap_or(library_path);
        if file(library_path).is_some() {
            Ok(format!("{PREFIX}{library_path}"))
        } else {
            let mut known: Vec<String> = COMPONENTS
                .files()
                .filter_map(|f| f.path().to_str().map(|p| format!("{PREFIX}{p}")))
                .chain(
                    CRDS.files()
                        .filter_map(|f| f.path().to_str().map(|p| format!("{PREFIX}crds/{p}"))),
                )
                .collect();
            known.sort();
            Err(ErrorKind::RuntimeError(
                format!(
                    "{asked} is not in the mlkube library; it holds: {}",
                    known.join(", ")
                )
                .into(),
            ))
        }
    }
}

impl ImportResolver for Resolver {
    fn resolve_from(
        &self,
        from: &SourcePath,
        path: &dyn AsPathLike,
    ) -> jrsonnet_evaluator::Result<SourcePath> {
        let path = match path.as_path() {
            ResolvePath::Str(s) => s.to_owned(),
            ResolvePath::Path(p) => p.to_string_lossy().into_owned(),
        };
        let from_name = from
            .downcast_ref::<SourceVirtual>()
            .map(|v| v.0.to_string())
            .unwrap_or_default();
        let name = self.resolve_name(&from_name, &path)?;
        Ok(Self::source(&name))
    }

    fn load_file_contents(&self, resolved: &SourcePath) -> jrsonnet_evaluator::Result<Vec<u8>> {
        let Some(name) = resolved
            .downcast_ref::<SourceVirtual>()
            .map(|v| v.0.to_string())
        else {
            return Err(ErrorKind::ResolvedFileNotFound(resolved.clone()).into());
        };
        if let Some(component) = name
            .strip_prefix(COMPONENT_IMPORT)
            .and_then(|rest| rest.strip_prefix('#'))
        {
            return match self.contexts.borrow().get(component) {
                Some(json) => Ok(json.clone().into_bytes()),
                None => Err(ErrorKind::RuntimeError(
                    format!("{COMPONENT_IMPORT}: `{component}` is not a component of this app")
                        .into(),
                )
                .into()),
            };
        }
        if let Some(library_path) = name.strip_prefix(PREFIX) {
            return file(library_path)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| ErrorKind::ResolvedFileNotFound(resolved.clone()).into());
        }
        if let Some(text) = self.staged.get(&name) {
            return Ok(text.clone().into_bytes());
        }
        std::fs::read(self.app_root.join(&name))
            .map_err(|error| ErrorKind::ImportIo(format!("cannot read {name}: {error}")).into())
    }
}

/// Line and column (from 1) of the quoted `path` in `text`, where it is imported.
fn import_position(text: &str, path: &str) -> Option<(usize, usize)> {
    let offset = [format!("'{path}'"), format!("\"{path}\"")]
        .iter()
        .filter_map(|quoted| text.find(quoted.as_str()))
        .min()?;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .unwrap_or_default()
        .chars()
        .count()
        + 1;
    Some((line, column))
}

/// Lexically normalise a relative path with `/` separators; `None` if it climbs above its root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in Path::new(path).components() {
        match part {
            PathPart::Normal(name) => parts.push(name.to_str()?),
            PathPart::ParentDir => {
                parts.pop()?;
            }
            PathPart::CurDir => {}
            PathPart::RootDir | PathPart::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver() -> Resolver {
        Resolver::new(Path::new("/nonexistent"), ComponentContexts::default())
    }

    #[test]
    fn component_import_is_per_component() {
        let name = resolver()
            .resolve_name("components/mnist.jsonnet", COMPONENT_IMPORT)
            .unwrap();
        assert_eq!(name, "mlkube/component.libsonnet#mnist");
    }

    #[test]
    fn component_import_is_refused_outside_component_files() {
        let error = resolver()
            .resolve_name("lib/helper.libsonnet", COMPONENT_IMPORT)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("can only be imported by a component file")
        );
    }

    #[test]
    fn unknown_library_file_lists_the_library() {
        let error = resolver()
            .resolve_name("components/a.jsonnet", "mlkube/nope.libsonnet")
            .unwrap_err();
        assert!(error.to_string().contains("is not in the mlkube library"));
    }

    #[test]
    fn a_missing_import_names_its_position_and_every_place_looked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("components")).unwrap();
        std::fs::write(
            dir.path().join("components/a.jsonnet"),
            "// a\nlocal x = import \"nope.libsonnet\";\nx\n",
        )
        .unwrap();
        let resolver = Resolver::new(dir.path(), ComponentContexts::default());
        let message = resolver
            .resolve_name("components/a.jsonnet", "nope.libsonnet")
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(
                "components/a.jsonnet:2:18: cannot find the import `nope.libsonnet`; looked for \
                 components/nope.libsonnet, lib/nope.libsonnet, vendor/nope.libsonnet in the app "
            ),
            "{message}"
        );
        assert!(!message.contains("virtual:"), "{message}");
    }

    #[test]
    fn an_old_prototype_name_imports_the_file_of_its_new_name() {
        for (old, name) in RENAMED {
            let imported = resolver()
                .resolve_name("components/a.jsonnet", &prototype_import(old))
                .unwrap();
            assert_eq!(imported, prototype_import(name));
            assert!(file(&format!("{name}.libsonnet")).is_some(), "{name}");
            assert!(file(&format!("{old}.libsonnet")).is_none(), "{old}");
            assert_eq!(old_names(name), [*old]);
        }
    }

    #[test]
    fn normalize_keeps_paths_inside_their_root() {
        assert_eq!(
            normalize("components/../lib/a.libsonnet").as_deref(),
            Some("lib/a.libsonnet")
        );
        assert_eq!(normalize("../a"), None);
    }
}
