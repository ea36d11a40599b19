// Issue #36: a trial at another micro-batch whose samples per step did not follow it (a batch_size the
// script overwrites, or one that sizes the loader's batch and not the model's) says something about the
// micro-batch knob only. The search drops that knob, as --fix batch_size would, and tunes the other knobs
// at the baseline's micro-batch, where samples/s still compares with trial 0's. Simulated trials, judged
// as the tune judges them (judgeTrial): no verdict here rests on a measured speed.
import { describe, expect, it } from "vitest";
import { confirmWinner } from "../../src/tune/confirm.ts";
import { judgeTrial } from "../../src/tune/effective.ts";
import { noWinnerAdvice, trialRecord } from "../../src/tune/record.ts";
import { searchKnobs } from "../../src/tune/search.ts";
import type { Knobs, SearchOutcome, TrialResult, TrialRunner, TuneSpace } from "../../src/tune/types.ts";
import { DEFAULT_ORACLE, FakeClock, SimulatedRunner } from "./oracle.ts";

const CAP = 2 ** 30;
const BASE = 32;

/** What one simulated job trains on and counts, for the knobs a trial asked for. */
type Job = (knobs: Knobs, ran: TrialResult) => TrialResult;

/** The batch_size knob is read and overwritten: the job trains on, and counts, 32 samples a step whatever it says. */
const overwritten: Job = (_knobs, ran) => ({ ...ran, samplesPerStep: BASE });

/** The knob sizes the DataLoader's batch, which brim counts, while the model is fed 256 samples a step whatever it is. */
const loaderOnly: Job = (knobs, ran) => {
  const m = Number(knobs.batch_size);
  return { ...ran, samplesPerStep: m, modelSamplesPerStep: 256, samplesPerSecond: ran.samplesPerSecond === null ? null : (ran.samplesPerSecond * m) / BASE };
};

/** Trials of `job` on the oracle (its step time that of micro-batch 32, its loader workers paying), each judged against trial 0 as the tune's runOne judges it. */
class JudgedJob implements TrialRunner {
  readonly trials: { knobs: Knobs; result: TrialResult }[] = [];
  untrusted: string | null = null;
  private readonly oracle: SimulatedRunner;
  private readonly job: Job;
  readonly clock = new FakeClock();

  /** `dataS`: seconds per sample the loop waits for data without workers; 0: workers pay in the compute (no data wait to rank them first) */
  constructor(job: Job, dataS: number) {
    this.job = job;
    const clock = this.clock;
    this.oracle = new SimulatedRunner({ ...DEFAULT_ORACLE, dataS }, { capBytes: CAP, clock, seed: 3, stepNoise: 0.01 });
  }

  async run(knobs: Knobs): Promise<TrialResult> {
    const ran = this.job(knobs, await this.oracle.run({ ...knobs, batch_size: BASE }, ""));
    const first = this.trials[0];
    const judged = first === undefined ? { result: ran, untrusted: null } : judgeTrial(first, { knobs, result: ran });
    this.untrusted ??= judged.untrusted;
    this.trials.push({ knobs, result: judged.result });
    return judged.result;
  }
}

const space = (others: TuneSpace["others"]): TuneSpace => ({ baseline: { batch_size: BASE, num_workers: 0 }, microBatch: { knob: "batch_size" }, others });
const WORKERS = [{ knob: "num_workers", values: [0, 1, 2, 4] }];

async function tuned(job: Job, others: TuneSpace["others"], dataS = 0.0005): Promise<{ runner: JudgedJob; outcome: SearchOutcome; said: string[] }> {
  const runner = new JudgedJob(job, dataS);
  const said: string[] = [];
  const outcome = await searchKnobs(space(others), runner, {
    capBytes: CAP,
    maxTrials: 24,
    maxTimeS: 3600,
    now: runner.clock.now,
    stopWhen: () => (runner.untrusted !== null ? "untrusted" : null),
    onNote: (line) => said.push(line),
  });
  return { runner, outcome, said };
}

/** The drop, the trial marked, no other micro-batch tried after it, and a winner at micro-batch 32 with its workers tuned, confirmed interleaved. */
async function expectWorkersTuned(runner: JudgedJob, outcome: SearchOutcome, said: string[], finding: RegExp): Promise<void> {
  const marked = runner.trials.filter((t) => t.result.notComparable !== undefined);
  expect(marked).toHaveLength(1);
  const trial = runner.trials.indexOf(marked[0] as (typeof runner.trials)[number]);
  expect(marked[0]?.result.notComparable).toMatch(finding);
  expect(trialRecord(trial, marked[0]?.knobs ?? {}, "micro-batch", marked[0]?.result as TrialResult, null).not_comparable).toMatch(finding);
  expect(runner.trials.slice(trial + 1).every((t) => t.knobs.batch_size === BASE)).toBe(true);
  expect(outcome.dropped).toMatchObject({ knobs: ["batch_size"], trial });
  const line = new RegExp(
    `^batch_size dropped from the search: .* \\(trial ${trial}, batch_size=\\d+\\); only configurations at micro-batch 32 are compared from here$`,
  );
  expect(said).toEqual([expect.stringMatching(line)]);
  expect(outcome.notes).toContainEqual(expect.stringMatching(line));
  expect(outcome.stopReason).not.toBe("untrusted");
  expect(outcome.memoryLine).toBeNull();
  expect(outcome.best?.knobs.batch_size).toBe(BASE);
  expect(Number(outcome.best?.knobs.num_workers)).toBeGreaterThan(0);
  expect(runner.untrusted).toBeNull();
  // the tune's confirmation (A/B/A/B against trial 0) runs at micro-batch 32 too, judged the same way
  const confirmation = await confirmWinner(
    outcome.trials[0]?.knobs ?? {},
    outcome.best?.knobs ?? {},
    (knobs) => runner.run(knobs),
    [],
    0.01,
    () => true,
  );
  expect(confirmation?.verdict).toBe("confirmed");
  expect(runner.untrusted).toBeNull();
}

describe("a micro-batch whose samples per step did not follow the knob (issue #36)", () => {
  // a loop waiting for data tunes num_workers before the micro-batch phase; one that does not, after it (the drop comes first)
  for (const [order, dataS] of [
    ["workers first", 0.0005],
    ["micro-batch first", 0],
  ] as const) {
    it(`an overwritten batch_size (${order}): the knob is dropped, num_workers is tuned at micro-batch 32 and wins`, async () => {
      const { runner, outcome, said } = await tuned(overwritten, WORKERS, dataS);
      const firstWorkers = runner.trials.findIndex((t) => t.knobs.num_workers !== 0);
      expect((outcome.dropped?.trial ?? -1) < firstWorkers).toBe(dataS === 0);
      await expectWorkersTuned(
        runner,
        outcome,
        said,
        /^samples per step did not follow the effective batch: 32 × 1 → \d+ × 1 .* the batch_size knob looks inert/,
      );
      expect(said[0]).toMatch(/^batch_size dropped from the search: samples per step did not follow the effective batch \(trial/);
    });

    it(`a knob that moves the loader's batch, not the model's (${order}): the knob is dropped, num_workers wins at micro-batch 32`, async () => {
      const { runner, outcome, said } = await tuned(loaderOnly, WORKERS, dataS);
      await expectWorkersTuned(runner, outcome, said, /^the model was fed the same samples per step: 32 × 1 → \d+ × 1/);
      expect(said[0]).toMatch(/^batch_size dropped from the search: the model was fed the same samples per step \(trial/);
    });
  }

  it("with no other knob to tune: no winner, the search stops as untrusted, with the same advice as before", async () => {
    for (const [job, advice] of [
      [overwritten, /do not follow the micro-batch/],
      [loaderOnly, /changes what the DataLoader yields, not what the model is fed each step/],
    ] as const) {
      const { runner, outcome, said } = await tuned(job, []);
      expect(outcome.stopReason).toBe("untrusted");
      expect(outcome.best).toBeNull();
      expect(outcome.bestIndex).toBeNull();
      expect(outcome.dropped).toBeUndefined();
      expect(said).toEqual([]);
      expect(runner.trials).toHaveLength(2);
      expect(outcome.notes.some((n) => n.startsWith("winner:"))).toBe(false);
      const finding = runner.trials[1]?.result.notComparable ?? null;
      expect(noWinnerAdvice([], outcome.stopReason, "1 GiB", finding).reason).toMatch(advice);
    }
  });

  it("with other knobs that evidence rules out: nothing else was tunable, so the same no-winner result", async () => {
    // a loop that hardly waits for data: num_workers is not tried, only the knob dropped would remain
    const { runner, outcome } = await tuned((knobs, ran) => ({ ...overwritten(knobs, ran), dataWaitShare: 0.01 }), WORKERS);
    expect(outcome.notes).toContainEqual(expect.stringMatching(/^num_workers not tried: the loop waits for data only/));
    expect(runner.trials.filter((t) => t.knobs.num_workers !== 0)).toEqual([]);
    expect(outcome.stopReason).toBe("untrusted");
    expect(outcome.best).toBeNull();
  });

  it("a count that moved at the baseline's own micro-batch (something else broke it) still stops the tune", async () => {
    // the job's count doubles once loader workers run: nothing about batch_size
    const brokenByWorkers: Job = (knobs, ran) => ({ ...ran, samplesPerStep: Number(knobs.num_workers) > 0 ? 2 * BASE : BASE, modelSamplesPerStep: BASE });
    const runner = new JudgedJob(brokenByWorkers, 0.0005);
    const outcome = await searchKnobs({ ...space(WORKERS), microBatch: undefined }, runner, {
      capBytes: CAP,
      maxTrials: 24,
      maxTimeS: 3600,
      now: runner.clock.now,
      stopWhen: () => (runner.untrusted !== null ? "untrusted" : null),
    });
    expect(runner.untrusted).toMatch(/^the model was fed the same samples per step/);
    expect(outcome.stopReason).toBe("untrusted");
    expect(outcome.notes.some((n) => n.startsWith("winner:"))).toBe(false);
    expect(runner.trials.every((t) => t.result.notComparable === undefined)).toBe(true);
  });
});
