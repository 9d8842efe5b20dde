// A hyperparameter sweep of TFJobs: the sweep of job-sweep.libsonnet over tf-job, with the grid
// that apps made before the other frameworks' sweeps got by default.
local sweep = import 'mlkube/job-sweep.libsonnet';
local tfJob = import 'mlkube/tf-job.libsonnet';

sweep.of(tfJob, 'tf-job-sweep', grid={ learningRate: [0.01, 0.001], hiddenLayers: [2, 3, 4] })
