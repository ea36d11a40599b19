// Every time limit of the tests goes through scaled(): a limit only stops a test that hangs, it is
// never a verdict, so on a slower or busier machine it grows instead of failing a test that would
// have passed. The factor is BRIM_TEST_TIME_SCALE when set (a number ≥ 1), otherwise the machine's
// load when the test file starts: 1 + the one-minute load average per core (an idle machine 1, two
// cores both busy 2), at most 4. The base limits were sized on an idle 2-core machine.
import { availableParallelism, loadavg } from "node:os";

const MAX_SCALE = 4;

/**
 * The factor time limits are multiplied by on this machine now.
 *
 * @example
 * ```ts
 * timeScale({ BRIM_TEST_TIME_SCALE: "3" }); // 3
 * ```
 */
export function timeScale(env: NodeJS.ProcessEnv = process.env, load: number = loadavg()[0] ?? 0, cores: number = availableParallelism()): number {
  const raw = env.BRIM_TEST_TIME_SCALE;
  if (raw !== undefined && raw !== "") {
    const given = Number(raw);
    if (!Number.isFinite(given) || given < 1) throw new Error(`BRIM_TEST_TIME_SCALE must be a number ≥ 1, got ${JSON.stringify(raw)}`);
    return given;
  }
  return Math.min(MAX_SCALE, 1 + Math.max(0, load) / Math.max(1, cores));
}

const SCALE = timeScale();

/**
 * A time limit in milliseconds, scaled for this machine (see the module comment).
 *
 * @example
 * ```ts
 * spawnSync(python, [script], { timeout: scaled(120_000) });
 * it("runs a job", { timeout: scaled(300_000) }, () => {});
 * ```
 */
export function scaled(ms: number): number {
  return Math.round(ms * SCALE);
}
