// The `local` environment: a laptop or the local test cluster. One replica of everything,
// small requests and no limits (but the model server's 2Gi of memory), no GPUs; the gateway is
// reachable on a NodePort, 30080: on the local cluster's real node, the host reaches it at
// $MLKUBE_GATEWAY_URL (`cluster/local-cluster.sh env`). The hub lets anyone in with any name
// (`dummy`), so it is on no node port: reach it through the API server (`kubectl port-forward`,
// or the service proxy).
{
  global: {},
  // A 2-core node: jobs and sweeps added later request 100m of CPU each, unless the app sets theirs.
  defaults: { cpuRequest: '100m' },
  components: {
    gateway: {
      serviceType: 'NodePort',
      nodePort: 30080,
      cpuRequest: '50m',
      memoryRequest: '64Mi',
    },
    'object-store': {
      storage: '5Gi',
      cpuRequest: '50m',
      memoryRequest: '128Mi',
    },
    'training-operator': {
      replicas: 1,
      leaderElect: false,
      cpuRequest: '50m',
      memoryRequest: '64Mi',
    },
    'notebook-hub': {
      serviceType: 'ClusterIP',
      authenticator: 'dummy',
      notebookMaxGpus: 0,
      notebookCpu: 0.25,
      notebookMemoryGb: 0.5,
      cpuRequest: '100m',
      memoryRequest: '256Mi',
    },
    mnist: {
      cpuRequest: '100m',
      memoryRequest: '256Mi',
    },
    'volume-controller': {
      cpuRequest: '25m',
      memoryRequest: '32Mi',
    },
  },
}
