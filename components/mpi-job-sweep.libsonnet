// A hyperparameter sweep of MPIJobs: job-sweep.libsonnet over mpi-job, one MPIJob per
// combination of a grid and of a seeded random search, the flags appended to the Launcher's args.
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/mpi-job.libsonnet', 'mpi-job-sweep')
