#!/usr/bin/env node
// The knob search against the classic batch-size finder and an exhaustive grid, on simulated jobs
// whose curves are known (the oracle of test/tune/oracle.ts, ported here), with seeded noise.
// For each shape × noise level × strategy: trials used, trials that went over the cap, and the true
// throughput of the winner as a share of the true best under the cap. Run `npm run build` first.
// Usage: node bench/search-sim.bench.mjs [--seeds 20]
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, platform, release } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { doublingBisection, exhaustiveGrid, searchKnobs } from "../dist/tune/search.js";

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf("--seeds");
const seeds = at > 0 ? Number(process.argv[at + 1]) : 20;
const MiB = 2 ** 20;

// --- the oracle (same formulas as test/tune/oracle.ts and test/jobs/oracle_job.py) ---
const DEFAULT = {
  baseBytes: 16 * MiB,
  perSampleBytes: 256 * 1024,
  overheadS: 0.008,
  perSampleS: 0.00035,
  knee: 64,
  penalty: 0.5,
  optimizerS: 0.002,
  workerGain: 0.15,
  workerBest: 2,
  workerCost: 0.1,
  workerBytes: 0,
  pinGain: 0.03,
  precisions: {
    fp32: { memory: 1, extraBytes: 0, time: 1 },
    tf32: { memory: 1, extraBytes: 0, time: 0.9 },
    "bf16-mixed": { memory: 0.5, extraBytes: 2 * MiB, time: 0.7 },
    "fp16-mixed": { memory: 0.5, extraBytes: 2 * MiB, time: 0.75 },
  },
  steps: 20,
  startupS: 1.5,
};
const num = (v, d) => (typeof v === "number" ? v : typeof v === "string" ? Number(v) : d);
const read = (k) => ({
  m: num(k.batch_size, 8),
  acc: num(k.accumulation, 1),
  w: num(k.num_workers, 0),
  pin: k.pin_memory === true,
  p: typeof k.precision === "string" ? k.precision : "fp32",
});
const prec = (s, name) => s.precisions[name] ?? { memory: 1, extraBytes: 0, time: 1 };
function stepSeconds(s, knobs) {
  const k = read(knobs);
  const slow = Number.isFinite(s.knee) ? 1 + (s.penalty * Math.max(0, k.m - s.knee)) / s.knee : 1;
  const workers = 1 - (s.workerGain * Math.min(k.w, s.workerBest)) / s.workerBest + (s.workerCost * Math.max(0, k.w - s.workerBest)) / s.workerBest;
  return (s.overheadS + s.perSampleS * k.m * prec(s, k.p).time * slow) * workers * (k.pin ? 1 - s.pinGain : 1) + s.optimizerS / Math.max(1, k.acc);
}
const throughput = (s, knobs) => read(knobs).m / stepSeconds(s, knobs);
function peakBytes(s, knobs) {
  const k = read(knobs);
  const p = prec(s, k.p);
  return s.baseBytes + p.extraBytes + s.perSampleBytes * p.memory * k.m + s.workerBytes * k.w;
}
function contextsOf(space) {
  let contexts = [{ ...space.baseline }];
  for (const { knob, values } of space.others) contexts = contexts.flatMap((c) => values.map((v) => ({ ...c, [knob]: v })));
  return contexts;
}
function microBatchesOf(space, upTo = 4096) {
  const out = [];
  const hi = Math.min(space.microBatch?.max ?? upTo, space.effectiveBatch ?? upTo);
  for (let m = 1; m <= hi; m++) if (space.effectiveBatch === undefined || space.effectiveBatch % m === 0) out.push(m);
  return out;
}
function knobsAt(space, context, m) {
  const k = { ...context, batch_size: m };
  if (space.effectiveBatch !== undefined) k.accumulation = space.effectiveBatch / m;
  return k;
}
function oracleBest(s, space, cap) {
  let best = 0;
  for (const c of contextsOf(space))
    for (const m of microBatchesOf(space)) {
      const k = knobsAt(space, c, m);
      if (peakBytes(s, k) <= cap) best = Math.max(best, throughput(s, k));
    }
  return best;
}
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const gaussian = (r) => Math.sqrt(-2 * Math.log(Math.max(r(), 1e-12))) * Math.cos(2 * Math.PI * r());
function simulatedRunner(s, cap, clock, seed, noise) {
  const random = seeded(seed);
  const calls = [];
  return {
    calls,
    async run(knobs) {
      const truePeak = peakBytes(s, knobs);
      let result;
      if (truePeak > cap) {
        result = {
          end: "cap_exceeded",
          samplesPerSecond: null,
          stepSeconds: [],
          peakBytes: cap,
          frameworkPeakBytes: null,
          durationS: s.startupS,
          oomRecoveries: 0,
        };
      } else {
        const mean = stepSeconds(s, knobs) * Math.max(0.2, 1 + noise.trial * gaussian(random));
        const steps = Array.from({ length: s.steps }, () => mean * Math.max(0.2, 1 + noise.step * gaussian(random)));
        const total = steps.reduce((a, b) => a + b, 0);
        const peak = Math.min(cap, truePeak * (1 + noise.peak * gaussian(random)));
        result = {
          end: "ok",
          samplesPerSecond: (read(knobs).m * steps.length) / total,
          stepSeconds: steps,
          peakBytes: peak,
          frameworkPeakBytes: null,
          durationS: s.startupS + total,
          oomRecoveries: 0,
        };
      }
      clock.t += result.durationS;
      calls.push({ knobs, truePeak });
      return result;
    },
  };
}

// --- the shapes (as test/tune/oracle-shapes.ts, plus two) ---
const microOnly = { baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [] };
const SHAPES = {
  plateau: { spec: { ...DEFAULT, knee: Infinity, overheadS: 0.01, perSampleS: 0.0003 }, cap: 96 * MiB, space: microOnly },
  knee: { spec: { ...DEFAULT, knee: 48, penalty: 1, overheadS: 0.01, perSampleS: 0.0003 }, cap: 128 * MiB, space: microOnly },
  "cpu-drop": { spec: { ...DEFAULT, knee: 24, penalty: 0.3, overheadS: 0.002, perSampleS: 0.0004 }, cap: 512 * MiB, space: microOnly },
  intercept: {
    spec: { ...DEFAULT, knee: Infinity, baseBytes: 600 * MiB, perSampleBytes: 2.5 * MiB, overheadS: 0.02, perSampleS: 0.0005 },
    cap: 1000 * MiB,
    space: microOnly,
  },
  tight: { spec: { ...DEFAULT, knee: Infinity, perSampleBytes: 2 * MiB }, cap: 64 * MiB, space: { ...microOnly, baseline: { batch_size: 64 } } },
  effective: {
    spec: { ...DEFAULT, knee: Infinity },
    cap: 64 * MiB,
    space: {
      baseline: { batch_size: 8, accumulation: 30 },
      microBatch: { knob: "batch_size" },
      accumulation: { knob: "accumulation" },
      effectiveBatch: 240,
      others: [],
    },
  },
  precision: {
    spec: { ...DEFAULT, knee: Infinity },
    cap: 64 * MiB,
    space: {
      baseline: { batch_size: 8, precision: "fp32", num_workers: 0 },
      microBatch: { knob: "batch_size" },
      others: [
        { knob: "precision", values: ["fp32", "bf16-mixed"] },
        { knob: "num_workers", values: [0, 1, 2, 4, 8] },
      ],
    },
  },
};
const NOISE = {
  none: { step: 0, trial: 0, peak: 0 },
  moderate: { step: 0.03, trial: 0.01, peak: 0.003 },
  heavy: { step: 0.1, trial: 0.03, peak: 0.01 },
};
const POWERS = Array.from({ length: 13 }, (_, i) => 2 ** i);
const STRATEGIES = {
  searchKnobs: (space, runner, options) => searchKnobs(space, runner, options),
  doublingBisection: (space, runner, options) => doublingBisection(space, runner, options),
  exhaustiveGrid: (space, runner, options) =>
    exhaustiveGrid(space, runner, { ...options, microBatches: space.effectiveBatch === undefined ? POWERS : microBatchesOf(space) }),
};

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const results = [];
const started = performance.now();
for (const [shapeName, shape] of Object.entries(SHAPES)) {
  const best = oracleBest(shape.spec, shape.space, shape.cap);
  for (const [noiseName, noise] of Object.entries(NOISE)) {
    for (const [name, strategy] of Object.entries(STRATEGIES)) {
      const reached = [];
      const trials = [];
      const simSeconds = [];
      let overCap = 0;
      const runs = noiseName === "none" ? 1 : seeds;
      for (let seed = 1; seed <= runs; seed++) {
        const clock = { t: 0 };
        const runner = simulatedRunner(shape.spec, shape.cap, clock, seed, noise);
        const outcome = await strategy(shape.space, runner, { capBytes: shape.cap, maxTrials: 200, maxTimeS: 1e9, now: () => clock.t });
        reached.push(outcome.best === null ? 0 : throughput(shape.spec, outcome.best.knobs) / best);
        trials.push(outcome.trials.length);
        simSeconds.push(clock.t);
        overCap += runner.calls.filter((c) => c.truePeak > shape.cap).length;
      }
      reached.sort((a, b) => a - b);
      const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
      results.push({
        shape: shapeName,
        noise: noiseName,
        strategy: name,
        runs,
        trials_mean: Number(mean(trials).toFixed(2)),
        trials_max: Math.max(...trials),
        over_cap_trials_mean: Number((overCap / runs).toFixed(2)),
        reached_pct_mean: Number((100 * mean(reached)).toFixed(1)),
        reached_pct_median: Number((100 * quantile(reached, 0.5)).toFixed(1)),
        reached_pct_min: Number((100 * reached[0]).toFixed(1)),
        within_3pct_share: Number((reached.filter((r) => r >= 0.97).length / runs).toFixed(2)),
        simulated_seconds_mean: Number(mean(simSeconds).toFixed(1)),
      });
    }
  }
}

const pad = (s, n) => String(s).padEnd(n);
console.log(
  `${pad("shape", 10)} ${pad("noise", 9)} ${pad("strategy", 18)} ${pad("trials", 12)} ${pad("over cap", 9)} ${pad("% of best: mean / median / min", 32)} ≥97 %`,
);
for (const r of results) {
  console.log(
    `${pad(r.shape, 10)} ${pad(r.noise, 9)} ${pad(r.strategy, 18)} ${pad(`${r.trials_mean} (≤${r.trials_max})`, 12)} ${pad(r.over_cap_trials_mean, 9)} ${pad(`${r.reached_pct_mean} / ${r.reached_pct_median} / ${r.reached_pct_min}`, 32)} ${Math.round(r.within_3pct_share * 100)} %`,
  );
}
const out = {
  bench: "search-sim",
  what: "simulated tune searches on known curves: trials used, trials over the cap, and the winner's true throughput as % of the true best under the cap",
  generated_at: new Date().toISOString(),
  node: process.version,
  host: { platform: platform(), release: release(), cpus: cpus().length },
  seeds,
  noise_levels: NOISE,
  shapes: Object.fromEntries(
    Object.entries(SHAPES).map(([k, v]) => [
      k,
      {
        cap_bytes: v.cap,
        baseline: v.space.baseline,
        effective_batch: v.space.effectiveBatch ?? null,
        others: v.space.others.map((o) => o.knob),
        best_samples_per_s: Number(oracleBest(v.spec, v.space, v.cap).toFixed(1)),
      },
    ]),
  ),
  results,
  wall_seconds: Number(((performance.now() - started) / 1000).toFixed(2)),
};
mkdirSync(join(here, "results"), { recursive: true });
writeFileSync(join(here, "results", "search-sim.json"), `${JSON.stringify(out, null, 2)}\n`);
console.log(`wrote bench/results/search-sim.json (${out.wall_seconds} s)`);
