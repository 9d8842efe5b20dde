// Serving one model: TensorFlow Serving or MLServer, one Deployment per version, and canary
// weights by a Gateway API HTTPRoute or an Istio VirtualService.
local u = import 'mlkube/util.libsonnet';

local component = 'serving';
// The pods' `app.kubernetes.io/name`, from the prototype's first name, tf-serving: it is in
// every Deployment's selector, which cannot change, so apps made before the rename go on applying.
local part = 'tf-serving';
local grpcPort = 9000;
local restPort = 8501;
// Kubeflow's package served REST on 8500; the Service keeps that port for its clients.
local kubeflowRestPort = 8500;
local monitoringPath = '/monitoring/prometheus/metrics';
// MLServer's ports in the image image/serving/ builds: the V2 protocol over REST and gRPC.
local v2RestPort = 8080;
local v2GrpcPort = 8081;
// Where an MLServer pod's init container puts the model it fetched from the store.
local modelsDir = '/models';
// Seconds a retiring pod goes on serving after it is told to stop (a pruned version, a rollout,
// an eviction by `kubectl drain`): its endpoint turns not ready at once, but the gateway learns
// it a moment later (Traefik balances over the Service's ready EndpointSlice addresses
// itself, not through the Service's virtual IP, and takes them from the gateway's
// `gateway-routes` a second or two after the change), and kube-proxy, for clients of the
// Service, as late. A preStop sleep keeps the server answering until nobody sends it anything new; then it
// gets SIGTERM and finishes what it has in flight.
local drainSeconds = 5;
local runtimeNames = ['tensorflow-serving', 'mlserver'];
local formatNames = ['tensorflow', 'xgboost'];

// 'v1:90,v2:10' -> [{version: 'v1', weight: 90}, {version: 'v2', weight: 10}], or an error that
// names the param.
local parseTrafficRule(rule) =
  local bad(message) = u.fail(component, 'trafficRule', '%s in %s; expected <version>:<weight>[,...] with weights summing to 100, e.g. v1:90,v2:10' % [message, std.manifestJsonMinified(rule)]);
  local entry(text) =
    local kv = std.split(std.trim(text), ':');
    local version = if std.length(kv) == 2 then std.trim(kv[0]) else '';
    local weight = if std.length(kv) == 2 then std.trim(kv[1]) else '';
    if version == '' || weight == '' then bad('entry %s is not <version>:<weight>' % std.manifestJsonMinified(text))
    else if !u.onlyChars('0123456789', weight) then
      bad('weight %s of %s is not a whole number' % [std.manifestJsonMinified(weight), version])
    else if std.length(std.findSubstr('.', version)) > 0 || std.asciiLower(version) != version then
      bad('version %s must be a lowercase name (it becomes part of a Deployment name)' % std.manifestJsonMinified(version))
    else { version: version, weight: std.parseInt(weight) };
  local entries = [entry(e) for e in std.split(rule, ',')];
  local versions = [e.version for e in entries];
  if std.length(std.set(versions)) != std.length(versions) then bad('a version is listed twice')
  else if std.sum([e.weight for e in entries]) != 100 then bad('weights sum to %d' % std.sum([e.weight for e in entries]))
  else entries;

// The model path of `version`: its entry in versionModelBasePaths, else modelBasePath with
// `{version}` replaced by the version's name.
local versionPath(params, versions, version) =
  local unknown = std.setDiff(std.set(std.objectFields(params.versionModelBasePaths)), std.set(versions));
  if std.length(unknown) > 0 then
    u.fail(component, 'versionModelBasePaths', 'versions %s are not in trafficRule %s' % [std.join(', ', unknown), params.trafficRule])
  else if std.objectHas(params.versionModelBasePaths, version) then
    local path = params.versionModelBasePaths[version];
    if std.isString(path) then path else u.fail(component, 'versionModelBasePaths', 'the path of %s must be a string' % version)
  else std.strReplace(params.modelBasePath, '{version}', version);

// MLServer fetches s3://bucket/prefix from objectStore, or reads a path under /mnt of modelPvc.
local checkedMlserverPath(params, version, path) =
  local s3 = std.startsWith(path, 's3://');
  local parts = std.split(std.lstripChars(std.substr(path, 5, std.length(path)), '/'), '/');
  local where = 'the model path of %s, %s,' % [version, std.manifestJsonMinified(path)];
  if s3 && (std.length(parts) < 2 || std.length(parts[0]) < 3 || std.rstripChars(parts[1], '/') == '') then
    u.fail(component, 'modelBasePath', '%s is not s3://bucket/prefix, e.g. s3://models/xgboost-digits/{version}/' % where)
  else if s3 && params.objectStore == null then
    u.fail(component, 'objectStore', '%s is in an object store: name its object-store component in objectStore' % where)
  else if !s3 && !(params.modelPvc != null && std.startsWith(path, '/mnt/')) then
    u.fail(component, 'modelBasePath', '%s must be s3://bucket/prefix (with objectStore) or a path under /mnt (with modelPvc) for runtime mlserver' % where)
  else path;

// The gateway's <namespace>/<name> or <name> as an HTTPRoute parentRef.
local parentRef(gateway) =
  local parts = std.split(gateway, '/');
  if std.length(parts) == 1 && parts[0] != '' then { name: parts[0] }
  else if std.length(parts) == 2 && parts[0] != '' && parts[1] != '' then { namespace: parts[0], name: parts[1] }
  else u.fail(component, 'gateway', '%s is not <name> or <namespace>/<name> of a Gateway' % std.manifestJsonMinified(gateway));

{
  name: component,
  description: |||
    Serving for one model, one Deployment per version named in trafficRule (`v1:100` = one
    version; `v1:90,v2:10` = a canary, each version serving its own model path), by one of two
    runtimes (runtime):
    - `tensorflow-serving`: `tensorflow_model_server` (image, a registry's), gRPC on 9000 and
      REST on 8501 (and 8500, Kubeflow's REST port, on the Service), TensorFlow SavedModels only,
      read from modelBasePath (gs://, s3:// or a path under /mnt with modelPvc); ready when its
      REST status answers; Prometheus metrics on the REST port (the monitoring ConfigMap).
    - `mlserver`: Seldon's MLServer from the image image/serving/ builds (mlserverImage), the V2
      (Open Inference) protocol, REST on 8080 and gRPC on 8081, for modelFormat `xgboost`
      (model.json) or `tensorflow` (a SavedModel). An init container copies the version's model
      from objectStore (s3://bucket/prefix/) into the pod, and fails, saying so, when nothing is
      there; the pod is ready only once the model answers /v2/models/<model>/ready.
    A version's model path is its entry in versionModelBasePaths, else modelBasePath with
    `{version}` replaced by the version's name (s3://models/digits/{version}/). Renders a
    Service over every version; with gateway set, a Service per version (<name>-<version>) and a
    Gateway API HTTPRoute on that Gateway sending /v2/models/<model> (/v1/models/<model> and
    its own :predict, :classify and :regress URLs for TensorFlow Serving) to the versions by
    their weights: `apply` brings every version's
    Deployment to ready before it writes the route, so weight only moves to versions that
    answer, and a retiring pod serves for a few seconds after it is told to stop. With istio on,
    a networking.istio.io/v1 VirtualService splits by the same weights (plus one on istioGateway
    at /tfserving/models/<model>, when set) and a DestinationRule has one subset per version.
    Without either, the Service balances over every version's pods by replica count. A
    version's replicas spread over the nodes (a preference: they share a node when no other
    fits), and a PodDisruptionBudget per version (maxUnavailable 1 by default, or minAvailable)
    lets `kubectl drain` evict one replica at a time, the next once its replacement is Ready.
    Pods run non-root with a read-only root filesystem; GPUs (numGpus) switch TensorFlow
    Serving to gpuImage.
    Dropped from Kubeflow's package: the HTTP proxy sidecar (TF Serving has had a REST API since
    1.8); Ambassador mappings and the v1alpha2 RouteRule (the Gateway API or Istio v1 replace
    them); the separate tf-serving-service prototype (merged: one instance per model); cloud, S3
    and NFS specifics, replaced by credentialsSecret (env vars), gcpCredentialSecret and modelPvc.
  ||| + u.paramsLine($.params),
  params: {
    modelName: { type: 'string', default: null, description: 'Model name served; null uses the component name.' },
    runtime: { type: 'string', enum: runtimeNames, default: 'tensorflow-serving', description: 'Model server: tensorflow-serving (SavedModels; its image from a registry) or mlserver (V2 protocol; the image image/serving/ builds).' },
    modelFormat: { type: 'string', enum: formatNames, default: 'tensorflow', description: 'What the model path holds: tensorflow (a SavedModel) or xgboost (model.json; mlserver only).' },
    modelBasePath: { type: 'string', default: 'gs://kubeflow-examples-data/mnist', description: 'Model base path (gs://, s3:// or a path under /mnt with modelPvc); {version} is replaced by each version.' },
    image: { type: 'image', default: 'tensorflow/serving:2.18.0', description: 'TensorFlow Serving image without GPUs.' },
    gpuImage: { type: 'image', default: 'tensorflow/serving:2.18.0-gpu', description: 'TensorFlow Serving image used when numGpus > 0.' },
    mlserverImage: { type: 'image', default: 'mlkube/serving:0.1.0', description: 'MLServer image (image/serving/build.sh) for runtime mlserver.' },
    numGpus: { type: 'integer', minimum: 0, default: 0, description: 'nvidia.com/gpu per replica.' },
    replicas: { type: 'integer', minimum: 1, default: 1, description: 'Replicas of each version.' },
    serviceType: { type: 'string', enum: ['ClusterIP', 'NodePort', 'LoadBalancer'], default: 'ClusterIP', description: 'Service type: ClusterIP, NodePort or LoadBalancer.' },
    trafficRule: { type: 'string', default: 'v1:100', description: 'Versions and their traffic weights in percent, e.g. v1:90,v2:10.' },
    versionModelBasePaths: { type: 'object', default: {}, description: 'Per-version model base paths overriding modelBasePath, e.g. {v2: "gs://bucket/mnist-v2"}.' },
    gateway: { type: 'string', default: null, description: 'Gateway API Gateway (<name> in this namespace, or <namespace>/<name>) whose HTTPRoute splits traffic by trafficRule; null renders no route.' },
    directClients: { type: 'array', items: { type: 'string' }, default: null, description: "Namespaces whose pods may call the model servers directly (the Services); null is none with gateway set (only the gateway's pods reach them) and this namespace without." },
    objectStore: { type: 'string', default: null, description: "Object-store component holding s3:// model paths (its <name>-endpoint ConfigMap and keys reach MLServer's init container); null for none." },
    objectStoreCredentials: { type: 'string', default: null, description: "Secret with the store's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; null is <objectStore>-read-credentials, the store's read-only keys." },
    readyTimeout: { type: 'integer', minimum: 10, default: 300, description: "Seconds a version's rollout may make no progress before its Deployment fails (progressDeadlineSeconds), so apply stops waiting and names it." },
    istio: { type: 'boolean', default: false, description: 'Inject the Istio sidecar and render the VirtualService and DestinationRule.' },
    istioGateway: { type: 'string', default: null, description: 'Istio Gateway (<namespace>/<name>) exposing /tfserving/models/<model>; null is mesh-only.' },
    enablePrometheus: { type: 'boolean', default: true, description: 'Serve Prometheus metrics and add scrape annotations (tensorflow-serving).' },
    credentialsSecret: { type: 'string', default: null, description: 'Secret whose keys become env vars (AWS_ACCESS_KEY_ID, AWS_REGION, S3_ENDPOINT, ...).' },
    gcpCredentialSecret: { type: 'string', default: null, description: 'Secret with key.json, mounted for GOOGLE_APPLICATION_CREDENTIALS.' },
    modelPvc: { type: 'string', default: null, description: 'PersistentVolumeClaim mounted read-only at /mnt (for NFS-held models).' },
    maxUnavailable: { type: 'integer', minimum: 1, default: 1, description: "PodDisruptionBudget per version: at most this many of its pods evicted at once (kubectl drain waits for the replacements to be Ready); 1 still lets a drain evict the pod of a single replica." },
    minAvailable: { type: 'integer', minimum: 0, default: null, description: 'PodDisruptionBudget minAvailable per version instead of maxUnavailable (below replicas, or drains block); null uses maxUnavailable.' },
  } + u.resourceParams('500m', '1Gi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local model = if params.modelName == null then name else params.modelName;
    local traffic = parseTrafficRule(params.trafficRule);
    local versions = [t.version for t in traffic];
    local runtime = u.oneOf(component, params, 'runtime', runtimeNames);
    local format = u.oneOf(component, params, 'modelFormat', formatNames);
    local mlserver = runtime == 'mlserver';
    local serviceType = u.oneOf(component, params, 'serviceType', ['ClusterIP', 'NodePort', 'LoadBalancer']);
    local replicas = if params.replicas < 1 then u.fail(component, 'replicas', 'must be at least 1, got %d' % params.replicas) else params.replicas;
    local numGpus =
      if params.numGpus < 0 then u.fail(component, 'numGpus', 'must not be negative, got %d' % params.numGpus)
      else if mlserver && params.numGpus > 0 then u.fail(component, 'numGpus', 'runtime mlserver serves on the CPU here; set numGpus 0 or runtime tensorflow-serving')
      else params.numGpus;
    local basePath(version) =
      local path = versionPath(params, versions, version);
      if mlserver then checkedMlserverPath(params, version, path) else path;
    local checkedFormat =
      if !mlserver && format != 'tensorflow' then
        u.fail(component, 'modelFormat', 'runtime tensorflow-serving cannot load %s models (TensorFlow Serving loads SavedModels only); set runtime mlserver' % format)
      else format;
    local gateway =
      if params.istioGateway == null then null
      else if !params.istio then u.fail(component, 'istioGateway', 'is set but istio is off; set istio: true or istioGateway: null')
      else if std.length(std.split(params.istioGateway, '/')) == 2 then params.istioGateway
      else u.fail(component, 'istioGateway', '%s is not <namespace>/<name>' % std.manifestJsonMinified(params.istioGateway));
    local route = if params.gateway == null then null else parentRef(params.gateway);
    local configName = name + '-config';
    local versionLabels(version) = u.selector(name, part) + { version: version };
    local restTarget = if mlserver then v2RestPort else restPort;
    local servicePorts =
      if mlserver then [
        { name: 'http-mlserver', port: v2RestPort, targetPort: 'http', protocol: 'TCP' },
        { name: 'grpc-mlserver', port: v2GrpcPort, targetPort: 'grpc', protocol: 'TCP' },
      ] else [
        // The port names carry the protocol, so Istio routes gRPC and HTTP correctly.
        { name: 'grpc-tf-serving', port: grpcPort, targetPort: 'grpc', protocol: 'TCP' },
        { name: 'http-tf-serving', port: restPort, targetPort: 'rest', protocol: 'TCP' },
        { name: 'http-tf-serving-kubeflow', port: kubeflowRestPort, targetPort: 'rest', protocol: 'TCP' },
      ];
    local prometheus = params.enablePrometheus && !mlserver;

    local tfServingContainer(version) = {
      name: 'model-server',
      image: if numGpus > 0 then params.gpuImage else params.image,
      command: ['/usr/bin/tensorflow_model_server'],
      args: [
        '--port=%d' % grpcPort,
        '--rest_api_port=%d' % restPort,
        '--model_name=' + model,
        '--model_base_path=' + basePath(version),
      ] + (if prometheus then ['--monitoring_config_file=/var/config/monitoring_config.txt'] else []),
      ports: [
        { name: 'grpc', containerPort: grpcPort, protocol: 'TCP' },
        { name: 'rest', containerPort: restPort, protocol: 'TCP' },
      ],
      livenessProbe: { tcpSocket: { port: 'grpc' }, initialDelaySeconds: 30, periodSeconds: 30 },
      readinessProbe: { httpGet: { path: '/v1/models/' + model, port: 'rest' }, periodSeconds: 10 },
    };

    local storeAccess =
      if params.objectStore == null then []
      else [
        { configMapRef: { name: params.objectStore + '-endpoint' } },
        { secretRef: { name: if params.objectStoreCredentials == null then params.objectStore + '-read-credentials' else params.objectStoreCredentials } },
      ];
    local fetched(version) = std.startsWith(basePath(version), 's3://');
    local modelDir(version) = if fetched(version) then modelsDir + '/' + model else basePath(version);
    local fetchContainer(version) = {
      name: 'fetch-model',
      image: params.mlserverImage,
      command: ['python3', '-m', 'mlkube_serving.fetch', '--uri', basePath(version), '--dest', modelDir(version)],
      envFrom: storeAccess,
      resources: u.resources(params),
      securityContext: u.containerSecurity(1000),
      volumeMounts: [{ name: 'models', mountPath: modelsDir }, { name: 'tmp', mountPath: '/tmp' }],
    };
    // MLServer answers its probes on the event loop that runs inference (parallel_workers 0),
    // so a probe can wait behind a batch on a busy node; the default 1 s would take a loaded
    // model out of service, or restart it, for being busy.
    local modelReady = { httpGet: { path: '/v2/models/%s/ready' % model, port: 'http' }, timeoutSeconds: 5 };
    local mlserverContainer(version) = {
      name: 'model-server',
      image: params.mlserverImage,
      command: [
        'python3', '-m', 'mlkube_serving.serve', '--name', model, '--version', version,
        '--format', checkedFormat, '--model-dir', modelDir(version),
        '--http-port', std.toString(v2RestPort), '--grpc-port', std.toString(v2GrpcPort),
      ],
      ports: [
        { name: 'http', containerPort: v2RestPort, protocol: 'TCP' },
        { name: 'grpc', containerPort: v2GrpcPort, protocol: 'TCP' },
      ],
      // Alive only while the model is loaded: one unloaded (MLServer's repository API) is
      // loaded again by a restart, not left out of service for good. The startup probe gives
      // the first load readyTimeout seconds.
      startupProbe: modelReady { periodSeconds: 2, failureThreshold: std.max(1, std.floor(params.readyTimeout / 2)) },
      livenessProbe: modelReady { periodSeconds: 10, failureThreshold: 3 },
      readinessProbe: modelReady { periodSeconds: 2 },
    };

    local deployment(version) = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(name + '-' + version, { version: version }) + {
        annotations: { 'serving.mlkube.io/model-path': basePath(version), 'serving.mlkube.io/runtime': runtime },
      },
      spec: {
        replicas: replicas,
        progressDeadlineSeconds: params.readyTimeout,
        selector: { matchLabels: versionLabels(version) },
        template: {
          metadata: {
            labels: versionLabels(version) + (if params.istio then { 'sidecar.istio.io/inject': 'true' } else {}),
            [if prometheus then 'annotations']: {
              'prometheus.io/scrape': 'true',
              'prometheus.io/port': std.toString(restPort),
              'prometheus.io/path': monitoringPath,
            },
          },
          spec: {
            securityContext: u.podSecurity(1000),
            // The drain, then what is in flight.
            terminationGracePeriodSeconds: drainSeconds + 25,
            topologySpreadConstraints: u.spreadOverNodes(versionLabels(version)),
            [if mlserver && fetched(version) then 'initContainers']: [fetchContainer(version)],
            containers: [(if mlserver then mlserverContainer(version) else tfServingContainer(version)) + {
              lifecycle: { preStop: { sleep: { seconds: drainSeconds } } },
              [if params.gcpCredentialSecret != null then 'env']: [
                { name: 'GOOGLE_APPLICATION_CREDENTIALS', value: '/secret/gcp-credentials/key.json' },
              ],
              [if params.credentialsSecret != null then 'envFrom']: [{ secretRef: { name: params.credentialsSecret } }],
              resources: u.resources(params, if numGpus > 0 then { 'nvidia.com/gpu': numGpus } else {}),
              securityContext: u.containerSecurity(1000),
              volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }]
                            + (if mlserver && fetched(version) then [{ name: 'models', mountPath: modelsDir, readOnly: true }] else [])
                            + (if prometheus then [{ name: 'config', mountPath: '/var/config', readOnly: true }] else [])
                            + (if params.gcpCredentialSecret == null then [] else [{ name: 'gcp-credentials', mountPath: '/secret/gcp-credentials', readOnly: true }])
                            + (if params.modelPvc == null then [] else [{ name: 'models-pvc', mountPath: '/mnt', readOnly: true }]),
            }],
            volumes: [{ name: 'tmp', emptyDir: {} }]
                     + (if mlserver && fetched(version) then [{ name: 'models', emptyDir: {} }] else [])
                     + (if prometheus then [{ name: 'config', configMap: { name: configName } }] else [])
                     + (if params.gcpCredentialSecret == null then [] else [{ name: 'gcp-credentials', secret: { secretName: params.gcpCredentialSecret } }])
                     + (if params.modelPvc == null then [] else [{ name: 'models-pvc', persistentVolumeClaim: { claimName: params.modelPvc, readOnly: true } }]),
          },
        },
      },
    };

    local pdb(version) = u.pdb(component, params, part, replicas, name + '-' + version, versionLabels(version), { version: version });

    local service(serviceName, selector, extra={}) = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(serviceName, extra),
      spec: { type: serviceType, selector: selector, ports: servicePorts },
    };
    local versionServices = if route == null then [] else [
      service(name + '-' + v, versionLabels(v), { version: v }) + { spec+: { type: 'ClusterIP' } }
      for v in versions
    ];
    // A prefix matches whole path segments, so TF Serving's own `/v1/models/<model>:predict`
    // (and :classify, :regress) need exact matches; a version's or label's, below the prefix,
    // do not.
    local prefix = (if mlserver then '/v2/models/' else '/v1/models/') + model;
    local routeMatches = [{ path: { type: 'PathPrefix', value: prefix } }] + (
      if mlserver then []
      else [{ path: { type: 'Exact', value: prefix + ':' + verb } } for verb in ['predict', 'classify', 'regress']]
    );
    local httpRoute = if route == null then [] else [{
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'HTTPRoute',
      metadata: meta(name),
      spec: {
        parentRefs: [route],
        rules: [{
          matches: routeMatches,
          backendRefs: [{ name: name + '-' + t.version, port: restTarget, weight: t.weight } for t in traffic],
        }],
      },
    }];

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
            route: [r { destination+: { port: { number: restTarget } } } for r in split],
          }],
        },
      }]
    );

    assert gateway == null || std.isString(gateway);
    assert checkedFormat == format;
    (if prometheus then [{
       apiVersion: 'v1',
       kind: 'ConfigMap',
       metadata: meta(configName),
       data: {
         'monitoring_config.txt': 'prometheus_config {\n  enable: true\n  path: "%s"\n}\n' % monitoringPath,
       },
     }] else [])
    + [service(name, u.selector(name, part))]
    + versionServices
    + [deployment(v) for v in versions]
    + std.flattenArrays([pdb(v) for v in versions])
    + httpRoute
    + istioObjects
    + (if params.istio then [] else [$.networkPolicy(params, env, route, if mlserver then [v2RestPort, v2GrpcPort] else [grpcPort, restPort])])
  ),

  // Who reaches the model servers: the gateway's pods (Traefik, from the gateway component
  // named by the route) and the pods of directClients, on the servers' own ports; the kubelet's
  // probes come from the node, which the policy does not restrict. So MLServer's repository API
  // (load, unload), which the route never sends, is out of every other pod's reach. With Istio
  // the mesh decides, and no policy is rendered.
  networkPolicy(params, env, route, ports):: (
    local clients =
      if params.directClients != null then u.namespaceNames(component, 'directClients', params.directClients)
      else if route == null then [env.namespace]
      else [];
    local gatewayPods = if route == null then [] else [
      u.namespacePeer(std.get(route, 'namespace', env.namespace)) + {
        podSelector: { matchLabels: u.selector(route.name, 'gateway') },
      },
    ];
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: u.metadata(params.name, part),
      spec: {
        podSelector: { matchLabels: u.selector(params.name, part) },
        policyTypes: ['Ingress'],
        ingress: [{
          from: gatewayPods + [u.namespacePeer(ns) for ns in clients],
          ports: [{ protocol: 'TCP', port: p } for p in std.set(ports)],
        }],
      },
    }
  ),
}
