// Overrides for the `local` environment: `global` applies to every component that declares
// the parameter, `components.<name>` to one component. `mlkube param set <component> <key>
// <value> --env local` edits this file in place.
{
  global: {},
  components: {},
}
