// A user's profile, as Kubeflow's Profile makes one: a namespace of their own, the roles they
// and their workloads need there, a quota, and the admission rule that workloads there run
// only as the ServiceAccounts the profile allows.
local u = import 'mlkube/util.libsonnet';
local admission = import 'mlkube/admission.libsonnet';

local component = 'profile';
local part = 'profile';
// The namespace label that marks a profile's namespace: the admission rule binds to it.
local profileLabel = 'mlkube.io/profile';
// The namespace annotation that lists the ServiceAccounts workloads may run as.
local accountsAnnotation = 'mlkube.io/workload-service-accounts';
local policyName = 'mlkube-workload-service-accounts';
local ownerKinds = ['User', 'Group', 'ServiceAccount'];
local jobs = admission.jobs;
local edit = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
local read = ['get', 'list', 'watch'];

local policy = {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicy',
  // Shared by every profile of every app: no instance label, which would name one of them.
  metadata: { name: policyName, labels: { 'app.kubernetes.io/name': part } },
  spec: {
    failurePolicy: 'Fail',
    matchConstraints: admission.matchConstraints,
    variables: [
      {
        name: 'allowed',
        expression: "has(namespaceObject.metadata.annotations) && '%s' in namespaceObject.metadata.annotations ? namespaceObject.metadata.annotations['%s'].split(',') : ['default']" % [accountsAnnotation, accountsAnnotation],
      },
    ] + admission.accountVariables,
    validations: [{
      expression: 'size(variables.refused) == 0',
      messageExpression: "'serviceAccountName ' + variables.refused[0] + ' is not one that workloads in namespace ' + request.namespace + ' may run as; use one of ' + variables.allowed.join(', ') + ' (its profile lists them in the namespace annotation %s)'" % accountsAnnotation,
      reason: 'Forbidden',
    }],
  },
};

local binding = {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicyBinding',
  metadata: { name: policyName, labels: { 'app.kubernetes.io/name': part } },
  spec: {
    policyName: policyName,
    validationActions: ['Deny'],
    matchResources: {
      matchPolicy: 'Equivalent',
      namespaceSelector: { matchExpressions: [{ key: profileLabel, operator: 'Exists' }] },
      objectSelector: {},
    },
  },
};

{
  name: component,
  description: |||
    A user's profile, as Kubeflow's Profile: a namespace of their own (namespace, default: the
    component's name) where their notebooks and jobs run, apart from the platform's namespace
    and its identities. Renders the Namespace (labelled mlkube.io/profile, Pod Security
    baseline enforced), the ServiceAccount serviceAccount (default-editor, as Kubeflow names it)
    that their notebooks and jobs run as, a Role `<name>-edit` and its RoleBinding for the owner
    (ownerKind User, Group or ServiceAccount) and that ServiceAccount: the training jobs of
    every framework, Frameworks, VolumeManagers, pods (read and delete, their logs), services,
    events and persistentvolumeclaims, never Secrets, Roles or ServiceAccounts; a ResourceQuota
    when a quota param is set; with notebookHub, a RoleBinding that lets that notebook hub
    (userNamespaces) spawn the owner's notebooks here; and the cluster's ValidatingAdmissionPolicy and its binding
    (installPolicy) that refuse, in every profile's namespace, a pod, workload, Kubeflow job or
    Framework whose pods would run as a ServiceAccount not in allowedServiceAccounts (written as
    the namespace annotation mlkube.io/workload-service-accounts; `*-launcher` allows the
    ServiceAccount the operator makes for an MPIJob's launcher), with a message naming the
    account and the allowed ones. No webhook: the API server itself checks (Kubernetes 1.30+).
    Removing the component, or `delete`, keeps the namespace and what is in it (the user's
    notebooks, jobs and claims): delete it with `kubectl delete namespace` when it may go.
    Dropped from Kubeflow's Profile: the Profile resource and its controller (a profile is a
    component, applied like the others), Istio's AuthorizationPolicy (no Istio here), the
    default-viewer ServiceAccount, the kubeflow-edit ClusterRole aggregation, and the
    WorkloadIdentity and AwsIamForServiceAccount plugins.
  ||| + u.paramsLine($.params),
  params: {
    namespace: { type: 'string', default: null, description: "The profile's namespace; null: the component's name." },
    owner: { type: 'string', default: 'user@example.com', description: 'Who the profile is for: a user or group name as the cluster authenticates it, or namespace:name of a ServiceAccount.' },
    ownerKind: { type: 'string', enum: ownerKinds, default: 'User', description: 'What owner is: User, Group or ServiceAccount.' },
    serviceAccount: { type: 'string', default: 'default-editor', description: 'The ServiceAccount notebooks and jobs of the profile run as; it may do what the owner may.' },
    allowedServiceAccounts: { type: 'array', items: { type: 'string' }, default: ['default', 'default-editor', '*-launcher'], description: 'The ServiceAccounts pods in the namespace may run as; a leading * matches any beginning.' },
    cpuQuota: { type: 'quantity', default: null, description: 'Total CPU requests of the namespace; null: no limit.' },
    memoryQuota: { type: 'quantity', default: null, description: 'Total memory requests of the namespace; null: no limit.' },
    gpuQuota: { type: 'integer', minimum: 0, default: null, description: 'Total nvidia.com/gpu requests of the namespace; null: no limit.' },
    podQuota: { type: 'integer', minimum: 0, default: null, description: 'Most pods in the namespace; null: no limit.' },
    notebookHub: { type: 'string', default: null, description: 'namespace/name of a notebook hub (with userNamespaces) that spawns the profile owner\'s notebooks here; null: none.' },
    installPolicy: { type: 'boolean', default: true, description: 'Render the ValidatingAdmissionPolicy and its binding (shared by every profile).' },
  },

  render(params, env):: (
    local name = params.name;
    local namespace = if params.namespace == null then name else params.namespace;
    local meta(objectName) = u.metadata(objectName, part, {}, name) { namespace: namespace };
    local ownerKind = u.oneOf(component, params, 'ownerKind', ownerKinds);
    local owner =
      if params.owner == '' then u.fail(component, 'owner', 'must name who the profile is for')
      else if ownerKind != 'ServiceAccount' then
        { kind: ownerKind, apiGroup: 'rbac.authorization.k8s.io', name: params.owner }
      else
        local parts = std.split(params.owner, ':');
        if std.length(parts) != 2 || parts[0] == '' || parts[1] == '' then
          u.fail(component, 'owner', 'a ServiceAccount owner is namespace:name, got %s' % std.manifestJsonMinified(params.owner))
        else { kind: 'ServiceAccount', namespace: parts[0], name: parts[1] };
    local allowed = params.allowedServiceAccounts;
    local validAllowed =
      if allowed == [] then u.fail(component, 'allowedServiceAccounts', 'must list at least one ServiceAccount')
      else if std.length([a for a in allowed if a == '' || std.member(a, ',')]) > 0 then
        u.fail(component, 'allowedServiceAccounts', 'names must be non-empty and without commas, got %s' % std.manifestJsonMinified(allowed))
      else if !std.member(allowed, params.serviceAccount) then
        u.fail(component, 'allowedServiceAccounts', 'must hold serviceAccount %s, which notebooks and jobs run as' % std.manifestJsonMinified(params.serviceAccount))
      else allowed;
    local quota = std.prune({
      'requests.cpu': params.cpuQuota,
      'requests.memory': params.memoryQuota,
      'requests.nvidia.com/gpu': params.gpuQuota,
      pods: params.podQuota,
    });

    (if params.installPolicy then [policy, binding] else [])
    + [
      {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: namespace,
          labels: u.selector(name, part) + {
            [profileLabel]: name,
            'pod-security.kubernetes.io/enforce': 'baseline',
          },
          annotations: { [accountsAnnotation]: std.join(',', validAllowed) },
        },
      },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(params.serviceAccount) },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: meta(name + '-edit'),
        rules: [
          { apiGroups: ['kubeflow.org'], resources: jobs, verbs: edit },
          { apiGroups: ['frameworkcontroller.microsoft.com'], resources: ['frameworks'], verbs: edit },
          { apiGroups: ['kvc.kubeflow.org'], resources: ['volumemanagers'], verbs: edit },
          { apiGroups: [''], resources: ['pods'], verbs: read + ['delete'] },
          { apiGroups: [''], resources: ['pods/log', 'services', 'events'], verbs: read },
          { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: edit },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta(name + '-edit'),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: name + '-edit' },
        subjects: [owner, { kind: 'ServiceAccount', name: params.serviceAccount, namespace: namespace }],
      },
    ]
    + (if params.notebookHub == null then [] else
         local hub = std.split(params.notebookHub, '/');
         if std.length(hub) != 2 || hub[0] == '' || hub[1] == '' then
           u.fail(component, 'notebookHub', 'is namespace/name of the notebook hub, got %s' % std.manifestJsonMinified(params.notebookHub))
         else [{
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'RoleBinding',
           metadata: meta(hub[1] + '-spawner'),
           // The hub component's ClusterRole, named as its clusterName makes it.
           roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: '%s-%s-spawner' % hub },
           subjects: [{ kind: 'ServiceAccount', name: hub[1], namespace: hub[0] }],
         }])
    + (if quota == {} then [] else [{
         apiVersion: 'v1',
         kind: 'ResourceQuota',
         metadata: meta(name),
         spec: { hard: quota },
       }])
  ),
}
