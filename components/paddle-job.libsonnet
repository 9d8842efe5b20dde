// A PaddlePaddle training job: one kubeflow.org/v1 PaddleJob, run by the training-operator
// component. `job` renders it, with the params every training job shares (training-job.libsonnet).
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'paddle-job';
local part = 'paddle-job';
// The container and port the operator reads PADDLE_MASTER's port from and exposes
// (src/operator/training/frameworks/paddle.rs): upstream names that port `master`.
local framework = {
  kind: 'PaddleJob',
  replicaSpecs: 'paddleReplicaSpecs',
  container: 'paddle',
  portName: 'master',
  port: 36543,
  gpuTypes: ['Worker'],
  gpuWords: 'Worker',
};

{
  name: component,
  description: |||
    A PaddlePaddle training job: one kubeflow.org/v1 PaddleJob for a training-operator component to run.
    Replica types Master (0 or 1, a parameter server when present, and then what decides success)
    and Worker (every one succeeding decides it without a Master; worker 0 is then the
    rendezvous); PADDLE_MASTER, PADDLE_NNODES and the rest come from the operator. Every replica
    runs one container named `paddle` (image, command, args, env) with port `master` 36543, the
    resource requests and limits, and on the Workers gpus `nvidia.com/gpu` limits (gpuImage when
    set). restartPolicy (default OnFailure, the operator's) applies to every type; runPolicy
    takes cleanPodPolicy, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend
    and schedulingPolicy. Pods run as a non-root user (runAsUser) without privilege escalation,
    capabilities or a service account token unless serviceAccount is set.
    Kubeflow's ksonnet packages had no PaddlePaddle prototype (the operator came after them); the
    defaults run the training-operator's paddle-simple-cpu self-check. Dropped: elasticPolicy
    (the operator accepts it but does not scale PaddleJobs), the example's `kubeflow` namespace
    and its imagePullPolicy Always.
  ||| + u.paramsLine($.params),
  params: t.params(framework, {
    image: 'paddlepaddle/paddle:2.4.0rc0-cpu',
    command: ['python'],
    args: ['-m', 'paddle.distributed.launch', 'run_check'],
    restartPolicy: 'OnFailure',
  }) + {
    masterReplicas: { type: 'integer', minimum: 0, maximum: 1, default: 0, description: 'Master replicas: 0 or 1 (a parameter server).' },
    workerReplicas: { type: 'integer', minimum: 0, default: 1, description: 'Worker replicas.' },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, left out when 0, after checking the counts.
  replicaCounts(prototype, params):: (
    local counts = {
      Master: t.oneAtMost(prototype, params, 'masterReplicas', 'Master'),
      Worker: t.notNegative(prototype, params, 'workerReplicas'),
    };
    if counts.Master + counts.Worker == 0 then
      u.fail(prototype, 'workerReplicas', 'the job has neither a Master nor a Worker; set workerReplicas to at least 1')
    else t.present(counts)
  ),

  longestPodSuffix(counts):: t.longestPodSuffix(counts),

  // One PaddleJob named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, extraArgs),
}
