// What every training-job prototype shares (tf-job, pytorch-job, jax-job, xgboost-job, mpi-job,
// paddle-job, mxnet-job): the params a user of any framework reaches for, the checks of their
// values, and the kubeflow.org/v1 job itself, built from a framework's description. A prototype
// adds its replica counts and its framework's own spec fields, and exposes, for sweeps, the same
// three functions: `replicaCounts(prototype, params)`, `longestPodSuffix(counts)` and
// `job(prototype, part, params, name, labels, annotations, extraArgs)`.
local u = import 'mlkube/util.libsonnet';

// Pods are named `<job>-<type>-<index>`, and each gets a headless Service of the same name,
// which must be a DNS-1035 label.
local maxServiceName = 63;
local lowercase = 'abcdefghijklmnopqrstuvwxyz';
local digits = '0123456789';

local isDns1035(name) =
  local chars = std.stringChars(name);
  std.length(chars) > 0
  && std.member(lowercase, chars[0])
  && u.onlyChars(lowercase + digits + '-', name)
  && chars[std.length(chars) - 1] != '-';

local stringList(prototype, params, param) =
  local values = params[param];
  local bad = [v for v in values if !std.isString(v)];
  if std.length(bad) > 0 then
    u.fail(prototype, param, 'must be a list of strings, but holds %s; quote numbers, e.g. ["--steps", "100"]' % std.manifestJsonMinified(bad[0]))
  else values;

local schedulingFields = ['minAvailable', 'queue', 'minResources', 'priorityClass', 'scheduleTimeoutSeconds'];

{
  // The params every job prototype declares. `framework.gpuWords` names the replica types that
  // get GPUs; `defaults` gives the image, command, args and restartPolicy of the framework's
  // example job.
  params(framework, defaults):: {
    image: { type: 'image', default: defaults.image, description: 'Image of every replica.' },
    gpuImage: { type: 'image', default: null, description: 'Image of the %s replicas when gpus > 0; null uses image.' % framework.gpuWords },
    command: { type: 'array', items: { type: 'string' }, default: defaults.command, description: "Container command (list of strings); empty keeps the image's entrypoint." },
    args: { type: 'array', items: { type: 'string' }, default: defaults.args, description: 'Container args (list of strings), e.g. ["--epochs=10"].' },
    env: { type: 'object', default: {}, description: 'Environment variables of every replica, name to value.' },
    gpus: { type: 'integer', minimum: 0, default: 0, description: 'nvidia.com/gpu limit of each %s pod.' % framework.gpuWords },
    restartPolicy: { type: 'string', enum: ['Always', 'OnFailure', 'Never', 'ExitCode'], default: defaults.restartPolicy, description: 'Restart policy of every replica: Always, OnFailure, Never or ExitCode.' },
    cleanPodPolicy: { type: 'string', enum: ['All', 'Running', 'None'], default: 'Running', description: 'Pods deleted when the job finishes: All, Running (e.g. parameter servers) or None.' },
    backoffLimit: { type: 'integer', minimum: 0, default: null, description: 'Restarts before the job fails; null is the operator default.' },
    activeDeadlineSeconds: { type: 'integer', minimum: 0, default: null, description: 'Seconds the job may run before it fails; null is no deadline.' },
    ttlSecondsAfterFinished: { type: 'integer', minimum: 0, default: null, description: 'Seconds after finishing until the operator deletes the job; null keeps it.' },
    suspend: { type: 'boolean', default: false, description: 'Suspend the job: its pods are deleted until it is resumed.' },
    schedulingPolicy: { type: 'object', default: null, description: 'runPolicy.schedulingPolicy for a gang scheduler (%s); null sets none.' % std.join(', ', schedulingFields) },
    runAsUser: { type: 'integer', minimum: 1, default: 1000, description: 'Non-root user id the containers run as.' },
    serviceAccount: { type: 'string', default: null, description: "Service account of the pods; null uses the namespace's default, without a token." },
    imagePullSecrets: { type: 'array', items: { type: 'string' }, default: [], description: 'Names of Secrets used to pull the images.' },
    objectStore: { type: 'string', default: null, description: "Object-store component whose endpoint (its <name>-endpoint ConfigMap) and keys every replica gets as AWS_* variables; null for none." },
    objectStoreCredentials: { type: 'string', default: null, description: "Secret with the store's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; null is, with modelPath, <name>-model-keys, keys the store makes for this component alone (write, read and list only below modelPath; the component renders the request), and without it <objectStore>-read-credentials, the object-store component's keys that only read and list." },
    modelPath: { type: 'string', default: null, description: "Where the lead replica saves the trained model: bucket/prefix in objectStore, e.g. models/digits/1, as MODEL_URI=s3://models/digits/1/ (a sweep's jobs add their name); null saves none." },
    dataVolumeManager: { type: 'string', default: null, description: 'VolumeManager (volume-controller) whose volumes every replica mounts read-only at /data/<volume id>; the pods wait until it has placed the data.' },
  } + u.resourceParams('500m', '1Gi'),

  notNegative(prototype, params, param)::
    local value = params[param];
    if value != null && value < 0 then u.fail(prototype, param, 'must not be negative, got %d' % value) else value,

  // A replica count of 0 or 1: a type the framework allows once per job (a Chief, a Master).
  oneAtMost(prototype, params, param, type)::
    if params[param] > 1 then u.fail(prototype, param, 'must be 0 or 1, got %d; a job has one %s at most' % [params[param], type])
    else $.notNegative(prototype, params, param),

  // params.schedulingPolicy, its fields checked; null when unset.
  schedulingPolicy(prototype, params)::
    local policy = params.schedulingPolicy;
    local unknown = if policy == null then [] else std.setDiff(std.objectFields(policy), std.set(schedulingFields));
    if unknown != [] then
      u.fail(prototype, 'schedulingPolicy', 'has no field %s; its fields are %s' % [unknown[0], std.join(', ', schedulingFields)])
    else policy,

  // The types whose count is not 0, from { <type>: <count> }.
  present(counts):: { [t]: counts[t] for t in std.objectFields(counts) if counts[t] > 0 },

  // The longest `-<type>-<index>` the operator appends to the job's name for a pod.
  longestPodSuffix(counts):: std.foldl(
    function(longest, suffix) if std.length(suffix) > std.length(longest) then suffix else longest,
    ['-%s-%d' % [std.asciiLower(t), counts[t] - 1] for t in std.objectFields(counts)],
    '',
  ),

  // The variables and envFrom sources that reach params.objectStore and say where to save the
  // model, for the job named `name` (a sweep's job when it is not the component's name).
  storeAccess(prototype, params, name)::
    local store = params.objectStore;
    local path = params.modelPath;
    // An S3 bucket's name: 3 to 63 lowercase letters, digits, dots and hyphens.
    local bucket = if path == null then '' else std.split(path, '/')[0];
    local validBucket = std.length(bucket) >= 3 && std.length(bucket) <= 63
                        && u.onlyChars('abcdefghijklmnopqrstuvwxyz0123456789.-', bucket);
    local validPath = path != null && std.length(std.findSubstr('/', path)) > 0
                      && validBucket && !std.endsWith(path, '/');
    if path != null && store == null then
      u.fail(prototype, 'modelPath', 'needs objectStore, the object-store component to save the model in')
    else if path != null && std.length(std.findSubstr('://', path)) > 0 then
      local rest = std.split(path, '://');
      u.fail(prototype, 'modelPath', '%s is a URL; give bucket/prefix in objectStore without the scheme, e.g. %s' % [std.manifestJsonMinified(path), std.manifestJsonMinified(rest[std.length(rest) - 1])])
    else if path != null && !validPath then
      u.fail(prototype, 'modelPath', '%s is not bucket/prefix, e.g. models/digits/1' % std.manifestJsonMinified(path))
    else if store == null && params.objectStoreCredentials != null then
      u.fail(prototype, 'objectStoreCredentials', 'is set without objectStore; name the object-store component too')
    else {
      envFrom: if store == null then [] else [
        { configMapRef: { name: store + '-endpoint' } },
        { secretRef: { name: if params.objectStoreCredentials != null then params.objectStoreCredentials
                                else if path != null then $.modelKeysName(params)
                                else store + '-read-credentials' } },
      ],
      env: if path == null then [] else [
        { name: 'MODEL_URI', value: 's3://%s/' % $.jobModelPath(path, params, name) },
      ],
      // params.modelPath, checked.
      modelPath: path,
    },

  // Where the job named `name` saves its model, below `prefix` (params.modelPath): there for
  // the component's own job, in a path of its own for each of a sweep's jobs.
  jobModelPath(prefix, params, name):: if name == params.name then prefix else prefix + '/' + name,

  // The request for keys of the component's own, and their Secret, when its jobs save a model
  // with no keys of their own: the store's model-keys container makes keys that write only below
  // modelPath (object-store/model_keys.py).
  modelKeysName(params):: params.name + '-model-keys',

  // The component's `jobs` and, when they save a model with no keys of their own, that request.
  withModelKeys(prototype, part, params, jobs):: jobs + $.modelKeys(prototype, part, params, jobs),

  // That request, a ConfigMap labelled with the store's name; none when the jobs save no model or
  // bring their own keys (or have no objectStore param: a Framework's). `part` labels it as the
  // component's jobs are labelled. It names the `jobs` and the path each saves in: once a job
  // has finished, the keys no longer write in its path (a model version is written once).
  modelKeys(prototype, part, params, jobs)::
    if std.get(params, 'objectStore') == null || params.modelPath == null || params.objectStoreCredentials != null then []
    else [{
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: u.metadata($.modelKeysName(params), part, { 'mlkube.io/object-store': params.objectStore }, params.name) {
        // `apply` writes the jobs only once this Secret exists (src/deploy/health/answer.rs).
        annotations: { 'mlkube.io/answered-by-secret': $.modelKeysName(params) },
      },
      local prefix = $.storeAccess(prototype, params, params.name).modelPath,
      data: {
        prefix: prefix,
        jobs: std.manifestJsonMinified([
          { apiVersion: j.apiVersion, kind: j.kind, name: j.metadata.name, path: $.jobModelPath(prefix, params, j.metadata.name) }
          for j in jobs
        ]),
      },
    }],

  // params[param], checked to be a list of strings.
  strings(prototype, params, param):: stringList(prototype, params, param),

  // One job of `framework` named `name` for the component `params.name`, made by `prototype`
  // (named in errors), with `counts` replicas per type (types with 0 left out by the caller);
  // `labels` and `annotations` go on the job and its pods, `extraArgs` after params.args, and
  // `spec` holds the framework's own fields (nprocPerNode, jobMode, ...). `commands` gives a
  // type its own { command, args } in place of params.command, params.args and extraArgs (an
  // MPIJob's Launcher and Workers run different programs).
  //
  // `framework` is { kind, replicaSpecs (the spec's map field), container, portName, port (null
  // for none), gpuTypes (the replica types that get params.gpus and gpuImage), and optionally
  // tokenTypes (the replica types whose pods mount their service account's API token whatever
  // params.serviceAccount is) and longestPodSuffix(counts) (when its pods are not all named
  // `<job>-<type>-<index>`) }.
  job(framework, prototype, part, params, name, counts, labels={}, annotations={}, extraArgs=[], spec={}, commands={}):: (
    local fail(param, message) = u.fail(prototype, param, message);
    local suffix = if std.objectHas(framework, 'longestPodSuffix') then framework.longestPodSuffix(counts) else $.longestPodSuffix(counts);
    local longest = name + suffix;
    local jobName =
      if !isDns1035(name) then
        fail('name', 'the %s name %s is not a DNS-1035 label: lowercase letters, digits and "-", starting with a letter; rename the component' % [framework.kind, std.manifestJsonMinified(name)])
      else if std.length(longest) > maxServiceName then
        fail('name', 'the %s name %s is too long: its pod and service %s would be %d characters, more than %d; rename the component' % [framework.kind, std.manifestJsonMinified(name), longest, std.length(longest), maxServiceName])
      else name;
    local restartPolicy = u.oneOf(prototype, params, 'restartPolicy', ['Always', 'OnFailure', 'Never', 'ExitCode']);
    local cleanPodPolicy = u.oneOf(prototype, params, 'cleanPodPolicy', ['All', 'Running', 'None']);
    local gpus = $.notNegative(prototype, params, 'gpus');
    local uid = if params.runAsUser < 1 then fail('runAsUser', 'must be a non-root user id, 1 or more, got %d' % params.runAsUser) else params.runAsUser;
    local envVars = [
      local value = params.env[key];
      if std.isObject(value) || std.isArray(value) || value == null then
        fail('env', 'the value of %s must be a string, number or boolean, got %s' % [key, std.manifestJsonMinified(value)])
      else { name: key, value: std.toString(value) }
      for key in std.objectFields(params.env)
    ];
    local sharedCommand = {
      command: stringList(prototype, params, 'command'),
      args: stringList(prototype, params, 'args') + extraArgs,
    };
    local pullSecrets = stringList(prototype, params, 'imagePullSecrets');
    local store = $.storeAccess(prototype, params, name);
    local allEnv = envVars + store.env;
    local jobAnnotations = annotations + (
      if params.dataVolumeManager == null then {} else { 'data.mlkube.io/volume-manager': params.dataVolumeManager }
    );
    local podLabels = u.selector(params.name, part) + labels;

    local template(type) =
      local withGpus = gpus > 0 && std.member(framework.gpuTypes, type);
      local run = if std.objectHas(commands, type) then commands[type] else sharedCommand;
      local withToken = params.serviceAccount != null || std.member(std.get(framework, 'tokenTypes', []), type);
      {
        metadata: {
          labels: podLabels,
          [if annotations != {} then 'annotations']: annotations,
        },
        spec: {
          securityContext: u.podSecurity(uid),
          [if params.serviceAccount != null then 'serviceAccountName']: params.serviceAccount,
          automountServiceAccountToken: withToken,
          [if pullSecrets != [] then 'imagePullSecrets']: [{ name: s } for s in pullSecrets],
          containers: [{
            name: framework.container,
            image: if withGpus && params.gpuImage != null then params.gpuImage else params.image,
            [if run.command != [] then 'command']: run.command,
            [if run.args != [] then 'args']: run.args,
            [if allEnv != [] then 'env']: allEnv,
            [if store.envFrom != [] then 'envFrom']: store.envFrom,
            [if framework.port != null then 'ports']: [{ name: framework.portName, containerPort: framework.port, protocol: 'TCP' }],
            resources: u.resources(params, if withGpus then { 'nvidia.com/gpu': gpus } else {}),
            securityContext: u.containerSecurity(uid) { readOnlyRootFilesystem: false },
          }],
        },
      };

    {
      apiVersion: 'kubeflow.org/v1',
      kind: framework.kind,
      metadata: u.metadata(jobName, part, labels, params.name) + (if jobAnnotations != {} then { annotations: jobAnnotations } else {}),
      spec: spec {
        runPolicy: std.prune({
          cleanPodPolicy: cleanPodPolicy,
          backoffLimit: $.notNegative(prototype, params, 'backoffLimit'),
          activeDeadlineSeconds: $.notNegative(prototype, params, 'activeDeadlineSeconds'),
          ttlSecondsAfterFinished: $.notNegative(prototype, params, 'ttlSecondsAfterFinished'),
          schedulingPolicy: $.schedulingPolicy(prototype, params),
        }) + { suspend: params.suspend },
        [framework.replicaSpecs]: {
          [type]: { replicas: counts[type], restartPolicy: restartPolicy, template: template(type) }
          for type in std.objectFields(counts)
        },
      },
    }
  ),
}
