// What the campaign measures: the example jobs, their model specs, and per part the micro-batches,
// step counts and search settings. Micro-batches for planner accuracy are chosen so the memory that
// grows with the batch spans tens of MiB to several GiB on an 80 GB card (per-sample bytes from
// `brim plan`), and stay within each job's dataset (`set` enlarges it where needed: a loader with
// drop_last and a batch larger than the dataset yields nothing and the job never steps). Loader
// workers stay off: big batches through worker shared memory fail where /dev/shm is small.

const train = (example) => `examples/${example}/train.py`;
const config = (example) => `examples/${example}/config.yaml`;

/**
 * One job: how to start it, which spec `brim plan` reads for it, and its knobs.
 * `datasetSize`: samples per epoch of the naive config (the largest micro-batch a trial may use).
 */
const FULL = [
  {
    name: "nbeats",
    example: "nbeats",
    args: ["--config", config("nbeats")],
    spec: "examples/nbeats/model.yaml",
    optimizer: "adam",
    datasetSize: 12224,
    accuracy: { microBatches: [512, 4096, 16384, 32768], set: ["data.n_series=256"], knobs: {} },
    grid: [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
  },
  {
    name: "cnn-lstm",
    example: "cnn-lstm",
    args: ["--config", config("cnn-lstm")],
    spec: "examples/cnn-lstm/model.yaml",
    optimizer: "adam",
    datasetSize: 512,
    accuracy: { microBatches: [32, 256, 1024, 2048], set: ["data.n_files=2048"], knobs: {} },
    grid: [16, 32, 64, 128, 256, 512],
  },
  {
    name: "embedder",
    example: "embedder",
    args: ["--config", config("embedder")],
    spec: "examples/embedder/model.yaml",
    planStage: "short",
    optimizer: "adamw",
    datasetSize: 8192,
    accuracy: { microBatches: [8, 64, 256, 512], set: [], knobs: { stage: "short" } },
    // the naive config holds the effective batch at 4 × 16 = 64: micro-batches divide it
    grid: [4, 8, 16, 32, 64],
  },
  {
    name: "ppo",
    example: "ppo",
    args: ["--config", config("ppo")],
    spec: "examples/ppo/model.yaml",
    optimizer: "adam",
    datasetSize: 256,
    accuracy: { microBatches: [256, 4096, 16384, 65536], set: ["env.num_envs=4096"], knobs: {} },
    grid: [32, 64, 128, 256],
  },
  {
    name: "lstm",
    example: "lstm-transformer",
    args: ["--config", config("lstm-transformer")],
    spec: "examples/lstm-transformer/lstm.yaml",
    optimizer: "adamw",
    datasetSize: 28544,
    accuracy: { microBatches: [32, 256, 1024, 4096], set: [], knobs: {} },
    grid: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
  },
  {
    name: "transformer",
    example: "lstm-transformer",
    args: ["--config", config("lstm-transformer"), "--set", "model.kind=transformer"],
    spec: "examples/lstm-transformer/transformer.yaml",
    optimizer: "adamw",
    datasetSize: 28544,
    accuracy: { microBatches: [32, 256, 1024, 2048], set: [], knobs: {} },
    // the same example as "lstm" with its other model: planner accuracy only, unless named in --jobs
    accuracyOnly: true,
    grid: [16, 32, 64, 128, 256, 512, 1024, 2048],
  },
];

const QUICK = [
  {
    name: "quick-nbeats",
    example: "nbeats",
    args: ["--config", "bench/gpu/quick/config.yaml"],
    spec: "bench/gpu/quick/nbeats-tiny.yaml",
    optimizer: "adam",
    datasetSize: 408,
    accuracy: { microBatches: [4, 16], set: [], knobs: {} },
    grid: [8, 32],
  },
];

/** Per-part settings; `quick` is the CPU smoke run of run.sh --quick. */
const SETTINGS = {
  full: {
    precisions: ["fp32", "bf16-mixed", "fp16-mixed"],
    accuracy: { steps: 6, warmup: 1, hz: 20, runLimitS: 240, guessS: 12 },
    profile: { samples: 8, limitS: 180 },
    tune: { maxTrials: 12, maxTime: "150s", steps: 10, warmup: 2, trialTime: "60s", guessS: 200 },
    grid: { precisions: ["fp32", "bf16-mixed"], maxTime: "100s", guessS: 120 },
    guard: { cap: "12GiB", fitShare: 0.6, pressureShare: 1.5, steps: 12, oomAt: 3, limitS: 300, guessS: 90 },
    overhead: { steps: 150, pairs: 2, hz: 10, limitS: 180, guessS: 60 },
    utilization: { targetS: 10, minSteps: 30, maxSteps: 3000, warmup: 3, hz: 10, limitS: 240, guessS: 30 },
    snapshots: { precisions: ["fp32", "bf16-mixed"], steps: 4, warmup: 1, limitS: 240, guessS: 45 },
  },
  quick: {
    precisions: ["fp32"],
    accuracy: { steps: 3, warmup: 1, hz: 10, runLimitS: 120, guessS: 10 },
    profile: { samples: 8, limitS: 120 },
    // the least tune that searches: your configuration and one trial (a winner adds its A/B
    // confirmation, 4 trials more); every trial is a job process, seconds of CPU on a busy machine
    tune: { maxTrials: 2, maxTime: "90s", steps: 12, warmup: 2, trialTime: "60s", guessS: 60 },
    // the grid is over the micro-batch: PyTorch's threads (tried first beside busy cores) stay as given
    grid: { precisions: [], fix: ["cpu_threads"], maxTime: "60s", guessS: 40 },
    guard: { cap: "4GiB", fitShare: null, pressureShare: null, steps: 4, oomAt: 1, limitS: 120, guessS: 15 },
    overhead: { steps: 4, pairs: 1, hz: 10, limitS: 120, guessS: 20 },
    utilization: { targetS: 1, minSteps: 3, maxSteps: 3, warmup: 1, hz: 10, limitS: 120, guessS: 15 },
    snapshots: { precisions: ["fp32"], steps: 3, warmup: 1, limitS: 120, guessS: 15 },
  },
};

/**
 * The jobs and settings of this call (--quick, --jobs). `jobs` is for planner accuracy (every model);
 * `workloads` for tune, guard, utilization and overhead (one job per example).
 */
export function campaignPlan(opts) {
  const all = opts.quick ? QUICK : FULL;
  const jobs = opts.jobs ? all.filter((j) => opts.jobs.includes(j.name)) : all;
  if (opts.jobs && jobs.length === 0) throw new Error(`--jobs: none of ${opts.jobs.join(",")} is a job here (${all.map((j) => j.name).join(", ")})`);
  const workloads = jobs.filter((j) => !j.accuracyOnly || opts.jobs?.includes(j.name));
  return { jobs, workloads, settings: opts.quick ? SETTINGS.quick : SETTINGS.full, parallel: opts.parallel ?? (opts.quick ? 1 : 2) };
}

/** The job's command: python, its train.py, its arguments, and extra `--set key=value` overrides. */
export function jobCommand(campaign, job, sets = [], extra = []) {
  return [campaign.opts.python, train(job.example), ...job.args, ...sets.flatMap((s) => ["--set", s]), ...extra];
}

/** `--knob name=value` arguments for brim run. */
export function knobArgs(knobs) {
  return Object.entries(knobs).flatMap(([k, v]) => ["--knob", `${k}=${v}`]);
}
