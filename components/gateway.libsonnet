// A Gateway API implementation: Traefik Proxy serving the HTTPRoutes of one Gateway, with the
// traffic split by their backendRefs' weights, as `mlkube gateway-routes` (a container beside
// it) translates them; Traefik itself holds no Kubernetes credentials.
local u = import 'mlkube/util.libsonnet';

local component = 'gateway';
local part = 'gateway';
local controllerName = 'traefik.io/gateway-controller';
// Traefik's own entry point: /ping for the probes, never routed to by a Gateway.
local pingPort = 8080;
local uid = 65532;
local group = 'gateway.networking.k8s.io';
// What `mlkube gateway-routes` (beside Traefik in each pod) watches in the namespaces it
// serves, and the statuses it writes. No Secret and no ConfigMap: Traefik's own Gateway API
// provider would cache every Secret of those namespaces.
local watchedRoutes = ['gateways', 'httproutes', 'referencegrants'];
local statusWritten = ['gateways', 'httproutes'];
// Where Traefik's HTTP provider fetches the routes (the pod's loopback alone), and where the
// kubelet asks whether they are there (synced; fetched by Traefik).
local routesPort = 8081;
local routesProbePort = 8082;
// The fallback's port: `mlkube gateway-fallback`, the answer for paths no other route takes.
local fallbackPort = 8080;
// Seconds a Traefik pod told to stop (a drain's eviction, a rollout) goes on serving: its
// endpoint turns not ready at once, but kube-proxy stops sending it new connections only once
// it has seen that, a second or so later. Then SIGTERM, and Traefik finishes the requests in
// flight for up to graceSeconds (its entry points' lifeCycle.graceTimeOut, 10 s by default).
local drainSeconds = 5;
local graceSeconds = 10;
// A kept-alive connection stays with the pod it was opened to, whatever the endpoints say, and
// a server that stops closes it when idle, which can cross a request the client is sending.
// Traefik answers with `Connection: close` on a connection older than this, so by the time the
// drain ends every connection in use has been closed cleanly and reopened on another pod.
local keepAliveSeconds = 2;
// Seconds Traefik keeps an idle connection to a backend for its next request. A backend closes
// its own idle connections after a while (MLServer's uvicorn after 5 s, by default), and a
// request Traefik sends on one the backend is closing at that moment fails with a 502 (a POST
// is not retried). Traefik's default, 90 s, leaves that race open; below every backend's, it is
// closed.
local backendIdleSeconds = 1;
// A connection to a backend can be refused: by a server that stopped before Traefik took it
// out, or, from a new Traefik pod (a rollout's, or the one a drain brings up on another node),
// by servers whose NetworkPolicy admits it only once each node's policy controller has its
// address, a moment after it starts. A request whose connection failed before a byte of it
// went out is tried again, on the next backend the route picks, with pauses growing from the
// first interval to twice it (about 3 s in all): Traefik's retry middleware, on every route of
// the entry point, read from a file a ConfigMap holds. No attempt starts once 5 s have passed
// (a dead node's address fails a dial only after Traefik's 30 s, and is answered then, as
// before). Any other failure (a status, a connection lost mid-request) is answered as it came.
local retry = { attempts: 10, initialInterval: '250ms', timeout: '5s' };
local dynamicDir = '/etc/traefik';
local dynamicFile = 'dynamic.yaml';

{
  name: component,
  description: |||
    A Gateway API implementation: Traefik Proxy v3.7 (MIT, pure Go), from the image
    image/gateway/ builds, as the data plane of a GatewayClass <namespace>-<name> and of the
    Gateway <name> in the environment's namespace, with one HTTP listener on `port`. HTTPRoutes
    attached to that Gateway (a serving component's `gateway` param renders one) are served with their
    backendRefs' weights, so a canary gets its share of the requests, and get Accepted and
    ResolvedRefs conditions in their status: `mlkube gateway-routes` (routesImage), a sidecar in
    each pod, watches the Gateway, its routes, their Services and EndpointSlices, and serves them
    to Traefik's HTTP provider on the pod's loopback as Traefik's own routes, each Service's
    ready endpoints as servers (path, header, query and method matches, host names, weights;
    a route with filters is refused, saying so in its status). Traefik holds no Kubernetes
    credentials, and the ServiceAccount reads no Secret or ConfigMap (Traefik's own Gateway API
    provider caches every Secret of the namespaces it watches). Renders the Gateway API v1.6.3
    standard-channel CRDs (gatewayclasses, gateways, httproutes, grpcroutes, tlsroutes,
    referencegrants, backendtlspolicies; `crds: false` for a cluster that has them), the
    GatewayClass and Gateway, a ServiceAccount, RBAC with only the lists, watches and status
    patches gateway-routes makes, the Deployment (non-root, read-only root filesystem, /ping probes;
    `replicas` pods spread over the nodes, each serving for a few seconds after it is told to
    stop, and a PodDisruptionBudget, maxUnavailable, so a drain takes one at a time; a pod is
    ready once Traefik has fetched its routes)
    and the Service <name> (ClusterIP, or NodePort on `nodePort`; the local environment's real
    node forwards 127.0.0.1:<API port + 1> to node port 30080). A request whose connection to a
    backend is refused before a byte of it went out (a server that stopped before Traefik took
    it out; a new Traefik pod, which the servers' NetworkPolicies admit a moment after it starts)
    is tried again for about 3 s (Traefik's retry middleware on the entry point, from the
    ConfigMap <name>). A request no route takes (a
    mistyped model, KServe's V1 path to MLServer) gets a 404 whose JSON says what to ask
    instead, not Traefik's bare `404 page not found`: an HTTPRoute <name>-fallback for `/` (the
    shortest prefix, so every other route wins) to `mlkube gateway-fallback` (fallbackImage, a
    Deployment and Service <name>-fallback; `fallbackImage: null` renders none). With routeNamespaces `Same`,
    only this namespace is watched and the rules are a Role here (plus the cluster-scoped
    GatewayClasses); with `All` routes of every namespace may attach and the rules are
    cluster-wide (Services, EndpointSlices and the Gateway API's objects; still no Secret).
    Dropped from what Kubeflow shipped (Ambassador, then Istio's ingress gateway): Envoy
    (C++, which cannot be built here), Ambassador's Mapping annotations (HTTPRoutes replace
    them), TLS listeners, Traefik's dashboard and its own CRDs (IngressRoute and friends).
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'image', default: 'mlkube/gateway:0.1.0', description: 'Image with the traefik binary (image/gateway/build.sh).' },
    imagePullPolicy: { type: 'string', enum: ['Always', 'IfNotPresent', 'Never'], default: 'IfNotPresent', description: 'Image pull policy: Always, IfNotPresent or Never.' },
    crds: { type: 'boolean', default: true, description: 'Render the Gateway API CRDs Traefik needs (false where the cluster has them).' },
    port: { type: 'integer', minimum: 1, maximum: 65535, default: 8000, description: "The HTTP listener's port: Traefik's entry point, and the Service's port." },
    routeNamespaces: { type: 'string', enum: ['Same', 'All'], default: 'Same', description: 'Namespaces whose HTTPRoutes may attach: Same (this one) or All.' },
    serviceType: { type: 'string', enum: ['ClusterIP', 'NodePort'], default: 'ClusterIP', description: 'Type of the Service in front of Traefik: ClusterIP or NodePort.' },
    nodePort: { type: 'integer', minimum: 30000, maximum: 32767, default: null, description: 'Node port of the listener with serviceType NodePort; null lets the cluster pick.' },
    replicas: { type: 'integer', minimum: 1, default: 1, description: 'Traefik pods, spread over the nodes (two or more keep the routes served through a node drain).' },
    maxUnavailable: { type: 'integer', minimum: 1, default: 1, description: "PodDisruptionBudget: at most this many Traefik pods evicted at once (kubectl drain waits for the replacements to be Ready)." },
    logLevel: { type: 'string', enum: ['DEBUG', 'INFO', 'WARN', 'ERROR'], default: 'INFO', description: "Traefik's log level: DEBUG, INFO, WARN or ERROR." },
    routesImage: { type: 'image', default: 'mlkube/mlkube:0.1.0', description: "Image with the mlkube binary (the operator's) whose `gateway-routes` turns the Gateway's HTTPRoutes into Traefik's routes and writes their statuses." },
    fallbackImage: { type: 'image', default: 'mlkube/mlkube:0.1.0', description: 'Image with the mlkube binary (the operator\'s) that answers the paths no route takes with a 404 saying what to ask instead; null: Traefik\'s bare 404.' },
  } + u.resourceParams('50m', '64Mi', '256Mi'),

  render(params, env):: (
    local name = params.name;
    local namespace = env.namespace;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local className = u.clusterName(env, name);
    local pullPolicy = u.oneOf(component, params, 'imagePullPolicy', ['Always', 'IfNotPresent', 'Never']);
    local routeNamespaces = u.oneOf(component, params, 'routeNamespaces', ['Same', 'All']);
    local serviceType = u.oneOf(component, params, 'serviceType', ['ClusterIP', 'NodePort']);
    local logLevel = u.oneOf(component, params, 'logLevel', ['DEBUG', 'INFO', 'WARN', 'ERROR']);
    local taken = [pingPort, routesPort, routesProbePort];
    local port =
      if std.isNumber(params.port) && params.port == std.floor(params.port) && params.port >= 1 && params.port <= 65535 && !std.member(taken, params.port) then params.port
      else u.fail(component, 'port', 'must be a port from 1 to 65535 other than %d, %d and %d (the ping and routes ports), got %s' % (taken + [std.manifestJsonMinified(params.port)]));
    local nodePort =
      if params.nodePort == null then null
      else if serviceType != 'NodePort' then u.fail(component, 'nodePort', 'is set but serviceType is %s; set serviceType: NodePort or nodePort: null' % serviceType)
      else if std.isNumber(params.nodePort) && params.nodePort == std.floor(params.nodePort) && params.nodePort >= 30000 && params.nodePort <= 32767 then params.nodePort
      else u.fail(component, 'nodePort', 'must be in the node port range 30000-32767, got %s' % std.manifestJsonMinified(params.nodePort));
    // Traefik serves only the GatewayClasses carrying this label: another environment's
    // Traefik in the same cluster leaves this one's Gateway alone.
    local classLabel = { 'mlkube.io/gateway-namespace': namespace };
    local subject = { kind: 'ServiceAccount', name: name, namespace: namespace };
    // What `mlkube gateway-routes` reads and writes in the namespaces it watches.
    local watchedRules = [
      { apiGroups: [''], resources: ['services'], verbs: ['list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      { apiGroups: [group], resources: watchedRoutes, verbs: ['list', 'watch'] },
      { apiGroups: [group], resources: [r + '/status' for r in statusWritten], verbs: ['patch'] },
    ];
    local clusterRole = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta(className),
      rules: [
        // Its own GatewayClass, read by name (a list and watch cannot be narrowed to it).
        { apiGroups: [group], resources: ['gatewayclasses'], verbs: ['list', 'watch'] },
        { apiGroups: [group], resources: ['gatewayclasses/status'], resourceNames: [className], verbs: ['patch'] },
      ] + (if routeNamespaces == 'All' then watchedRules else []),
    };
    local roleRef(kind, roleName) = { apiGroup: 'rbac.authorization.k8s.io', kind: kind, name: roleName };
    local rbac = [
      clusterRole,
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: meta(className),
        roleRef: roleRef('ClusterRole', className),
        subjects: [subject],
      },
    ] + (if routeNamespaces == 'Same' then [
           { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: meta(name), rules: watchedRules },
           {
             apiVersion: 'rbac.authorization.k8s.io/v1',
             kind: 'RoleBinding',
             metadata: meta(name),
             roleRef: roleRef('Role', name),
             subjects: [subject],
           },
         ] else []);
    local args = [
      '--global.checknewversion=false',
      '--global.sendanonymoususage=false',
      '--log.level=' + logLevel,
      '--log.nocolor=true',
      '--entrypoints.web.address=:%d' % port,
      '--entrypoints.traefik.address=:%d' % pingPort,
      // A header whose name aliases another's (X_Forwarded_For) is dropped, so that a backend
      // that reads headers as CGI variables cannot be told a spoofed one.
      '--entrypoints.web.http.aliasheadersstrategy=delete',
      '--entrypoints.traefik.http.aliasheadersstrategy=delete',
      '--entrypoints.web.transport.keepalivemaxtime=%ds' % keepAliveSeconds,
      '--entrypoints.web.transport.lifecycle.gracetimeout=%ds' % graceSeconds,
      '--entrypoints.web.http.middlewares=retry-refused@file',
      '--providers.file.filename=%s/%s' % [dynamicDir, dynamicFile],
      '--providers.file.watch=false',
      '--serverstransport.forwardingtimeouts.idleconntimeout=%ds' % backendIdleSeconds,
      '--ping=true',
      '--ping.entrypoint=traefik',
      // The routes, from the container beside it, polled every second; a new configuration is
      // applied a second after it came, not after the default two.
      '--providers.http.endpoint=http://127.0.0.1:%d/config' % routesPort,
      '--providers.http.pollinterval=1s',
      '--providers.providersthrottleduration=1s',
    ];
    local routesArgs = [
      'mlkube',
      'gateway-routes',
      '--gateway=%s/%s' % [namespace, name],
      '--class=' + className,
      '--controller-name=' + controllerName,
      '--port=%d' % port,
      '--entry-point=web',
      // Gateways report the Service's name: no load balancer fills in an address.
      '--address=%s.%s.svc' % [name, namespace],
      '--listen=127.0.0.1:%d' % routesPort,
      '--probes=:%d' % routesProbePort,
    ] + (if routeNamespaces == 'All' then ['--all-namespaces'] else []);
    local dynamic = std.manifestYamlDoc({ http: { middlewares: { 'retry-refused': { retry: retry } } } }, quote_keys=false);
    local probe(period, failures) = {
      httpGet: { path: '/ping', port: 'ping' },
      periodSeconds: period,
      failureThreshold: failures,
    };

    (if params.crds then [
       std.parseYaml(importstr 'mlkube/crds/gatewayclasses.gateway.networking.k8s.io.yaml'),
       std.parseYaml(importstr 'mlkube/crds/gateways.gateway.networking.k8s.io.yaml'),
       std.parseYaml(importstr 'mlkube/crds/httproutes.gateway.networking.k8s.io.yaml'),
       std.parseYaml(importstr 'mlkube/crds/grpcroutes.gateway.networking.k8s.io.yaml'),
       std.parseYaml(importstr 'mlkube/crds/tlsroutes.gateway.networking.k8s.io.yaml'),
       std.parseYaml(importstr 'mlkube/crds/referencegrants.gateway.networking.k8s.io.yaml'),
       std.parseYaml(importstr 'mlkube/crds/backendtlspolicies.gateway.networking.k8s.io.yaml'),
     ] else [])
    + [
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'GatewayClass',
        metadata: meta(className, classLabel),
        spec: {
          controllerName: controllerName,
          // At most 64 characters, as the CRD allows.
          description: "Traefik, run by mlkube's gateway component",
        },
      },
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'Gateway',
        metadata: meta(name),
        spec: {
          gatewayClassName: className,
          listeners: [{
            name: 'http',
            protocol: 'HTTP',
            port: port,
            allowedRoutes: { namespaces: { from: routeNamespaces } },
          }],
        },
      },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(name) },
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: meta(name),
        data: { [dynamicFile]: dynamic },
      },
    ]
    + rbac
    + [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta(name),
        spec: {
          replicas: params.replicas,
          selector: { matchLabels: u.selector(name, part) },
          template: {
            metadata: {
              labels: u.selector(name, part),
              // A changed file rolls the pods: Traefik reads it once, at its start.
              annotations: { 'mlkube.io/dynamic-config': std.md5(dynamic) },
            },
            spec: {
              serviceAccountName: name,
              // Only the routes container gets the account's token (its own volume): Traefik,
              // which faces every client, holds no Kubernetes credentials.
              automountServiceAccountToken: false,
              securityContext: u.podSecurity(uid),
              terminationGracePeriodSeconds: drainSeconds + graceSeconds + 5,
              topologySpreadConstraints: u.spreadOverNodes(u.selector(name, part)),
              // A sidecar: started (its caches synced) before Traefik, stopped after it.
              initContainers: [{
                name: 'routes',
                image: params.routesImage,
                imagePullPolicy: pullPolicy,
                restartPolicy: 'Always',
                command: routesArgs,
                ports: [{ name: 'routes-probes', containerPort: routesProbePort, protocol: 'TCP' }],
                startupProbe: { httpGet: { path: '/synced', port: 'routes-probes' }, periodSeconds: 1, failureThreshold: 300 },
                // Ready once Traefik has fetched the routes (and so applied them): until then
                // the pod takes no request it would answer 404.
                readinessProbe: { httpGet: { path: '/ready', port: 'routes-probes' }, periodSeconds: 2 },
                livenessProbe: { tcpSocket: { port: 'routes-probes' }, periodSeconds: 10, failureThreshold: 3 },
                resources: u.resources(params),
                securityContext: u.containerSecurity(uid),
                volumeMounts: [{ name: 'api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true }],
              }],
              containers: [{
                name: 'traefik',
                image: params.image,
                imagePullPolicy: pullPolicy,
                args: args,
                ports: [
                  { name: 'web', containerPort: port, protocol: 'TCP' },
                  { name: 'ping', containerPort: pingPort, protocol: 'TCP' },
                ],
                readinessProbe: probe(5, 2),
                livenessProbe: probe(10, 3) + { initialDelaySeconds: 5 },
                lifecycle: { preStop: { sleep: { seconds: drainSeconds } } },
                resources: u.resources(params),
                securityContext: u.containerSecurity(uid),
                volumeMounts: [
                  { name: 'tmp', mountPath: '/tmp' },
                  { name: 'dynamic', mountPath: dynamicDir, readOnly: true },
                ],
              }],
              volumes: [
                { name: 'tmp', emptyDir: {} },
                { name: 'dynamic', configMap: { name: name } },
                {
                  name: 'api-access',
                  projected: {
                    sources: [
                      { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
                      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
                      { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
                    ],
                  },
                },
              ],
            },
          },
        },
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: meta(name),
        spec: {
          type: serviceType,
          selector: u.selector(name, part),
          ports: [std.prune({
            name: 'http',
            port: port,
            targetPort: 'web',
            protocol: 'TCP',
            nodePort: nodePort,
          })],
        },
      },
    ]
    + u.pdb(component, params, part, params.replicas)
    + (if params.fallbackImage == null then [] else $.fallback(params, pullPolicy))
  ),

  // The Deployment, Service and HTTPRoute of `mlkube gateway-fallback`: one small pod, which
  // reads nothing from the cluster (no ServiceAccount token).
  fallback(params, pullPolicy):: (
    local name = params.name + '-fallback';
    local selector = u.selector(name, part);
    local meta = u.metadata(name, part, {}, params.name);
    [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta,
        spec: {
          replicas: 1,
          selector: { matchLabels: selector },
          template: {
            metadata: { labels: selector },
            spec: {
              automountServiceAccountToken: false,
              securityContext: u.podSecurity(uid),
              containers: [{
                name: 'fallback',
                image: params.fallbackImage,
                imagePullPolicy: pullPolicy,
                command: ['mlkube', 'gateway-fallback', '--listen', ':%d' % fallbackPort],
                ports: [{ name: 'http', containerPort: fallbackPort, protocol: 'TCP' }],
                readinessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 5 },
                resources: u.resources(params),
                securityContext: u.containerSecurity(uid),
              }],
            },
          },
        },
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: meta,
        spec: {
          selector: selector,
          ports: [{ name: 'http', port: fallbackPort, targetPort: 'http', protocol: 'TCP' }],
        },
      },
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'HTTPRoute',
        metadata: meta,
        spec: {
          parentRefs: [{ name: params.name }],
          rules: [{
            matches: [{ path: { type: 'PathPrefix', value: '/' } }],
            backendRefs: [{ name: name, port: fallbackPort }],
          }],
        },
      },
    ]
  ),
}
