// An XGBoost training job: one kubeflow.org/v1 XGBoostJob, run by a training-operator component.
// `job` renders it, with the params every training job shares (training-job.libsonnet).
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'xgboost-job';
local part = 'xgboost-job';
// The container and port the operator reads the tracker's port from and exposes
// (src/operator/training/frameworks/xgboost.rs); rendering the port keeps `show` and the live job alike.
local framework = {
  kind: 'XGBoostJob',
  replicaSpecs: 'xgbReplicaSpecs',
  container: 'xgboost',
  portName: 'xgboostjob-port',
  port: 9999,
  gpuTypes: ['Master', 'Worker'],
  gpuWords: 'Master and Worker',
};

{
  name: component,
  description: |||
    An XGBoost training job: one kubeflow.org/v1 XGBoostJob for a training-operator component to run.
    Replica types Master (always one: rank 0, the tracker, and what decides success) and Worker
    (workerReplicas, ranks 1 and up; 0 leaves the type out); MASTER_ADDR, MASTER_PORT,
    WORLD_SIZE, RANK and WORKER_ADDRS come from the operator. Every replica runs one container
    named `xgboost` (image, command, args, env) with port `xgboostjob-port` 9999, the resource
    requests and limits, and gpus `nvidia.com/gpu` limits (gpuImage when set). restartPolicy
    (default Never, the operator's) applies to every type; runPolicy takes cleanPodPolicy,
    backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend and schedulingPolicy.
    Pods run as a non-root user (runAsUser) without privilege escalation, capabilities or a
    service account token unless serviceAccount is set.
    Kubeflow's ksonnet packages had no XGBoost prototype (the operator came after them); the
    defaults run the training-operator's xgboost-dist-iris example. Dropped from that example:
    its per-type restart policies (one for every type), its imagePullPolicy Always, and the
    Master count (the CRD allows exactly one).
  ||| + u.paramsLine($.params),
  params: t.params(framework, {
    image: 'docker.io/kubeflow/xgboost-dist-iris:latest',
    command: [],
    args: ['--job_type=Train', '--xgboost_parameter=objective:multi:softprob,num_class:3', '--n_estimators=10', '--learning_rate=0.1', '--model_path=/tmp/xgboost-model', '--model_storage_type=local'],
    restartPolicy: 'Never',
  }) + {
    workerReplicas: { type: 'integer', minimum: 0, default: 1, description: 'Worker replicas beside the one Master.' },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, left out when 0, after checking the counts.
  replicaCounts(prototype, params):: t.present({
    Master: 1,
    Worker: t.notNegative(prototype, params, 'workerReplicas'),
  }),

  longestPodSuffix(counts):: t.longestPodSuffix(counts),

  // One XGBoostJob named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, extraArgs),
}
