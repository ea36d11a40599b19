import { describe, expect, it } from "vitest";
import { candidateValues } from "../../src/knobs/index.ts";
import { EVIDENCE_FIRST, evidenceOf, otherWork, rankByEvidence } from "../../src/tune/evidence.ts";
import { searchKnobs } from "../../src/tune/search.ts";
import { jobWideRuledOut } from "../../src/tune/space.ts";
import type { Knobs, TrialResult, TrialRunner, TuneSpace } from "../../src/tune/types.ts";

// The knob cpu_threads (PyTorch's intra-op threads) on the recorded shape of the bundled cnn-lstm
// example beside one busy core of 2: no timing here, the trials' rates are the record's.
// the medians of bench/results/cpu-threads.json at ad262d1 (node bench/cpu-threads.bench.mjs --rounds 2 --steps 24),
// kept here so that measuring again does not change what this test decides
const record: { results: { threads: number | null; workers: number; median: number }[] } = {
  results: [
    { threads: null, workers: 0, median: 7.67 },
    { threads: null, workers: 2, median: 6.168 },
    { threads: null, workers: 4, median: 6.789 },
    { threads: 1, workers: 0, median: 9.656 },
    { threads: 1, workers: 2, median: 20.58 },
    { threads: 1, workers: 4, median: 45.14 },
  ],
};
const CPU = { backend: "cpu" as const, bf16: false, tensorCores: false, cpus: 2 };

const trial = (rate: number, other: number, wait = 0.9): TrialResult => ({
  end: "ok",
  samplesPerSecond: rate,
  stepSeconds: [16 / rate],
  peakBytes: null,
  frameworkPeakBytes: null,
  durationS: 10,
  oomRecoveries: 0,
  dataWaitShare: wait,
  cpuCores: 0.3,
  cpus: 2,
  hostBusy: (other + 0.3) / 2,
});

/** A job whose rate is the record's for its threads and workers (values between them: the nearer one below). */
class RecordedJob implements TrialRunner {
  readonly calls: { knobs: Knobs; purpose: string }[] = [];
  run(knobs: Knobs, purpose: string): Promise<TrialResult> {
    this.calls.push({ knobs, purpose });
    const threads = knobs.cpu_threads === 1 ? 1 : null;
    const workers = Number(knobs.num_workers ?? 0);
    const rows = record.results.filter((r) => r.threads === threads && r.workers <= workers).sort((a, b) => b.workers - a.workers);
    // a repeat of one configuration differs by ±2 %, alternately
    const wobble = this.calls.length % 2 === 0 ? 1.02 : 0.98;
    // the data wait as the first command's tune recorded it (bench/results/first-run.json): 62 % on 2
    // threads, 95 % on one (its compute no longer waits for a core), less with workers
    const wait = workers > 0 ? 0.7 : threads === 1 ? 0.95 : 0.62;
    return Promise.resolve(trial((rows[0]?.median ?? 1) * wobble, 1, wait));
  }
}

describe("cpu_threads: fewer intra-op threads when other work holds the cores", () => {
  it("is tried, fewer than the job's only, and never on one thread", () => {
    expect(candidateValues(["cpu_threads"], { cpu_threads: 2 }, CPU)).toEqual([{ knob: "cpu_threads", values: [1, 2] }]);
    expect(candidateValues(["cpu_threads"], { cpu_threads: 16 }, CPU)[0]?.values).toEqual([1, 2, 4, 8, 16]);
    expect(candidateValues(["cpu_threads"], { cpu_threads: 6 }, CPU)[0]?.values).toEqual([1, 2, 4, 6]);
    expect(candidateValues(["cpu_threads"], { cpu_threads: 1 }, CPU)).toEqual([]);
  });

  it("ranks first, before the loader's workers, when other processes keep a core busy; is left out when none do", () => {
    const others = [
      { knob: "num_workers", values: [0, 1, 2, 4] },
      { knob: "cpu_threads", values: [1, 2] },
    ];
    const busy = evidenceOf(trial(8, 1), { num_workers: 0, cpu_threads: 2 }, 1e9);
    expect(otherWork(busy)).toBeCloseTo(1, 6);
    const { ranked } = rankByEvidence(others, busy, { num_workers: 0, cpu_threads: 2 });
    expect(ranked.map((r) => r.knob)).toEqual(["cpu_threads", "num_workers"]);
    expect(ranked[0]?.why).toMatch(/other processes keep 1\.00 of 2 cores busy: each parallel op of the job's 2 threads waits/);
    const quiet = rankByEvidence(others, evidenceOf(trial(8, 0.05), { num_workers: 0, cpu_threads: 2 }, 1e9), { num_workers: 0, cpu_threads: 2 });
    expect(quiet.ranked.map((r) => r.knob)).toEqual(["num_workers"]);
    expect(quiet.skipped).toEqual([
      { knob: "cpu_threads", why: "other processes keep only 0.05 of 2 cores busy: fewer threads pay only when they hold cores" },
    ]);
    // a loop that does not wait for data, on a GPU: no loader walk to spoil, tried after the micro-batch phase
    const onGpu = { ...trial(8, 1, 0.01), gpuUtilMean: 80 };
    const fed = rankByEvidence(others, evidenceOf(onGpu, { num_workers: 0, cpu_threads: 2 }, 1e9), { num_workers: 0, cpu_threads: 2 });
    expect(fed.ranked.map((r) => [r.knob, r.gain < EVIDENCE_FIRST])).toEqual([["cpu_threads", true]]);
    // the same loop on the CPU: its threads are the compute, so they are tried before the micro-batch phase
    const fedCpu = rankByEvidence(others, evidenceOf(trial(8, 1, 0.01), { num_workers: 0, cpu_threads: 2 }, 1e9), { num_workers: 0, cpu_threads: 2 });
    expect(fedCpu.ranked.map((r) => [r.knob, r.gain >= EVIDENCE_FIRST])).toEqual([["cpu_threads", true]]);
    const unread = { ...evidenceOf(trial(8, 1), {}, 1e9), hostBusy: null };
    expect(rankByEvidence(others, unread, {}).skipped[0]?.why).toBe("no reading of the machine's other work");
  });

  it("the recorded job: one thread is kept first, then the workers the default threads could not use", async () => {
    const job = new RecordedJob();
    const space: TuneSpace = {
      baseline: { batch_size: 16, num_workers: 0, cpu_threads: 2 },
      microBatch: { knob: "batch_size", values: [16] },
      others: [
        { knob: "num_workers", values: [0, 1, 2, 4] },
        { knob: "cpu_threads", values: [1, 2] },
      ],
    };
    let t = 0;
    const outcome = await searchKnobs(space, job, { capBytes: 1e12, maxTrials: 8, maxTimeS: 1e6, now: () => (t += 10) });
    const first = job.calls.findIndex((c) => c.knobs.cpu_threads === 1);
    const workers = job.calls.findIndex((c) => Number(c.knobs.num_workers) > 0);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThan(workers);
    expect(outcome.best?.knobs).toMatchObject({ cpu_threads: 1, num_workers: 4 });
    // ranked again at the configuration kept: on one thread the loop waits 95 %, so one worker could hide only 5 % and is skipped
    expect(job.calls.some((c) => c.knobs.num_workers === 1)).toBe(false);
    expect(job.calls[workers]?.purpose).toMatch(/waits for data 95 % of step time.*one worker would only overlap the loading with the 5 % of compute/);
    // the record's shape: on the default threads workers do not pay (4 read under twice none); on one thread 4 read over four times none
    const row = (threads: number | null, w: number) => record.results.find((r) => r.threads === threads && r.workers === w)?.median ?? 0;
    expect(row(null, 4)).toBeLessThan(2 * row(null, 0));
    expect(row(1, 4)).toBeGreaterThan(4 * row(1, 0));
  });

  it("a job with nothing else to tune and no other work beside it has nothing to tune; beside busy cores it has cpu_threads", () => {
    const space: TuneSpace = { baseline: { cpu_threads: 2 }, others: [{ knob: "cpu_threads", values: [1, 2] }] };
    expect(jobWideRuledOut(space, evidenceOf(trial(8, 0.02), { cpu_threads: 2 }, 1e9))).toEqual([
      "cpu_threads not tried: other processes keep only 0.02 of 2 cores busy: fewer threads pay only when they hold cores",
    ]);
    expect(jobWideRuledOut(space, evidenceOf(trial(8, 1), { cpu_threads: 2 }, 1e9))).toBeNull();
    expect(jobWideRuledOut({ ...space, others: [...space.others, { knob: "num_workers", values: [0, 2] }] }, evidenceOf(trial(8, 0.02), {}, 1e9))).toBeNull();
  });
});
