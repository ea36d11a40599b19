import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseTuneRecord } from "../../src/record/schema.ts";
import { confirmSpeedup } from "../../src/tune/confirm.ts";
import { describeNoise, NOISE_FLOOR, noiseEstimate } from "../../src/tune/strategies/noise.ts";

// A real tune on slow steps beside a busy core (issue 38's proof), kept as brim wrote it: the nbeats
// example at micro-batch 6144 (steps of 9–14 s), `setsid yes` holding one of the 2 cores, at c038a2b:
//   brim tune --store … --fix batch_size --max-trials 3 --max-time 20m -- python nbeats/train.py \
//     --config nbeats/config.yaml --set data_loader.batch_size=6144
// Its verdicts are checked again from what it stored, with no clock.
const record = parseTuneRecord(
  JSON.parse(readFileSync(new URL("../fixtures/tune-noise/nbeats-busy-core.json", import.meta.url), "utf8")),
  "nbeats-busy-core.json",
);
const search = record.trials.filter((t) => !t.purpose.startsWith("confirm"));

describe("a tune on 9–14 s steps beside a busy core, as recorded", () => {
  it("measured your configuration twice before comparing a knob, and its noise is measured from that repeat, not a floor", () => {
    const same = search.filter((t) => JSON.stringify(t.knobs) === JSON.stringify(search[0]?.knobs));
    expect(same.map((t) => t.index)).toEqual([0, 1]);
    const rates = same.map((t) => t.samples_per_s ?? 0);
    // the repeat's own spread (0.85 %); with one degree of freedom the trials' step noise (1.9 %) is the larger and stands in
    const repeat = noiseEstimate([], [rates]);
    expect(repeat.source).toBe("repeats");
    expect(repeat.noise).toBeCloseTo(0.0085, 3);
    expect(record.noise).toBeGreaterThanOrEqual(repeat.noise);
    expect(record.noise).not.toBe(NOISE_FLOOR);
    expect(record.notes).toContain("noise ±1.9 % a trial, measured: the spread of repeated configurations in this tune (1 degree of freedom)");
    // said since as what it is: the step noise, larger than the one repeat's spread
    expect(describeNoise(noiseEstimate([0.0189], [rates]))).toBe(
      "±1.9 % a trial, measured: the trials' own step noise, larger than the ±0.9 % spread of repeated configurations in this tune (1 degree of freedom: too few to stand alone)",
    );
  });

  it("decided every search trial on 20 steady steps (K capped by --steps: their mean was within ±1.8–2.5 %, short of ±1 %)", () => {
    expect(search.map((t) => t.stopped_by)).toEqual(["steps", "steps", "steps"]);
    expect(record.notes.some((n) => n.includes("then 20 steady steps at least (K: 20 steps measured their mean within ±1.8 %"))).toBe(true);
  });

  it("confirmed cpu_threads=1 on interleaved pairs whose interval is the one their rates give", () => {
    const c = record.confirmation;
    expect(c?.verdict).toBe("confirmed");
    const again = confirmSpeedup(c?.baseline_rates ?? [], c?.winner_rates ?? [], [], 0);
    expect(again.speedup).toBeCloseTo(c?.speedup ?? 0, 6);
    expect(again.low).toBeGreaterThan(1.2);
    expect(record.winner?.knobs).toMatchObject({ cpu_threads: 1 });
  });
});
