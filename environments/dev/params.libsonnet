// The `dev` environment: a shared development cluster, in a namespace of its own
// (`<namespace>-dev`). Dev-sized requests with memory limits; no GPUs, no Istio. The hub keeps
// the component's default authenticator, `firstuse`: a name's first login sets its password, kept
// on the hub's volume (1Gi), so nobody logs in as another user.
{
  global: {},
  components: {
    gateway: {
      cpuRequest: '100m',
      memoryRequest: '128Mi',
      memoryLimit: '256Mi',
    },
    'object-store': {
      storage: '20Gi',
      cpuRequest: '100m',
      memoryRequest: '256Mi',
      memoryLimit: '1Gi',
    },
    'training-operator': {
      replicas: 1,
      leaderElect: false,
      cpuRequest: '100m',
      memoryRequest: '128Mi',
      memoryLimit: '256Mi',
    },
    'notebook-hub': {
      serviceType: 'ClusterIP',
      notebookMaxGpus: 0,
      notebookCpu: 0.5,
      notebookMemoryGb: 1,
      notebookMemoryLimitGb: 4,
      cpuRequest: '200m',
      memoryRequest: '512Mi',
      memoryLimit: '1Gi',
    },
    mnist: {
      cpuRequest: '500m',
      memoryRequest: '1Gi',
      memoryLimit: '2Gi',
    },
    'volume-controller': {
      cpuRequest: '50m',
      memoryRequest: '64Mi',
      memoryLimit: '128Mi',
    },
  },
}
