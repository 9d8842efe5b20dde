// A hyperparameter sweep of PyTorchJobs: job-sweep.libsonnet over pytorch-job, one PyTorchJob per
// combination of a grid and of a seeded random search.
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/pytorch-job.libsonnet', 'pytorch-job-sweep')
