// One model served the way Kubeflow serves: a KServe InferenceService, which the operator's
// InferenceService controller (the training-operator component's servingGateway) turns into
// revisions, a route on the gateway and a canary that moves only onto ready revisions.
local u = import 'mlkube/util.libsonnet';

local component = 'inference-service';
local part = 'inference-service';
local protocols = ['v1', 'v2', 'grpc-v2'];
// The annotation by which KServe finds the store's endpoint on a ServiceAccount's Secret; the
// object store writes it on its read-only keys.
local endpointAnnotation = 'serving.kserve.io/s3-endpoint';

// storageUri with {version} replaced, checked for the schemes the controller fetches from.
local storageUri(params) =
  local uri = std.strReplace(params.storageUri, '{version}', params.version);
  local s3 = std.startsWith(uri, 's3://');
  local parts = std.split(std.substr(uri, 5, std.length(uri)), '/');
  if std.length(std.findSubstr('{', uri)) > 0 then
    u.fail(component, 'storageUri', '%s has a placeholder other than {version}' % std.manifestJsonMinified(params.storageUri))
  else if s3 && (std.length(parts) < 2 || std.length(parts[0]) < 3 || parts[1] == '') then
    u.fail(component, 'storageUri', '%s is not s3://bucket/prefix, e.g. s3://models/xgboost-digits/{version}/' % std.manifestJsonMinified(uri))
  else if s3 && params.objectStore == null && params.serviceAccountName == null then
    u.fail(component, 'objectStore', '%s is in an object store: name its object-store component in objectStore (or a serviceAccountName whose Secret has the %s annotation)' % [std.manifestJsonMinified(uri), endpointAnnotation])
  else if !s3 && !std.startsWith(uri, 'pvc://') then
    u.fail(component, 'storageUri', '%s is neither s3://bucket/prefix nor pvc://claim/path' % std.manifestJsonMinified(uri))
  else uri;

// The version's name, checked: it is part of the model's URI and what a user sets to roll.
local version(params) =
  local v = params.version;
  if !std.isString(v) || v == '' || std.length(std.findSubstr('/', v)) > 0 then
    u.fail(component, 'version', '%s is not a name without slashes, e.g. v2' % std.manifestJsonMinified(v))
  else v;

local canary(params) =
  local p = params.canaryTrafficPercent;
  if p == null then null
  else if !std.isNumber(p) || p != std.floor(p) || p < 0 || p > 100 then
    u.fail(component, 'canaryTrafficPercent', 'must be a whole number from 0 to 100 (or null to promote), got %s' % std.manifestJsonMinified(p))
  else p;

local replicas(params) =
  local min = params.minReplicas;
  local max = if params.maxReplicas == null then min else params.maxReplicas;
  if max < min then
    u.fail(component, 'maxReplicas', '%d is below minReplicas %d' % [max, min])
  else { minReplicas: min, maxReplicas: max };

{
  name: component,
  description: |||
    One model served by a KServe InferenceService (serving.kserve.io/v1beta1, raw-deployment
    mode), the object Kubeflow's users write, for the operator's InferenceService controller:
    run the training-operator component with servingGateway set, which also installs KServe's
    CRDs and the ClusterServingRuntime kserve-mlserver (MLServer on the serving image: sklearn,
    xgboost, lightgbm and tensorflow over the V2 protocol). The controller picks the runtime by modelFormat (or
    takes `runtime`), runs each revision of the spec as a Deployment and Service, routes
    <name>-<namespace>.<domain> on the gateway (status.url) and, with canaryTrafficPercent,
    sends that share to the newest revision only while it is ready, the rest to the last one
    rolled out; a canary that turns unready later gets its share taken back, with an event and
    a condition. The model is storageUri with `{version}` replaced by `version`: roll out a new
    version with `param set <name> version v2` and `canaryTrafficPercent 10`, then promote with
    `canaryTrafficPercent null`; the controller retires the old revision once the gateway no
    longer sends to it. `apply` waits until the InferenceService is Ready with its newest
    revision ready (a canary held back is waited for, and named), and stops at once on a spec
    the controller refuses (an unknown format, no runtime or two for it, a storage scheme it
    cannot fetch), with the controller's reason. With objectStore, s3:// models are fetched
    with the store's read-only keys KServe's way: a ServiceAccount <name> listing the store's
    Secret <store>-read-credentials, which the store annotates with its endpoint.
    minReplicas/maxReplicas above it get a HorizontalPodAutoscaler on CPU (scaleTarget percent).
    Dropped from KServe: Knative (serverless mode, scale to zero) and Istio, InferenceGraph,
    transformers and explainers, LLMInferenceService, ModelMesh.
  ||| + u.paramsLine($.params),
  params: {
    modelFormat: { type: 'string', default: 'xgboost', description: "The model's format (predictor.model.modelFormat.name), as a runtime's supportedModelFormats names it: sklearn, xgboost, lightgbm or tensorflow for kserve-mlserver." },
    modelFormatVersion: { type: 'string', default: null, description: "The format's version (modelFormat.version); null matches a runtime's entry for the format without one." },
    runtime: { type: 'string', default: null, description: 'The ServingRuntime (this namespace) or ClusterServingRuntime to serve with; null lets the controller choose by modelFormat and protocolVersion.' },
    protocolVersion: { type: 'string', enum: protocols, default: 'v2', description: "The inference protocol: v2 (the Open Inference Protocol over REST, MLServer's), grpc-v2 or v1 (KServe's default, which kserve-mlserver does not speak)." },
    storageUri: { type: 'string', default: 's3://models/{version}/', description: "Where the model is: s3://bucket/prefix (with objectStore) or pvc://claim/path; {version} is replaced by version." },
    args: { type: 'array', items: { type: 'string' }, default: [], description: "Arguments appended to the runtime's (predictor.model.args), e.g. [\"--version\", \"v2\"] for kserve-mlserver to name the version in its answers." },
    version: { type: 'string', default: 'v1', description: 'The version served (or rolled out as the canary), put in storageUri.' },
    canaryTrafficPercent: { type: 'integer', minimum: 0, maximum: 100, default: null, description: "Percent of the requests for the newest revision while the last one rolled out keeps the rest; null (or 100) promotes it." },
    objectStore: { type: 'string', default: 'object-store', description: "Object-store component whose read-only keys fetch s3:// models: renders the ServiceAccount <name> that lists them; null for none." },
    serviceAccountName: { type: 'string', default: null, description: "ServiceAccount the predictor runs as, instead of the one objectStore renders (its Secret annotated %s holds the store's keys)." % endpointAnnotation },
    minReplicas: { type: 'integer', minimum: 1, default: 1, description: 'Replicas of a revision.' },
    maxReplicas: { type: 'integer', minimum: 1, default: null, description: 'Above minReplicas: a HorizontalPodAutoscaler on CPU scales each revision up to it; null is minReplicas.' },
    scaleTarget: { type: 'integer', minimum: 1, default: null, description: "The autoscaler's target CPU utilization in percent; null is KServe's 80." },
  } + u.resourceParams('100m', '512Mi', '2Gi'),

  render(params, env):: (
    local name = params.name;
    local meta(objectName) = u.metadata(objectName, part, {}, name);
    local account =
      if params.serviceAccountName != null then params.serviceAccountName
      else if params.objectStore != null then name
      else null;
    local model = std.prune({
      modelFormat: { name: params.modelFormat, version: params.modelFormatVersion },
      runtime: params.runtime,
      protocolVersion: u.oneOf(component, params, 'protocolVersion', protocols),
      storageUri: storageUri(params { version: version(params) }),
      args: if params.args == [] then null else params.args,
      resources: u.resources(params),
    });
    local scaled = replicas(params);
    local isvc = {
      apiVersion: 'serving.kserve.io/v1beta1',
      kind: 'InferenceService',
      metadata: meta(name),
      spec: {
        predictor: std.prune(scaled {
          model: model,
          serviceAccountName: account,
          canaryTrafficPercent: canary(params),
          scaleMetric: if scaled.maxReplicas > scaled.minReplicas then 'cpu' else null,
          scaleTarget: params.scaleTarget,
        }),
      },
    };
    local storeAccount = {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: meta(name),
      secrets: [{ name: params.objectStore + '-read-credentials' }],
    };
    (if params.objectStore != null && params.serviceAccountName == null then [storeAccount] else [])
    + [isvc]
  ),
}
