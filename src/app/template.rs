//! The text of the files `init`, `env add`, `component add` and `param set` create: params
//! files that explain their precedence, and a component file that renders its prototype.

use crate::render::library;

/// `components/params.libsonnet` of a new app.
pub const APP_PARAMS: &str = "\
// Parameters of this app's components, shared by every environment.
//
// Precedence, lowest first: the prototype's default < the environment's `defaults` <
// `components.<name>` below < `global` below < environments/<env>/params.libsonnet (its
// `global`, then its `components.<name>`). `global` applies to every component whose
// prototype declares that parameter; `defaults` only belong in an environment's file.
// `mlkube param set` edits this file in place; hand edits and comments are kept.
{
  global: {},
  components: {},
}
";

/// `environments/<env>/params.libsonnet` of a new environment.
pub fn env_params(env: &str) -> String {
    format!(
        "// Overrides for the `{env}` environment: `global` applies to every component that \
         declares\n// the parameter, `components.<name>` to one component; both beat \
         components/params.libsonnet.\n// A `defaults: {{ <param>: <value> }}` block here \
         would only replace the prototypes' defaults,\n// below every value the app sets. \
         `mlkube param set <component> <key> <value> --env {env}`\n// edits this file in \
         place.\n{{\n  global: {{}},\n  components: {{}},\n}}\n"
    )
}

/// `components/<name>.jsonnet` of an instance of `prototype`.
pub fn component(name: &str, prototype: &str) -> String {
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
