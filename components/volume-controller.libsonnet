// The volume controller: VolumeManager resources (Kubeflow's KVC API) turned into data on nodes,
// run by mlkube's own operator image as `mlkube operator --controllers volumes`.
local u = import 'mlkube/util.libsonnet';

local component = 'volume-controller';
local part = 'volume-controller';
local metricsPort = 8080;
local healthPort = 8081;

{
  name: component,
  description: |||
    The volume controller: places the data of VolumeManager resources (KVC's kvc.kubeflow.org/v1 API) on nodes, from S3 or any S3 endpoint, or points at NFS.
    Runs mlkube's own operator image as `mlkube operator --controllers volumes --namespace <env>`:
    for each S3 volume it runs `replicas` fetcher pods of the same image, on distinct nodes, that
    copy the objects into a hostPath directory under volumeRoot, and reports in status.volumes
    the hostPath volume source and the node affinity a pod copies to read them; deleting the
    VolumeManager removes that data from every node. A volume with fewer eligible nodes than
    replicas (by its nodeAffinity and tolerations; cordoned nodes not counted) places nothing
    and is Failed with what it needs and what there is, with a TooFewNodes event, until enough
    nodes are eligible. NFS volumes are reported as they are; Pachyderm is reported Failed (not
    supported).
    Renders the VolumeManager CRD (kvc.kubeflow.org/v1, typed schema, no status subresource),
    a ServiceAccount, a Role/RoleBinding with exactly the verbs the controller uses (it never
    reads Secrets: fetchers take the access key from the Secret themselves), a
    ClusterRole/ClusterRoleBinding `<namespace>-<name>` to list and watch nodes (read only), the
    Deployment (non-root, read-only root filesystem, /healthz and /readyz probes; its fetchers
    are given only the Secrets of credentialSecrets, the object store's by default: a
    VolumeManager naming another fails, so it cannot hand any Secret of the namespace to an
    endpoint of its choosing), and the
    `kubernetes.io/no-provisioner` StorageClass KVC's chart shipped (for hand-written local
    volumes; the controller itself makes no claims).
    Kubeflow shipped KVC as a Helm chart (image volumecontroller/kube-volume-controller:v0.1.0,
    2018, no longer pullable); this follows its API, not its image. Dropped from the chart:
    registry/org/repo (one image param), the pod/PV/PVC templates, and its cluster-wide `*` RBAC.
    Fetcher pods run as root (hostPath directories belong to root) without capabilities, so the
    namespace must admit hostPath pods (Pod Security `privileged`, not `baseline`/`restricted`).
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'string', default: 'mlkube/mlkube', description: 'The mlkube operator image (controller and fetchers), without tag.' },
    tag: { type: 'string', default: '0.1.0', description: 'Image tag.' },
    imagePullPolicy: { type: 'string', enum: ['Always', 'IfNotPresent', 'Never'], default: 'IfNotPresent', description: 'Image pull policy: Always, IfNotPresent or Never.' },
    logLevel: { type: 'integer', minimum: 0, default: null, description: 'Log verbosity as KVC counted it (--v=N): 0 warn, 1 to 3 info, 4 and up debug; null keeps info.' },
    volumeRoot: { type: 'string', default: '/var/lib/mlkube/volumes', description: 'The directory on each node under which placed data lives (--volume-root).' },
    credentialSecrets: { type: 'array', items: { type: 'string' }, default: ['object-store-read-credentials'], description: "The only Secrets a VolumeManager may name for its access key (options.awsCredentialsSecretName): the store credentials granted to the namespace (the store's read-only keys by default: fetchers only read); null allows any (--volume-secrets)." },
    installCrd: { type: 'boolean', default: true, description: 'Render the volumemanagers.kvc.kubeflow.org CRD.' },
    installStorageClass: { type: 'boolean', default: true, description: 'Render the no-provisioner StorageClass.' },
    storageClassName: { type: 'string', default: 'kvc', description: "Name of that StorageClass ('kvc' as KVC's chart named it)." },
  } + u.resourceParams('50m', '64Mi', '256Mi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local subject = { kind: 'ServiceAccount', name: name, namespace: env.namespace };
    // Cluster-scoped, so named after the namespace: one per environment that renders it.
    local nodesName = u.clusterName(env, name);
    local crd = std.parseYaml(importstr 'mlkube/crds/volumemanagers.kvc.kubeflow.org.yaml');
    local pullPolicy = u.oneOf(component, params, 'imagePullPolicy', ['Always', 'IfNotPresent', 'Never']);
    local logLevel =
      if params.logLevel == null then 'info'
      else if params.logLevel < 0 then u.fail(component, 'logLevel', 'must not be negative, got %d' % params.logLevel)
      else if params.logLevel == 0 then 'warn'
      else if params.logLevel < 4 then 'info'
      else 'debug';
    local root = params.volumeRoot;
    local validRoot =
      if std.type(root) != 'string' || !std.startsWith(root, '/') || std.length(std.rstripChars(root, '/')) == 0 then
        u.fail(component, 'volumeRoot', 'must be an absolute directory other than /, got %s' % std.manifestJsonMinified(root))
      else root;
    local image = '%s:%s' % [params.image, params.tag];
    local secrets = params.credentialSecrets;
    local secretsFlag =
      if secrets == null then []
      else if !std.isArray(secrets) || secrets == [] || std.length([x for x in secrets if !std.isString(x) || x == '' || std.member(x, ',')]) > 0 then
        u.fail(component, 'credentialSecrets', 'must list Secret names (at least one, no commas), or be null to allow any; got %s' % std.manifestJsonMinified(secrets))
      else ['--volume-secrets', std.join(',', secrets)];
    local probe(path, period, failures) = {
      httpGet: { path: path, port: 'health' },
      periodSeconds: period,
      failureThreshold: failures,
    };

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
        kind: 'Role',
        metadata: meta(name),
        // Exactly the controller's calls (src/operator/volumes/controller.rs); its cluster
        // tests run with these rules, and fail on a verb granted and not used.
        rules: [
          // Its cache (list, watch); the status, and its finalizer, by merge patch.
          { apiGroups: ['kvc.kubeflow.org'], resources: ['volumemanagers'], verbs: ['list', 'watch', 'patch'] },
          // Its pods set blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
          // admission plugin allows only to who may update the owner's finalizers.
          { apiGroups: ['kvc.kubeflow.org'], resources: ['volumemanagers/finalizers'], verbs: ['update'] },
          // Fetchers and cleaners: cached, created, and deleted (a fetcher of a deleted
          // VolumeManager, a failed cleaner).
          { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch', 'create', 'delete'] },
          // events.k8s.io/v1 only: a volume short of nodes, a patch of its series on a repeat.
          { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
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
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: meta(nodesName),
        // The node cache: which nodes may hold a volume's data, counted against its replicas.
        rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: meta(nodesName),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: nodesName },
        subjects: [subject],
      },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta(name),
        spec: {
          // One controller per namespace, without leader election: a rollout never overlaps.
          replicas: 1,
          strategy: { type: 'Recreate' },
          selector: { matchLabels: u.selector(name, part) },
          template: {
            metadata: { labels: u.selector(name, part) },
            spec: {
              serviceAccountName: name,
              securityContext: u.podSecurity(65532),
              containers: [{
                name: 'controller',
                image: image,
                imagePullPolicy: pullPolicy,
                command: ['mlkube'],
                args: [
                  'operator',
                  '--controllers',
                  'volumes',
                  '--namespace',
                  env.namespace,
                  '--metrics-addr',
                  ':%d' % metricsPort,
                  '--health-addr',
                  ':%d' % healthPort,
                  '--volume-image',
                  image,
                  '--volume-root',
                  validRoot,
                ] + secretsFlag,
                env: [{ name: 'RUST_LOG', value: logLevel }],
                ports: [
                  { name: 'metrics', containerPort: metricsPort, protocol: 'TCP' },
                  { name: 'health', containerPort: healthPort, protocol: 'TCP' },
                ],
                livenessProbe: probe('/healthz', 20, 3) + { initialDelaySeconds: 5 },
                readinessProbe: probe('/readyz', 10, 3),
                resources: u.resources(params),
                securityContext: u.containerSecurity(65532),
              }],
            },
          },
        },
      },
    ]
  ),
}
