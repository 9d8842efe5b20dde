// A hyperparameter grid sweep over a job prototype: `of(job, name, grid)` is the sweep prototype
// `name` that renders one job per combination of values, each by the job prototype's `job`, so a
// sweep's jobs and a single job never differ in anything but their flags and names. Moved here
// from tf-job-sweep.libsonnet, unchanged, so that every framework's job prototype can have one.
local u = import 'mlkube/util.libsonnet';
// Hex digits of the combination's hash in a job's name: `<component>-<hash>`.
local hashLength = 10;
local labelPrefix = 'sweep.mlkube.io/';
local annotation = 'sweep.mlkube.io/hyperparameters';
local maxServiceName = 63;
local letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
local digits = '0123456789';


// A label value (at most 63 of letters, digits, `-`, `_`, `.`, starting and ending with a
// letter or digit): what `kubectl get -l` can select on.
local isLabelValue(text) =
  local chars = std.stringChars(text);
  local alphanumeric(c) = std.member(letters + digits, c);
  std.length(chars) <= 63
  && (chars == [] || (alphanumeric(chars[0]) && alphanumeric(chars[std.length(chars) - 1])))
  && std.all([std.member(letters + digits + '-_.', c) for c in chars]);

// A hyperparameter's name becomes a flag and a label key: a letter, then letters, digits and
// `_`, ending with a letter or digit.
local isHyperparameterName(name) =
  local chars = std.stringChars(name);
  std.length(chars) > 0 && std.length(chars) <= 63
  && std.member(letters, chars[0])
  && std.member(letters + digits, chars[std.length(chars) - 1])
  && std.all([std.member(letters + digits + '_', c) for c in chars]);

// `learningRate` -> `learning-rate` (kebab) or `learning_rate` (snake).
local flagName(name, style) =
  local separator = if style == 'kebab' then '-' else '_';
  std.join('', [
    if c == '_' || c == '-' then separator
    else if std.asciiLower(c) != c then separator + std.asciiLower(c)
    else c
    for c in std.stringChars(name)
  ]);

// The grid's values of one hyperparameter, checked.
local valuesOf(component, grid, name) =
  local fail(param, message) = u.fail(component, param, message);
  local values = grid[name];
  local shown = std.manifestJsonMinified(values);
  if !isHyperparameterName(name) then
    fail('grid', 'hyperparameter %s must be a letter followed by letters, digits or "_" (it becomes a flag and a label key)' % std.manifestJsonMinified(name))
  else if !std.isArray(values) then
    fail('grid', 'the values of %s must be a list, e.g. [%s], got %s' % [name, shown, shown])
  else if values == [] then
    fail('grid', '%s has no values, so the grid has no combinations' % name)
  else
    local bad = [v for v in values if !(std.isString(v) || std.isNumber(v) || std.isBoolean(v))];
    local unlabelled = [v for v in values if !isLabelValue(std.toString(v))];
    if bad != [] then fail('grid', 'a value of %s must be a string, number or boolean, got %s' % [name, std.manifestJsonMinified(bad[0])])
    else if unlabelled != [] then
      fail('grid', 'value %s of %s cannot be a label value (letters, digits, "-", "_" and ".", at most 63, starting and ending with a letter or digit), which `kubectl get -l` selects on' % [std.manifestJsonMinified(unlabelled[0]), name])
    else if std.length(std.set([std.manifestJsonMinified(v) for v in values])) != std.length(values) then
      fail('grid', '%s lists a value twice in %s' % [name, shown])
    else values;

// Every combination of the grid's values, as objects { <hyperparameter>: <value> }.
local combinations(component, grid) =
  local fail(param, message) = u.fail(component, param, message);
  if !std.isObject(grid) || std.length(grid) == 0 then
    fail('grid', 'is empty; give each hyperparameter a list of values, e.g. {"learningRate": [0.01, 0.001]}')
  else std.foldl(
    function(partial, name) [c { [name]: v } for c in partial for v in valuesOf(component, grid, name)],
    std.objectFields(grid),
    [{}],
  );

// The name of a combination's job: the component's, then a hash of the combination, so that a
// job keeps its name when the grid grows and each combination always gets the same name.
local jobName(name, combination) =
  '%s-%s' % [name, std.substr(std.md5(std.manifestJsonMinified(combination)), 0, hashLength)];

{
  // The sweep prototype `component` over the job prototype `job`, `grid` the default of its grid.
  of(job, component, grid):: {
    name: component,
    description: |||
      A hyperparameter sweep: one kubeflow.org/v1 TFJob per combination of the values in grid.
      grid maps hyperparameter names to lists of values: {"learningRate": [0.01, 0.001],
      "hiddenLayers": [2, 3, 4]} renders 6 jobs, each with flags after args such as
      `--hidden-layers=2 --learning-rate=0.01` (alphabetical; flagStyle `snake` gives
      `--learning_rate`). Jobs are named `<component>-<hash>`, the first 10 hex digits of the MD5 of
      the combination, so a combination keeps its job and its name when the grid grows or is
      reordered, and names are checked unique. Each job and its pods carry the values as labels
      `sweep.mlkube.io/<hyperparameter>` (`kubectl get tfjobs -l sweep.mlkube.io/learningRate=0.01`)
      and all of them as JSON in the annotation `sweep.mlkube.io/hyperparameters`. maxJobs guards
      against a grid larger than meant. Every other param is tf-job's and applies to each job,
      rendered by tf-job's own code; set a small grid in `local` and the full one in `prod`.
      The Kubeflow talk wrote this sweep as a Helm loop over a values file.
      Dropped from that loop: the chart's per-job templating (every job is the same tf-job), and
      search strategies other than a full grid (random or Bayesian search is Katib's job).
    ||| + u.paramsLine(self.params),
    params: job.params {
      grid: { type: 'object', default: grid, description: 'Hyperparameters and their values, e.g. {"learningRate": [0.01, 0.001]}; one job per combination.' },
      flagStyle: { type: 'string', default: 'kebab', description: 'How a hyperparameter becomes a flag: kebab (--learning-rate) or snake (--learning_rate).' },
      maxJobs: { type: 'integer', default: 50, description: 'Most jobs the grid may render; a larger grid is an error.' },
    },

    render(params, env):: (
      local style = u.oneOf(component, params, 'flagStyle', ['kebab', 'snake']);
      local all = combinations(component, params.grid);
      local room = maxServiceName - std.length(job.longestPodSuffix(job.replicaCounts(component, params))) - 1 - hashLength;
      local names = [jobName(params.name, c) for c in all];
      local checked =
        if std.length(all) > params.maxJobs then
          u.fail(component, 'grid', 'gives %d jobs, more than maxJobs (%d); shrink the grid or raise maxJobs' % [std.length(all), params.maxJobs])
        else if std.length(params.name) > room then
          u.fail(component, 'name', 'the component name %s is too long for a sweep: with the job hash and the pod suffix the operator adds, pod and service names would pass %d characters; use at most %d' % [std.manifestJsonMinified(params.name), maxServiceName, room])
        else if std.length(std.set(names)) != std.length(names) then
          u.fail(component, 'grid', 'two combinations hash to the same job name; change a value slightly')
        else all;
      [
        job.job(
          component,
          component,
          params,
          jobName(params.name, c),
          labels={ [labelPrefix + h]: std.toString(c[h]) for h in std.objectFields(c) },
          annotations={ [annotation]: std.manifestJsonMinified(c) },
          extraArgs=['--%s=%s' % [flagName(h, style), std.toString(c[h])] for h in std.objectFields(c)],
        )
        for c in checked
      ]
    ),
  },
}
