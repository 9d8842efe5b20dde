// The InferenceService controller's part of the training-operator component (servingGateway):
// KServe's CRDs, the ClusterServingRuntime kserve-mlserver, and the RBAC rules of exactly the
// controller's calls (src/operator/serving/).
local u = import 'mlkube/util.libsonnet';

local crds = [
  std.parseYaml(importstr 'mlkube/crds/inferenceservices.serving.kserve.io.yaml'),
  std.parseYaml(importstr 'mlkube/crds/servingruntimes.serving.kserve.io.yaml'),
  std.parseYaml(importstr 'mlkube/crds/clusterservingruntimes.serving.kserve.io.yaml'),
];

// Seconds a retiring revision's server goes on answering after it is told to stop: the gateway
// applies a route a moment after it acknowledges it.
local drainSeconds = 5;

{
  // What the controller calls: its caches (list, watch) of InferenceServices, runtimes,
  // Deployments, Services, pods and HTTPRoutes; the status replaced whole (update); the objects
  // it owns created (with blockOwnerDeletion: the finalizers rule), re-read when one of the
  // name exists (get), server-side applied (patch) and retired (delete); the predictor's
  // ServiceAccount and its Secrets' metadata read for the store's endpoint (get, never list).
  rules(clusterWide):: [
    { apiGroups: ['serving.kserve.io'], resources: ['inferenceservices', 'servingruntimes'], verbs: ['list', 'watch'] },
    { apiGroups: ['serving.kserve.io'], resources: ['inferenceservices/status', 'inferenceservices/finalizers'], verbs: ['update'] },
    { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
    { apiGroups: [''], resources: ['services'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
    // The NetworkPolicy that keeps other namespaces' pods away from the servers.
    { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
    { apiGroups: ['gateway.networking.k8s.io'], resources: ['httproutes'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
    { apiGroups: ['autoscaling'], resources: ['horizontalpodautoscalers'], verbs: ['create', 'patch', 'delete'] },
    { apiGroups: [''], resources: ['serviceaccounts', 'secrets'], verbs: ['get'] },
  ] + (if clusterWide then [
         { apiGroups: ['serving.kserve.io'], resources: ['clusterservingruntimes'], verbs: ['list', 'watch'] },
       ] else []),

  // The runtime that serves the formats the serving image serves, over KServe's V2 protocol.
  runtime(params, meta):: {
    apiVersion: 'serving.kserve.io/v1alpha1',
    kind: 'ClusterServingRuntime',
    metadata: meta('kserve-mlserver'),
    spec: {
      supportedModelFormats: [
        { name: 'xgboost', version: v, autoSelect: true, priority: 1 }
        for v in ['1', '2', '3']
      ] + [
        { name: 'lightgbm', version: v, autoSelect: true, priority: 1 }
        for v in ['3', '4']
      ] + [
        { name: 'sklearn', version: '1', autoSelect: true, priority: 1 },
        { name: 'tensorflow', version: '2', autoSelect: true, priority: 1 },
      ],
      protocolVersions: ['v2', 'grpc-v2'],
      containers: [{
        name: 'kserve-container',
        image: params.servingImage,
        command: ['python3', '-m', 'mlkube_serving.serve'],
        args: ['--name', '{{.Name}}', '--format', 'auto', '--model-dir', '/mnt/models', '--http-port', '8080', '--grpc-port', '8081'],
        ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
        // Ready, and alive, only while the model is loaded: one unloaded is loaded again by a
        // restart. The startup probe gives the first load five minutes.
        startupProbe: { httpGet: { path: '/v2/models/{{.Name}}/ready', port: 8080 }, periodSeconds: 2, failureThreshold: 150 },
        livenessProbe: { httpGet: { path: '/v2/models/{{.Name}}/ready', port: 8080 }, periodSeconds: 10, failureThreshold: 3 },
        // Out of the Service's endpoints, and its revision's share back on the rolled-out one,
        // two seconds after the model is gone; one slow answer on a busy node is not enough.
        readinessProbe: { httpGet: { path: '/v2/models/{{.Name}}/ready', port: 8080 }, periodSeconds: 1, failureThreshold: 2, timeoutSeconds: 2 },
        lifecycle: { preStop: { sleep: { seconds: drainSeconds } } },
        resources: { requests: { cpu: '100m', memory: '512Mi' }, limits: { memory: '2Gi' } },
        securityContext: u.containerSecurity(1000) + { seccompProfile: { type: 'RuntimeDefault' } },
        volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
      }],
      volumes: [{ name: 'tmp', emptyDir: {} }],
    },
  },

  // What servingGateway adds to the component: the CRDs (with installCrd), the runtime, and,
  // for a namespace-scoped operator, a ClusterRole to read the cluster's runtimes.
  objects(params, env, meta, subject, clusterWide, installCrd)::
    (if installCrd then crds else [])
    + [$.runtime(params, meta)]
    + (if clusterWide then [] else [
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'ClusterRole',
           metadata: meta(u.clusterName(env, params.name + '-runtimes')),
           rules: [{ apiGroups: ['serving.kserve.io'], resources: ['clusterservingruntimes'], verbs: ['list', 'watch'] }],
         },
         {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'ClusterRoleBinding',
           metadata: meta(u.clusterName(env, params.name + '-runtimes')),
           roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: u.clusterName(env, params.name + '-runtimes') },
           subjects: [subject],
         },
       ]),
}
