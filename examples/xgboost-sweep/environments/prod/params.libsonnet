// Overrides for the `prod` environment: `global` applies to every component that declares
// the parameter, `components.<name>` to one component. `mlkube param set <component> <key>
// <value> --env prod` edits this file in place.
//
// prod searches wider: the grid's rounds, each with 8 learning rates drawn log-uniformly
// (seed 1, so every run draws the same ones), 3 workers per job.
{
  global: {},
  components: {
    sweep: {
      workerReplicas: 3,
      grid: { rounds: [30, 100] },
      random: { count: 8, seed: 1, ranges: { learningRate: { min: 0.01, max: 0.5, log: true }, maxDepth: { min: 2, max: 8, integer: true } } },
    },
  },
}
