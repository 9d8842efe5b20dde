// A synthetic component for the render benchmark: 500 apps x 4 objects = 2,000 objects, built
// the way real Jsonnet is: constructor functions, `+:` mixins over `super`, comprehensions, and
// ConfigMaps holding YAML made with std.manifestYamlDoc. It imports nothing, so the reference
// jsonnet binaries evaluate exactly the same file.
local apps = 500;

local labelled(name, tier) = {
  metadata+: { labels+: { app: name, tier: tier } },
};

local deployment(name, i) = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: name },
  spec: {
    replicas: 1 + i % 3,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: {
        serviceAccountName: name,
        containers: [{
          name: 'main',
          image: 'example.com/app:%d.%d' % [i % 7, i % 11],
          args: ['--port=8080', '--name=%s' % name],
          env: [{ name: 'VAR_' + j, value: std.toString(i * j) } for j in std.range(0, 11)],
          ports: [{ name: 'http', containerPort: 8080 }],
        }],
      },
    },
  },
};

// A mixin applied over `super`: add requests and a probe to every container.
local withResources(cpu) = {
  spec+: { template+: { spec+: {
    containers: [
      c {
        resources: { requests: { cpu: cpu, memory: '128Mi' }, limits: { memory: '256Mi' } },
        readinessProbe: { httpGet: { path: '/healthz', port: 'http' } },
      }
      for c in super.containers
    ],
  } } },
};

local configMap(name, i) = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: name + '-config' },
  data: {
    'config.yaml': std.manifestYamlDoc({
      name: name,
      index: i,
      features: ['feature-' + k for k in std.range(0, 15) if (i + k) % 3 != 0],
      limits: { ['limit' + k]: k * i for k in std.range(0, 9) },
      upstreams: [{ host: 'svc-' + ((i + k) % apps) + '.example.com', weight: k } for k in std.range(1, 4)],
    }),
  },
};

local service(name) = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: name },
  spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
};

local serviceAccount(name) = {
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: { name: name },
};

{
  ['app-%03d' % i]: [
    deployment(name, i) + withResources(if i % 2 == 0 then '100m' else '250m') + labelled(name, tier),
    configMap(name, i) + labelled(name, tier),
    service(name) + labelled(name, tier),
    serviceAccount(name) + labelled(name, tier),
  ]
  for i in std.range(0, apps - 1)
  for name in ['app-%03d' % i]
  for tier in [if i % 5 == 0 then 'gold' else 'standard']
}
