// A hyperparameter sweep of FrameworkController Frameworks: job-sweep.libsonnet over framework,
// one Framework per combination of a grid and of a seeded random search, named
// `<component><hash>` (a Framework's name holds no `-`).
local sweep = import 'mlkube/job-sweep.libsonnet';

sweep.of(import 'mlkube/framework.libsonnet', 'framework-sweep')
