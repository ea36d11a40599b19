/**
 * The oracle: a training job whose memory and speed curves are known exactly, so that a search can be
 * scored against the true best. The same formulas drive test/jobs/oracle_job.py (a real job that
 * sleeps and allocates); here they drive a simulated {@link TrialRunner} with seeded noise.
 *
 * step time = (overhead + per-sample time × m × precision time × (1 + penalty × max(0, m − knee) / knee))
 *             × workers factor × pin factor + optimizer time / accumulation
 * peak      = base + precision extra + per-sample bytes × precision memory × m + worker bytes × workers
 * workers factor = 1 − gain × min(w, best) / best + cost × max(0, w − best) / best
 *
 * @example
 * ```ts
 * const spec = { ...DEFAULT_ORACLE, knee: 48, penalty: 1 };
 * throughput(spec, { batch_size: 48 }); // samples/s
 * const runner = new SimulatedRunner(spec, { capBytes: 2 ** 30, clock: new FakeClock(), seed: 7, stepNoise: 0.03 });
 * ```
 * @module
 */
import type { Knobs, KnobValue, TrialResult, TrialRunner, TuneSpace } from "../../src/tune/search.ts";

/** Memory and time effect of one precision. */
export interface PrecisionEffect {
  /** multiplies the per-sample bytes */
  memory: number;
  /** bytes added (16-bit weight copies) */
  extraBytes: number;
  /** multiplies the per-sample time */
  time: number;
}

/** The constants of an oracle job. */
export interface OracleSpec {
  baseBytes: number;
  perSampleBytes: number;
  overheadS: number;
  perSampleS: number;
  /** micro-batch above which each sample gets slower (Infinity: none) */
  knee: number;
  penalty: number;
  optimizerS: number;
  workerGain: number;
  workerBest: number;
  workerCost: number;
  workerBytes: number;
  pinGain: number;
  /** seconds per sample to build a batch in the loop (the data-starved mode); loader workers hide it behind the compute */
  dataS: number;
  precisions: Record<string, PrecisionEffect>;
  /** steady steps a trial measures, and wall time before them (start-up, warm-up) */
  steps: number;
  startupS: number;
}

/** The oracle's defaults, the same as test/jobs/oracle_job.py's. */
export const DEFAULT_ORACLE: OracleSpec = {
  baseBytes: 16 * 2 ** 20,
  perSampleBytes: 256 * 2 ** 10,
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
  dataS: 0,
  precisions: {
    fp32: { memory: 1, extraBytes: 0, time: 1 },
    tf32: { memory: 1, extraBytes: 0, time: 0.9 },
    "bf16-mixed": { memory: 0.5, extraBytes: 2 * 2 ** 20, time: 0.7 },
    "fp16-mixed": { memory: 0.5, extraBytes: 2 * 2 ** 20, time: 0.75 },
  },
  steps: 20,
  startupS: 1.5,
};

const num = (v: KnobValue | undefined, fallback: number): number => (typeof v === "number" ? v : typeof v === "string" ? Number(v) : fallback);
const bool = (v: KnobValue | undefined): boolean => v === true || v === "true" || v === 1;

/**
 * The knobs the oracle reads, with the job's defaults.
 *
 * @example
 * ```ts
 * readKnobs({ batch_size: 32 }); // { m: 32, accumulation: 1, workers: 0, pin: false, precision: "fp32" }
 * ```
 */
export function readKnobs(knobs: Knobs): { m: number; accumulation: number; workers: number; pin: boolean; precision: string } {
  return {
    m: num(knobs.batch_size, 8),
    accumulation: num(knobs.accumulation, 1),
    workers: num(knobs.num_workers, 0),
    pin: bool(knobs.pin_memory),
    precision: typeof knobs.precision === "string" ? knobs.precision : "fp32",
  };
}

function precisionOf(spec: OracleSpec, name: string): PrecisionEffect {
  return spec.precisions[name] ?? { memory: 1, extraBytes: 0, time: 1 };
}

/**
 * Mean seconds of one micro-batch step.
 *
 * @example
 * ```ts
 * stepSeconds(DEFAULT_ORACLE, { batch_size: 32 }); // 0.0212
 * ```
 */
export function stepSeconds(spec: OracleSpec, knobs: Knobs): number {
  return computeSeconds(spec, knobs) + dataWaitSeconds(spec, knobs);
}

/**
 * Seconds of a step spent waiting for the batch: dataS × m with no workers, else what the workers
 * cannot hide behind the compute.
 *
 * @example
 * ```ts
 * dataWaitSeconds({ ...DEFAULT_ORACLE, dataS: 0.001 }, { batch_size: 16 }); // 0.016
 * ```
 */
export function dataWaitSeconds(spec: OracleSpec, knobs: Knobs): number {
  const k = readKnobs(knobs);
  const fetch = spec.dataS * k.m;
  if (fetch <= 0) return 0;
  return k.workers <= 0 ? fetch : Math.max(0, fetch / k.workers - computeSeconds(spec, knobs));
}

function computeSeconds(spec: OracleSpec, knobs: Knobs): number {
  const k = readKnobs(knobs);
  const p = precisionOf(spec, k.precision);
  const slow = Number.isFinite(spec.knee) ? 1 + (spec.penalty * Math.max(0, k.m - spec.knee)) / spec.knee : 1;
  const workers =
    1 -
    (spec.workerGain * Math.min(k.workers, spec.workerBest)) / spec.workerBest +
    (spec.workerCost * Math.max(0, k.workers - spec.workerBest)) / spec.workerBest;
  const pin = k.pin ? 1 - spec.pinGain : 1;
  return (spec.overheadS + spec.perSampleS * k.m * p.time * slow) * workers * pin + spec.optimizerS / Math.max(1, k.accumulation);
}

/**
 * True samples per second.
 *
 * @example
 * ```ts
 * throughput(DEFAULT_ORACLE, { batch_size: 32 }); // ≈ 1509
 * ```
 */
export function throughput(spec: OracleSpec, knobs: Knobs): number {
  return readKnobs(knobs).m / stepSeconds(spec, knobs);
}

/**
 * True peak bytes.
 *
 * @example
 * ```ts
 * peakBytes(DEFAULT_ORACLE, { batch_size: 32 }); // 16 MiB + 32 × 256 KiB = 25165824
 * ```
 */
export function peakBytes(spec: OracleSpec, knobs: Knobs): number {
  const k = readKnobs(knobs);
  const p = precisionOf(spec, k.precision);
  return spec.baseBytes + p.extraBytes + spec.perSampleBytes * p.memory * k.m + spec.workerBytes * k.workers;
}

/**
 * The true best configuration of a tune space under a cap: every allowed micro-batch up to `maxMicro`
 * under every combination of the other knobs, peak ≤ cap.
 *
 * @example
 * ```ts
 * oracleBest(SHAPES.knee.spec, SHAPES.knee.space, SHAPES.knee.capBytes); // { knobs: { batch_size: 48 }, samplesPerSecond: ... }
 * ```
 */
export function oracleBest(spec: OracleSpec, space: TuneSpace, capBytes: number, maxMicro = 4096): { knobs: Knobs; samplesPerSecond: number } | null {
  const microKnob = space.microBatch?.knob;
  let contexts: Knobs[] = [{ ...space.baseline }];
  for (const { knob, values } of space.others) contexts = contexts.flatMap((c) => values.map((v) => ({ ...c, [knob]: v })));
  let best: { knobs: Knobs; samplesPerSecond: number } | null = null;
  for (const context of contexts) {
    const ms: (number | null)[] = [];
    if (microKnob === undefined) ms.push(null);
    else {
      const hi = Math.min(space.microBatch?.max ?? maxMicro, space.effectiveBatch ?? maxMicro);
      for (let m = space.microBatch?.min ?? 1; m <= hi; m++) if (space.effectiveBatch === undefined || space.effectiveBatch % m === 0) ms.push(m);
    }
    for (const m of ms) {
      const knobs: Knobs = { ...context };
      if (m !== null && microKnob !== undefined) knobs[microKnob] = m;
      if (m !== null && space.effectiveBatch !== undefined && space.accumulation !== undefined) knobs[space.accumulation.knob] = space.effectiveBatch / m;
      if (peakBytes(spec, knobs) > capBytes) continue;
      const sps = throughput(spec, knobs);
      if (best === null || sps > best.samplesPerSecond) best = { knobs, samplesPerSecond: sps };
    }
  }
  return best;
}

/**
 * A small seeded random generator (mulberry32) returning numbers in [0, 1).
 *
 * @example
 * ```ts
 * const r = seeded(1); r(); // 0.6270739405881613
 * ```
 */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A standard normal draw from a uniform generator (Box–Muller).
 *
 * @example
 * ```ts
 * gaussian(seeded(3)); // e.g. -0.41
 * ```
 */
export function gaussian(random: () => number): number {
  const u = Math.max(random(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/**
 * A clock the simulated runner moves forward by each trial's duration.
 *
 * @example
 * ```ts
 * const clock = new FakeClock();
 * await searchKnobs(space, new SimulatedRunner(spec, { capBytes, clock }), { capBytes, maxTrials: 20, maxTimeS: 60, now: clock.now });
 * ```
 */
export class FakeClock {
  t = 0;
  readonly now = (): number => this.t;
}

/** Options of the simulated runner. */
export interface SimulatedOptions {
  capBytes: number;
  clock: FakeClock;
  seed?: number;
  /** relative standard deviation of each step's time */
  stepNoise?: number;
  /** relative standard deviation of a whole trial's speed (drift between trials, invisible within one) */
  trialNoise?: number;
  /** relative standard deviation of the measured peak */
  peakNoise?: number;
  /** ends to force for given trial indices (an OOM mid-search, a crash) */
  force?: Record<number, TrialResult["end"]>;
}

/**
 * A {@link TrialRunner} over the oracle: a trial whose true peak is above the cap ends `cap_exceeded`
 * after a short while; otherwise it returns noisy steps and peaks. `calls` keeps every call.
 *
 * @example
 * ```ts
 * const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: 64 * 2 ** 20, clock, seed: 2, stepNoise: 0.03, force: { 3: "gpu_oom" } });
 * ```
 */
export class SimulatedRunner implements TrialRunner {
  readonly calls: { knobs: Knobs; purpose: string; result: TrialResult; truePeak: number }[] = [];
  private readonly spec: OracleSpec;
  private readonly options: SimulatedOptions;
  private readonly random: () => number;

  constructor(spec: OracleSpec, options: SimulatedOptions) {
    this.spec = spec;
    this.options = options;
    this.random = seeded(options.seed ?? 1);
  }

  run(knobs: Knobs, purpose: string): Promise<TrialResult> {
    const { spec, options } = this;
    const truePeak = peakBytes(spec, knobs);
    const forced = options.force?.[this.calls.length];
    let result: TrialResult;
    if (truePeak > options.capBytes || (forced !== undefined && forced !== "ok")) {
      const end = forced ?? "cap_exceeded";
      result = {
        end,
        samplesPerSecond: null,
        stepSeconds: [],
        peakBytes: end === "cap_exceeded" ? options.capBytes : null,
        frameworkPeakBytes: null,
        durationS: spec.startupS,
        oomRecoveries: 0,
      };
    } else {
      const trialFactor = 1 + (options.trialNoise ?? 0) * gaussian(this.random);
      const mean = stepSeconds(spec, knobs) * Math.max(0.2, trialFactor);
      const steps: number[] = [];
      for (let i = 0; i < spec.steps; i++) steps.push(mean * Math.max(0.2, 1 + (options.stepNoise ?? 0) * gaussian(this.random)));
      const total = steps.reduce((a, b) => a + b, 0);
      const m = readKnobs(knobs).m;
      const peak = truePeak * (1 + (options.peakNoise ?? 0) * gaussian(this.random));
      result = {
        end: "ok",
        // measured only in the data-starved mode: the worker factor of the other shapes is no data wait
        dataWaitShare: spec.dataS > 0 ? dataWaitSeconds(spec, knobs) / stepSeconds(spec, knobs) : null,
        precision: readKnobs(knobs).precision,
        samplesPerSecond: (m * steps.length) / total,
        stepSeconds: steps,
        peakBytes: Math.min(peak, options.capBytes),
        frameworkPeakBytes: null,
        durationS: spec.startupS + total,
        oomRecoveries: 0,
      };
    }
    options.clock.t += result.durationS;
    this.calls.push({ knobs, purpose, result, truePeak });
    return Promise.resolve(result);
  }
}
