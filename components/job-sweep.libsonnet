// Hyperparameter sweeps over any training-job prototype. `of(job, name)` turns a job prototype
// (tf-job, pytorch-job, ...) into a sweep prototype that renders one job per combination of a
// grid and of a seeded random search, each by the job prototype's own `job`, so a sweep's jobs
// and a single job of that framework never differ in anything but their flags, labels and names.
//
// What a job prototype gives a sweep: `name`, `params`, `replicaCounts(prototype, params)` (the
// replica types with their counts, checked), `longestPodSuffix(counts)` (what the operator
// appends to a job's name for its longest pod name) and
// `job(prototype, part, params, name, labels, annotations, extraArgs)` (one job).
//
// Jsonnet has no random numbers: a draw is a hash. The value of hyperparameter `h` in draw `i`
// of seed `s` comes from the MD5 of `s:i:h`, its first 13 hex digits read as a fraction of 2^52.
// So a draw depends only on the seed, its index and the range, never on the environment or the
// other ranges: `local` with count 1 renders draw 0 with the name `prod` gives it, and a larger
// count keeps the draws before it.
local u = import 'mlkube/util.libsonnet';
local t = import 'mlkube/training-job.libsonnet';

// Hex digits of the combination's hash in a job's name: `<component>-<hash>`.
local hashLength = 10;
local labelPrefix = 'sweep.mlkube.io/';
local combinationAnnotation = 'sweep.mlkube.io/hyperparameters';
local objectiveAnnotation = 'sweep.mlkube.io/objective';
local maxServiceName = 63;
local letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
local digits = '0123456789';
// 13 hex digits are 52 bits: a fraction of 2^52 is exact in a double.
local drawHexDigits = 13;
local drawSpan = std.pow(2, 52);

// A label value (at most 63 of letters, digits, `-`, `_`, `.`, starting and ending with a
// letter or digit): what `kubectl get -l` can select on.
local isLabelValue(text) =
  local chars = std.stringChars(text);
  local alphanumeric(c) = std.member(letters + digits, c);
  std.length(chars) <= 63
  && (chars == [] || (alphanumeric(chars[0]) && alphanumeric(chars[std.length(chars) - 1])))
  && u.onlyChars(letters + digits + '-_.', text);

// A hyperparameter's name becomes a flag and a label key: a letter, then letters, digits and
// `_`, ending with a letter or digit.
local isHyperparameterName(name) =
  local chars = std.stringChars(name);
  std.length(chars) > 0 && std.length(chars) <= 63
  && std.member(letters, chars[0])
  && std.member(letters + digits, chars[std.length(chars) - 1])
  && u.onlyChars(letters + digits + '_', name);

// `learningRate` -> `learning-rate` (kebab) or `learning_rate` (snake).
local flagName(name, style) =
  local separator = if style == 'kebab' then '-' else '_';
  std.join('', [
    if c == '_' || c == '-' then separator
    else if std.asciiLower(c) != c then separator + std.asciiLower(c)
    else c
    for c in std.stringChars(name)
  ]);

// `x` rounded to `significant` digits. Dividing the rounded integer by an exact power of ten
// gives the double nearest the decimal, so it prints as the short decimal (0.00123).
local round(x, significant) =
  if x == 0 then 0
  else
    local guess = std.floor(std.log(std.abs(x)) / std.log(10));
    // The logarithm may fall just short at a power of ten.
    local exponent = if std.pow(10, guess + 1) <= std.abs(x) then guess + 1 else guess;
    local shift = significant - 1 - exponent;
    if shift >= 0 then std.round(x * std.pow(10, shift)) / std.pow(10, shift)
    else std.round(x / std.pow(10, -shift)) * std.pow(10, -shift);

// Checks of one sweep prototype's params; `prototype` names it in errors.
local checks(prototype) = {
  local fail(param, message) = u.fail(prototype, param, message),

  name(param, name)::
    if isHyperparameterName(name) then name
    else fail(param, 'hyperparameter %s must be a letter followed by letters, digits or "_" (it becomes a flag and a label key)' % std.manifestJsonMinified(name)),

  // A value a job can carry: a flag's value and a label's.
  value(param, name, v)::
    if !(std.isString(v) || std.isNumber(v) || std.isBoolean(v)) then
      fail(param, 'a value of %s must be a string, number or boolean, got %s' % [name, std.manifestJsonMinified(v)])
    else if !isLabelValue(std.toString(v)) then
      fail(param, 'value %s of %s cannot be a label value (letters, digits, "-", "_" and ".", at most 63, starting and ending with a letter or digit), which `kubectl get -l` selects on' % [std.manifestJsonMinified(v), name])
    else v,

  // A list of distinct values, e.g. a grid's or a random choice's.
  values(param, name, values)::
    local shown = std.manifestJsonMinified(values);
    if !std.isArray(values) then
      fail(param, 'the values of %s must be a list, e.g. [%s], got %s' % [name, shown, shown])
    else if values == [] then
      fail(param, '%s has no values%s' % [name, if param == 'grid' then ', so the grid has no combinations' else ''])
    else
      local checked = [$.value(param, name, v) for v in values];
      if std.length(std.set([std.manifestJsonMinified(v) for v in checked])) != std.length(checked) then
        fail(param, '%s lists a value twice in %s' % [name, shown])
      else checked,

  number(param, what, v)::
    if std.isNumber(v) then v else fail(param, '%s must be a number, got %s' % [what, std.manifestJsonMinified(v)]),
};

// Every combination of the grid's values, as objects { <hyperparameter>: <value> }; [{}] for
// an empty grid.
local gridCombinations(prototype, grid) =
  local check = checks(prototype);
  if !std.isObject(grid) then
    u.fail(prototype, 'grid', 'must be an object of hyperparameters and their values, e.g. {"learningRate": [0.01, 0.001]}')
  else std.foldl(
    function(partial, name) [c { [name]: v } for c in partial for v in check.values('grid', name, grid[name])],
    // Checked here: a name is used as a field name, which forces the check.
    [check.name('grid', name) for name in std.objectFields(grid)],
    [{}],
  );

// A range of random.ranges, checked: a list to choose from, or {min, max} with `log` (uniform
// in the logarithm), `integer` and `digits` (significant digits of a number, default 3).
local checkedRange(prototype, name, range) =
  local check = checks(prototype);
  local fail(message) = u.fail(prototype, 'random', message);
  local what = 'random.ranges.' + name;
  if std.isArray(range) then { choices: check.values('random', name, range) }
  else if !std.isObject(range) then
    fail('%s must be a list of values to choose from or {"min": ..., "max": ...}, got %s' % [what, std.manifestJsonMinified(range)])
  else
    local unknown = std.setDiff(std.objectFields(range), ['digits', 'integer', 'log', 'max', 'min']);
    local spec = { log: false, integer: false, digits: 3 } + range;
    local min = check.number('random', what + '.min', std.get(range, 'min'));
    local max = check.number('random', what + '.max', std.get(range, 'max'));
    if unknown != [] then fail('%s has %s; a range takes min, max, log, integer and digits' % [what, std.join(', ', unknown)])
    else if !std.isBoolean(spec.log) || !std.isBoolean(spec.integer) then fail('%s: log and integer must be true or false' % what)
    else if !(std.isNumber(spec.digits) && spec.digits >= 1 && spec.digits <= 15 && spec.digits == std.floor(spec.digits)) then
      fail('%s.digits must be a whole number from 1 to 15, got %s' % [what, std.manifestJsonMinified(spec.digits)])
    else if min >= max then fail('%s: min (%s) must be less than max (%s)' % [what, min, max])
    else if spec.log && min <= 0 then fail('%s: a log range needs min above 0, got %s' % [what, min])
    else if spec.integer && (min != std.floor(min) || max != std.floor(max)) then
      fail('%s: an integer range needs whole min and max, got %s and %s' % [what, min, max])
    else spec { min: min, max: max };

// A fraction in [0, 1) for hyperparameter `name` in draw `index` of `seed`.
local fraction(seed, index, name) =
  std.parseHex(std.substr(std.md5('%s:%d:%s' % [seed, index, name]), 0, drawHexDigits)) / drawSpan;

local drawValue(range, f) =
  if std.objectHas(range, 'choices') then range.choices[std.floor(f * std.length(range.choices))]
  else if range.integer then
    local low = if range.log then std.log(range.min) else range.min;
    local high = if range.log then std.log(range.max + 1) else range.max + 1;
    local x = low + f * (high - low);
    std.min(range.max, std.floor(if range.log then std.exp(x) else x))
  else if range.log then round(std.exp(std.log(range.min) + f * (std.log(range.max) - std.log(range.min))), range.digits)
  else round(range.min + f * (range.max - range.min), range.digits);

// The draws of a random search, in order, each { <hyperparameter>: <value> }; a draw equal to
// an earlier one is left out. [{}] without a random search.
local randomDraws(prototype, random) =
  local check = checks(prototype);
  local fail(message) = u.fail(prototype, 'random', message);
  if random == null then [{}]
  else if !std.isObject(random) then fail('must be an object such as {"count": 20, "seed": 1, "ranges": {"learningRate": {"min": 0.0001, "max": 0.1, "log": true}}}, or null')
  else
    local unknown = std.setDiff(std.objectFields(random), ['count', 'ranges', 'seed']);
    local count = std.get(random, 'count');
    local seed = std.get(random, 'seed', 1);
    local ranges = std.get(random, 'ranges', {});
    if unknown != [] then fail('has %s; it takes count, seed and ranges' % std.join(', ', unknown))
    else if !(std.isNumber(count) && count >= 1 && count == std.floor(count)) then
      fail('count must be a whole number of jobs, 1 or more, got %s' % std.manifestJsonMinified(count))
    else if !(std.isNumber(seed) || std.isString(seed)) then fail('seed must be a number or a string, got %s' % std.manifestJsonMinified(seed))
    else if !std.isObject(ranges) || std.length(ranges) == 0 then
      fail('ranges is empty; give each hyperparameter a range, e.g. {"learningRate": {"min": 0.0001, "max": 0.1, "log": true}}')
    else
      local checked = { [check.name('random', h)]: checkedRange(prototype, h, ranges[h]) for h in std.objectFields(ranges) };
      local draws = [
        { [h]: check.value('random', h, drawValue(checked[h], fraction(seed, i, h))) for h in std.objectFields(checked) }
        for i in std.range(0, count - 1)
      ];
      std.foldl(
        function(kept, draw) if std.member(kept, draw) then kept else kept + [draw],
        draws,
        [],
      );

// Every job's combination: each of the grid's with each draw of the random search.
local combinations(prototype, params) =
  local grid = gridCombinations(prototype, params.grid);
  local draws = randomDraws(prototype, params.random);
  local both = std.setInter(std.objectFields(grid[0]), std.objectFields(draws[0]));
  if grid == [{}] && draws == [{}] then
    u.fail(prototype, 'grid', 'is empty; give each hyperparameter a list of values, e.g. {"learningRate": [0.01, 0.001]}, or set random')
  else if both != [] then
    u.fail(prototype, 'random', '%s is in grid too; give each hyperparameter either values in grid or a range in random' % both[0])
  else [g + d for g in grid for d in draws];

local objectiveOf(prototype, objective) =
  local fail(message) = u.fail(prototype, 'objective', message);
  if objective == null then null
  else if !std.isObject(objective) || !std.isString(std.get(objective, 'metric')) then
    fail('must be {"metric": <name>, "goal": "maximize" or "minimize"}, got %s' % std.manifestJsonMinified(objective))
  else if std.setDiff(std.objectFields(objective), ['goal', 'metric']) != [] then
    fail('takes metric and goal only, got %s' % std.manifestJsonMinified(objective))
  else if !std.member(['maximize', 'minimize'], std.get(objective, 'goal', 'maximize')) then
    fail('goal must be "maximize" or "minimize", got %s' % std.manifestJsonMinified(objective.goal))
  else { goal: 'maximize' } + objective;

// The name of a combination's job: the component's, then a hash of the combination, so that a
// job keeps its name when the grid grows and each combination always gets the same name. A job
// prototype whose names cannot hold `-` (a Framework's) gives its `nameSeparator`.
local separator(job) = std.get(job, 'nameSeparator', '-');
local jobName(job, name, combination) =
  '%s%s%s' % [name, separator(job), std.substr(std.md5(std.manifestJsonMinified(combination)), 0, hashLength)];

{
  // The sweep prototype `name` over the job prototype `job`; `grid` is the default of its grid.
  of(job, name, grid={}):: {
    name: name,
    description: |||
      A hyperparameter sweep of %(job)s jobs: one job per combination of a grid of values and of
      the draws of a seeded random search, each rendered by %(job)s with every %(job)s param.
      grid maps hyperparameters to lists of values: {"learningRate": [0.01, 0.001], "layers": [2,
      3, 4]} gives 6 combinations. random draws count combinations from ranges:
      {"count": 20, "seed": 1, "ranges": {"learningRate": {"min": 0.0001, "max": 0.1, "log": true},
      "layers": {"min": 2, "max": 5, "integer": true}, "optimizer": ["adam", "sgd"]}} (log is
      uniform in the logarithm; numbers keep `digits` significant digits, default 3). A draw is a
      hash of the seed, its index and the hyperparameter, so it is the same in every environment
      and a larger count keeps the earlier draws; a draw equal to an earlier one is left out. With
      both, every grid combination goes with every draw. The values are appended to args as
      flags in alphabetical order (`--layers=2 --learning-rate=0.01`; flagStyle `snake` gives
      `--learning_rate`). Jobs are named `<component>%(separator)s<hash>`, the first 10 hex digits of the MD5
      of the combination, so a combination keeps its job and its name when the grid or count
      grows, and names are checked unique. Each job and its pods carry the values as labels
      `sweep.mlkube.io/<hyperparameter>` and all of them as JSON in the annotation
      `sweep.mlkube.io/hyperparameters`; objective ({"metric": "accuracy", "goal": "maximize"})
      is set as the annotation `sweep.mlkube.io/objective`, which `mlkube status <env> -c
      <component>` ranks the jobs by; a job reports a metric as a line `metric <name>=<value>` in
      its lead replica's log, or as an annotation `metric.mlkube.io/<name>`. maxJobs guards
      against a sweep larger than meant.
      The Kubeflow talk wrote sweeps as a Helm loop over a values file. Dropped from that loop:
      the chart's per-job templating (every job is the same %(job)s); Bayesian search and early
      stopping (Katib's job: a sweep here is a fixed set of jobs, known before any runs).
    ||| % { job: job.name, separator: separator(job) } + u.paramsLine(self.params),
    params: job.params {
      grid: { type: 'object', default: grid, description: 'Hyperparameters and their values, e.g. {"learningRate": [0.01, 0.001]}; one job per combination.' },
      random: { type: 'object', default: null, description: 'A random search: {"count": 20, "seed": 1, "ranges": {"learningRate": {"min": 0.0001, "max": 0.1, "log": true}}}; null for none.' },
      objective: { type: 'object', default: null, description: 'The metric the jobs report and its goal, {"metric": "accuracy", "goal": "maximize"}, by which status ranks them; null ranks by the first metric reported, highest first.' },
      flagStyle: { type: 'string', enum: ['kebab', 'snake'], default: 'kebab', description: 'How a hyperparameter becomes a flag: kebab (--learning-rate) or snake (--learning_rate).' },
      maxJobs: { type: 'integer', minimum: 1, default: 50, description: 'Most jobs the sweep may render; a larger one is an error.' },
    },

    render(params, env):: (
      local style = u.oneOf(name, params, 'flagStyle', ['kebab', 'snake']);
      local all = combinations(name, params);
      local objective = objectiveOf(name, params.objective);
      local room = maxServiceName - std.length(job.longestPodSuffix(job.replicaCounts(name, params))) - std.length(separator(job)) - hashLength;
      local names = [jobName(job, params.name, c) for c in all];
      local checked =
        if std.length(all) > params.maxJobs then
          u.fail(name, 'grid', 'gives %d jobs, more than maxJobs (%d); shrink the sweep or raise maxJobs' % [std.length(all), params.maxJobs])
        else if std.length(params.name) > room then
          u.fail(name, 'name', 'the component name %s is too long for a sweep: with the job hash and the pod suffix the operator adds, pod and service names would pass %d characters; use at most %d' % [std.manifestJsonMinified(params.name), maxServiceName, room])
        else if std.length(std.set(names)) != std.length(names) then
          u.fail(name, 'grid', 'two combinations hash to the same job name; change a value slightly')
        else all;
      t.withModelKeys(name, name, params, [
        job.job(
          name,
          name,
          params,
          jobName(job, params.name, c),
          labels={ [labelPrefix + h]: std.toString(c[h]) for h in std.objectFields(c) },
          annotations={ [combinationAnnotation]: std.manifestJsonMinified(c) }
                      + (if objective != null then { [objectiveAnnotation]: std.manifestJsonMinified(objective) } else {}),
          extraArgs=['--%s=%s' % [flagName(h, style), std.toString(c[h])] for h in std.objectFields(c)],
        )
        for c in checked
      ])
    ),
  },
}
