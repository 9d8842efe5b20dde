// The `prod` environment (`<namespace>-prod`): the operator runs two replicas with leader
// election and a PodDisruptionBudget keeps one of them up, every container has CPU and memory
// limits, and the model is served by two replicas at least, autoscaled on CPU. The hub trusts
// the user name an authenticating proxy in front of it puts in X-Remote-User.
{
  global: {},
  components: {
    // Two gateway pods, so a node drain or a restart never leaves the routes unserved.
    gateway: {
      replicas: 2,
      cpuRequest: '500m',
      memoryRequest: '256Mi',
      cpuLimit: '2',
      memoryLimit: '1Gi',
    },
    // Sized for datasets and models; for a replicated store, set endpoint (and
    // credentialsSecret) to one and nothing is deployed.
    'object-store': {
      storage: '200Gi',
      cpuRequest: '1',
      memoryRequest: '2Gi',
      cpuLimit: '4',
      memoryLimit: '8Gi',
    },
    'training-operator': {
      replicas: 2,
      leaderElect: true,
      minAvailable: 1,
      cpuRequest: '200m',
      memoryRequest: '256Mi',
      cpuLimit: '1',
      memoryLimit: '512Mi',
    },
    'notebook-hub': {
      serviceType: 'ClusterIP',
      authenticator: 'header',
      hubDbStorage: '1Gi',
      notebookMaxGpus: 1,
      notebookCpu: 1,
      notebookMemoryGb: 2,
      notebookCpuLimit: 4,
      notebookMemoryLimitGb: 16,
      cpuRequest: '500m',
      memoryRequest: '1Gi',
      cpuLimit: '2',
      memoryLimit: '2Gi',
    },
    // Two replicas of each revision at least, up to four as the CPU asks.
    mnist: {
      minReplicas: 2,
      maxReplicas: 4,
      cpuRequest: '1',
      memoryRequest: '1Gi',
      cpuLimit: '4',
      memoryLimit: '4Gi',
    },
    'volume-controller': {
      cpuRequest: '100m',
      memoryRequest: '128Mi',
      cpuLimit: '500m',
      memoryLimit: '256Mi',
    },
  },
}
