// TensorFlow Serving: one instance per model, with optional canary versions behind Istio.
local u = import 'mlkube/util.libsonnet';

local component = 'tf-serving';
local part = 'tf-serving';
local grpcPort = 9000;
local restPort = 8501;
// Kubeflow's package served REST on 8500; the Service keeps that port for its clients.
local kubeflowRestPort = 8500;
local monitoringPath = '/monitoring/prometheus/metrics';

// 'v1:90,v2:10' -> [{version: 'v1', weight: 90}, {version: 'v2', weight: 10}], or an error that
// names the param.
local parseTrafficRule(rule) =
  local bad(message) = u.fail(component, 'trafficRule', '%s in %s; expected <version>:<weight>[,...] with weights summing to 100, e.g. v1:90,v2:10' % [message, std.manifestJson(rule)]);
  local entry(text) =
    local kv = std.split(std.trim(text), ':');
    local version = if std.length(kv) == 2 then std.trim(kv[0]) else '';
    local weight = if std.length(kv) == 2 then std.trim(kv[1]) else '';
    if version == '' || weight == '' then bad('entry %s is not <version>:<weight>' % std.manifestJson(text))
    else if !std.all([std.member('0123456789', c) for c in std.stringChars(weight)]) then
      bad('weight %s of %s is not a whole number' % [std.manifestJson(weight), version])
    else if std.length(std.findSubstr('.', version)) > 0 || std.asciiLower(version) != version then
      bad('version %s must be a lowercase name (it becomes part of a Deployment name)' % std.manifestJson(version))
    else { version: version, weight: std.parseInt(weight) };
  local entries = [entry(e) for e in std.split(rule, ',')];
  local versions = [e.version for e in entries];
  if std.length(std.set(versions)) != std.length(versions) then bad('a version is listed twice')
  else if std.sum([e.weight for e in entries]) != 100 then bad('weights sum to %d' % std.sum([e.weight for e in entries]))
  else entries;

{
  name: component,
  description: |||
    TensorFlow Serving for one model: `tensorflow_model_server` with gRPC on 9000 and REST on 8501.
    Renders one Deployment per version named in trafficRule (`v1:100` = one version; `v1:90,v2:10`
    = a canary, v2 serving the path in versionModelBasePaths), a Service (gRPC 9000, REST 8501 and
    8500, Kubeflow's REST port), the monitoring ConfigMap (Prometheus metrics on the REST port), a
    PodDisruptionBudget when minAvailable is set, and with istio on, a networking.istio.io/v1
    VirtualService that splits traffic by the weights (plus one on istioGateway at
    /tfserving/models/<model>, when set) and a DestinationRule with one subset per version.
    Without istio, the Service balances over every version's pods by replica count.
    Pods run non-root with a read-only root filesystem, a TCP liveness probe on gRPC and a
    readiness probe on the model's REST status; GPUs (numGpus) switch to gpuImage.
    Dropped from Kubeflow's package: the HTTP proxy sidecar (TF Serving has had a REST API since
    1.8); Ambassador mappings and the v1alpha2 RouteRule (Istio v1 or an Ingress replace them);
    the separate tf-serving-service prototype (merged: one instance per model); cloud, S3 and NFS
    specifics, replaced by credentialsSecret (env vars), gcpCredentialSecret and modelPvc.
  ||| + u.paramsLine($.params),
  params: {
    modelName: { type: 'string', default: null, description: 'Model name served; null uses the component name.' },
    modelBasePath: { type: 'string', default: 'gs://kubeflow-examples-data/mnist', description: 'Model base path (gs://, s3:// or a path under /mnt with modelPvc).' },
    image: { type: 'image', default: 'tensorflow/serving:2.18.0', description: 'Model server image without GPUs.' },
    gpuImage: { type: 'image', default: 'tensorflow/serving:2.18.0-gpu', description: 'Model server image used when numGpus > 0.' },
    numGpus: { type: 'integer', minimum: 0, default: 0, description: 'nvidia.com/gpu per replica.' },
    replicas: { type: 'integer', minimum: 1, default: 1, description: 'Replicas of each version.' },
    serviceType: { type: 'string', enum: ['ClusterIP', 'NodePort', 'LoadBalancer'], default: 'ClusterIP', description: 'Service type: ClusterIP, NodePort or LoadBalancer.' },
    trafficRule: { type: 'string', default: 'v1:100', description: 'Versions and their traffic weights in percent, e.g. v1:90,v2:10.' },
    versionModelBasePaths: { type: 'object', default: {}, description: 'Per-version model base paths overriding modelBasePath, e.g. {v2: "gs://bucket/mnist-v2"}.' },
    istio: { type: 'boolean', default: false, description: 'Inject the Istio sidecar and render the VirtualService and DestinationRule.' },
    istioGateway: { type: 'string', default: null, description: 'Istio Gateway (<namespace>/<name>) exposing /tfserving/models/<model>; null is mesh-only.' },
    enablePrometheus: { type: 'boolean', default: true, description: 'Serve Prometheus metrics and add scrape annotations.' },
    credentialsSecret: { type: 'string', default: null, description: 'Secret whose keys become env vars (AWS_ACCESS_KEY_ID, AWS_REGION, S3_ENDPOINT, ...).' },
    gcpCredentialSecret: { type: 'string', default: null, description: 'Secret with key.json, mounted for GOOGLE_APPLICATION_CREDENTIALS.' },
    modelPvc: { type: 'string', default: null, description: 'PersistentVolumeClaim mounted read-only at /mnt (for NFS-held models).' },
    minAvailable: { type: 'integer', minimum: 0, default: null, description: 'PodDisruptionBudget minAvailable per version; null renders no budget.' },
  } + u.resourceParams('500m', '1Gi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local model = if params.modelName == null then name else params.modelName;
    local traffic = parseTrafficRule(params.trafficRule);
    local versions = [t.version for t in traffic];
    local serviceType = u.oneOf(component, params, 'serviceType', ['ClusterIP', 'NodePort', 'LoadBalancer']);
    local replicas = if params.replicas < 1 then u.fail(component, 'replicas', 'must be at least 1, got %d' % params.replicas) else params.replicas;
    local numGpus = if params.numGpus < 0 then u.fail(component, 'numGpus', 'must not be negative, got %d' % params.numGpus) else params.numGpus;
    local unknownVersions = std.setDiff(std.set(std.objectFields(params.versionModelBasePaths)), std.set(versions));
    local basePath(version) =
      if std.length(unknownVersions) > 0 then
        u.fail(component, 'versionModelBasePaths', 'versions %s are not in trafficRule %s' % [std.join(', ', unknownVersions), params.trafficRule])
      else if std.objectHas(params.versionModelBasePaths, version) then
        local path = params.versionModelBasePaths[version];
        if std.isString(path) then path else u.fail(component, 'versionModelBasePaths', 'the path of %s must be a string' % version)
      else params.modelBasePath;
    local gateway =
      if params.istioGateway == null then null
      else if !params.istio then u.fail(component, 'istioGateway', 'is set but istio is off; set istio: true or istioGateway: null')
      else if std.length(std.split(params.istioGateway, '/')) == 2 then params.istioGateway
      else u.fail(component, 'istioGateway', '%s is not <namespace>/<name>' % std.manifestJson(params.istioGateway));
    local configName = name + '-config';
    local versionLabels(version) = u.selector(name, part) + { version: version };

    local deployment(version) = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(name + '-' + version, { version: version }),
      spec: {
        replicas: replicas,
        selector: { matchLabels: versionLabels(version) },
        template: {
          metadata: {
            labels: versionLabels(version) + (if params.istio then { 'sidecar.istio.io/inject': 'true' } else {}),
            [if params.enablePrometheus then 'annotations']: {
              'prometheus.io/scrape': 'true',
              'prometheus.io/port': std.toString(restPort),
              'prometheus.io/path': monitoringPath,
            },
          },
          spec: {
            securityContext: u.podSecurity(1000),
            containers: [{
              name: 'model-server',
              image: if numGpus > 0 then params.gpuImage else params.image,
              command: ['/usr/bin/tensorflow_model_server'],
              args: [
                '--port=%d' % grpcPort,
                '--rest_api_port=%d' % restPort,
                '--model_name=' + model,
                '--model_base_path=' + basePath(version),
              ] + (if params.enablePrometheus then ['--monitoring_config_file=/var/config/monitoring_config.txt'] else []),
              ports: [
                { name: 'grpc', containerPort: grpcPort, protocol: 'TCP' },
                { name: 'rest', containerPort: restPort, protocol: 'TCP' },
              ],
              [if params.gcpCredentialSecret != null then 'env']: [
                { name: 'GOOGLE_APPLICATION_CREDENTIALS', value: '/secret/gcp-credentials/key.json' },
              ],
              [if params.credentialsSecret != null then 'envFrom']: [{ secretRef: { name: params.credentialsSecret } }],
              livenessProbe: { tcpSocket: { port: 'grpc' }, initialDelaySeconds: 30, periodSeconds: 30 },
              readinessProbe: { httpGet: { path: '/v1/models/' + model, port: 'rest' }, periodSeconds: 10 },
              resources: u.resources(params, if numGpus > 0 then { 'nvidia.com/gpu': numGpus } else {}),
              securityContext: u.containerSecurity(1000),
              volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }]
                            + (if params.enablePrometheus then [{ name: 'config', mountPath: '/var/config', readOnly: true }] else [])
                            + (if params.gcpCredentialSecret == null then [] else [{ name: 'gcp-credentials', mountPath: '/secret/gcp-credentials', readOnly: true }])
                            + (if params.modelPvc == null then [] else [{ name: 'models', mountPath: '/mnt', readOnly: true }]),
            }],
            volumes: [{ name: 'tmp', emptyDir: {} }]
                     + (if params.enablePrometheus then [{ name: 'config', configMap: { name: configName } }] else [])
                     + (if params.gcpCredentialSecret == null then [] else [{ name: 'gcp-credentials', secret: { secretName: params.gcpCredentialSecret } }])
                     + (if params.modelPvc == null then [] else [{ name: 'models', persistentVolumeClaim: { claimName: params.modelPvc, readOnly: true } }]),
          },
        },
      },
    };

    local pdb(version) =
      [p { metadata+: { name: name + '-' + version, labels+: { version: version } }, spec+: { selector: { matchLabels: versionLabels(version) } } } for p in u.pdb(component, params, part, replicas)];

    local split = [{ destination: { host: name, subset: t.version }, weight: t.weight } for t in traffic];
    local istioObjects = if !params.istio then [] else [
      {
        apiVersion: 'networking.istio.io/v1',
        kind: 'DestinationRule',
        metadata: meta(name),
        spec: {
          host: name,
          subsets: [{ name: v, labels: { version: v } } for v in versions],
        },
      },
      {
        apiVersion: 'networking.istio.io/v1',
        kind: 'VirtualService',
        metadata: meta(name),
        spec: {
          hosts: [name],
          gateways: ['mesh'],
          http: [{ route: split }],
        },
      },
    ] + (
      if gateway == null then [] else [{
        apiVersion: 'networking.istio.io/v1',
        kind: 'VirtualService',
        metadata: meta(name + '-gateway'),
        spec: {
          hosts: ['*'],
          gateways: [gateway],
          http: [{
            match: [{ uri: { prefix: '/tfserving/models/' + model } }],
            rewrite: { uri: '/v1/models/' + model },
            route: [r { destination+: { port: { number: restPort } } } for r in split],
          }],
        },
      }]
    );

    assert gateway == null || std.isString(gateway);
    (if params.enablePrometheus then [{
       apiVersion: 'v1',
       kind: 'ConfigMap',
       metadata: meta(configName),
       data: {
         'monitoring_config.txt': 'prometheus_config {\n  enable: true\n  path: "%s"\n}\n' % monitoringPath,
       },
     }] else [])
    + [{
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(name),
      spec: {
        type: serviceType,
        selector: u.selector(name, part),
        ports: [
          // The port names carry the protocol, so Istio routes gRPC and HTTP correctly.
          { name: 'grpc-tf-serving', port: grpcPort, targetPort: 'grpc', protocol: 'TCP' },
          { name: 'http-tf-serving', port: restPort, targetPort: 'rest', protocol: 'TCP' },
          { name: 'http-tf-serving-kubeflow', port: kubeflowRestPort, targetPort: 'rest', protocol: 'TCP' },
        ],
      },
    }]
    + [deployment(v) for v in versions]
    + std.flattenArrays([pdb(v) for v in versions])
    + istioObjects
  ),
}
