// A hyperparameter sweep of JAXJobs: job-sweep.libsonnet over jax-job, one JAXJob per
// combination of a grid and of a seeded random search.
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/jax-job.libsonnet', 'jax-job-sweep')
