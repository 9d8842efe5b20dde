// An MXNet job: one kubeflow.org/v1 MXJob (training or auto-tuning), run by the training-operator
// component. `job` renders it, with the params every training job shares (training-job.libsonnet).
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'mxnet-job';
local part = 'mxnet-job';
// The container and port the operator reads the DMLC ports from and exposes
// (src/operator/training/frameworks/mxnet.rs); rendering the port keeps `show` and the live job alike.
local framework = {
  kind: 'MXJob',
  replicaSpecs: 'mxReplicaSpecs',
  container: 'mxnet',
  portName: 'mxjob-port',
  port: 9091,
  gpuTypes: ['Worker', 'TunerServer'],
  gpuWords: 'Worker and TunerServer',
};
// Each job mode's replica types: their params and their counts when the param is null.
local modes = {
  MXTrain: { schedulerReplicas: 1, serverReplicas: 1, workerReplicas: 1 },
  MXTune: { tunerTrackerReplicas: 1, tunerServerReplicas: 1, tunerReplicas: 1 },
};
local types = {
  schedulerReplicas: 'Scheduler',
  serverReplicas: 'Server',
  workerReplicas: 'Worker',
  tunerTrackerReplicas: 'TunerTracker',
  tunerServerReplicas: 'TunerServer',
  tunerReplicas: 'Tuner',
};

{
  name: component,
  description: |||
    An MXNet job: one kubeflow.org/v1 MXJob for a training-operator component to run (the operator
    runs MXJob as release 1.8 did; v1.9 dropped it). jobMode MXTrain is parameter-server training
    with replica types Scheduler (0 or 1), Server and Worker, by default one of each; MXTune is
    auto-tuning with TunerTracker, TunerServer and Tuner (0 or 1), by default one of each. A
    count left null takes its mode's default; a type of the other mode must stay null or 0.
    The Scheduler decides success, else a lone Worker without Servers, else the Tuner.
    MX_CONFIG and the DMLC_* variables come from the operator. Every replica runs one container
    named `mxnet` (image, command, args, env) with port `mxjob-port` 9091, the resource requests
    and limits, and gpus `nvidia.com/gpu` limits on Workers and TunerServers (gpuImage when
    set). restartPolicy (default Never, the operator's) applies to every type; runPolicy takes
    cleanPodPolicy, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend and
    schedulingPolicy. Pods run as a non-root user (runAsUser) without privilege escalation,
    capabilities or a service account token unless serviceAccount is set.
    Kept from ksonnet's mxnet-job prototype: image and a GPU image, args, the per-type counts
    and GPUs. Dropped: the namespace param (the environment's is used), comma-separated args (a
    list now) and the v1alpha1 `replicaSpecs` list (kubeflow.org/v1 `mxReplicaSpecs` map).
  ||| + u.paramsLine($.params),
  params: t.params(framework, {
    image: 'kubeflow/mxnet-gpu:latest',
    command: ['python3'],
    args: ['/mxnet/mxnet/example/image-classification/train_mnist.py', '--num-epochs', '1', '--kv-store', 'dist_sync'],
    restartPolicy: 'Never',
  }) + {
    jobMode: { type: 'string', enum: ['MXTrain', 'MXTune'], default: 'MXTrain', description: 'MXTrain (parameter-server training) or MXTune (auto-tuning).' },
    schedulerReplicas: { type: 'integer', minimum: 0, maximum: 1, default: null, description: 'Scheduler replicas: 0 or 1; null is 1 with MXTrain.' },
    serverReplicas: { type: 'integer', minimum: 0, default: null, description: 'Server replicas; null is 1 with MXTrain.' },
    workerReplicas: { type: 'integer', minimum: 0, default: null, description: 'Worker replicas; null is 1 with MXTrain.' },
    tunerTrackerReplicas: { type: 'integer', minimum: 0, default: null, description: 'TunerTracker replicas; null is 1 with MXTune.' },
    tunerServerReplicas: { type: 'integer', minimum: 0, default: null, description: 'TunerServer replicas; null is 1 with MXTune.' },
    tunerReplicas: { type: 'integer', minimum: 0, maximum: 1, default: null, description: 'Tuner replicas: 0 or 1; null is 1 with MXTune.' },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, left out when 0, after checking the counts against
  // the job mode.
  replicaCounts(prototype, params):: (
    local mode = u.oneOf(prototype, params, 'jobMode', std.objectFields(modes));
    local count(param) =
      local value = params[param];
      if value == null then std.get(modes[mode], param, 0)
      else if !std.objectHas(modes[mode], param) && value != 0 then
        u.fail(prototype, param, '%s replicas belong to the other job mode; with jobMode %s leave it null or 0' % [types[param], mode])
      else if param == 'schedulerReplicas' || param == 'tunerReplicas' then t.oneAtMost(prototype, params, param, types[param])
      else t.notNegative(prototype, params, param);
    local counts = { [types[p]]: count(p) for p in std.objectFields(types) };
    local decided =
      if mode == 'MXTrain' then counts.Scheduler == 1 || (counts.Worker == 1 && counts.Server == 0)
      else counts.Tuner == 1;
    if !decided then
      u.fail(prototype, if mode == 'MXTrain' then 'schedulerReplicas' else 'tunerReplicas', if mode == 'MXTrain' then 'the job has no Scheduler and not a lone Worker without Servers, so nothing could make it succeed; set schedulerReplicas to 1' else 'an MXTune job needs its Tuner, which decides success; set tunerReplicas to 1')
    else t.present(counts)
  ),

  longestPodSuffix(counts):: t.longestPodSuffix(counts),

  // One MXJob named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, extraArgs, { jobMode: params.jobMode }),
}
