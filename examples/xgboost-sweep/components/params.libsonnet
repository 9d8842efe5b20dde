// Parameters of this app's components, shared by every environment.
//
// Precedence, lowest first: the prototype's default < `components.<name>` below < `global`
// below < environments/<env>/params.libsonnet (its `global`, then its `components.<name>`).
// `global` applies to every component whose prototype declares that parameter.
// `mlkube param set` edits this file in place; hand edits and comments are kept.
{
  global: {},
  components: {
    // A Master and a Worker per job, as examples/xgboost-digits.yaml: the script takes its
    // flags (--rounds, --max-depth, --learning-rate) from the sweep's values.
    sweep: {
      image: 'mlkube/training:0.1.0',
      command: ['python3', '/opt/mlkube/examples/xgboost_digits.py'],
      args: [],
      workerReplicas: 1,
      // Keep the pods, and so the Master's log with the metric, after each job ends.
      cleanPodPolicy: 'None',
      // XGBoost peaks at about 150 MB resident per replica (measured).
      cpuRequest: '100m',
      memoryRequest: '256Mi',
      cpuLimit: '1',
      memoryLimit: '512Mi',
      // Few rounds of shallow trees learn less: the accuracies differ.
      grid: { rounds: [2, 30], maxDepth: [1, 4] },
      objective: { metric: 'accuracy', goal: 'maximize' },
    },
  },
}
