// An S3-compatible object store: SeaweedFS, one pod, its data on a volume; or, with `endpoint`,
// only the connection details of an S3 service that runs elsewhere.
local admission = import 'mlkube/admission.libsonnet';
local u = import 'mlkube/util.libsonnet';

local component = 'object-store';
local part = 'object-store';
local s3Port = 8333;
// The loopback ports of the servers behind the S3 gateway: never reachable from outside the pod.
local filerPort = 8888;
local masterPort = 9333;
local innerS3Port = 8334;
// The S3 server's identities besides the administrator's (its environment): the read-only
// keys', written by the init container into a volume of the pod alone.
local identitiesDir = '/identities';
local identitiesFile = identitiesDir + '/s3.json';
local uid = 1000;
local gid = 100;
local bucketName = '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$';

{
  name: component,
  description: |||
    An S3-compatible object store for datasets and models: SeaweedFS (`weed`), Apache-2.0,
    from the image image/object-store/ builds. Renders a StatefulSet of one pod whose data
    (metadata and blobs) lives on a PersistentVolumeClaim of `storage` (storageClass, or the
    cluster default), so a restart of the pod keeps every object; `weed mini` runs master,
    volume server and filer on the pod's loopback only, and `weed s3` serves the S3 API on
    port 8333, behind the Service <name>; a NetworkPolicy admits that port only from pods of
    this namespace and of grantedNamespaces. The buckets of `buckets` are created at start.
    Credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the Secret credentialsSecret
    (yours, created beforehand), or, when null, in <name>-credentials, generated with random
    values by the pod's init container and kept, like the data volume, when the component is
    deleted (added again, the store serves the same data with the same keys); never rendered, so
    `show` and `diff` never print them. Those keys read and write every bucket (for uploads);
    every other key the store makes writes only below prefixes of its own, or nowhere: a
    training-job component that saves no model gets the read-only keys, and a training job
    that saves a model (modelPath) gets keys of its own: its component renders
    the request <component>-model-keys, a ConfigMap labelled mlkube.io/object-store=<name>,
    which the pod's model-keys container answers with a Secret of that name, owned by the
    request, of keys that read and list only below that prefix and write only in the paths of
    the jobs it names, no longer in a job's once that job has finished (kept in the store's
    filer, withdrawn with the request; a prefix that overlaps an older request's, is outside
    jobBuckets, or holds a file already (a model version is written once) gets a Warning event
    instead; a job of your own gets such keys from a ConfigMap you write the same way);
    <name>-read-credentials, always generated, may only read and list (for fetchers and model
    servers), and carries KServe's annotations
    (serving.kserve.io/s3-endpoint, -usehttps, -region), so an InferenceService whose
    ServiceAccount lists it fetches its model from this store; each of `writers` gets
    <name>-writer-<writer>, keys that write, read and list only below its prefixes (for one
    job's model versions). A pod reaches the store by reference:
    `envFrom` the ConfigMap <name>-endpoint (AWS_ENDPOINT_URL, S3_ENDPOINT, AWS_REGION,
    S3_BUCKETS, S3_CREDENTIALS_SECRET) and the credentials Secret. The pod is Ready, and
    `status` healthy, only while a signed ListBuckets answers and every bucket is there. With
    `endpoint` set, nothing is deployed: only <name>-endpoint pointing there, and
    credentialsSecret must name the Secret holding that service's keys.
    Dropped from what Kubeflow ships (Kubeflow Pipelines' MinIO): MinIO itself, archived and
    unmaintained since April 2026 (and AGPL-3.0), its fixed minio/minio123 credentials, and
    replication across servers (one pod serves; for a replicated store, point `endpoint` at one).
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'image', default: 'mlkube/object-store:0.1.0', description: 'Image with weed (SeaweedFS) and python3 with boto3 (image/object-store/build.sh).' },
    buckets: { type: 'array', items: { type: 'string' }, default: ['data', 'models'], description: 'Buckets made at start (S3 bucket names: 3-63 lower-case letters, digits, dots, hyphens).' },
    storage: { type: 'quantity', default: '10Gi', description: 'Size of the volume holding the data.' },
    storageClass: { type: 'string', default: null, description: 'StorageClass of the data volume; null uses the cluster default.' },
    credentialsSecret: { type: 'string', default: null, description: 'Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to use; null generates <name>-credentials.' },
    endpoint: { type: 'string', default: null, description: 'URL of an external S3 service to use instead of deploying one (needs credentialsSecret).' },
    jobBuckets: { type: 'array', items: { type: 'string' }, default: ['models'], description: "The only buckets a job's own keys (modelPath) may be made in." },
    writers: { type: 'object', default: {}, description: 'Keys that write only below their prefixes, e.g. {"digits-v1": ["models/digits/v1"]}: each gets the Secret <name>-writer-<writer> (it may also read and list there), for a job that saves its model (objectStoreCredentials).' },
    grantedNamespaces: { type: 'array', items: { type: 'string' }, default: [], description: "Namespaces besides this one whose pods may reach the store (its NetworkPolicy); they still need the keys." },
    region: { type: 'string', default: 'us-east-1', description: 'Region clients sign their requests for.' },
  } + u.resourceParams('100m', '256Mi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName) = u.metadata(objectName, part, {}, name);
    local generated = params.credentialsSecret == null;
    local secretName = if generated then name + '-credentials' else params.credentialsSecret;
    local buckets = [
      if std.isString(b) && std.length(std.findSubstr('..', b)) == 0 && $.validBucket(b) then b
      else u.fail(component, 'buckets', '%s is not an S3 bucket name (3-63 lower-case letters, digits, dots, hyphens)' % std.manifestJsonMinified(b))
      for b in params.buckets
    ];
    local external = params.endpoint != null;
    local endpointUrl =
      if !external then 'http://%s.%s.svc:%d' % [name, env.namespace, s3Port]
      else if !std.startsWith(params.endpoint, 'http://') && !std.startsWith(params.endpoint, 'https://') then
        u.fail(component, 'endpoint', '%s is not an http:// or https:// URL' % std.manifestJsonMinified(params.endpoint))
      else if generated then u.fail(component, 'credentialsSecret', 'name the Secret with the keys of the external endpoint %s' % params.endpoint)
      else params.endpoint;
    local connection = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta(name + '-endpoint'),
      data: {
        AWS_ENDPOINT_URL: endpointUrl,
        S3_ENDPOINT: endpointUrl,
        AWS_REGION: params.region,
        AWS_DEFAULT_REGION: params.region,
        S3_BUCKETS: std.join(',', buckets),
        S3_CREDENTIALS_SECRET: secretName,
      },
    };
    [connection] + (if external then [] else $.server(params, env, buckets, secretName, generated))
  ),

  validBucket(b):: std.length(b) >= 3 && std.length(b) <= 63
                   && u.onlyChars('abcdefghijklmnopqrstuvwxyz0123456789.-', b)
                   && !std.member('.-', b[0]) && !std.member('.-', b[std.length(b) - 1]),

  // The read-only keys the store always generates: for fetchers and model servers.
  readSecretName(name):: name + '-read-credentials',

  // params.jobBuckets, each checked to be one of the store's buckets.
  jobBuckets(params):: (
    if !std.isArray(params.jobBuckets) then u.fail(component, 'jobBuckets', 'must be a list of buckets, got %s' % std.manifestJsonMinified(params.jobBuckets))
    else [
      if std.member(params.buckets, b) then b
      else u.fail(component, 'jobBuckets', '%s is not a bucket of the store (%s)' % [std.manifestJsonMinified(b), std.join(', ', params.buckets)])
      for b in params.jobBuckets
    ]
  ),

  // What KServe reads on a predictor's ServiceAccount's Secret to reach an S3 store: its
  // endpoint (host:port), plain HTTP, and the region.
  kserveAnnotations(params, env):: {
    'serving.kserve.io/s3-endpoint': '%s.%s.svc:%d' % [params.name, env.namespace, s3Port],
    'serving.kserve.io/s3-usehttps': '0',
    'serving.kserve.io/s3-region': params.region,
  },

  // params.writers checked: the Secret of each writer's keys to the prefixes ("bucket/prefix",
  // the bucket one of the store's) below which they may write.
  writerSecrets(params):: (
    local bad(message) = u.fail(component, 'writers', message + '; expected {"<writer>": ["<bucket>/<prefix>", ...]}, e.g. {"digits-v1": ["models/digits/v1"]}');
    local writerName(w) = std.length(w) >= 1 && std.length(w) <= 40 && u.onlyChars('abcdefghijklmnopqrstuvwxyz0123456789-', w)
                          && w[0] != '-' && w[std.length(w) - 1] != '-';
    local prefix(w, p) =
      local parts = if std.isString(p) then std.split(std.rstripChars(p, '/'), '/') else [];
      if std.length(parts) < 2 || std.member(parts, '') || std.member(parts, '..') || std.member(parts, '.') then
        bad('prefix %s of %s is not <bucket>/<prefix>' % [std.manifestJsonMinified(p), w])
      else if !std.member(params.buckets, parts[0]) then
        bad('prefix %s of %s is in no bucket of the store (%s)' % [std.manifestJsonMinified(p), w, std.join(', ', params.buckets)])
      else std.join('/', parts);
    if !std.isObject(params.writers) then bad('must be an object, got %s' % std.manifestJsonMinified(params.writers))
    else {
      [params.name + '-writer-' + w]:
        if !writerName(w) then bad('writer %s is not a name (1-40 lower-case letters, digits and hyphens)' % std.manifestJsonMinified(w))
        else if !std.isArray(params.writers[w]) || params.writers[w] == [] then bad('writer %s needs a list of prefixes' % w)
        else [prefix(w, p) for p in params.writers[w]]
      for w in std.objectFields(params.writers)
    }
  ),

  // The ServiceAccount and Role of the init container that makes or reads the credentials.

  access(params, env, secretName, generated):: (
    local name = params.name;
    local meta(objectName) = u.metadata(objectName, part, {}, name);
    [
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(name) },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: meta(name),
        rules: [
          {
            apiGroups: [''],
            resources: ['secrets'],
            resourceNames: [secretName, $.readSecretName(name)] + std.objectFields($.writerSecrets(params)),
            verbs: ['get'],
          },
          // The read-only keys get KServe's annotations, naming the store's endpoint.
          { apiGroups: [''], resources: ['secrets'], resourceNames: [$.readSecretName(name)], verbs: ['patch'] },
          // `create` cannot be limited to a name; the scripts create only those and the
          // Secrets of the model keys' requests.
          { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
          // The requests for model keys (model_keys.py), and the events of those it refuses.
          { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] },
          { apiGroups: [''], resources: ['events'], verbs: ['create'] },
          // The jobs a request names: once they have finished, their keys no longer write.
          { apiGroups: ['kubeflow.org'], resources: admission.jobs, verbs: ['get'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta(name),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: name },
        subjects: [{ kind: 'ServiceAccount', name: name, namespace: env.namespace }],
      },
    ]
  ),

  server(params, env, buckets, secretName, generated):: (
    local name = params.name;
    local meta(objectName) = u.metadata(objectName, part, {}, name);
    local scripts = {
      'credentials.py': importstr 'mlkube/object-store/credentials.py',
      'kube_api.py': importstr 'mlkube/object-store/kube_api.py',
      'model_keys.py': importstr 'mlkube/object-store/model_keys.py',
      's3_ready.py': importstr 'mlkube/object-store/s3_ready.py',
    };
    $.access(params, env, secretName, generated) + [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: meta(name + '-scripts'),
        data: scripts,
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: meta(name),
        spec: {
          selector: u.selector(name, part),
          ports: [{ name: 's3', port: s3Port, targetPort: 's3', protocol: 'TCP' }],
        },
      },
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: meta(name),
        spec: {
          podSelector: { matchLabels: u.selector(name, part) },
          policyTypes: ['Ingress'],
          ingress: [{
            from: [
              u.namespacePeer(ns)
              for ns in std.set([env.namespace] + u.namespaceNames(component, 'grantedNamespaces', params.grantedNamespaces))
            ],
            ports: [{ protocol: 'TCP', port: s3Port }],
          }],
        },
      },
      $.statefulSet(params, env, buckets, secretName, generated, std.md5(std.manifestJson(scripts))),
    ]
  ),

  statefulSet(params, env, buckets, secretName, generated, scriptsHash):: (
    local name = params.name;
    local credential(key) = { name: key, valueFrom: { secretKeyRef: { name: secretName, key: key } } };
    local credentials = [credential('AWS_ACCESS_KEY_ID'), credential('AWS_SECRET_ACCESS_KEY')];
    local mounts = [{ name: 'tmp', mountPath: '/tmp' }];
    local container(containerName) = {
      name: containerName,
      image: params.image,
      resources: u.resources(params),
      securityContext: u.containerSecurity(uid),
    };
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: u.metadata(name, part, {}, name),
      spec: {
        // One pod: `weed mini` keeps master, volume server and filer in one process.
        replicas: 1,
        serviceName: name,
        selector: { matchLabels: u.selector(name, part) },
        updateStrategy: { type: 'RollingUpdate' },
        template: {
          metadata: {
            labels: u.selector(name, part),
            annotations: { 'mlkube.io/config-hash': scriptsHash },
          },
          spec: {
            serviceAccountName: name,
            securityContext: u.podSecurity(uid, gid),
            initContainers: [container('credentials') {
              command: ['python3', '/scripts/credentials.py'],
              env: [
                { name: 'SECRET_NAME', value: secretName },
                { name: 'GENERATE', value: std.toString(generated) },
                { name: 'READ_SECRET_NAME', value: $.readSecretName(name) },
                { name: 'READ_SECRET_ANNOTATIONS', value: std.manifestJsonMinified($.kserveAnnotations(params, env)) },
                { name: 'SECRET_LABELS', value: std.manifestJsonMinified(u.selector(name, part)) },
                { name: 'WRITERS', value: std.manifestJsonMinified($.writerSecrets(params)) },
                { name: 'CONFIG_FILE', value: identitiesFile },
              ],
              resources: u.resources(params { cpuRequest: '10m', memoryRequest: '32Mi' }),
              volumeMounts: [
                { name: 'scripts', mountPath: '/scripts', readOnly: true },
                { name: 'identities', mountPath: identitiesDir },
              ],
            }],
            containers: [
              container('store') {
                command: [
                  'weed', 'mini', '-dir=/data', '-ip=127.0.0.1', '-ip.bind=127.0.0.1',
                  '-master.port=%d' % masterPort, '-filer.port=%d' % filerPort, '-volume.port=9340',
                  '-s3.port=%d' % innerS3Port, '-s3.port.iceberg=0', '-s3.port.lance=0',
                  '-webdav=false', '-admin.ui=false', '-bucket=' + std.join(',', buckets),
                ],
                env: credentials,
                volumeMounts: mounts + [{ name: 'data', mountPath: '/data' }],
              },
              container('s3') {
                command: [
                  'weed', 's3', '-filer=127.0.0.1:%d' % filerPort, '-ip.bind=0.0.0.0',
                  '-port=%d' % s3Port, '-port.iceberg=0', '-port.lance=0', '-config=' + identitiesFile,
                ],
                env: credentials + [
                  { name: 'S3_ENDPOINT', value: 'http://127.0.0.1:%d' % s3Port },
                  { name: 'S3_BUCKETS', value: std.join(',', buckets) },
                  { name: 'AWS_REGION', value: params.region },
                ],
                ports: [{ name: 's3', containerPort: s3Port, protocol: 'TCP' }],
                readinessProbe: { exec: { command: ['python3', '/scripts/s3_ready.py'] }, periodSeconds: 10, timeoutSeconds: 10, failureThreshold: 2 },
                livenessProbe: { tcpSocket: { port: 's3' }, initialDelaySeconds: 30, periodSeconds: 20, failureThreshold: 6 },
                resources: u.resources(params { cpuRequest: '50m', memoryRequest: '128Mi' }),
                volumeMounts: mounts + [
                  { name: 'scripts', mountPath: '/scripts', readOnly: true },
                  { name: 'identities', mountPath: identitiesDir, readOnly: true },
                ],
              },
              container('model-keys') {
                command: ['python3', '/scripts/model_keys.py'],
                env: [
                  { name: 'STORE', value: name },
                  { name: 'JOB_BUCKETS', value: std.manifestJsonMinified($.jobBuckets(params)) },
                  { name: 'MASTER', value: '127.0.0.1:%d' % masterPort },
                  { name: 'FILER', value: '127.0.0.1:%d' % filerPort },
                  { name: 'HOME', value: '/tmp' },
                ],
                resources: u.resources(params { cpuRequest: '10m', memoryRequest: '64Mi' }),
                volumeMounts: mounts + [{ name: 'scripts', mountPath: '/scripts', readOnly: true }],
              },
            ],
            volumes: [
              { name: 'scripts', configMap: { name: name + '-scripts' } },
              { name: 'tmp', emptyDir: {} },
              { name: 'identities', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
            ],
          },
        },
        volumeClaimTemplates: [{
          metadata: { name: 'data' },
          spec: std.prune({
            accessModes: ['ReadWriteOnce'],
            storageClassName: params.storageClass,
            resources: { requests: { storage: params.storage } },
          }),
        }],
      },
    }
  ),
}
