// An MPI training job: one kubeflow.org/v1 MPIJob, run by a training-operator component.
// `job` renders it, with the params every training job shares (training-job.libsonnet), except
// that the Launcher and the Workers run different programs: the Launcher `mpirun`, the Workers
// nothing of their own unless asked (the operator makes them sleep until mpirun execs into them).
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

local component = 'mpi-job';
local part = 'mpi-job';
// The container the operator reads exit codes from (src/operator/training/frameworks/mpi.rs); MPI has no
// port and no services. The Launcher's pod mounts its API token: its kubectl execs into the
// Workers as the ServiceAccount the operator binds to a Role allowing just that.
local framework = {
  kind: 'MPIJob',
  replicaSpecs: 'mpiReplicaSpecs',
  container: 'mpi',
  portName: null,
  port: null,
  gpuTypes: ['Worker'],
  gpuWords: 'Worker',
  tokenTypes: ['Launcher'],
  // The Launcher's pod is `<job>-launcher`, a Worker's `<job>-worker-<index>`.
  longestPodSuffix(counts)::
    local workers = std.get(counts, 'Worker', 0);
    local worker = if workers > 0 then '-worker-%d' % (workers - 1) else '';
    if std.length(worker) > std.length('-launcher') then worker else '-launcher',
};
local implementations = ['OpenMPI', 'Intel', 'MPICH'];
local image = 'horovod/horovod:0.28.1';
// Upstream's examples/mpi/tensorflow-mnist.yaml, without -np (mpirun starts one process per slot
// of the hostfile, so the count follows workerReplicas and slotsPerWorker) and without
// --allow-run-as-root (the pods run as a non-root user).
local launcherArgs = [
  '-bind-to',
  'none',
  '-map-by',
  'slot',
  '-x',
  'LD_LIBRARY_PATH',
  '-x',
  'PATH',
  '-mca',
  'pml',
  'ob1',
  '-mca',
  'btl',
  '^openib',
  'python',
  '/horovod/examples/tensorflow2/tensorflow2_mnist.py',
];
local shared = t.params(framework, { image: image, command: [], args: [], restartPolicy: 'Never' });

{
  name: component,
  description: |||
    An MPI training job: one kubeflow.org/v1 MPIJob for a training-operator component to run.
    Replica types Launcher (always exactly 1) and Worker (workerReplicas). The Launcher runs
    launcherCommand and launcherArgs (default mpirun with upstream's Horovod TensorFlow MNIST
    example; without -np mpirun starts one process per slot, slotsPerWorker on each Worker) and
    decides success; Workers run workerCommand and workerArgs, by default none, so the operator
    makes them sleep until mpirun's processes arrive by kubectl exec. Every replica runs one
    container named `mpi` (image, env), no port, the resource requests and limits, and gpus
    `nvidia.com/gpu` limits on the Workers (gpuImage when set). mpiImplementation (OpenMPI,
    Intel or MPICH; null: Open MPI's hostfile with Open MPI's and Intel MPI's variables) and
    runLauncherAsWorker (null: only when the Launcher asks for a GPU) are passed to the job.
    restartPolicy (default Never, the operator's) applies to both types; runPolicy takes
    cleanPodPolicy, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend and
    schedulingPolicy. Pods run as a non-root user (runAsUser) without privilege escalation or
    capabilities, and Workers without a service account token unless serviceAccount is set.
    The Launcher is the exception: it needs its API token to exec into the Workers, so its pod
    mounts the token of serviceAccount or, when that is null, of `<job>-launcher`, which the
    operator creates with a Role that allows exec into this job's Workers and nothing else.
    A sweep appends its flags to launcherArgs (the program mpirun runs).
    Kept from ksonnet's mpi-job-simple and mpi-job-custom prototypes: image, command and args
    (now the Launcher's), the replica count (workerReplicas) and GPUs per replica (gpus, on the
    Workers). Dropped: the namespace param (the environment's is used), comma-separated args (a
    list now), the total `gpus` that the v1alpha1 operator split into replicas (kubeflow.org/v1
    counts Workers), and mpi-job-custom's pvcName (mount volumes in a hand-written component).
  ||| + u.paramsLine($.params),
  params: {
    [p]: shared[p]
    for p in std.objectFields(shared)
    if !std.member(['command', 'args'], p)
  } + {
    image+: { description: 'Image of the Launcher and the Workers; it must hold MPI and the training program.' },
    launcherCommand: { type: 'array', items: { type: 'string' }, default: ['mpirun'], description: 'Command of the Launcher (list of strings), e.g. ["mpirun"] or ["horovodrun"].' },
    launcherArgs: { type: 'array', items: { type: 'string' }, default: launcherArgs, description: "Args of the Launcher's command: mpirun's options, then the training program and its flags." },
    workerCommand: { type: 'array', items: { type: 'string' }, default: [], description: "Command of each Worker (list of strings); empty leaves it to the operator, which makes the Worker sleep until mpirun's processes arrive." },
    workerArgs: { type: 'array', items: { type: 'string' }, default: [], description: 'Args of workerCommand; needs workerCommand.' },
    workerReplicas: { type: 'integer', minimum: 0, default: 2, description: 'Worker replicas; the Launcher is always one.' },
    slotsPerWorker: { type: 'integer', minimum: 1, default: 1, description: 'MPI processes each Worker runs: its slots in the hostfile.' },
    mpiImplementation: { type: 'string', enum: implementations, default: null, description: 'The MPI in the image, for the hostfile and the Launcher\'s variables: OpenMPI, Intel or MPICH; null: Open MPI\'s hostfile with Open MPI\'s and Intel MPI\'s variables.' },
    runLauncherAsWorker: { type: 'boolean', default: null, description: 'Whether the Launcher runs MPI processes too (first in the hostfile); null: only when it asks for a GPU.' },
  },

  render(params, env):: t.withModelKeys(component, part, params, [$.job(component, part, params, params.name)]),

  // The replica types with their counts, left out when 0, after checking the counts.
  replicaCounts(prototype, params):: t.present({
    Launcher: 1,
    Worker: t.notNegative(prototype, params, 'workerReplicas'),
  }),

  longestPodSuffix(counts):: framework.longestPodSuffix(counts),

  // MPI's own spec fields, checked as the CRD checks them.
  spec(prototype, params):: std.prune({
    slotsPerWorker:
      if params.slotsPerWorker < 1 then u.fail(prototype, 'slotsPerWorker', 'must be 1 or more, got %d' % params.slotsPerWorker)
      else params.slotsPerWorker,
    mpiImplementation:
      if params.mpiImplementation == null then null
      else u.oneOf(prototype, params, 'mpiImplementation', implementations),
    runLauncherAsWorker: params.runLauncherAsWorker,
  }),

  // The Launcher's and the Workers' commands; `extraArgs` go to the Launcher's program.
  commands(prototype, params, extraArgs):: (
    local workerCommand = t.strings(prototype, params, 'workerCommand');
    local workerArgs = t.strings(prototype, params, 'workerArgs');
    local launcherCommand = t.strings(prototype, params, 'launcherCommand');
    {
      Launcher: {
        command:
          if launcherCommand == [] then u.fail(prototype, 'launcherCommand', 'is empty; the Launcher must run mpirun (or horovodrun), e.g. ["mpirun"]')
          else launcherCommand,
        args: t.strings(prototype, params, 'launcherArgs') + extraArgs,
      },
      Worker: {
        command: workerCommand,
        args:
          if workerCommand == [] && workerArgs != [] then
            u.fail(prototype, 'workerArgs', 'needs workerCommand: without one the operator makes Workers sleep and drops the args; set workerCommand too')
          else workerArgs,
      },
    }
  ),

  // One MPIJob named `name` for the component `params.name`, made by `prototype` (named in
  // errors); `labels` and `annotations` go on the job and its pods, `extraArgs` after the
  // Launcher's args.
  job(prototype, part, params, name, labels={}, annotations={}, extraArgs=[])::
    t.job(framework, prototype, part, params, name, $.replicaCounts(prototype, params), labels, annotations, [], $.spec(prototype, params), $.commands(prototype, params, extraArgs)),
}
