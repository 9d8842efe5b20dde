// A PyTorch training job: one kubeflow.org/v1 PyTorchJob, run by a training-operator component.
// `job` renders it, with the params every training job shares (training-job.libsonnet).
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'pytorch-job';
local part = 'pytorch-job';
// The container and port the operator reads the rendezvous port from and exposes
// (src/operator/training/frameworks/pytorch.rs); rendering the port keeps `show` and the live job alike.
local framework = {
  kind: 'PyTorchJob',
  replicaSpecs: 'pytorchReplicaSpecs',
  container: 'pytorch',
  portName: 'pytorchjob-port',
  port: 23456,
  gpuTypes: ['Master', 'Worker'],
  gpuWords: 'Master and Worker',
};
local elasticFields = ['maxReplicas', 'maxRestarts', 'metrics', 'minReplicas', 'nProcPerNode', 'rdzvBackend', 'rdzvConf', 'rdzvHost', 'rdzvId', 'rdzvPort', 'standalone'];

{
  name: component,
  description: |||
    A PyTorch training job: one kubeflow.org/v1 PyTorchJob for a training-operator component to run.
    Replica types Master (0 or 1) and Worker, each with its count; a type with 0 replicas is left
    out. With a Master, it decides success, every pod gets MASTER_ADDR pointing at it and workers
    wait for it in an init-pytorch container; without one, every Worker succeeding does (any one
    with elasticPolicy). Every replica runs one container named `pytorch` (image, command, args,
    env) with port `pytorchjob-port` 23456, the resource requests and limits, and gpus
    `nvidia.com/gpu` limits on the Master and Workers (gpuImage when set). nprocPerNode sets the
    processes per pod (WORLD_SIZE counts them); elasticPolicy makes the job elastic, with
    torchrun's rendezvous (minReplicas, maxReplicas, rdzvBackend, ...). restartPolicy (default
    OnFailure, the operator's) applies to every type; runPolicy takes cleanPodPolicy, backoffLimit,
    activeDeadlineSeconds, ttlSecondsAfterFinished, suspend and schedulingPolicy. Pods run as a
    non-root user (runAsUser) without privilege escalation, capabilities or a service account
    token unless serviceAccount is set.
    Kept from ksonnet's pytorch-job prototype: image and a GPU image, args, the Master and Worker
    counts (num_masters, num_workers), GPUs (then on workers only). Dropped: the namespace param
    (the environment's is used), comma-separated args (a list now), num_ps (PyTorchJob has no
    parameter servers), jobVersion (kubeflow.org/v1 only) and its `replicaSpecs` list.
  ||| + u.paramsLine($.params),
  params: t.params(framework, {
    image: 'docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727',
    command: ['python3', '/opt/pytorch-mnist/mnist.py'],
    args: ['--epochs=1'],
    restartPolicy: 'OnFailure',
  }) + {
    masterReplicas: { type: 'integer', minimum: 0, maximum: 1, default: 1, description: 'Master replicas: 0 or 1; the Master is rank 0 and decides success.' },
    workerReplicas: { type: 'integer', minimum: 0, default: 1, description: 'Worker replicas.' },
    nprocPerNode: { type: 'string', default: null, description: 'Processes per pod (torchrun --nproc-per-node): a number, auto, cpu or gpu; null is auto.' },
    elasticPolicy: { type: 'object', default: null, description: 'Elastic training: %s; null is a job of fixed size.' % std.join(', ', elasticFields) },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, left out when 0, after checking the counts.
  replicaCounts(prototype, params):: (
    local counts = {
      Master: t.oneAtMost(prototype, params, 'masterReplicas', 'Master'),
      Worker: t.notNegative(prototype, params, 'workerReplicas'),
    };
    if counts.Master + counts.Worker == 0 then
      u.fail(prototype, 'workerReplicas', 'the job has neither a Master nor a Worker; set masterReplicas or workerReplicas to at least 1')
    else if params.elasticPolicy != null && counts.Worker == 0 then
      u.fail(prototype, 'elasticPolicy', 'needs Workers: an elastic job scales its Workers; set workerReplicas to at least 1')
    else t.present(counts)
  ),

  longestPodSuffix(counts):: t.longestPodSuffix(counts),

  // PyTorch's own spec fields: nprocPerNode and elasticPolicy, checked as the CRD checks them.
  spec(prototype, params):: (
    local nproc = params.nprocPerNode;
    local elastic = params.elasticPolicy;
    local isCount(text) = std.length(text) > 0 && u.onlyChars('0123456789', text);
    local unknown = if elastic == null then [] else std.setDiff(std.objectFields(elastic), elasticFields);
    local backend = if elastic == null then null else std.get(elastic, 'rdzvBackend');
    std.prune({
      nprocPerNode:
        if nproc == null || isCount(nproc) || std.member(['auto', 'cpu', 'gpu'], nproc) then nproc
        else u.fail(prototype, 'nprocPerNode', 'must be a number of processes, auto, cpu or gpu, got %s' % std.manifestJsonMinified(nproc)),
      elasticPolicy:
        if unknown != [] then
          u.fail(prototype, 'elasticPolicy', 'has no field %s; its fields are %s' % [unknown[0], std.join(', ', elasticFields)])
        else if backend != null && !std.member(['c10d', 'etcd', 'etcd-v2'], backend) then
          u.fail(prototype, 'elasticPolicy', 'rdzvBackend %s is not one of c10d, etcd, etcd-v2' % std.manifestJsonMinified(backend))
        else if elastic != null && std.objectHas(elastic, 'nProcPerNode') && nproc != null then
          u.fail(prototype, 'elasticPolicy', 'nProcPerNode and the nprocPerNode param cannot both be set; use nprocPerNode')
        else elastic,
    })
  ),

  // One PyTorchJob named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, extraArgs, $.spec(prototype, params)),
}
