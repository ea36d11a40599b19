import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { TuneRecord, TuneTrialRecord } from "../../src/record/types.ts";
import { searchKnobs, type Knobs, type TrialResult } from "../../src/tune/search.ts";
import { buildSpace } from "../../src/tune/space.ts";

// What brim tune decides, on the trials of a real tune recorded on a busy 2-core machine
// (test/fixtures/stores/cnn-lstm-tune: the small cnn-lstm over batch_size, 6 trials): the search runs
// again with each trial it asks for answered by the recorded one (throughput, steady step times, peak),
// so its decisions are checked on fixed measurements, never on how fast this machine is today.
const STORE = join(import.meta.dirname, "..", "fixtures", "stores", "cnn-lstm-tune");
const [tuneId] = readdirSync(join(STORE, "tunes"));
const record = JSON.parse(readFileSync(join(STORE, "tunes", tuneId as string, "tune.json"), "utf8")) as TuneRecord;

// the record keeps what a trial set; a knob it left out kept the baseline's value
const key = (knobs: Knobs): string => JSON.stringify(Object.entries({ ...record.trials[0]?.knobs, ...knobs }).sort(([a], [b]) => a.localeCompare(b)));

/** A recorded trial as the search saw it: its run's steady step times from the timeline. */
function resultOf(trial: TuneTrialRecord): TrialResult {
  const timeline = readFileSync(join(STORE, "runs", trial.run_id as string, "timeline.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { kind: string; warmup?: boolean; wait_s?: number; compute_s?: number });
  const steady = timeline.filter((e) => e.kind === "step" && e.warmup !== true).map((e) => (e.wait_s ?? 0) + (e.compute_s ?? 0));
  return {
    end: trial.end as TrialResult["end"],
    samplesPerSecond: trial.samples_per_s,
    stepSeconds: steady,
    peakBytes: trial.peak_bytes,
    frameworkPeakBytes: trial.framework_peak_bytes ?? null,
    durationS: trial.duration_s ?? 0,
    oomRecoveries: trial.oom_recoveries ?? 0,
    dataWaitShare: trial.data_wait_share,
  };
}

/** Answers each configuration the search asks for with its recordings, in the order they were made. */
function replay(): { run(knobs: Knobs): Promise<TrialResult>; asked: Knobs[]; unrecorded: Knobs[] } {
  const left = new Map<string, TuneTrialRecord[]>();
  for (const trial of record.trials) left.set(key(trial.knobs), [...(left.get(key(trial.knobs)) ?? []), trial]);
  const asked: Knobs[] = [];
  const unrecorded: Knobs[] = [];
  return {
    asked,
    unrecorded,
    run(knobs: Knobs): Promise<TrialResult> {
      asked.push(knobs);
      const next = left.get(key(knobs))?.shift();
      if (next === undefined) {
        unrecorded.push(knobs);
        return Promise.resolve({
          end: "interrupted",
          samplesPerSecond: null,
          stepSeconds: [],
          peakBytes: null,
          frameworkPeakBytes: null,
          durationS: 0,
          oomRecoveries: 0,
        });
      }
      return Promise.resolve(resultOf(next));
    },
  };
}

describe("brim tune's decisions on a recorded tune (cnn-lstm, 6 trials on a busy 2-core machine)", () => {
  it("asks for the configurations it asked for then, in that order, and picks the same winner: micro-batch 64, the fastest measured", async () => {
    const trial0 = record.trials[0] as TuneTrialRecord;
    const runner = replay();
    let clock = 0;
    // the space brim builds from the config's knobs on that 2-core CPU host, as the tune did
    const space = buildSpace(trial0.knobs, {}, Object.keys(trial0.knobs), { backend: "cpu", bf16: false, tensorCores: false, cpus: 2 }, () => {});
    const outcome = await searchKnobs(space, runner, {
      capBytes: record.cap_bytes,
      maxTrials: record.trials.length,
      maxTimeS: 3600,
      now: () => (clock += 1),
    });
    expect(runner.unrecorded).toEqual([]);
    expect(runner.asked.map((knobs) => knobs.batch_size)).toEqual(record.trials.map((trial) => trial.knobs.batch_size));
    // for the same reasons: baseline, memory probes, throughput between probes, a re-measure of the best
    const why = (purpose: string): string => purpose.split(":")[0] ?? "";
    expect(outcome.trials.map((trial) => why(trial.purpose))).toEqual(record.trials.map((trial) => why(trial.purpose)));
    const best = outcome.bestIndex === null ? null : outcome.trials[outcome.bestIndex];
    expect(best?.knobs.batch_size).toBe(record.winner?.knobs.batch_size);
    expect(best?.knobs.batch_size).toBe(64);
    // the fastest of the configurations measured: its mean beats every other one's
    const means = new Map<number, number[]>();
    for (const trial of record.trials)
      means.set(trial.knobs.batch_size as number, [...(means.get(trial.knobs.batch_size as number) ?? []), trial.samples_per_s as number]);
    const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;
    const fastest = [...means.entries()].sort((a, b) => mean(b[1]) - mean(a[1]))[0]?.[0];
    expect(best?.knobs.batch_size).toBe(fastest);
  });
});
