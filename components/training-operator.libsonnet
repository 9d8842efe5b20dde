// The training-job operator: mlkube's own `mlkube operator` and the CRDs of the frameworks it
// runs (TFJob, PyTorchJob, MXJob, XGBoostJob, JAXJob, PaddleJob, MPIJob of kubeflow.org/v1, and
// FrameworkController's Framework).
local u = import 'mlkube/util.libsonnet';

local component = 'training-operator';
// The pods' `app.kubernetes.io/name`, from the prototype's first name, tf-job-operator: it is
// in the Deployment's selector, which cannot change, so operators deployed before the rename go
// on applying (and scripts find every operator by it).
local part = 'tf-job-operator';
local metricsPort = 8080;
local healthPort = 8081;
// The operator's own --pytorch-init-container-image default (src/operator/training/frameworks/pytorch.rs).
local operatorPytorchInitImage = 'alpine:3.10';
// The operator's own --mpi-kubectl-delivery-image default (src/operator/training/frameworks/mpi.rs).
local operatorKubectlDeliveryImage = 'mlkube/kubectl-delivery:0.1.0';

{
  name: component,
  description: |||
    The training-job operator: runs `mlkube operator`, which drives TFJobs, PyTorchJobs, MXJobs, XGBoostJobs, JAXJobs, PaddleJobs and MPIJobs (kubeflow.org/v1)
    to pods and services, and FrameworkController's Frameworks (frameworkcontroller.microsoft.com/v1) to ConfigMaps and pods.
    Renders the CRDs of the `frameworks` it runs (crds/<plural>.<group>.yaml,
    generated from the operator's Rust types),
    a ServiceAccount, least-privilege RBAC (exactly the verbs and resources the operator uses, never
    `*`, and job delete for ttlSecondsAfterFinished; a ClusterRole/Binding, or a Role/RoleBinding
    and `--namespace` with deploymentScope `namespace`; a Role for its one leader-election Lease
    only when leaderElect is on; PodGroup rules only with gangScheduling, or for the gangScheduler
    it passes as --gang-scheduler), a Deployment (non-root, read-only root filesystem, /healthz and /readyz
    probes; pytorchInitImage, when not alpine:3.10, passed as --pytorch-init-container-image, and
    mpiKubectlDeliveryImage as --mpi-kubectl-delivery-image whenever it runs MPIJobs), a
    metrics Service on 8080, and a PodDisruptionBudget when minAvailable is set.
    Dropped from Kubeflow's package: the tf-job-dashboard (its Deployment, Service, ServiceAccount
    and RBAC; the dashboard was retired upstream, `kubectl get tfjobs` shows the same); the
    controller ConfigMap (grpcServerFilePath served v1alpha1 only, and the accelerator hostPath
    volumes are the GPU device plugin's job today); tfJobVersion, tfDefaultImage and cloud (only
    kubeflow.org/v1 exists now); deploymentNamespace (the environment's namespace is used);
    the Ambassador mapping; and the wildcard RBAC on CRDs, storage classes, jobs, deployments.
  ||| + u.paramsLine($.params),
  params: {
    image: { type: 'string', default: 'mlkube/mlkube', description: 'Operator image, without tag.' },
    tag: { type: 'string', default: '0.1.0', description: 'Operator image tag.' },
    imagePullPolicy: { type: 'string', enum: ['Always', 'IfNotPresent', 'Never'], default: 'IfNotPresent', description: 'Image pull policy: Always, IfNotPresent or Never.' },
    replicas: { type: 'integer', minimum: 1, default: 1, description: 'Operator replicas; more than one needs leaderElect.' },
    leaderElect: { type: 'boolean', default: false, description: 'Run with --leader-elect (a Lease in the namespace picks the active replica).' },
    deploymentScope: { type: 'string', enum: ['cluster', 'namespace'], default: 'cluster', description: "'cluster' watches every namespace (ClusterRole); 'namespace' only the environment's (Role)." },
    frameworks: { type: 'array', items: { type: 'string', enum: ['tensorflow', 'pytorch', 'mxnet', 'xgboost', 'jax', 'paddle', 'mpi', 'frameworkcontroller'] }, default: ['tensorflow', 'pytorch', 'mxnet', 'xgboost', 'jax', 'paddle', 'mpi', 'frameworkcontroller'], description: "The frameworks the operator runs: tensorflow, pytorch, mxnet, xgboost, jax, paddle, mpi (its training controller's --frameworks), and frameworkcontroller (FrameworkController's Framework: its fc controller). Their CRDs and RBAC rules are rendered." },
    installCrd: { type: 'boolean', default: true, description: "Render the frameworks' CRDs (off when another owner installs them)." },
    gangScheduling: { type: 'boolean', default: false, description: 'Grant access to Volcano and scheduler-plugins PodGroups, for gang-scheduled TFJobs.' },
    gangScheduler: { type: 'string', default: null, description: "Gang-schedule every job with this scheduler (--gang-scheduler): 'volcano', or a scheduler-plugins scheduler's name; grants its PodGroups." },
    pytorchInitImage: { type: 'image', default: operatorPytorchInitImage, description: "Image of the init-pytorch container in which PyTorch workers wait for the Master (--pytorch-init-container-image); a mirror's where the nodes cannot pull alpine:3.10." },
    mpiKubectlDeliveryImage: { type: 'image', default: operatorKubectlDeliveryImage, description: "Image of the kubectl-delivery init container that puts kubectl into MPIJob launchers (--mpi-kubectl-delivery-image); a mirror's where the nodes cannot pull the default." },
    minAvailable: { type: 'integer', minimum: 0, default: null, description: 'PodDisruptionBudget minAvailable; null renders no budget.' },
    servingGateway: { type: 'string', default: null, description: "The Gateway API Gateway (<namespace>/<name>, or <name> in this environment's namespace) that InferenceServices' HTTPRoutes hang on: runs the InferenceService controller (--controllers serving), and renders KServe's CRDs (installCrd), the ClusterServingRuntime kserve-mlserver and their RBAC; null runs none." },
    servingDomain: { type: 'string', default: 'example.com', description: "KServe's ingress domain: an InferenceService answers at http://<name>-<namespace>.<servingDomain> through the Gateway." },
    servingImage: { type: 'image', default: 'mlkube/serving:0.1.0', description: 'The serving image (image/serving/build.sh): the kserve-mlserver runtime and the storage initializer that fetches s3:// models.' },
    frameworkControllerConfig: { type: 'string', default: null, description: "FrameworkController's configuration file (frameworkcontroller.yaml: its podFailureSpec, retry delays, cache timeout, workerNumber) as text, e.g. \"$(cat frameworkcontroller.yaml)\": a ConfigMap <name>-fc-config mounted for --fc-config; null: FrameworkController's defaults." },
  } + u.resourceParams('100m', '128Mi', '512Mi'),

  render(params, env):: (
    local scope = u.oneOf(component, params, 'deploymentScope', ['cluster', 'namespace']);
    local pullPolicy = u.oneOf(component, params, 'imagePullPolicy', ['Always', 'IfNotPresent', 'Never']);
    local replicas =
      if params.replicas < 1 then u.fail(component, 'replicas', 'must be at least 1, got %d' % params.replicas)
      else if params.replicas > 1 && !params.leaderElect then
        u.fail(component, 'replicas', '%d replicas without leaderElect would reconcile every TFJob %d times over; set leaderElect: true' % [params.replicas, params.replicas])
      else params.replicas;
    local name = params.name;
    local meta(objectName, extra={}) = u.metadata(objectName, part, extra, name);
    local clusterWide = scope == 'cluster';
    // Each framework's resource and CRD; importstr needs a literal path.
    local known = {
      tensorflow: { resource: 'tfjobs', crd: std.parseYaml(importstr 'mlkube/crds/tfjobs.kubeflow.org.yaml') },
      pytorch: { resource: 'pytorchjobs', crd: std.parseYaml(importstr 'mlkube/crds/pytorchjobs.kubeflow.org.yaml') },
      mxnet: { resource: 'mxjobs', crd: std.parseYaml(importstr 'mlkube/crds/mxjobs.kubeflow.org.yaml') },
      xgboost: { resource: 'xgboostjobs', crd: std.parseYaml(importstr 'mlkube/crds/xgboostjobs.kubeflow.org.yaml') },
      jax: { resource: 'jaxjobs', crd: std.parseYaml(importstr 'mlkube/crds/jaxjobs.kubeflow.org.yaml') },
      paddle: { resource: 'paddlejobs', crd: std.parseYaml(importstr 'mlkube/crds/paddlejobs.kubeflow.org.yaml') },
      mpi: { resource: 'mpijobs', crd: std.parseYaml(importstr 'mlkube/crds/mpijobs.kubeflow.org.yaml') },
      frameworkcontroller: { resource: null, crd: std.parseYaml(importstr 'mlkube/crds/frameworks.frameworkcontroller.microsoft.com.yaml') },
    };
    local frameworks =
      if std.length(params.frameworks) == 0 then u.fail(component, 'frameworks', 'must name at least one of %s' % std.join(', ', std.objectFields(known)))
      else [
        if std.objectHas(known, f) then known[f]
        else u.fail(component, 'frameworks', 'no framework %s; the frameworks are %s' % [f, std.join(', ', std.objectFields(known))])
        for f in std.set(params.frameworks)
      ];
    local jobs = [f.resource for f in frameworks if f.resource != null];
    // The InferenceService controller is not ready until KServe's kinds and HTTPRoute are served.
    local servingNeeds = if params.servingGateway == null then {} else { annotations: {
      'mlkube.io/requires-kinds': 'InferenceService.serving.kserve.io,HTTPRoute.gateway.networking.k8s.io',
      'mlkube.io/requires-hint': "servingGateway runs the InferenceService controller, which needs KServe's CRDs (this component's installCrd) and the Gateway API's HTTPRoute (the gateway component's crds): apply them with it, e.g. `mlkube apply %s -c gateway -c %s`, or `mlkube param set %s servingGateway null --env %s`" % [env.name, name, name, env.name],
    } };
    local servingGateway =
      if params.servingGateway == null then null
      else if !std.isString(params.servingGateway) || params.servingGateway == '' || std.length(std.split(params.servingGateway, '/')) > 2 then
        u.fail(component, 'servingGateway', 'must be <namespace>/<name> or <name> of a Gateway, got %s' % std.manifestJsonMinified(params.servingGateway))
      else if std.length(std.split(params.servingGateway, '/')) == 1 then env.namespace + '/' + params.servingGateway
      else params.servingGateway;
    local serving = import 'mlkube/training-operator/serving.libsonnet';
    local runsFrameworkController = std.member(params.frameworks, 'frameworkcontroller');
    local trainingKinds = [f for f in std.set(params.frameworks) if f != 'frameworkcontroller'];
    local gangScheduler = params.gangScheduler;
    local validGangScheduler =
      if gangScheduler == null then null
      else if std.type(gangScheduler) != 'string' || gangScheduler == '' then
        u.fail(component, 'gangScheduler', "must be 'volcano' or a scheduler-plugins scheduler's name, got %s" % std.manifestJsonMinified(gangScheduler))
      else gangScheduler;
    local pytorchInitImage = params.pytorchInitImage;
    local spaces(s) = u.anyChar(' \t\n\r', s);
    local validPytorchInitImage =
      if std.type(pytorchInitImage) != 'string' || pytorchInitImage == '' || spaces(pytorchInitImage) then
        u.fail(component, 'pytorchInitImage', 'must be an image as the nodes pull it, e.g. alpine:3.10, got %s' % std.manifestJsonMinified(pytorchInitImage))
      else pytorchInitImage;
    local kubectlDeliveryImage = params.mpiKubectlDeliveryImage;
    local validKubectlDeliveryImage =
      if std.type(kubectlDeliveryImage) != 'string' || kubectlDeliveryImage == '' || spaces(kubectlDeliveryImage) then
        u.fail(component, 'mpiKubectlDeliveryImage', 'must be an image as the nodes pull it, e.g. %s, got %s' % [operatorKubectlDeliveryImage, std.manifestJsonMinified(kubectlDeliveryImage)])
      else kubectlDeliveryImage;
    local runsMpi = std.member(params.frameworks, 'mpi');
    local runsPytorch = std.member(params.frameworks, 'pytorch');
    // Volcano's PodGroups, or scheduler-plugins' for any other scheduler (src/operator/training/engine/build.rs).
    local podGroupApis = std.set(
      (if params.gangScheduling then ['scheduling.volcano.sh', 'scheduling.x-k8s.io'] else [])
      + (if validGangScheduler == null then []
         else if validGangScheduler == 'volcano' then ['scheduling.volcano.sh']
         else ['scheduling.x-k8s.io'])
    );

    // Exactly the operator's calls (src/operator/); the operator's cluster tests run with these
    // rules, and tests/cluster/identity.rs fails on a verb granted and not used.
    local rules = (if std.length(jobs) > 0 then [
      // Its cache (list, watch), the re-read before adopting orphans (get), TTL (delete).
      { apiGroups: ['kubeflow.org'], resources: jobs, verbs: ['get', 'list', 'watch', 'delete'] },
      // The status is written whole, with a replace.
      { apiGroups: ['kubeflow.org'], resources: [r + '/status' for r in jobs], verbs: ['update'] },
      // Pods and services set blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
      // admission plugin allows only to who may update the owner's finalizers.
      { apiGroups: ['kubeflow.org'], resources: [r + '/finalizers' for r in jobs], verbs: ['update'] },
      // Caches (list, watch), creates and deletes, adopting and releasing orphans (patch).
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch', 'create', 'delete', 'patch'] },
      { apiGroups: [''], resources: ['services'], verbs: ['list', 'watch', 'create', 'delete', 'patch'] },
      // The VolumeManager a job's data.mlkube.io/volume-manager annotation names, read before
      // its pods are created (src/operator/training/controller/data.rs); never watched.
      { apiGroups: ['kvc.kubeflow.org'], resources: ['volumemanagers'], verbs: ['get'] },
    ] else []) + [
      // events.k8s.io/v1 only; a repeat patches the event's series.
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
    ] + (
      // FrameworkController's Framework (src/operator/fc/): its cache (list, watch), its status
      // written whole (update), and its ConfigMaps (one per attempt, owned by the Framework
      // with blockOwnerDeletion: the finalizers rules) and pods (owned by the ConfigMap, with
      // blockOwnerDeletion too), each cached, created and deleted. Never cluster-admin, never a CRD write: the CRD is
      // rendered here, not created by the controller as FrameworkController does.
      if runsFrameworkController then [
        { apiGroups: ['frameworkcontroller.microsoft.com'], resources: ['frameworks'], verbs: ['list', 'watch'] },
        { apiGroups: ['frameworkcontroller.microsoft.com'], resources: ['frameworks/status', 'frameworks/finalizers'], verbs: ['update'] },
        { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch', 'create', 'delete'] },
        { apiGroups: [''], resources: ['configmaps/finalizers'], verbs: ['update'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch', 'create', 'delete'] },
      ] else []
    ) + (
      if servingGateway == null then [] else serving.rules(clusterWide)
    ) + (
      // Read, server-side applied (which creates it the first time), deleted when the job ends;
      // never watched.
      if std.length(podGroupApis) > 0 then [
        { apiGroups: podGroupApis, resources: ['podgroups'], verbs: ['get', 'create', 'patch', 'delete'] },
      ] else []
    ) + (
      // An MPIJob's ConfigMap and its launcher's ServiceAccount, Role and RoleBinding
      // (src/operator/training/frameworks/mpi/): watched (list, watch) so that one deleted or changed is
      // written again, read before the first write, server-side applied; never deleted (the
      // job owns them). A Role may only grant what its writer holds: the launcher's exec into
      // its workers, and the get kubectl exec does first.
      if runsMpi then [
        { apiGroups: [''], resources: ['configmaps', 'serviceaccounts'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
        { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles', 'rolebindings'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
        { apiGroups: [''], resources: ['pods/exec'], verbs: ['create'] },
      ] else []
    ) + (
      // A PyTorchJob's HorizontalPodAutoscaler for elasticPolicy.metrics
      // (src/operator/training/controller/autoscaler.rs): read, server-side applied, deleted when the
      // policy's metrics go; never watched.
      if runsPytorch then [
        { apiGroups: ['autoscaling'], resources: ['horizontalpodautoscalers'], verbs: ['get', 'create', 'patch', 'delete'] },
      ] else []
    );
    local subject = { kind: 'ServiceAccount', name: name, namespace: env.namespace };
    local rbacName = if clusterWide then u.clusterName(env, name) else name;

    local leaseName = name + '-leader-election';
    local leaseObjectName = 'mlkube-tfjob-operator';
    local leaderElection = if params.leaderElect then [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: meta(leaseName),
        // The operator's one Lease (src/operator/runtime/leader.rs); a create cannot be limited by name.
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [leaseObjectName], verbs: ['get', 'update'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta(leaseName),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: leaseName },
        subjects: [subject],
      },
    ] else [];

    // FrameworkController's configuration file, mounted from a ConfigMap; the operator reads it
    // once at start, so the pod template carries its hash and a change rolls the operator.
    local fcConfig =
      if params.frameworkControllerConfig == null then null
      else if !std.isString(params.frameworkControllerConfig) then
        u.fail(component, 'frameworkControllerConfig', "must be the file's text (a string)")
      else if !runsFrameworkController then
        u.fail(component, 'frameworkControllerConfig', 'configures the Framework controller, which frameworks leaves out; add frameworkcontroller to frameworks, or drop the file')
      else params.frameworkControllerConfig;
    local fcConfigDir = '/etc/mlkube/frameworkcontroller';
    local args = [
      'operator',
      '--metrics-addr',
      ':%d' % metricsPort,
      '--health-addr',
      ':%d' % healthPort,
      // The rooms of the operator it runs: the training jobs, FrameworkController's Framework.
      '--controllers',
      std.join(',', (if std.length(trainingKinds) > 0 then ['training'] else [])
                    + (if runsFrameworkController then ['fc'] else [])
                    + (if servingGateway == null then [] else ['serving'])),
    ] + (if std.length(trainingKinds) > 0 then ['--frameworks', std.join(',', trainingKinds)] else [])
    + (if clusterWide then [] else ['--namespace', env.namespace])
    + (if params.leaderElect then ['--leader-elect'] else [])
    + (if validGangScheduler == null then [] else ['--gang-scheduler', validGangScheduler])
    // Left out at the operator's own default, and when it runs no PyTorchJobs.
    + (if validPytorchInitImage == operatorPytorchInitImage || !std.member(params.frameworks, 'pytorch') then []
       else ['--pytorch-init-container-image', validPytorchInitImage])
    // Always named when it runs MPIJobs, its default too: the manifest names every platform
    // image the operator uses, so an environment's imageRegistry reaches this one as well.
    + (if !runsMpi then []
       else ['--mpi-kubectl-delivery-image', validKubectlDeliveryImage])
    + (if fcConfig == null then [] else ['--fc-config', fcConfigDir + '/frameworkcontroller.yaml'])
    + (if servingGateway == null then [] else [
         '--serving-gateway', servingGateway,
         '--serving-domain', params.servingDomain,
         '--storage-initializer-image', params.servingImage,
       ]);

    local probe(path, period, failures) = {
      httpGet: { path: path, port: 'health' },
      periodSeconds: period,
      failureThreshold: failures,
    };

    (if params.installCrd then [f.crd for f in frameworks] else [])
    + (if servingGateway == null then [] else serving.objects(params, env, meta, subject, clusterWide, params.installCrd))
    + [
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: meta(name),
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: if clusterWide then 'ClusterRole' else 'Role',
        metadata: meta(rbacName),
        rules: rules,
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: if clusterWide then 'ClusterRoleBinding' else 'RoleBinding',
        metadata: meta(rbacName),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: if clusterWide then 'ClusterRole' else 'Role', name: rbacName },
        subjects: [subject],
      },
    ]
    + leaderElection
    + (if fcConfig == null then [] else [{
         apiVersion: 'v1',
         kind: 'ConfigMap',
         metadata: meta(name + '-fc-config'),
         data: { 'frameworkcontroller.yaml': fcConfig },
       }])
    + [
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: meta(name + '-metrics') + {
          annotations: {
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': std.toString(metricsPort),
            'prometheus.io/path': '/metrics',
          },
        },
        spec: {
          type: 'ClusterIP',
          selector: u.selector(name, part),
          ports: [{ name: 'metrics', port: metricsPort, targetPort: 'metrics', protocol: 'TCP' }],
        },
      },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        // Which namespaces it acts in: an apply refuses a second operator whose jobs overlap;
        // and the kinds it is not ready without, which an apply refuses to wait for in vain.
        metadata: meta(name, { 'mlkube.io/operator-scope': scope }) + servingNeeds,
        spec: {
          replicas: replicas,
          selector: { matchLabels: u.selector(name, part) },
          template: {
            metadata: { labels: u.selector(name, part) }
                      + (if fcConfig == null then {} else { annotations: { 'mlkube.io/fc-config-md5': std.md5(fcConfig) } }),
            spec: {
              serviceAccountName: name,
              securityContext: u.podSecurity(65532),
              containers: [{
                name: 'operator',
                image: '%s:%s' % [params.image, params.tag],
                imagePullPolicy: pullPolicy,
                command: ['mlkube'],
                args: args,
                // The operator keeps its leader-election Lease in its own namespace.
                env: [{ name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } }],
                ports: [
                  { name: 'metrics', containerPort: metricsPort, protocol: 'TCP' },
                  { name: 'health', containerPort: healthPort, protocol: 'TCP' },
                ],
                livenessProbe: probe('/healthz', 20, 3) + { initialDelaySeconds: 5 },
                readinessProbe: probe('/readyz', 10, 3),
                resources: u.resources(params),
                securityContext: u.containerSecurity(65532),
              } + (if fcConfig == null then {} else {
                     volumeMounts: [{ name: 'fc-config', mountPath: fcConfigDir, readOnly: true }],
                   })],
            } + (if fcConfig == null then {} else {
                   volumes: [{ name: 'fc-config', configMap: { name: name + '-fc-config' } }],
                 }),
          },
        },
      },
    ]
    + u.pdb(component, params, part, replicas)
  ),
}
