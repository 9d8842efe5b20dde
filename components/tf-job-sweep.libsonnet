// A hyperparameter grid sweep of TFJobs: job-sweep.libsonnet's sweep over tf-job.
local sweep = import 'mlkube/job-sweep.libsonnet';
local tfJob = import 'mlkube/tf-job.libsonnet';

sweep.of(tfJob, 'tf-job-sweep', grid={ learningRate: [0.01, 0.001], hiddenLayers: [2, 3, 4] })
