// A FrameworkController job: one frameworkcontroller.microsoft.com/v1 Framework, run by the
// training-operator component (its `frameworkcontroller` framework, src/operator/fc/). TaskRoles of
// indexed Tasks, each Task one pod `{framework}-{taskrole}-{index}`; the top-level params are what
// every TaskRole has unless its entry in taskRoles says otherwise. `job` renders it, as the
// training-job prototypes do, so that framework-sweep renders one Framework per combination.
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'framework';
local part = 'framework';
// The CRD's pattern of a Framework's and a TaskRole's name: FrameworkController joins them with
// `-` into pod names, so neither may hold one.
local maxName = 63;
local nameChars = 'abcdefghijklmnopqrstuvwxyz0123456789';
// The CRD's bounds on Tasks: its status holds every Task, and must fit in one object.
local maxTaskNumber = 800;
local maxTaskRoles = 100;
local executionTypes = ['Create', 'Start', 'Stop'];
local retryFields = ['fancyRetryPolicy', 'maxRetryCount'];
local resourceFields = ['cpuRequest', 'memoryRequest', 'cpuLimit', 'memoryLimit'];
// What a TaskRole entry may set; what it leaves out comes from the param of the same name.
local roleFields = std.set([
  'name',
  'taskNumber',
  'image',
  'command',
  'args',
  'env',
  'gpus',
  'minFailedTaskCount',
  'minSucceededTaskCount',
  'taskRetryPolicy',
  'podGracefulDeletionTimeoutSec',
] + resourceFields);

local isName(name) =
  std.isString(name) && std.length(name) >= 1 && std.length(name) <= maxName
  && u.onlyChars(nameChars, name);

local isInteger(v) = std.isNumber(v) && v == std.floor(v);

// Checks of one prototype's values; `prototype` names it in errors.
local checks(prototype) = {
  local fail(param, message) = u.fail(prototype, param, message),

  frameworkName(name)::
    if isName(name) then name
    else fail('name', 'the Framework name %s must be 1 to %d lowercase letters and digits, without "-" (FrameworkController joins it with the TaskRole and index into pod names); rename the component' % [std.manifestJsonMinified(name), maxName]),

  // A RetryPolicy object, `what` naming it in errors.
  retryPolicy(param, what, policy)::
    local unknown = if std.isObject(policy) then std.setDiff(std.objectFields(policy), retryFields) else [];
    local spec = { fancyRetryPolicy: false, maxRetryCount: 0 } + (if std.isObject(policy) then policy else {});
    if !std.isObject(policy) then
      fail(param, '%s must be {"fancyRetryPolicy": true or false, "maxRetryCount": N}, got %s' % [what, std.manifestJsonMinified(policy)])
    else if unknown != [] then
      fail(param, '%s has no field %s; its fields are %s' % [what, unknown[0], std.join(', ', retryFields)])
    else if !std.isBoolean(spec.fancyRetryPolicy) then
      fail(param, '%s: fancyRetryPolicy must be true or false, got %s' % [what, std.manifestJsonMinified(spec.fancyRetryPolicy)])
    else if !isInteger(spec.maxRetryCount) || spec.maxRetryCount < -2 then
      fail(param, '%s: maxRetryCount must be a whole number, -2 (always retry), -1 (retry every failure) or more, got %s' % [what, std.manifestJsonMinified(spec.maxRetryCount)])
    else spec,

  // A completion count: -1 (or 0) disables the condition.
  count(param, what, v)::
    if !isInteger(v) || v < -1 then
      fail(param, '%s must be a whole number, -1 (never) or more, got %s' % [what, std.manifestJsonMinified(v)])
    else v,

  taskNumber(param, what, v)::
    if !isInteger(v) || v < 0 || v > maxTaskNumber then
      fail(param, '%s must be a whole number from 0 to %d, got %s' % [what, maxTaskNumber, std.manifestJsonMinified(v)])
    else v,

  gracePeriod(param, what, v)::
    if v == null || (isInteger(v) && v >= 0) then v
    else fail(param, '%s must be null (never force-delete a pod) or seconds, 0 or more, got %s' % [what, std.manifestJsonMinified(v)]),

  strings(param, what, values)::
    if !std.isArray(values) || std.length([v for v in values if !std.isString(v)]) > 0 then
      fail(param, '%s must be a list of strings, got %s; quote numbers, e.g. ["--steps", "100"]' % [what, std.manifestJsonMinified(values)])
    else values,

  env(param, what, env)::
    if !std.isObject(env) then fail(param, '%s must be an object of names and values, got %s' % [what, std.manifestJsonMinified(env)])
    else [
      local value = env[key];
      if std.isObject(value) || std.isArray(value) || value == null then
        fail(param, 'the value of %s in %s must be a string, number or boolean, got %s' % [key, what, std.manifestJsonMinified(value)])
      else { name: key, value: std.toString(value) }
      for key in std.objectFields(env)
    ],
};

// The TaskRoles of params.taskRoles, each with every field, in the order given, after checking
// them: known fields, names, unique names, counts.
local taskRoles(prototype, params) =
  local check = checks(prototype);
  local fail(message) = u.fail(prototype, 'taskRoles', message);
  local roles = params.taskRoles;
  local names = [std.get(r, 'name') for r in roles if std.isObject(r)];
  local defaults = {
    image: params.image,
    command: params.command,
    args: params.args,
    env: {},
    gpus: params.gpus,
    minFailedTaskCount: params.minFailedTaskCount,
    minSucceededTaskCount: params.minSucceededTaskCount,
    taskRetryPolicy: params.taskRetryPolicy,
    podGracefulDeletionTimeoutSec: params.podGracefulDeletionTimeoutSec,
  } + { [f]: params[f] for f in resourceFields };
  local one(i, role) =
    local unknown = std.setDiff(std.objectFields(role), roleFields);
    local what = 'taskRoles[%d]' % i;
    local spec = defaults + role;
    if unknown != [] then
      fail('%s has no field %s; a TaskRole takes %s' % [what, unknown[0], std.join(', ', roleFields)])
    else if !isName(std.get(role, 'name')) then
      fail('%s: name %s must be 1 to %d lowercase letters and digits, without "-" (FrameworkController joins it into pod names)' % [what, std.manifestJsonMinified(std.get(role, 'name')), maxName])
    else if !std.objectHas(role, 'taskNumber') then
      fail('TaskRole %s has no taskNumber; give it its number of Tasks, 0 to %d' % [role.name, maxTaskNumber])
    else spec {
      taskNumber: check.taskNumber('taskRoles', 'the taskNumber of TaskRole %s' % role.name, role.taskNumber),
      minFailedTaskCount: check.count('taskRoles', 'the minFailedTaskCount of TaskRole %s' % role.name, spec.minFailedTaskCount),
      minSucceededTaskCount: check.count('taskRoles', 'the minSucceededTaskCount of TaskRole %s' % role.name, spec.minSucceededTaskCount),
      taskRetryPolicy: check.retryPolicy('taskRoles', 'the taskRetryPolicy of TaskRole %s' % role.name, spec.taskRetryPolicy),
      podGracefulDeletionTimeoutSec: check.gracePeriod('taskRoles', 'the podGracefulDeletionTimeoutSec of TaskRole %s' % role.name, spec.podGracefulDeletionTimeoutSec),
      command: check.strings('taskRoles', 'the command of TaskRole %s' % role.name, spec.command),
      args: check.strings('taskRoles', 'the args of TaskRole %s' % role.name, spec.args),
      env: check.env('taskRoles', 'the env of TaskRole %s' % role.name, params.env + spec.env),
      gpus: t.notNegative(prototype, spec, 'gpus'),
    };
  if !std.isArray(roles) || roles == [] then
    fail('must list at least one TaskRole, e.g. [{"name": "worker", "taskNumber": 2}]')
  else if std.length([r for r in roles if !std.isObject(r)]) > 0 then
    fail('each TaskRole must be an object such as {"name": "worker", "taskNumber": 2}, got %s' % std.manifestJsonMinified([r for r in roles if !std.isObject(r)][0]))
  else if std.length(roles) > maxTaskRoles then
    fail('lists %d TaskRoles, more than the %d a Framework may have' % [std.length(roles), maxTaskRoles])
  else if std.length(std.set(names)) != std.length(names) then
    fail('two TaskRoles are named %s; a TaskRole name is unique in its Framework' % std.manifestJsonMinified([n for n in names if std.count(names, n) > 1][0]))
  else
    local built = [one(i, roles[i]) for i in std.range(0, std.length(roles) - 1)];
    local total = std.foldl(function(sum, r) sum + r.taskNumber, built, 0);
    if total > maxTaskNumber then
      fail('the taskNumbers add up to %d Tasks, more than the %d a Framework may have (its status holds every Task); split the job into Frameworks of at most %d Tasks' % [total, maxTaskNumber, maxTaskNumber])
    else built;

{
  name: component,
  description: |||
    A FrameworkController job: one frameworkcontroller.microsoft.com/v1 Framework for the
    training-operator component to run (its frameworkcontroller framework). taskRoles lists the
    TaskRoles, each {"name": "worker", "taskNumber": 2} with optionally its own image, command,
    args, env (added to env), gpus, resources, minFailedTaskCount and minSucceededTaskCount (its
    FrameworkAttemptCompletionPolicy: -1 never; by default any failed Task fails the Framework,
    and it succeeds when every Task did), taskRetryPolicy ({"fancyRetryPolicy": false,
    "maxRetryCount": 0}) and podGracefulDeletionTimeoutSec; what an entry leaves out comes from
    the param of the same name. Task i of TaskRole r is the pod `<name>-<r>-<i>`; its container is
    named after its TaskRole, and FrameworkController's FC_* environment and {{FC_...}}
    placeholders work in it. fancyRetryPolicy and maxRetryCount are the Framework's RetryPolicy
    (-2 always retry, -1 every failure, N up to N times); executionType is Start, Create (wait
    for a Start) or Stop. The Framework's name and every TaskRole's are lowercase letters and
    digits without "-" (FrameworkController joins them into pod names), so the component's name
    is too. Pods run as a non-root user (runAsUser) without privilege escalation, capabilities or
    a service account token unless serviceAccount is set.
    Kubeflow's ksonnet packages had no FrameworkController prototype; the defaults run one Task
    that prints its place and exits 0. Dropped from FrameworkController's Framework: the pod
    template as a whole (the params build it), and the description field (the component's name
    says what it is).
  ||| + u.paramsLine($.params),
  params: {
    taskRoles: { type: 'array', default: [{ name: 'worker', taskNumber: 1 }], description: 'The TaskRoles, each {"name": "worker", "taskNumber": 2, ...}, with optionally its own image, command, args, env, gpus, resources, completion counts, taskRetryPolicy.' },
    image: { type: 'image', default: 'docker.io/library/busybox:1.36', description: 'Image of every Task, unless its TaskRole sets one.' },
    command: { type: 'array', items: { type: 'string' }, default: ['sh', '-c', 'echo task $FC_TASKROLE_NAME-$FC_TASK_INDEX of $FC_FRAMEWORK_NAME; exit 0'], description: "Container command (list of strings); empty keeps the image's entrypoint." },
    args: { type: 'array', items: { type: 'string' }, default: [], description: 'Container args (list of strings), e.g. ["--epochs=10"].' },
    env: { type: 'object', default: {}, description: 'Environment variables of every Task, name to value; a TaskRole adds its own.' },
    gpus: { type: 'integer', minimum: 0, default: 0, description: 'nvidia.com/gpu limit of each Task, unless its TaskRole sets one.' },
    restartPolicy: { type: 'string', enum: ['Never', 'OnFailure', 'Always'], default: 'Never', description: "Pods' restartPolicy: Never (a failed container fails its Task attempt), OnFailure or Always." },
    executionType: { type: 'string', enum: executionTypes, default: 'Start', description: 'Start runs the Framework, Create waits for a Start, Stop completes it at once.' },
    fancyRetryPolicy: { type: 'boolean', default: false, description: "The Framework's RetryPolicy: retry transient failures uncounted and never permanent ones." },
    maxRetryCount: { type: 'integer', minimum: -2, default: 0, description: "The Framework's RetryPolicy: -2 always retry, -1 retry every failure, N retry up to N times." },
    taskRetryPolicy: { type: 'object', default: { fancyRetryPolicy: false, maxRetryCount: 0 }, description: "Each Task's RetryPolicy, {\"fancyRetryPolicy\": false, \"maxRetryCount\": 0}, unless its TaskRole sets one." },
    minFailedTaskCount: { type: 'integer', minimum: -1, default: 1, description: 'Failed Tasks of a TaskRole that fail the Framework; -1 never.' },
    minSucceededTaskCount: { type: 'integer', minimum: -1, default: -1, description: 'Succeeded Tasks of a TaskRole that make the Framework succeed; -1 waits for every Task.' },
    podGracefulDeletionTimeoutSec: { type: 'integer', minimum: 0, default: null, description: 'Seconds a deleting pod may take before it is force-deleted; null never (one instance per Task).' },
    runAsUser: { type: 'integer', minimum: 1, default: 1000, description: 'Non-root user id the containers run as.' },
    serviceAccount: { type: 'string', default: null, description: "Service account of the pods; null uses the namespace's default, without a token." },
    imagePullSecrets: { type: 'array', items: { type: 'string' }, default: [], description: 'Names of Secrets used to pull the images.' },
  } + u.resourceParams('500m', '1Gi'),

  render(params, env):: [$.job(component, part, params, params.name)],

  // The TaskRoles with their taskNumber, after checking them all.
  replicaCounts(prototype, params):: { [r.name]: r.taskNumber for r in taskRoles(prototype, params) },

  // What FrameworkController appends to the Framework's name for its longest pod name.
  longestPodSuffix(counts):: t.longestPodSuffix({ [r]: counts[r] for r in std.objectFields(counts) if counts[r] > 0 }),

  // A sweep's job is `<component><hash>`: a Framework's name holds no `-`.
  nameSeparator:: '',

  // One Framework named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on it and its pods, `extraArgs` after each
  // TaskRole's args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[]):: (
    local check = checks(prototype);
    local roles = taskRoles(prototype, params);
    local uid = if params.runAsUser < 1 then u.fail(prototype, 'runAsUser', 'must be a non-root user id, 1 or more, got %d' % params.runAsUser) else params.runAsUser;
    local restartPolicy = u.oneOf(prototype, params, 'restartPolicy', ['Never', 'OnFailure', 'Always']);
    local pullSecrets = t.strings(prototype, params, 'imagePullSecrets');
    local podLabels = u.selector(params.name, part) + labels;
    local pod(role) = {
      metadata: {
        labels: podLabels,
        [if annotations != {} then 'annotations']: annotations,
      },
      spec: {
        restartPolicy: restartPolicy,
        securityContext: u.podSecurity(uid),
        [if params.serviceAccount != null then 'serviceAccountName']: params.serviceAccount,
        automountServiceAccountToken: params.serviceAccount != null,
        [if pullSecrets != [] then 'imagePullSecrets']: [{ name: s } for s in pullSecrets],
        containers: [{
          name: role.name,
          image: role.image,
          [if role.command != [] then 'command']: role.command,
          [if role.args + extraArgs != [] then 'args']: role.args + extraArgs,
          [if role.env != [] then 'env']: role.env,
          resources: u.resources(role, if role.gpus > 0 then { 'nvidia.com/gpu': role.gpus } else {}),
          securityContext: u.containerSecurity(uid) { readOnlyRootFilesystem: false },
        }],
      },
    };
    {
      apiVersion: 'frameworkcontroller.microsoft.com/v1',
      kind: 'Framework',
      metadata: u.metadata(check.frameworkName(name), part, labels, params.name) + (if annotations != {} then { annotations: annotations } else {}),
      spec: {
        executionType: u.oneOf(prototype, params, 'executionType', executionTypes),
        retryPolicy: check.retryPolicy('maxRetryCount', 'the RetryPolicy', { fancyRetryPolicy: params.fancyRetryPolicy, maxRetryCount: params.maxRetryCount }),
        taskRoles: [
          {
            name: role.name,
            taskNumber: role.taskNumber,
            frameworkAttemptCompletionPolicy: {
              minFailedTaskCount: role.minFailedTaskCount,
              minSucceededTaskCount: role.minSucceededTaskCount,
            },
            task: {
              retryPolicy: role.taskRetryPolicy,
              [if role.podGracefulDeletionTimeoutSec != null then 'podGracefulDeletionTimeoutSec']: role.podGracefulDeletionTimeoutSec,
              pod: pod(role),
            },
          }
          for role in roles
        ],
      },
    }
  ),
}
