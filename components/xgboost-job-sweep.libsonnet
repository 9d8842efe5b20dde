// A hyperparameter sweep of XGBoostJobs: job-sweep.libsonnet over xgboost-job, one XGBoostJob per
// combination of a grid and of a seeded random search.
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/xgboost-job.libsonnet', 'xgboost-job-sweep')
