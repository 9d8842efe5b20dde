// Helpers shared by the prototypes: labels, resources, security contexts, checks on
// param values that a type alone cannot express, and the generated params line of each
// description. Pure functions of their arguments; no prototype state lives here.
{
  // Labels that select one instance's pods. Kept small and stable: a Deployment's selector is
  // immutable, so nothing that a param can change goes in here.
  selector(name, part):: {
    'app.kubernetes.io/name': part,
    'app.kubernetes.io/instance': name,
  },

  // Metadata of an object named `name` that belongs to the component instance `instance`: the
  // instance's selector labels plus any extra ones.
  metadata(name, part, extra={}, instance=name):: {
    name: name,
    labels: $.selector(instance, part) + extra,
  },

  // Cluster-scoped objects (ClusterRole, ClusterRoleBinding) of two environments of the same
  // app can share one cluster: their names carry the namespace so they never collide.
  clusterName(env, name):: env.namespace + '-' + name,

  // Requests always; limits only when the params set them (prod sets them on every container).
  resources(params, extraLimits={})::
    local limits = std.prune({ cpu: params.cpuLimit, memory: params.memoryLimit }) + extraLimits;
    {
      requests: { cpu: params.cpuRequest, memory: params.memoryRequest },
      [if std.length(limits) > 0 then 'limits']: limits,
    },

  // The container security context every container gets: no privilege escalation, no Linux
  // capabilities, read-only root filesystem (writable paths are explicit emptyDir mounts).
  containerSecurity(uid):: {
    runAsNonRoot: true,
    runAsUser: uid,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
  },

  podSecurity(uid, fsGroup=null):: std.prune({
    runAsNonRoot: true,
    runAsUser: uid,
    fsGroup: fsGroup,
    seccompProfile: { type: 'RuntimeDefault' },
  }),

  // An error that names the component and the param, for values of the right type that are
  // still wrong (an unknown enum value, a malformed traffic rule).
  fail(component, param, message):: error 'component %s: param %s: %s' % [component, param, message],

  // Whether every character of `text` is one of `chars` (a string of them).
  onlyChars(chars, text):: std.all([std.member(chars, c) for c in std.stringChars(text)]),

  // Whether any character of `text` is one of `chars` (a string of them).
  anyChar(chars, text):: std.any([std.member(chars, c) for c in std.stringChars(text)]),

  // `names` of param, each a namespace's name (an RFC 1123 label), or an error naming it.
  namespaceNames(component, param, names)::
    local label(n) = std.isString(n) && std.length(n) >= 1 && std.length(n) <= 63
                     && $.onlyChars('abcdefghijklmnopqrstuvwxyz0123456789-', n)
                     && n[0] != '-' && n[std.length(n) - 1] != '-';
    if !std.isArray(names) then $.fail(component, param, 'must be a list of namespaces, got %s' % std.manifestJsonMinified(names))
    else [
      if label(n) then n
      else $.fail(component, param, '%s is not a namespace name (1-63 lower-case letters, digits and hyphens)' % std.manifestJsonMinified(n))
      for n in names
    ],

  // A NetworkPolicy peer: the pods of the namespace named `ns`, by the label the API server
  // sets on every namespace.
  namespacePeer(ns):: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } },

  oneOf(component, params, param, allowed)::
    if std.member(allowed, params[param]) then params[param]
    else $.fail(component, param, '%s is not one of %s' % [
      std.manifestJsonMinified(params[param]),
      std.join(', ', [std.manifestJsonMinified(a) for a in allowed]),
    ]),

  // A PodDisruptionBudget over `selector` (the instance's pods unless given): `minAvailable` when
  // set, else `maxUnavailable` where the component has that param; none when both are null.
  // Either way it leaves room for one voluntary disruption, or node drains would block forever:
  // minAvailable stays below replicas, maxUnavailable at 1 or more. With maxUnavailable 1,
  // Strimzi's default budget (KServe's proposed default, minAvailable = minReplicas, kserve#4574,
  // would let nothing be evicted), `kubectl drain` evicts one pod at a time and the next only
  // once the replacement is Ready; of one replica it still evicts the only pod, a short outage
  // no budget can avoid, rather than a drain that never ends.
  // A pod that is not Ready may always be evicted (unhealthyPodEvictionPolicy, as the Kubernetes
  // documentation advises): a crash-looping pod serves nothing, and must not hold a drain up.
  pdb(component, params, part, replicas, name=params.name, selector=$.selector(params.name, part), labels={})::
    local minAvailable = std.get(params, 'minAvailable', null);
    local maxUnavailable = std.get(params, 'maxUnavailable', null);
    local budget =
      if minAvailable != null then
        if minAvailable >= replicas then
          $.fail(component, 'minAvailable', '%d leaves no pod of %d replicas evictable, so node drains would block; set it below replicas' % [minAvailable, replicas])
        else { minAvailable: minAvailable }
      else if maxUnavailable == null then null
      else if maxUnavailable < 1 then
        $.fail(component, 'maxUnavailable', '%d leaves no pod evictable, so node drains would block; set 1 or more, or null for no budget' % maxUnavailable)
      else { maxUnavailable: maxUnavailable };
    if budget == null then []
    else [{
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: $.metadata(name, part, labels, params.name),
      spec: budget + {
        selector: { matchLabels: selector },
        unhealthyPodEvictionPolicy: 'AlwaysAllow',
      },
    }],

  // Replicas spread over the nodes, one more on a node than on another at most, counting only
  // the pods of `selector` of the same ReplicaSet (pod-template-hash: a rollout's new pods
  // spread among themselves, not around the old ones about to go). ScheduleAnyway makes it a
  // preference the scheduler weighs, not a filter: a node the pods cannot use still counts as
  // a domain (one without the GPUs or the room, or cordoned by a drain while the evicted
  // replica is replaced), and DoNotSchedule would leave a replica Pending on such a cluster,
  // or a drain's replacement Pending until the node comes back. Spreading when it can, and
  // scheduling anyway when it cannot, also keeps a one-node cluster as it was.
  spreadOverNodes(selector):: [{
    maxSkew: 1,
    topologyKey: 'kubernetes.io/hostname',
    whenUnsatisfiable: 'ScheduleAnyway',
    labelSelector: { matchLabels: selector },
    matchLabelKeys: ['pod-template-hash'],
  }],

  // The last paragraph of every description: the params, so `prototype describe` and the
  // description never disagree.
  paramsLine(params):: 'Params: ' + std.join(', ', std.objectFields(params)) + '.',

  // The params every component shares for the main container's resources.
  resourceParams(cpu, memory, memoryLimit=null):: {
    cpuRequest: { type: 'quantity', default: cpu, description: 'CPU request of the main container.' },
    memoryRequest: { type: 'quantity', default: memory, description: 'Memory request of the main container.' },
    cpuLimit: { type: 'quantity', default: null, description: 'CPU limit of every container; null sets none.' },
    memoryLimit: { type: 'quantity', default: memoryLimit, description: 'Memory limit of every container; null sets none.' },
  },
}
