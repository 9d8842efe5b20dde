// The `sweep` component: an instance of the xgboost-job-sweep prototype
// (`mlkube prototype describe xgboost-job-sweep` lists its parameters).
// Its parameters are set in components/params.libsonnet and, per environment, in
// environments/<env>/params.libsonnet; `mlkube param list sweep --env <env>` shows them.
local component = import 'mlkube/component.libsonnet';

(import 'mlkube/xgboost-job-sweep.libsonnet').render(component.params, component.env)
