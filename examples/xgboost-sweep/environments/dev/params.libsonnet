// Overrides for the `dev` environment: `global` applies to every component that declares
// the parameter, `components.<name>` to one component. `mlkube param set <component> <key>
// <value> --env dev` edits this file in place.
{
  global: {},
  components: {},
}
