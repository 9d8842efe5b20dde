// The pieces of a ValidatingAdmissionPolicy that refuses workloads whose pods would run as a
// ServiceAccount not allowed to them: what it matches, and the CEL that finds the accounts an
// object's pods run as, whatever its kind. Shared by the profile's rule and the notebook hub's.
local jobs = ['tfjobs', 'pytorchjobs', 'mxjobs', 'xgboostjobs', 'mpijobs', 'paddlejobs', 'jaxjobs'];

// The pod specs of the object under admission, whatever its kind: a pod's own, a workload's
// template, each replica's template of a Kubeflow job, each TaskRole's of a Framework.
local specsExpression = |||
  request.resource.resource == 'pods' ? [object.spec] :
  request.resource.resource == 'cronjobs' ? [object.spec.jobTemplate.spec.template.spec] :
  request.resource.resource == 'frameworks' ?
    (has(object.spec.taskRoles) ? object.spec.taskRoles.filter(r, has(r.task) && has(r.task.pod) && has(r.task.pod.spec)).map(r, r.task.pod.spec) : []) :
  request.resource.group == 'kubeflow.org' ?
    variables.replicaSpecs.filter(k, has(variables.replicaSpecs[k].template) && has(variables.replicaSpecs[k].template.spec)).map(k, variables.replicaSpecs[k].template.spec) :
  [object.spec.template.spec]
|||;

// A Kubeflow job's map of replica specs, under the field of its kind.
local replicaSpecsExpression =
  local fields = ['tfReplicaSpecs', 'pytorchReplicaSpecs', 'mxReplicaSpecs', 'xgbReplicaSpecs', 'mpiReplicaSpecs', 'paddleReplicaSpecs', 'jaxReplicaSpecs'];
  std.join(' : ', ['has(object.spec.%s) ? object.spec.%s' % [f, f] for f in fields]) + ' : {}';

{
  // The resources of the Kubeflow jobs of every framework.
  jobs:: jobs,

  // Every kind whose objects make pods: pods themselves, the apps and batch workloads, the
  // Kubeflow jobs and Frameworks. Every field the API server would default is written out:
  // the struct is atomic, so two appliers co-own it only if it equals what is stored.
  matchConstraints:: {
    matchPolicy: 'Equivalent',
    namespaceSelector: {},
    objectSelector: {},
    resourceRules: [
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: '*' },
      { apiGroups: ['kubeflow.org'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: jobs, scope: '*' },
      { apiGroups: ['frameworkcontroller.microsoft.com'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['frameworks'], scope: '*' },
      { apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments', 'statefulsets', 'replicasets', 'daemonsets'], scope: '*' },
      { apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['jobs', 'cronjobs'], scope: '*' },
    ],
  },

  // The variables `accounts` (the ServiceAccount of each pod spec: serviceAccountName, the
  // older serviceAccount, or default) and `refused` (those not in the list variable
  // `allowed`, which the policy defines first; an entry `*-launcher` allows every name that
  // ends in `-launcher`).
  accountVariables:: [
    { name: 'replicaSpecs', expression: replicaSpecsExpression },
    { name: 'specs', expression: specsExpression },
    {
      name: 'accounts',
      expression: "variables.specs.map(s, has(s.serviceAccountName) && s.serviceAccountName != '' ? s.serviceAccountName : (has(s.serviceAccount) && s.serviceAccount != '' ? s.serviceAccount : 'default'))",
    },
    {
      name: 'refused',
      expression: "variables.accounts.filter(a, !variables.allowed.exists(p, p == a || (p.startsWith('*') && a.endsWith(p.substring(1)))))",
    },
  ],
}
