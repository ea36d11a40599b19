/**
 * One measuring run of `brim plan`: the user's job run briefly under the guard with given knob values
 * (launched as a tune's trial is, `knobs/launch.ts`), its config copies removed after — and by the
 * watchdog when brim is killed. A run that did not end ok is an error with one text for every plan
 * path, its last lines said first.
 *
 * This folder (`src/plan/measure/`) is the one part of `src/plan/` that runs a job: it comes after
 * `guard/` and `tune/` in the flow, and nothing else in `src/plan/` imports it.
 *
 * @example
 * ```ts
 * const run = await measuringRun({ command, cwd, bindings, documents, knobs: { batch_size: 8 }, steps: 3, copyTag, at: "at micro-batch 8",
 *   consequence: "nothing is planned", guard: { hz: 10 } }, { devices, store, say: (text) => process.stderr.write(text) });
 * ```
 * @module
 */
import type { ConfigDocument } from "../../configs/index.ts";
import type { Devices } from "../../devices/index.ts";
import { BrimError } from "../../errors/index.ts";
import { guardRun, type GuardOptions, type GuardResult } from "../../guard/guard.ts";
import type { RunStore } from "../../record/store.ts";
import { launchWithKnobs, type CopyTag, type KnobBinding, type Knobs } from "../../knobs/index.ts";

/**
 * One measuring run asked for.
 *
 * @example
 * ```ts
 * const request: MeasuringRunRequest = { command: ["python", "train.py"], cwd: "/proj", bindings: [], documents: new Map(), knobs: { batch_size: 8 },
 *   copyTag: { kind: "plan", owner: session, index: 0 }, steps: 3, at: "at micro-batch 8", consequence: "nothing is planned", guard: { hz: 10 } };
 * ```
 */
export interface MeasuringRunRequest {
  command: readonly string[];
  cwd: string;
  bindings: readonly KnobBinding[];
  documents: ReadonlyMap<string, ConfigDocument>;
  knobs: Knobs;
  copyTag: CopyTag;
  steps: number;
  /** the run's values in words, for the line that starts it ("at micro-batch 8 with stage=short") */
  at: string;
  /** what a failed run means for the plan ("nothing is planned") */
  consequence: string;
  /** the guard's settings that differ between plan paths */
  guard: Pick<GuardOptions, "hz" | "hungAfterS" | "timeLimitS" | "env" | "onChunk">;
}

/**
 * What a measuring run needs: the machine, the store, and where its lines go (stderr).
 *
 * @example
 * ```ts
 * const deps: MeasureDeps = { devices: openDevices(), store: new RunStore(".brim"), say: (text) => process.stderr.write(text) };
 * ```
 */
export interface MeasureDeps {
  devices: Devices;
  store: RunStore;
  /** a line for the user, newline included */
  say: (text: string) => void;
}

/** Lines of a failed measuring run's output said before its error. */
const TAIL_LINES = 15;

/**
 * Runs the job once to measure it (see the module doc) and returns the run; a run that did not end
 * ok is a BrimError ({@link notOkError}), its last lines said first.
 *
 * @example
 * ```ts
 * const run = await measuringRun(request, { devices, store, say });
 * run.summary.peak_tree_rss_bytes;
 * ```
 */
export async function measuringRun(request: MeasuringRunRequest, deps: MeasureDeps): Promise<GuardResult> {
  const launch = await launchWithKnobs(request.command, request.bindings, request.knobs, {
    copyTag: request.copyTag,
    documents: request.documents,
    cwd: request.cwd,
  });
  try {
    deps.say(`brim: measuring the job ${request.at} for ${request.steps} steps: ${launch.command.join(" ")}\n`);
    const result = await guardRun(
      {
        command: launch.command,
        cwd: request.cwd,
        capBytes: null,
        shrink: false,
        knobs: request.knobs,
        stepBudget: request.steps,
        warmupSteps: 1,
        killGraceS: 10,
        forwardSignals: true,
        ...request.guard,
        env: { ...request.guard.env, ...launch.env },
        removeOnLoss: launch.copies,
      },
      { devices: deps.devices, store: deps.store },
    );
    if (result.job.end.cause !== "ok") {
      const tail = result.job.tail.slice(-TAIL_LINES);
      if (tail.length > 0)
        deps.say(
          `brim: the last lines of the measuring run's output (all of it in ${deps.store.root}/runs/${result.meta.id}/output.log):\n${tail.map((l) => `  | ${l}`).join("\n")}\n`,
        );
      throw notOkError(result, request.consequence);
    }
    return result;
  } finally {
    launch.cleanup();
  }
}

/**
 * The one error of a measuring run that did not end ok: its id, how it ended, and what that means.
 *
 * @example
 * ```ts
 * notOkError(run, "nothing is planned").message; // "the measuring run 20261122-101500-3f2a did not end ok (crashed: ...); nothing is planned"
 * ```
 */
export function notOkError(run: Pick<GuardResult, "meta" | "job">, consequence: string): BrimError {
  const end = run.job.end;
  const message = end.message.replace(/the last lines of its output are above and in output\.log/, "its last lines are printed above");
  return new BrimError("E_JOB_START", `the measuring run ${run.meta.id} did not end ok (${end.cause}: ${message}); ${consequence}`);
}
