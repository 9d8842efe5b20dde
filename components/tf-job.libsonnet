// A TensorFlow training job: one kubeflow.org/v1 TFJob, run by the tf-job-operator component.
// `job` renders it and is shared with tf-job-sweep, which renders one per grid combination.
local u = import 'mlkube/util.libsonnet';

local component = 'tf-job';
local part = 'tf-job';
// The port upstream's operator gives the `tensorflow` container when it has none; rendering it
// keeps `show` and the live object alike. TF_CONFIG addresses every replica on it.
local tfPort = 2222;
// Pods are named `<job>-<type>-<index>`, and each gets a headless Service of the same name,
// which must be a DNS-1035 label.
local maxServiceName = 63;
local lowercase = 'abcdefghijklmnopqrstuvwxyz';
local digits = '0123456789';

local isDns1035(name) =
  local chars = std.stringChars(name);
  std.length(chars) > 0
  && std.member(lowercase, chars[0])
  && std.all([std.member(lowercase + digits + '-', c) for c in chars])
  && chars[std.length(chars) - 1] != '-';

local stringList(prototype, params, param) =
  local values = params[param];
  local bad = [v for v in values if !std.isString(v)];
  if std.length(bad) > 0 then
    u.fail(prototype, param, 'must be a list of strings, but holds %s; quote numbers, e.g. ["--steps", "100"]' % std.manifestJsonMinified(bad[0]))
  else values;

local notNegative(prototype, params, param) =
  local value = params[param];
  if value != null && value < 0 then u.fail(prototype, param, 'must not be negative, got %d' % value) else value;

{
  name: component,
  description: |||
    A TensorFlow training job: one kubeflow.org/v1 TFJob for the tf-job-operator component to run.
    Replica types Chief (or Master, with chiefType), PS, Worker and Evaluator, each with its count;
    a type with 0 replicas is left out, and a job needs a Chief or a Worker, since they decide its
    success. Every replica runs one container named `tensorflow` (image, command, args, env) with
    port `tfjob-port` 2222, the resource requests and limits, and on the Chief and Workers gpus
    `nvidia.com/gpu` limits (gpuImage when set). restartPolicy applies to every type; runPolicy
    takes cleanPodPolicy, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished and
    suspend. Pods run as a non-root user (runAsUser) without privilege escalation or capabilities;
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
    Not exposed: successPolicy, enableDynamicWorker, schedulingPolicy and volumes; a hand-written
    component can render them.
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'string', default: 'kubeflow/tf-dist-mnist-test:1.0', description: 'Image of every replica.' },
    gpuImage: { type: 'string', default: null, description: 'Image of the Chief and Workers when gpus > 0; null uses image.' },
    command: { type: 'array', default: [], description: "Container command (list of strings); empty keeps the image's entrypoint." },
    args: { type: 'array', default: [], description: 'Container args (list of strings), e.g. ["--train-steps=1000"].' },
    env: { type: 'object', default: {}, description: 'Environment variables of every replica, name to value.' },
    chiefType: { type: 'string', default: 'Chief', description: 'Replica type of the chief: Chief, or Master for code written for older operators.' },
    chiefReplicas: { type: 'integer', default: 0, description: 'Chief (or Master) replicas: 0 or 1.' },
    psReplicas: { type: 'integer', default: 0, description: 'Parameter server replicas.' },
    workerReplicas: { type: 'integer', default: 1, description: 'Worker replicas.' },
    evaluatorReplicas: { type: 'integer', default: 0, description: 'Evaluator replicas.' },
    gpus: { type: 'integer', default: 0, description: 'nvidia.com/gpu limit of each Chief and Worker pod.' },
    restartPolicy: { type: 'string', default: 'Never', description: 'Restart policy of every replica: Always, OnFailure, Never or ExitCode.' },
    cleanPodPolicy: { type: 'string', default: 'Running', description: 'Pods deleted when the job finishes: All, Running (e.g. parameter servers) or None.' },
    backoffLimit: { type: 'integer', default: null, description: 'Restarts before the job fails; null is the operator default.' },
    activeDeadlineSeconds: { type: 'integer', default: null, description: 'Seconds the job may run before it fails; null is no deadline.' },
    ttlSecondsAfterFinished: { type: 'integer', default: null, description: 'Seconds after finishing until the operator deletes the job; null keeps it.' },
    suspend: { type: 'boolean', default: false, description: 'Suspend the job: its pods are deleted until it is resumed.' },
    runAsUser: { type: 'integer', default: 1000, description: 'Non-root user id the containers run as.' },
    serviceAccount: { type: 'string', default: null, description: "Service account of the pods; null uses the namespace's default, without a token." },
    imagePullSecrets: { type: 'array', default: [], description: 'Names of Secrets used to pull the images.' },
  } + u.resourceParams('500m', '1Gi'),

  render(params, env):: [$.job(component, part, params, params.name)],

  // The replica types with their counts, left out when 0, after checking the counts.
  replicaCounts(prototype, params):: (
    local count(param) = notNegative(prototype, params, param);
    local chiefType = u.oneOf(prototype, params, 'chiefType', ['Chief', 'Master']);
    local chief =
      if params.chiefReplicas > 1 then u.fail(prototype, 'chiefReplicas', 'must be 0 or 1, got %d; a job has one %s at most' % [params.chiefReplicas, chiefType])
      else count('chiefReplicas');
    local counts = {
      [chiefType]: chief,
      PS: count('psReplicas'),
      Worker: count('workerReplicas'),
      Evaluator: count('evaluatorReplicas'),
    };
    if counts[chiefType] + counts.Worker == 0 then
      u.fail(prototype, 'workerReplicas', 'the job has neither a %s nor a Worker, so nothing could make it succeed; set workerReplicas or chiefReplicas to at least 1' % chiefType)
    else { [t]: counts[t] for t in std.objectFields(counts) if counts[t] > 0 }
  ),

  // The longest `-<type>-<index>` the operator appends to the job's name for a pod.
  longestPodSuffix(counts):: std.foldl(
    function(longest, suffix) if std.length(suffix) > std.length(longest) then suffix else longest,
    ['-%s-%d' % [std.asciiLower(t), counts[t] - 1] for t in std.objectFields(counts)],
    '',
  ),

  // One TFJob named `name` for the component `params.name`, made by `prototype` (named in errors);
  // `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[]):: (
    local fail(param, message) = u.fail(prototype, param, message);
    local counts = $.replicaCounts(prototype, params);
    local longest = name + $.longestPodSuffix(counts);
    local jobName =
      if !isDns1035(name) then
        fail('name', 'the TFJob name %s is not a DNS-1035 label: lowercase letters, digits and "-", starting with a letter; rename the component' % std.manifestJsonMinified(name))
      else if std.length(longest) > maxServiceName then
        fail('name', 'the TFJob name %s is too long: its pod and service %s would be %d characters, more than %d; rename the component' % [std.manifestJsonMinified(name), longest, std.length(longest), maxServiceName])
      else name;
    local restartPolicy = u.oneOf(prototype, params, 'restartPolicy', ['Always', 'OnFailure', 'Never', 'ExitCode']);
    local cleanPodPolicy = u.oneOf(prototype, params, 'cleanPodPolicy', ['All', 'Running', 'None']);
    local gpus = notNegative(prototype, params, 'gpus');
    local uid = if params.runAsUser < 1 then fail('runAsUser', 'must be a non-root user id, 1 or more, got %d' % params.runAsUser) else params.runAsUser;
    local envVars = [
      local value = params.env[key];
      if std.isObject(value) || std.isArray(value) || value == null then
        fail('env', 'the value of %s must be a string, number or boolean, got %s' % [key, std.manifestJsonMinified(value)])
      else { name: key, value: std.toString(value) }
      for key in std.objectFields(params.env)
    ];
    local command = stringList(prototype, params, 'command');
    local args = stringList(prototype, params, 'args') + extraArgs;
    local pullSecrets = stringList(prototype, params, 'imagePullSecrets');
    local podLabels = u.selector(params.name, part) + labels;

    local template(type) =
      local withGpus = gpus > 0 && std.member(['Chief', 'Master', 'Worker'], type);
      {
        metadata: {
          labels: podLabels,
          [if annotations != {} then 'annotations']: annotations,
        },
        spec: {
          securityContext: u.podSecurity(uid),
          [if params.serviceAccount != null then 'serviceAccountName']: params.serviceAccount,
          automountServiceAccountToken: params.serviceAccount != null,
          [if pullSecrets != [] then 'imagePullSecrets']: [{ name: s } for s in pullSecrets],
          containers: [{
            name: 'tensorflow',
            image: if withGpus && params.gpuImage != null then params.gpuImage else params.image,
            [if command != [] then 'command']: command,
            [if args != [] then 'args']: args,
            [if envVars != [] then 'env']: envVars,
            ports: [{ name: 'tfjob-port', containerPort: tfPort, protocol: 'TCP' }],
            resources: u.resources(params, if withGpus then { 'nvidia.com/gpu': gpus } else {}),
            securityContext: u.containerSecurity(uid) { readOnlyRootFilesystem: false },
          }],
        },
      };

    {
      apiVersion: 'kubeflow.org/v1',
      kind: 'TFJob',
      metadata: u.metadata(jobName, part, labels, params.name) + (if annotations != {} then { annotations: annotations } else {}),
      spec: {
        runPolicy: std.prune({
          cleanPodPolicy: cleanPodPolicy,
          backoffLimit: notNegative(prototype, params, 'backoffLimit'),
          activeDeadlineSeconds: notNegative(prototype, params, 'activeDeadlineSeconds'),
          ttlSecondsAfterFinished: notNegative(prototype, params, 'ttlSecondsAfterFinished'),
        }) + { suspend: params.suspend },
        tfReplicaSpecs: {
          [type]: { replicas: counts[type], restartPolicy: restartPolicy, template: template(type) }
          for type in std.objectFields(counts)
        },
      },
    }
  ),
}
