// A hyperparameter sweep of PaddleJobs: job-sweep.libsonnet over paddle-job, one PaddleJob per
// combination of a grid and of a seeded random search.
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/paddle-job.libsonnet', 'paddle-job-sweep')
