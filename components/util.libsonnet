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

  oneOf(component, params, param, allowed)::
    if std.member(allowed, params[param]) then params[param]
    else $.fail(component, param, '%s is not one of %s' % [
      std.manifestJson(params[param]),
      std.join(', ', [std.manifestJson(a) for a in allowed]),
    ]),

  // A PodDisruptionBudget when `minAvailable` is set. It must leave room for one voluntary
  // disruption, or node drains block forever.
  pdb(component, params, part, replicas)::
    if params.minAvailable == null then []
    else if params.minAvailable >= replicas then
      $.fail(component, 'minAvailable', '%d leaves no pod of %d replicas evictable, so node drains would block; set it below replicas' % [params.minAvailable, replicas])
    else [{
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: $.metadata(params.name, part),
      spec: {
        minAvailable: params.minAvailable,
        selector: { matchLabels: $.selector(params.name, part) },
      },
    }],

  // The last paragraph of every description: the params, so `prototype describe` and the
  // description never disagree.
  paramsLine(params):: 'Params: ' + std.join(', ', std.objectFields(params)) + '.',

  // The params every component shares for the main container's resources.
  resourceParams(cpu, memory):: {
    cpuRequest: { type: 'quantity', default: cpu, description: 'CPU request of the main container.' },
    memoryRequest: { type: 'quantity', default: memory, description: 'Memory request of the main container.' },
    cpuLimit: { type: 'quantity', default: null, description: 'CPU limit of every container; null sets none.' },
    memoryLimit: { type: 'quantity', default: null, description: 'Memory limit of every container; null sets none.' },
  },
}
