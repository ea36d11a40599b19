/**
 * The environment a job runs with: brim's SDK variables, the attach's boot folder first on
 * PYTHONPATH, the bundled SDK last.
 *
 * @module
 */
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { JobOptions } from "./types.ts";

/** brim's own Python SDK folder, appended to PYTHONPATH so an example finds `brim` without installing it. */
export const BUNDLED_SDK_PATH = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "python");

/** The folder whose `sitecustomize` attaches brim to an unmodified Python job (docs/attach.md); first on PYTHONPATH. */
export const ATTACH_BOOT_PATH = join(BUNDLED_SDK_PATH, "_brim_boot");

/**
 * The values that switch off an on-by-default switch of the job's environment (BRIM_ATTACH, BRIM_LOSS,
 * BRIM_METRICS): Python's `_env.OFF_WORDS` and the start-up's check say the same (test/job/contract.test.ts).
 *
 * @example
 * ```ts
 * OFF_WORDS.has("no"); // true
 * ```
 */
export const OFF_WORDS: ReadonlySet<string> = new Set(["0", "false", "no", "off"]);

/**
 * Whether brim attaches to the job: on unless `attach: false` (`--no-attach`) or `BRIM_ATTACH=0`.
 *
 * @example
 * ```ts
 * attachEnabled({ BRIM_ATTACH: "0" }); // false
 * ```
 */
export function attachEnabled(env: NodeJS.ProcessEnv, attach?: boolean): boolean {
  return attach !== false && !OFF_WORDS.has((env.BRIM_ATTACH ?? "1").trim().toLowerCase());
}

/**
 * The environment a job runs with: the SDK's variables (docs/sdk.md) on top of the base.
 *
 * @example
 * ```ts
 * jobEnvironment({ command: ["python", "train.py"], runId: "r1", knobs: { batch_size: 64 } }, "/tmp/brim.sock").BRIM_KNOBS;
 * // '{"batch_size":64}'
 * ```
 */
export function jobEnvironment(options: JobOptions, channelPath: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...(options.baseEnv ?? process.env) };
  env.BRIM_CHANNEL = channelPath;
  if (options.channelToken !== undefined) env.BRIM_CHANNEL_TOKEN = options.channelToken;
  env.BRIM_RUN_ID = options.runId;
  if (env.PYTHONUNBUFFERED === undefined) {
    // output as it comes; brim's sitecustomize then makes it line-buffered (whole lines per write)
    env.PYTHONUNBUFFERED = "1";
    env.BRIM_LINE_BUFFERED = "1";
  }
  if (options.knobs !== undefined && Object.keys(options.knobs).length > 0) env.BRIM_KNOBS = JSON.stringify(options.knobs);
  if (options.stepBudget != null) env.BRIM_STEP_BUDGET = String(options.stepBudget);
  if (options.warmupSteps != null) env.BRIM_WARMUP_STEPS = String(options.warmupSteps);
  if (options.gpuCapBytes != null) {
    env.BRIM_MEMORY_CAP_BYTES = String(Math.floor(options.gpuCapBytes));
    if (options.gpuTotalBytes != null && options.gpuTotalBytes > 0 && env.XLA_PYTHON_CLIENT_MEM_FRACTION === undefined) {
      env.XLA_PYTHON_CLIENT_PREALLOCATE = env.XLA_PYTHON_CLIENT_PREALLOCATE ?? "false";
      env.XLA_PYTHON_CLIENT_MEM_FRACTION = (Math.floor((options.gpuCapBytes / options.gpuTotalBytes) * 100) / 100).toFixed(2);
    }
  }
  const final: NodeJS.ProcessEnv = { ...env, ...options.env };
  const paths = final.PYTHONPATH === undefined || final.PYTHONPATH === "" ? [] : final.PYTHONPATH.split(delimiter);
  if (options.bundledSdk !== false) {
    if (attachEnabled(final, options.attach)) paths.unshift(ATTACH_BOOT_PATH);
    paths.push(BUNDLED_SDK_PATH);
  }
  if (!attachEnabled(final, options.attach)) final.BRIM_ATTACH = "0";
  if (paths.length > 0) final.PYTHONPATH = paths.join(delimiter);
  return final;
}
