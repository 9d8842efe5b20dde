// JupyterHub with KubeSpawner: one notebook server pod per user, spawned from an options form.
local u = import 'mlkube/util.libsonnet';
local admission = import 'mlkube/admission.libsonnet';

local component = 'notebook-hub';
local part = 'notebook-hub';
local hubPort = 8081;
local proxyPort = 8000;
local configDir = '/etc/mlkube/hub';
local invitationsDir = '/etc/mlkube/hub-invitations';
local uid = 1000;

{
  name: component,
  description: |||
    JupyterHub with KubeSpawner: users log in and get a notebook server pod with its own volume.
    Renders a StatefulSet running the hub (port 8081) with configurable-http-proxy as a sidecar
    (port 8000; its API token is made per pod by an init container, never rendered), a headless
    Service for the hub, a user-facing Service (port 80, serviceType), a ConfigMap holding
    jupyterhub_config.py (the options form: image from notebookImages, CPU, memory and, when
    notebookMaxGpus > 0, an nvidia.com/gpu limit; the same checks hold for servers started
    through the hub's REST API) and settings.json from the params, a per-user
    PersistentVolumeClaim at notebookPvcMount (created by KubeSpawner), RBAC for the hub (pods,
    claims, events in its namespace) and a ServiceAccount and Role for notebooks (TFJobs and a
    read-only view of pods, logs, services and events), and an admission rule of its namespace
    (a ValidatingAdmissionPolicy `<namespace>-<name>-accounts` and its binding) by which the
    hub's pods run only as the notebooks' ServiceAccount and what a notebook starts only as
    `default`, never as one of the platform's ServiceAccounts. With userNamespaces, each user's
    notebook runs in their profile's namespace instead (see the profile component), as its
    ServiceAccount, apart from the platform's: the hub gets a ClusterRole
    `<namespace>-<name>-spawner` with the same rules, which each profile binds in its own
    namespace, and no notebook ServiceAccount, Role or admission rule is rendered; a user
    without a profile cannot start a notebook. Users log in with FirstUseAuthenticator by
    default: the first login under a name sets its password (a bcrypt hash kept in the hub's
    state), so nobody else logs in as that user; allowedUsers lists the only names that may
    log in (with firstuse, a stranger then claims none), and with invitationsSecret a name's
    first login must give the invitation its administrator put in that Secret. Hub state sits
    in a volume of hubDbStorage (servers outlive a restart of the hub; 1Gi when null and the
    authenticator is firstuse, whose passwords a restart must not forget, or the next to log in
    as a user would take their name and volume), else in an emptyDir (the hub stops users'
    servers as it shuts down).
    Containers run as uid 1000 with read-only root filesystems.
    Dropped from Kubeflow's package: cloud/platform switches and the GKE/minikube specifics
    (gcpSecretName, accessLocalFs hostPath access; mount secrets through disks or an image
    instead); registry and repoName (notebookImages takes full image names); the v0.4 `ui`
    variants and rokSecretName (Arrikto Rok); the Ambassador mappings (put an Ingress or
    Gateway in front of the public Service); the notebooks' wildcard RBAC on deployments,
    replica sets and batch jobs. The IAP authenticator became the generic `header` one.
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'string', default: 'jupyterhub/k8s-hub', description: 'Hub image (JupyterHub with KubeSpawner), without tag.' },
    tag: { type: 'string', default: '4.2.0', description: 'Hub image tag.' },
    proxyImage: { type: 'image', default: 'jupyterhub/configurable-http-proxy:4.6.3', description: 'configurable-http-proxy image run beside the hub.' },
    serviceType: { type: 'string', enum: ['ClusterIP', 'NodePort', 'LoadBalancer'], default: 'ClusterIP', description: 'Type of the user-facing Service: ClusterIP, NodePort or LoadBalancer.' },
    authenticator: { type: 'string', enum: ['firstuse', 'dummy', 'header'], default: 'firstuse', description: "'firstuse' (a name's first login sets its password, kept on the hub's volume), 'dummy' (any name, any password: a cluster of one's own only) or 'header' (trust authHeader from a proxy)." },
    allowedUsers: { type: 'array', items: { type: 'string' }, default: null, description: "The only user names that may log in (JupyterHub's allowed_users, whatever the authenticator): with firstuse a stranger can then claim no name, and a name taken out of the list is refused from the hub's next start; null lets in any name." },
    invitationsSecret: { type: 'string', default: null, description: "With firstuse, a Secret of the hub's namespace (made with kubectl, never rendered) whose keys are user names and values their invitations (7 characters at least): a name without a password yet logs in first only with its invitation, which stays its password until the user changes it; null: a new name's first login sets any password." },
    authHeader: { type: 'string', default: 'X-Remote-User', description: "Header carrying the user name with authenticator 'header'." },
    defaultUrl: { type: 'string', default: '/lab', description: "Path a notebook server opens at: '/lab' (JupyterLab) or '/tree'." },
    notebookImages: { type: 'array', items: { type: 'image' }, default: ['jupyter/tensorflow-notebook:2023-10-20', 'jupyter/scipy-notebook:2023-10-20'], description: 'Images offered in the options form; the first is the default.' },
    notebookCpu: { type: 'number', minimum: 0, default: 0.5, description: 'Default CPU cores guaranteed to a notebook.' },
    notebookMemoryGb: { type: 'number', minimum: 0, default: 1, description: 'Default memory guaranteed to a notebook, in GB.' },
    notebookCpuLimit: { type: 'number', minimum: 0, default: null, description: 'CPU limit of every notebook (and the most the form allows); null sets none.' },
    notebookMemoryLimitGb: { type: 'number', minimum: 0, default: null, description: 'Memory limit of every notebook in GB (and the most the form allows); null sets none.' },
    notebookMaxGpus: { type: 'integer', minimum: 0, default: 0, description: 'Most GPUs the form offers per notebook; 0 hides the option.' },
    notebookPvcMount: { type: 'string', default: '/home/jovyan', description: "Where each user's own volume is mounted; '' gives notebooks none (where no StorageClass provisions volumes, a claim would stay Pending)." },
    notebookStorage: { type: 'quantity', default: '10Gi', description: "Size of each user's volume." },
    notebookStorageClass: { type: 'string', default: null, description: "StorageClass of users' volumes; null uses the cluster default." },
    disks: { type: 'array', items: { type: 'string' }, default: [], description: 'Existing PersistentVolumeClaims mounted into every notebook at /mnt/<claim>.' },
    notebookUid: { type: 'integer', minimum: 0, default: 1000, description: 'User id notebooks run as.' },
    notebookGid: { type: 'integer', minimum: 0, default: 100, description: 'Group id owning notebook volumes (fsGroup).' },
    userNamespaces: { type: 'boolean', default: false, description: "Spawn each user's notebook in their profile's namespace (userNamespaceTemplate), as profileServiceAccount, instead of in the hub's; each profile lets the hub in with its notebookHub param." },
    userNamespaceTemplate: { type: 'string', default: '{username}', description: "With userNamespaces, the namespace of a user's notebook, KubeSpawner's template ({username} is the user's escaped name): the profile component of that name makes it." },
    profileServiceAccount: { type: 'string', default: 'default-editor', description: "With userNamespaces, the ServiceAccount notebooks run as: the profile's, which its admission rule allows." },
    hubDbStorage: { type: 'quantity', default: null, description: "Size of a volume for the hub's database and firstuse's passwords, whose users' servers then outlive a hub restart; null: 1Gi with authenticator firstuse, else an emptyDir, and the hub stops every server as it shuts down." },
  } + u.resourceParams('200m', '512Mi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local notebookAccount = name + '-notebook';
    local publicName = name + '-public';
    local serviceType = u.oneOf(component, params, 'serviceType', ['ClusterIP', 'NodePort', 'LoadBalancer']);
    local authenticator = u.oneOf(component, params, 'authenticator', ['firstuse', 'dummy', 'header']);
    // firstuse's passwords must outlive the pod: in an emptyDir a restart would forget them.
    local dbStorage =
      if params.hubDbStorage != null || authenticator != 'firstuse' then params.hubDbStorage else '1Gi';
    local strings(param) =
      if std.all([std.isString(x) && x != '' for x in params[param]]) then params[param]
      else u.fail(component, param, 'every entry must be a non-empty string');
    local images =
      if std.length(params.notebookImages) == 0 then u.fail(component, 'notebookImages', 'offer at least one image')
      else strings('notebookImages');
    local disks = strings('disks');
    // Names as JupyterHub takes them: a space or comma makes one it refuses to log in.
    local allowedUsers =
      local users = params.allowedUsers;
      local badName(x) = !std.isString(x) || x == '' || u.anyChar(' \t\n,', x);
      if users == null then null
      else if !std.isArray(users) || users == [] || std.length(std.filter(badName, users)) > 0 then
        u.fail(component, 'allowedUsers', 'must list user names (at least one, no spaces or commas), or be null to let in any name; got %s' % std.manifestJsonMinified(users))
      else users;
    local invitations =
      if params.invitationsSecret == null then null
      else if authenticator != 'firstuse' then
        u.fail(component, 'invitationsSecret', "needs authenticator 'firstuse' (the one that sets a name's password at its first login); got authenticator %s" % std.manifestJsonMinified(authenticator))
      else if !std.isString(params.invitationsSecret) || params.invitationsSecret == '' then
        u.fail(component, 'invitationsSecret', 'must name a Secret of the hub\'s namespace, or be null; got %s' % std.manifestJsonMinified(params.invitationsSecret))
      else params.invitationsSecret;
    // An invitation is the Secret's key of the name as the hub normalizes it (in lowercase).
    local uninvitable = if invitations == null || allowedUsers == null then [] else [
      x
      for x in allowedUsers
      if !u.onlyChars('abcdefghijklmnopqrstuvwxyz0123456789-_.', std.asciiLower(x)) || std.startsWith(x, '..')
    ];
    local checkedUsers =
      if uninvitable == [] then allowedUsers
      else u.fail(component, 'allowedUsers', "with invitationsSecret every name must be one a Secret's key can hold (letters, digits, '-', '_' and '.'), so that it can be invited; got %s" % std.manifestJsonMinified(uninvitable));
    local maxGpus = if params.notebookMaxGpus < 0 then u.fail(component, 'notebookMaxGpus', 'must not be negative, got %d' % params.notebookMaxGpus) else params.notebookMaxGpus;

    local settings = {
      namespace: env.namespace,
      hubHost: '%s.%s.svc' % [name, env.namespace],
      authenticator: authenticator,
      authHeader: params.authHeader,
      allowedUsers: checkedUsers,
      invitationsDir: if invitations != null then invitationsDir else null,
      defaultUrl: params.defaultUrl,
      notebookServiceAccount: if params.userNamespaces then params.profileServiceAccount else notebookAccount,
      userNamespaceTemplate: if params.userNamespaces then params.userNamespaceTemplate else null,
      notebookLabels: {
        'app.kubernetes.io/name': 'notebook',
        'app.kubernetes.io/instance': name,
        'app.kubernetes.io/managed-by': 'kubespawner',
      },
      notebookImages: images,
      notebookCpu: params.notebookCpu,
      notebookMemoryGb: params.notebookMemoryGb,
      notebookCpuLimit: params.notebookCpuLimit,
      notebookMemoryLimitGb: params.notebookMemoryLimitGb,
      notebookMaxGpus: maxGpus,
      notebookPvcMount: params.notebookPvcMount,
      notebookStorage: params.notebookStorage,
      notebookStorageClass: params.notebookStorageClass,
      disks: disks,
      notebookUid: params.notebookUid,
      notebookGid: params.notebookGid,
      stopServersAtShutdown: dbStorage == null,
    };
    local configData = {
      'jupyterhub_config.py': importstr 'mlkube/notebook-hub/jupyterhub_config.py',
      'settings.json': std.manifestJsonEx(settings, '  ') + '\n',
    };
    local sidecarResources = u.resources(params { cpuRequest: '50m', memoryRequest: '64Mi' });
    local stateVolume = { name: 'state', emptyDir: {} };
    // What KubeSpawner does where it spawns: its pods and claims, and the events it reports.
    local spawnerRules = [
      { apiGroups: [''], resources: ['pods', 'persistentvolumeclaims'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
      { apiGroups: [''], resources: ['events'], verbs: ['get', 'list', 'watch'] },
    ];

    [
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: meta(name),
      },
    ]
    + (if params.userNamespaces then [
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'ClusterRole',
           metadata: meta(u.clusterName(env, name + '-spawner')),
           // Bound by each profile in its own namespace (its notebookHub param), never
           // cluster-wide: the hub spawns only where a profile let it in.
           rules: spawnerRules,
         },
       ] else [
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'Role',
           metadata: meta(name),
           rules: spawnerRules,
         },
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'RoleBinding',
           metadata: meta(name),
           roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: name },
           subjects: [{ kind: 'ServiceAccount', name: name, namespace: env.namespace }],
         },
         {
           apiVersion: 'v1',
           kind: 'ServiceAccount',
           metadata: meta(notebookAccount),
         },
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'Role',
           metadata: meta(notebookAccount),
           rules: [
             { apiGroups: ['kubeflow.org'], resources: ['tfjobs'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
             { apiGroups: [''], resources: ['pods', 'pods/log', 'services', 'events'], verbs: ['get', 'list', 'watch'] },
           ],
         },
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'RoleBinding',
           metadata: meta(notebookAccount),
           roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: notebookAccount },
           subjects: [{ kind: 'ServiceAccount', name: notebookAccount, namespace: env.namespace }],
         },
       ] + $.accountRule(name, env, meta))
    + [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: meta(name + '-config'),
        data: configData,
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: meta(name) + {
          annotations: {
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': std.toString(hubPort),
            'prometheus.io/path': '/hub/metrics',
          },
        },
        spec: {
          clusterIP: 'None',
          selector: u.selector(name, part),
          ports: [{ name: 'hub', port: hubPort, targetPort: 'hub', protocol: 'TCP' }],
        },
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: meta(publicName),
        spec: {
          type: serviceType,
          selector: u.selector(name, part),
          ports: [{ name: 'http', port: 80, targetPort: 'proxy', protocol: 'TCP' }],
        },
      },
      {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: meta(name),
        spec: {
          // One hub per namespace: JupyterHub keeps its state in one process.
          replicas: 1,
          serviceName: name,
          selector: { matchLabels: u.selector(name, part) },
          updateStrategy: { type: 'RollingUpdate' },
          template: {
            metadata: {
              labels: u.selector(name, part),
              // The config is read at start-up: a new hash rolls the hub.
              annotations: { 'mlkube.io/config-hash': std.md5(std.manifestJson(configData)) },
            },
            spec: {
              serviceAccountName: name,
              securityContext: u.podSecurity(uid, uid),
              initContainers: [{
                name: 'proxy-token',
                image: '%s:%s' % [params.image, params.tag],
                command: ['python3', '-c', "import secrets; open('/run/proxy/token', 'w').write(secrets.token_hex(32))"],
                resources: u.resources(params { cpuRequest: '10m', memoryRequest: '32Mi' }),
                securityContext: u.containerSecurity(uid),
                volumeMounts: [{ name: 'proxy-token', mountPath: '/run/proxy' }],
              }],
              containers: [
                {
                  name: 'hub',
                  image: '%s:%s' % [params.image, params.tag],
                  command: ['jupyterhub', '--config', configDir + '/jupyterhub_config.py'],
                  workingDir: '/srv/jupyterhub',
                  ports: [{ name: 'hub', containerPort: hubPort, protocol: 'TCP' }],
                  // Liveness waits for the start, which may migrate the database for minutes
                  // after an upgrade; readiness is checked often, so users wait seconds, not ten.
                  startupProbe: { httpGet: { path: '/hub/health', port: 'hub' }, periodSeconds: 2, failureThreshold: 150 },
                  readinessProbe: { httpGet: { path: '/hub/health', port: 'hub' }, periodSeconds: 2 },
                  livenessProbe: { httpGet: { path: '/hub/health', port: 'hub' }, periodSeconds: 10, failureThreshold: 6 },
                  resources: u.resources(params),
                  securityContext: u.containerSecurity(uid),
                  volumeMounts: [
                    { name: 'config', mountPath: configDir, readOnly: true },
                    { name: 'state', mountPath: '/srv/jupyterhub' },
                    { name: 'proxy-token', mountPath: '/run/proxy', readOnly: true },
                    { name: 'tmp', mountPath: '/tmp' },
                  ] + (if invitations != null then [{ name: 'invitations', mountPath: invitationsDir, readOnly: true }] else []),
                },
                {
                  name: 'proxy',
                  image: params.proxyImage,
                  // configurable-http-proxy takes its token only from the environment.
                  command: ['sh', '-c', 'export CONFIGPROXY_AUTH_TOKEN="$(cat /run/proxy/token)" && exec configurable-http-proxy --ip=0.0.0.0 --port=%d --api-ip=127.0.0.1 --api-port=8001 --default-target=http://127.0.0.1:%d --error-target=http://127.0.0.1:%d/hub/error' % [proxyPort, hubPort, hubPort]],
                  ports: [{ name: 'proxy', containerPort: proxyPort, protocol: 'TCP' }],
                  readinessProbe: { httpGet: { path: '/_chp_healthz', port: 'proxy' }, periodSeconds: 2 },
                  livenessProbe: { httpGet: { path: '/_chp_healthz', port: 'proxy' }, initialDelaySeconds: 10, periodSeconds: 10, failureThreshold: 6 },
                  resources: sidecarResources,
                  securityContext: u.containerSecurity(uid),
                  volumeMounts: [{ name: 'proxy-token', mountPath: '/run/proxy', readOnly: true }],
                },
              ],
              volumes: [
                { name: 'config', configMap: { name: name + '-config' } },
                { name: 'proxy-token', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
                { name: 'tmp', emptyDir: {} },
              ] + (if dbStorage == null then [stateVolume] else [])
              // Optional, so the hub starts before the Secret exists; a key the kubelet adds to
              // the volume later counts from the next login. 0440: read by the hub's group only.
              + (if invitations != null then [{ name: 'invitations', secret: { secretName: invitations, optional: true, defaultMode: 288 } }] else []),
            },
          },
          [if dbStorage != null then 'volumeClaimTemplates']: [{
            metadata: { name: 'state' },
            spec: {
              accessModes: ['ReadWriteOnce'],
              resources: { requests: { storage: dbStorage } },
            },
          }],
        },
      },
    ]
  ),

  // In the hub's own namespace, where the platform's ServiceAccounts live, the admission rule
  // that keeps the hub and its notebooks from starting anything as one of them: the hub's
  // pods run only as the notebooks' ServiceAccount, and what a notebook starts (a TFJob) only
  // as `default`, which holds no rights. Without it a notebook's token could start a TFJob
  // whose pod runs as the gateway or the operator.
  accountRule(name, env, meta):: (
    local ruleName = u.clusterName(env, name + '-accounts');
    local account(sa) = 'system:serviceaccount:%s:%s' % [env.namespace, sa];
    local hub = account(name);
    local notebookAccount = name + '-notebook';
    [
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: meta(ruleName),
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: admission.matchConstraints,
          matchConditions: [{
            name: 'hub-or-notebook',
            expression: "request.userInfo.username in ['%s', '%s']" % [hub, account(notebookAccount)],
          }],
          variables: [{
            name: 'allowed',
            expression: "request.userInfo.username == '%s' ? ['%s'] : ['default']" % [hub, notebookAccount],
          }] + admission.accountVariables,
          validations: [{
            expression: 'size(variables.refused) == 0',
            messageExpression: "'serviceAccountName ' + variables.refused[0] + ' is not one that ' + request.userInfo.username + ' may start pods as in namespace ' + request.namespace + '; use ' + variables.allowed[0] + ' (the platform keeps its own ServiceAccounts in this namespace: give users profiles, and the hub userNamespaces, for jobs that need more)'",
            reason: 'Forbidden',
          }],
        },
      },
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: meta(ruleName),
        spec: {
          policyName: ruleName,
          validationActions: ['Deny'],
          matchResources: {
            matchPolicy: 'Equivalent',
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
            objectSelector: {},
          },
        },
      },
    ]
  ),
}
