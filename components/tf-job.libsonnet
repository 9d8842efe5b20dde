// A TensorFlow training job: one kubeflow.org/v1 TFJob, run by a training-operator component.
// `job` renders it and is shared with tf-job-sweep, which renders one per grid combination.
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'tf-job';
local part = 'tf-job';
// The port upstream's operator gives the `tensorflow` container when it has none; rendering it
// keeps `show` and the live object alike. TF_CONFIG addresses every replica on it.
local framework = {
  kind: 'TFJob',
  replicaSpecs: 'tfReplicaSpecs',
  container: 'tensorflow',
  portName: 'tfjob-port',
  port: 2222,
  gpuTypes: ['Chief', 'Master', 'Worker'],
  gpuWords: 'Chief and Worker',
};

{
  name: component,
  description: |||
    A TensorFlow training job: one kubeflow.org/v1 TFJob for a training-operator component to run.
    Replica types Chief (or Master, with chiefType), PS, Worker and Evaluator, each with its count;
    a type with 0 replicas is left out, and a job needs a Chief or a Worker, since they decide its
    success. Every replica runs one container named `tensorflow` (image, command, args, env) with
    port `tfjob-port` 2222, the resource requests and limits, and on the Chief and Workers gpus
    `nvidia.com/gpu` limits (gpuImage when set). restartPolicy applies to every type; runPolicy
    takes cleanPodPolicy, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished,
    suspend and schedulingPolicy. Pods run as a non-root user (runAsUser) without privilege escalation or capabilities;
    the root filesystem stays writable, since training code writes caches and checkpoints there,
    and no service account token is mounted unless serviceAccount is set.
    The job's name is the component's: a DNS-1035 label short enough that its longest pod name
    (e.g. `<name>-worker-11`) is at most 63 characters. An applied job that finished stays; with
    ttlSecondsAfterFinished the operator deletes it, and the next `mlkube apply` runs it again.
    Kept from ksonnet's tf-job prototype: image and a GPU image, args, the per-type replica
    counts (num_masters, num_ps, num_workers), GPUs (num_gpus, then on workers only) and image
    pull secrets. Dropped: the namespace param (the environment's is used), comma-separated
    strings for args and pull secrets (lists now), the MASTER default of one replica (a single
    Worker now), and the v1alpha1 `replicaSpecs` list (kubeflow.org/v1 `tfReplicaSpecs` map).
    Not exposed: successPolicy, enableDynamicWorker and volumes; a hand-written component can
    render them. The params every framework's job shares live in training-job.libsonnet.
  ||| + u.paramsLine($.params),
  params: t.params(framework, {
    image: 'kubeflow/tf-dist-mnist-test:1.0',
    command: [],
    args: [],
    restartPolicy: 'Never',
  }) + {
    chiefType: { type: 'string', enum: ['Chief', 'Master'], default: 'Chief', description: 'Replica type of the chief: Chief, or Master for code written for older operators.' },
    chiefReplicas: { type: 'integer', minimum: 0, maximum: 1, default: 0, description: 'Chief (or Master) replicas: 0 or 1.' },
    psReplicas: { type: 'integer', minimum: 0, default: 0, description: 'Parameter server replicas.' },
    workerReplicas: { type: 'integer', minimum: 0, default: 1, description: 'Worker replicas.' },
    evaluatorReplicas: { type: 'integer', minimum: 0, default: 0, description: 'Evaluator replicas.' },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, left out when 0, after checking the counts.
  replicaCounts(prototype, params):: (
    local count(param) = t.notNegative(prototype, params, param);
    local chiefType = u.oneOf(prototype, params, 'chiefType', ['Chief', 'Master']);
    local counts = {
      [chiefType]: t.oneAtMost(prototype, params, 'chiefReplicas', chiefType),
      PS: count('psReplicas'),
      Worker: count('workerReplicas'),
      Evaluator: count('evaluatorReplicas'),
    };
    if counts[chiefType] + counts.Worker == 0 then
      u.fail(prototype, 'workerReplicas', 'the job has neither a %s nor a Worker, so nothing could make it succeed; set workerReplicas or chiefReplicas to at least 1' % chiefType)
    else t.present(counts)
  ),

  longestPodSuffix(counts):: t.longestPodSuffix(counts),

  // One TFJob named `name` for the component `params.name`, made by `prototype` (named in errors);
  // `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, extraArgs),
}
