// The Kubernetes Volume Controller (KVC): VolumeManager resources turned into volumes on nodes.
local u = import 'mlkube/util.libsonnet';

local component = 'volume-controller';
local part = 'volume-controller';
local templates = '/kvc-templates';

{
  name: component,
  description: |||
    The Kubernetes Volume Controller (KVC): fills volumes from S3, NFS or Pachyderm for VolumeManager resources.
    Renders the VolumeManager CRD (kvc.kubeflow.org/v1, typed schema for spec.volumeConfigs and
    status; no status subresource, because the controller writes status with a whole-object
    update), the controller Deployment (watching the environment's namespace), a ServiceAccount,
    a ClusterRole/Binding for the cluster-scoped objects it handles (nodes, persistent volumes), a
    Role/Binding for the namespaced ones (VolumeManagers, pods, claims, events), and the
    `kubernetes.io/no-provisioner` StorageClass (WaitForFirstConsumer) its claims name.
    Kubeflow shipped KVC as a Helm chart, not a ksonnet package; this follows that chart.
    Dropped or changed: registry/org/repo (one image param); clusterrole.install (the controller
    cannot run without its RBAC); the chart's `*` verbs on CRDs, storage classes, config maps,
    services, endpoints and deployments (the controller touches none of them); no probes, as the
    controller serves no health endpoint. Rollouts recreate the pod instead of the chart's surge:
    without leader election, two controllers must never overlap. Containers run as uid 65534.
    The 2018 image's PV template still uses the removed volume.alpha.kubernetes.io/node-affinity
    annotation; that lives in the image, not here.
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'string', default: 'volumecontroller/kube-volume-controller', description: 'Controller image, without tag.' },
    tag: { type: 'string', default: 'v0.1.0', description: 'Controller image tag.' },
    logLevel: { type: 'integer', minimum: 0, default: null, description: 'Log verbosity (--v=N); null keeps the default.' },
    installCrd: { type: 'boolean', default: true, description: 'Render the volumemanagers.kvc.kubeflow.org CRD.' },
    installStorageClass: { type: 'boolean', default: true, description: 'Render the no-provisioner StorageClass.' },
    storageClassName: { type: 'string', default: 'kvc', description: "Name of that StorageClass ('kvc' is what the controller's claims use)." },
  } + u.resourceParams('50m', '64Mi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local clusterName = u.clusterName(env, name);
    local subject = { kind: 'ServiceAccount', name: name, namespace: env.namespace };
    local crd = std.parseYaml(importstr 'mlkube/crds/volumemanagers.kvc.kubeflow.org.yaml');
    local logLevel =
      if params.logLevel == null then []
      else if params.logLevel < 0 then u.fail(component, 'logLevel', 'must not be negative, got %d' % params.logLevel)
      else ['--v=%d' % params.logLevel];
    local readWrite = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

    (if params.installCrd then [crd] else [])
    + (if params.installStorageClass then [{
         apiVersion: 'storage.k8s.io/v1',
         kind: 'StorageClass',
         // Shared by every app and environment that renders it: no instance label, which
         // would name this component.
         metadata: { name: params.storageClassName, labels: { 'app.kubernetes.io/name': part } },
         provisioner: 'kubernetes.io/no-provisioner',
         volumeBindingMode: 'WaitForFirstConsumer',
         reclaimPolicy: 'Delete',
       }] else [])
    + [
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: meta(name),
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: meta(clusterName),
        rules: [
          { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: [''], resources: ['persistentvolumes'], verbs: readWrite },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: meta(clusterName),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterName },
        subjects: [subject],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: meta(name),
        rules: [
          { apiGroups: ['kvc.kubeflow.org'], resources: ['volumemanagers'], verbs: ['get', 'list', 'watch', 'update', 'patch'] },
          { apiGroups: [''], resources: ['pods', 'persistentvolumeclaims'], verbs: readWrite },
          { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
          { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta(name),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: name },
        subjects: [subject],
      },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta(name),
        spec: {
          // One controller per namespace: it has no leader election.
          replicas: 1,
          strategy: { type: 'Recreate' },
          selector: { matchLabels: u.selector(name, part) },
          template: {
            metadata: { labels: u.selector(name, part) },
            spec: {
              serviceAccountName: name,
              securityContext: u.podSecurity(65534),
              containers: [{
                name: 'controller',
                image: '%s:%s' % [params.image, params.tag],
                imagePullPolicy: 'IfNotPresent',
                command: ['/kvc'],
                args: [
                  '--podFile=%s/pod.tmpl' % templates,
                  '--pvFile=%s/pv.tmpl' % templates,
                  '--pvcFile=%s/pvc.tmpl' % templates,
                  '--pachydermPodFile=%s/pod_pachyderm.tmpl' % templates,
                  '--namespace=' + env.namespace,
                ] + logLevel,
                resources: u.resources(params),
                securityContext: u.containerSecurity(65534),
              }],
            },
          },
        },
      },
    ]
  ),
}
