// A JAX training job: one kubeflow.org/v1 JAXJob, run by a training-operator component.
// `job` renders it, with the params every training job shares (training-job.libsonnet).
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'jax-job';
local part = 'jax-job';
// The container and port the operator reads the coordinator's port from and exposes
// (src/operator/training/frameworks/jax.rs); rendering the port keeps `show` and the live job alike.
local framework = {
  kind: 'JAXJob',
  replicaSpecs: 'jaxReplicaSpecs',
  container: 'jax',
  portName: 'jaxjob-port',
  port: 6666,
  gpuTypes: ['Worker'],
  gpuWords: 'Worker',
};

{
  name: component,
  description: |||
    A JAX training job: one kubeflow.org/v1 JAXJob for a training-operator component to run.
    Its one replica type is Worker: workerReplicas processes joined by jax.distributed, worker 0
    the coordinator (COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID come
    from the operator); every Worker succeeding makes the job succeed. Every replica runs one
    container named `jax` (image, command, args, env) with port `jaxjob-port` 6666, the resource
    requests and limits, and gpus `nvidia.com/gpu` limits (gpuImage when set). restartPolicy
    (default Never, the operator's) applies to every Worker; runPolicy takes cleanPodPolicy,
    backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend and schedulingPolicy.
    Pods run as a non-root user (runAsUser) without privilege escalation, capabilities or a
    service account token unless serviceAccount is set.
    Kubeflow's ksonnet packages had no JAX prototype (JAXJob came years later); the defaults run
    the training-operator's jaxjob-simple example. Dropped from that example: the `kubeflow`
    namespace it expects (the environment's is used) and its imagePullPolicy Always (the
    cluster's default applies).
  ||| + u.paramsLine($.params),
  params: t.params(framework, {
    image: 'docker.io/kubeflow/jaxjob-simple:latest',
    command: ['python3', 'train.py'],
    args: [],
    restartPolicy: 'Never',
  }) + {
    workerReplicas: { type: 'integer', minimum: 1, default: 1, description: 'Worker replicas: the JAX processes, worker 0 the coordinator.' },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, after checking them.
  replicaCounts(prototype, params)::
    if params.workerReplicas < 1 then
      u.fail(prototype, 'workerReplicas', 'must be at least 1, got %d; the Workers are the job' % params.workerReplicas)
    else { Worker: params.workerReplicas },

  longestPodSuffix(counts):: t.longestPodSuffix(counts),

  // One JAXJob named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, extraArgs),
}
