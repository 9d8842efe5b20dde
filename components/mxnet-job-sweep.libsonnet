// A hyperparameter sweep of MXJobs: job-sweep.libsonnet over mxnet-job, one MXJob per
// combination of a grid and of a seeded random search.
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/mxnet-job.libsonnet', 'mxnet-job-sweep')
