/**
 * The environment contract between brim (TypeScript) and the job (the Python package it puts in):
 * every `BRIM_*` variable that crosses from one to the other, who sets it, who reads it, what it
 * means and what its absence means; and, apart, the variables brim itself reads from the user's
 * shell. One table each: docs/sdk.md's "Environment variables" lists exactly {@link JOB_ENV}, and a
 * test holds every `BRIM_*` name in `src/` and `python/` to these two tables.
 *
 * @module
 */

/** One variable of the job's environment. */
export interface JobEnvVar {
  /** who puts it in the job's environment */
  setBy: string;
  /** what in the job reads it */
  readBy: string;
  /** what it means; the default is what its absence means */
  meaning: string;
}

/**
 * The job's environment, brim → Python: the variables brim (or the user, for the test switches)
 * sets and the SDK or the attach reads.
 *
 * @example
 * ```ts
 * JOB_ENV.BRIM_STEP_BUDGET.readBy; // "brim.track, brim.report_step, the attach's step count"
 * ```
 */
export const JOB_ENV = {
  BRIM_CHANNEL: { setBy: "src/job/environment.ts", readBy: "everything", meaning: "path of brim's Unix socket; unset: not under brim, every report a no-op" },
  BRIM_CHANNEL_TOKEN: { setBy: "src/job/environment.ts", readBy: "the hello", meaning: "the run's secret, sent back in the hello" },
  BRIM_RUN_ID: {
    setBy: "src/job/environment.ts",
    readBy: "the hello; the watchdog finds escaped processes by it",
    meaning: "brim's id of the run or trial",
  },
  BRIM_ATTACH: { setBy: "src/job/environment.ts, the user", readBy: "start-up (sitecustomize)", meaning: "0/false/no/off: do not attach; default on" },
  BRIM_LINE_BUFFERED: {
    setBy: "src/job/environment.ts",
    readBy: "start-up (sitecustomize)",
    meaning: "1: brim set PYTHONUNBUFFERED itself, so output is made line-buffered (whole lines per write)",
  },
  BRIM_KNOBS: { setBy: "src/job/environment.ts", readBy: "brim.knob, brim.torch", meaning: "JSON object of the trial's knob values; default {}" },
  BRIM_KNOBS_FILE: {
    setBy: "src/guard/guard.ts",
    readBy: "brim.knob",
    meaning: "JSON file of knobs brim decided during the run (a smaller micro-batch after an OOM), over BRIM_KNOBS",
  },
  BRIM_CODE_KNOBS: {
    setBy: "src/knobs/binding.ts",
    readBy: "start-up (sitecustomize), python/brim/_code.py",
    meaning: "JSON list of literals in the job's code a trial changes in memory (file, line, name, value)",
  },
  BRIM_LOADER_ARGS: {
    setBy: "src/knobs/binding.ts",
    readBy: "python/brim/_loader_args.py",
    meaning: "JSON list of DataLoader arguments a trial sets on the loader built at one line of code",
  },
  BRIM_STEP_BUDGET: {
    setBy: "src/job/environment.ts",
    readBy: "brim.track, brim.report_step, the attach",
    meaning: "steps the process may run; unset: no budget",
  },
  BRIM_SEED: {
    setBy: "src/knobs/launch.ts",
    readBy: "the attach, at torch's import",
    meaning:
      "seed of torch's generator in a tune's trials and plan's measuring runs, so that every run starts from the same weights and data order (each rank seed + its RANK; a job's own manual_seed still wins); unset: torch's own",
  },
  BRIM_WARMUP_STEPS: { setBy: "src/job/environment.ts", readBy: "step reports", meaning: "the first N steps are flagged warm-up; default 0" },
  BRIM_MEMORY_CAP_BYTES: { setBy: "src/job/environment.ts", readBy: "bt.apply_cap, the attach", meaning: "bytes the process may hold on the GPU" },
  BRIM_MEMORY_CAP_FRACTION: {
    setBy: "the user",
    readBy: "bt.apply_cap, brim.apply_jax_cap",
    meaning: "the cap as a fraction of the device, when no byte cap is set",
  },
  BRIM_MEMORY_CAP_OVERHEAD_BYTES: {
    setBy: "the user",
    readBy: "bt.apply_cap",
    meaning: "bytes held outside PyTorch's allocator; default measured",
  },
  BRIM_STACKS_DIR: { setBy: "src/job/runner.ts", readBy: "start-up (sitecustomize)", meaning: "folder for each process's stack dump" },
  BRIM_STACKS_SIGNAL: { setBy: "src/job/runner.ts", readBy: "start-up (sitecustomize)", meaning: "the signal number brim sends for a stack dump" },
  BRIM_PROGRESS_PATTERN: { setBy: "src/cli/run.ts", readBy: "brim (not the job)", meaning: "the user's pattern for progress lines (--progress-pattern)" },
  BRIM_FOOTPRINT: {
    setBy: "src/plan/measure/script.ts",
    readBy: "the attach (python/brim/_footprint.py)",
    meaning: "1: record what a step holds (brim plan's measuring runs)",
  },
  BRIM_LOSS: { setBy: "the user", readBy: "python/brim/_loss.py", meaning: "0/false/no/off: do not read the loss at backward(); default on" },
  BRIM_METRICS: { setBy: "the user", readBy: "python/brim/_metrics.py", meaning: "0/false/no/off: do not read metrics the job logs; default on" },
  BRIM_FAULT_OOM_AT_STEP: { setBy: "tests", readBy: "TrainStep", meaning: "test switch: TrainStep calls at which an out-of-memory error is injected" },
  BRIM_FAULT_OOM_PHASE: { setBy: "tests", readBy: "TrainStep", meaning: "test switch: forward (default) or backward, where the injected error is raised" },
} as const satisfies Record<string, JobEnvVar>;

/**
 * What brim itself reads from the user's shell (not passed to the job as a contract).
 *
 * @example
 * ```ts
 * BRIM_ENV.BRIM_STORE; // "the run store folder (default .brim)"
 * ```
 */
export const BRIM_ENV = {
  BRIM_STORE: "the run store folder (default .brim)",
  BRIM_FONT_DIRS: "folders of fonts for PNG charts",
  BRIM_PROMETHEUS_TOKEN: "the bearer token of brim run's metrics endpoint",
  BRIM_VERSION: "brim's version, set by brim for what it starts",
  BRIM_WATCHDOG_JS: "the watchdog's own code, passed to the node process that runs it",
  BRIM_CACHE_DIR: "where the single-file brim (scripts/sea.mjs) unpacks itself",
} as const satisfies Record<string, string>;
