import { describe, expect, it } from "vitest";
import { nearPowers } from "../../src/knobs/specs.ts";
import { evidenceOf, rankByEvidence } from "../../src/tune/evidence.ts";
import { measurableValues, rolloutShare } from "../../src/tune/rollout.ts";
import { searchKnobs } from "../../src/tune/search.ts";
import { heldLabel } from "../../src/tune/strategies/coordinate.ts";
import type { Knobs, TrialResult, TrialRunner, TuneSpace } from "../../src/tune/types.ts";
import { FakeClock } from "./oracle.ts";

/**
 * A trial of a PPO job as the attach records it (a step per minibatch update): `updates` steps of
 * `updateS`, the first of them and one every `period` after a rollout that took `rolloutS` (rl_zoo3 on
 * CartPole: 64-sample minibatches at about 10 ms, a 512-transition rollout of 4 processes at about 0.3 s).
 */
function ppoTrial(updateS: number, rolloutS: number, updates: number, wait: number | null = null, period = updates): TrialResult {
  const stepSeconds = Array.from({ length: updates }, (_, i) => updateS + (i % period === 0 ? rolloutS : 0) + (i % 3) * 1e-4);
  const total = stepSeconds.reduce((a, b) => a + b, 0);
  return {
    end: "ok",
    samplesPerSecond: (64 * updates) / total,
    stepSeconds,
    peakBytes: null,
    frameworkPeakBytes: null,
    durationS: total + 5,
    oomRecoveries: 0,
    dataWaitShare: wait,
    precision: "fp32",
  };
}

const ZOO_KNOBS = { num_envs: 4, rollout_steps: 128, batch_size: 64 };
const OTHERS = [
  { knob: "num_envs", values: nearPowers(4) },
  { knob: "rollout_steps", values: nearPowers(128) },
];

describe("the rollout evidence: when more environments are worth a trial", () => {
  it("reads the rollout from the steps far above the median step", () => {
    expect(rolloutShare([0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.31])).toEqual({
      share: expect.closeTo(0.789, 3) as number,
      steps: 1,
      measured: 8,
      period: 8,
    });
    expect(rolloutShare([0.01, 0.012, 0.011])).toEqual({ share: 0, steps: 0, measured: 3, period: null });
    expect(rolloutShare([0.01, 0.5])).toBeNull();
    // a busy machine's step at 3× the median is not a rollout when they are counted for their period
    expect(rolloutShare([0.01, 0.01, 0.03, 0.01, 0.3, 0.01, 0.01, 0.01, 0.28, 0.01])?.period).toBe(5);
  });

  it("does not try values whose rollout would not come once in the steps a trial measures (a trial without one reads as fast)", () => {
    const rollout = { share: 0.6, steps: 2, measured: 64, period: 32 };
    expect(measurableValues("rollout_steps", [32, 64, 128, 256, 512], rollout, { num_envs: 4, rollout_steps: 128 })).toEqual({
      values: [32, 64, 128, 256],
      why: "rollout_steps=512 not tried: a rollout would come every ≈128 updates there, more than the 64 steps a trial measures (a trial with no rollout in it reads as fast)",
    });
    expect(measurableValues("num_minibatches", [1, 2, 4, 8, 16], rollout, { num_minibatches: 4 }).values).toEqual([1, 2, 4, 8]);
    // num_envs with a rollout length beside it keeps the rollout, and so its period; alone it spaces them out
    expect(measurableValues("num_envs", [1, 2, 4, 8, 16], rollout, { num_envs: 4, rollout_steps: 128 }).values).toEqual([1, 2, 4, 8, 16]);
    expect(measurableValues("num_envs", [1, 2, 4, 8, 16], rollout, { num_envs: 4 }).values).toEqual([1, 2, 4, 8]);
    expect(measurableValues("num_workers", [0, 1, 2], rollout, { num_workers: 0 }).values).toEqual([0, 1, 2]);
    expect(measurableValues("rollout_steps", [32, 512], { ...rollout, period: null, steps: 0 }, { rollout_steps: 128 }).values).toEqual([32, 512]);
  });

  it("a job whose updates wait on its environments: num_envs first, the rollout's share and what it changes said", () => {
    const evidence = evidenceOf(ppoTrial(0.01, 0.3, 20), ZOO_KNOBS, 1e9);
    const { ranked, skipped } = rankByEvidence(OTHERS, evidence, ZOO_KNOBS);
    expect(skipped).toEqual([]);
    expect(ranked.map((r) => r.knob)).toEqual(["num_envs", "rollout_steps"]);
    expect(ranked[0]?.gain).toBeGreaterThan(0.5);
    expect(ranked[0]?.why).toMatch(
      /^60 % of the time measured is in the 1 step that collected a rollout \(2× the median step or more\); with rollout_steps changed/,
    );
    expect(ranked[1]?.why).toMatch(/the rollout \(num_envs × rollout_steps transitions each update sees\) changes with it/);
  });

  it("a rollout measured that took hardly any of the time: neither knob is tried, and the note says why", () => {
    const evidence = evidenceOf(ppoTrial(0.01, 0.015, 40), ZOO_KNOBS, 1e9);
    const { ranked, skipped } = rankByEvidence(OTHERS, evidence, ZOO_KNOBS);
    expect(ranked).toEqual([]);
    expect(skipped.map((s) => s.knob)).toEqual(["num_envs", "rollout_steps"]);
    expect(skipped[0]?.why).toMatch(/^4 % of the time measured .*: the environments' stepping hardly holds the updates up$/);
  });

  it("no rollout among the steps measured (fewer than one rollout's updates): tried last, no evidence either way", () => {
    const evidence = evidenceOf(ppoTrial(0.01, 0, 12), ZOO_KNOBS, 1e9);
    const { ranked, skipped } = rankByEvidence([...OTHERS, { knob: "num_minibatches", values: [1, 2, 4] }], evidence, ZOO_KNOBS);
    expect(skipped).toEqual([]);
    expect(ranked.map((r) => r.knob)).toEqual(["num_minibatches", "num_envs", "rollout_steps"]);
    expect(ranked[1]?.why).toMatch(/^no step measured collected a rollout/);
    expect(ranked[0]?.why).toMatch(/the minibatch \(samples per optimizer step\) is the rollout divided by it/);
  });

  it("the ppo example's wait is its rollout's: loader workers drop below num_envs, and the reason is said", () => {
    const knobs = { num_envs: 16, rollout_steps: 16, batch_size: 64, num_workers: 0 };
    const trial = ppoTrial(0.01, 0.2, 16, 0.55);
    const { ranked } = rankByEvidence([{ knob: "num_workers", values: [0, 1, 2] }, ...OTHERS], evidenceOf(trial, knobs, 1e9), knobs);
    expect(ranked[0]?.knob).toBe("num_envs");
    const workers = ranked.find((r) => r.knob === "num_workers");
    expect(workers?.why).toMatch(/most of it in the steps that collected a rollout: loader workers do not step the environments \(num_envs does\)/);
    // a job with no environments keeps the loader knobs' rule as it was
    const plain = rankByEvidence([{ knob: "num_workers", values: [0, 1, 2] }], evidenceOf(trial, { batch_size: 64, num_workers: 0 }, 1e9), {
      batch_size: 64,
      num_workers: 0,
    });
    expect(plain.ranked[0]?.gain).toBeCloseTo(0.55, 3);
  });
});

/**
 * A simulated rl_zoo3 job on 8 cores: SubprocVecEnv steps every environment at once (one round trip,
 * then each process's step on a core of its own), the updates are fixed minibatches of 64, 4 passes
 * over each rollout; every trial measures 128 updates, a rollout before the first and then one every
 * num_envs × rollout_steps × 4 / 64 updates.
 */
class PpoRunner implements TrialRunner {
  readonly calls: { knobs: Knobs; purpose: string }[] = [];
  private readonly clock: FakeClock;
  constructor(clock: FakeClock) {
    this.clock = clock;
  }
  run(knobs: Knobs, purpose: string): Promise<TrialResult> {
    const envs = Number(knobs.num_envs);
    const steps = Number(knobs.rollout_steps);
    const vectorStep = 0.001 + 0.004 * Math.ceil(envs / 8);
    const result = ppoTrial(0.004, steps * vectorStep, 128, null, (envs * steps * 4) / 64);
    this.clock.t += result.durationS;
    this.calls.push({ knobs, purpose });
    return Promise.resolve(result);
  }
}

describe("the walk over environments keeps the rollout (simulated rl_zoo3 PPO)", () => {
  it("tries num_envs first, moves rollout_steps inversely, and says what each trial kept or changed", async () => {
    const clock = new FakeClock();
    const runner = new PpoRunner(clock);
    const space: TuneSpace = { baseline: { ...ZOO_KNOBS }, others: OTHERS.map((o) => ({ ...o, values: [...o.values] })) };
    const outcome = await searchKnobs(space, runner, { capBytes: 1e9, maxTrials: 16, maxTimeS: 1e6, now: clock.now });
    const first = runner.calls.find((c) => c.knobs.num_envs !== 4);
    expect(first?.knobs).toEqual({ num_envs: 8, rollout_steps: 64, batch_size: 64 });
    expect(first?.purpose).toMatch(
      /^knob num_envs=8 with rollout_steps=64 \(the rollout: transitions each update sees, kept at 512\): against num_envs=4 — \d+ % of the time measured/,
    );
    // 128 steps a trial, a rollout every 32 updates at num_envs=8: rollout_steps stops at 4× (256)
    expect(runner.calls.some((c) => c.knobs.rollout_steps === 512 && c.knobs.num_envs !== 1)).toBe(false);
    // until rollout_steps is walked on its own, every trial keeps 512 transitions a rollout
    const walkOfEnvs = runner.calls.filter((c) => c.purpose.startsWith("knob num_envs"));
    expect(walkOfEnvs.length).toBeGreaterThan(0);
    for (const c of walkOfEnvs) expect(Number(c.knobs.num_envs) * Number(c.knobs.rollout_steps)).toBe(512);
    expect(Number(outcome.best?.knobs.num_envs)).toBeGreaterThan(4);
    expect(outcome.notes.join("\n")).toMatch(/num_envs: num_envs=8 with rollout_steps=64 \([^)]*\): \d+ % \([^)]*\) — kept/);
    // walked on its own afterwards, the rollout length says that it changes the rollout
    const alone = runner.calls.filter((c) => c.purpose.startsWith("knob rollout_steps="));
    expect(alone.length).toBeGreaterThan(0);
    for (const c of alone) expect(c.purpose).toMatch(/the rollout \(num_envs × rollout_steps transitions each update sees\) changes with it/);
  });

  it("says a value whose rollout length would not be whole is not tried", () => {
    expect(heldLabel("num_envs", 3, { num_envs: 4, rollout_steps: 128 }, null)).toBe(
      "num_envs=3 not tried: rollout_steps would not be a whole number (the rollout: transitions each update sees, 512, kept)",
    );
    expect(heldLabel("num_envs", 8, { num_envs: 4 }, { num_envs: 8 })).toBe("num_envs=8");
    expect(heldLabel("num_workers", 2, { num_workers: 0 }, { num_workers: 2 })).toBe("num_workers=2");
  });
});
