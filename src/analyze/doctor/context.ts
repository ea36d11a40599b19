/**
 * What every doctor check reads, built once per diagnosis, and the helpers they share.
 *
 * @module
 */
import type { RunMeta } from "../../record/types.ts";
import { stepStart, type GpuReading, type SampleEntry, type StepEntry, type Timeline } from "../../record/timeline/index.ts";
import type { RunMeasures } from "../measure.ts";
import * as T from "../thresholds.ts";
import { tuneCommandLine } from "../tune-hint.ts";
import type { Certainty, Evidence, Finding, NotEvaluated, Passed, Severity } from "./types.ts";

/** The run a check judges: metadata, timeline, measures, steady steps (thinned on a long run) and steady readings. */
export interface Ctx {
  meta: RunMeta;
  tl: Timeline;
  m: RunMeasures;
  steady: StepEntry[];
  samples: SampleEntry[];
  gpu: boolean;
}

/** What a check returns: a finding, a pass, or why it could not run. */
export type CheckResult = Finding | NotEvaluated | Passed;

/** Findings sort most severe first. */
export const SEVERITY_ORDER: Record<Severity, number> = { high: 0, medium: 1, low: 2, info: 3 };
/** Then surest first. */
export const CERTAINTY_ORDER: Record<Certainty, number> = { high: 0, medium: 1, low: 2 };

/** Shared by the checks. */
export function ev(label: string, value: Evidence["value"], unit: Evidence["unit"], text: string): Evidence {
  return { label, value, unit, text };
}

/** Shared by the checks. */
export function stepsConfidence(n: number): { level: Certainty; why: string } {
  if (n >= T.STEPS_FOR_HIGH_CONFIDENCE) return { level: "high", why: `${n} steady steps` };
  if (n >= T.STEPS_FOR_MEDIUM_CONFIDENCE) return { level: "medium", why: `only ${n} steady steps (high needs ${T.STEPS_FOR_HIGH_CONFIDENCE})` };
  return { level: "low", why: `only ${n} steady step${n === 1 ? "" : "s"}` };
}

/** Shared by the checks. */
export function lower(a: Certainty, b: Certainty): Certainty {
  return CERTAINTY_ORDER[a] >= CERTAINTY_ORDER[b] ? a : b;
}

/** Shared by the checks. */
export function jobGpus(ctx: Ctx, s: SampleEntry): GpuReading[] {
  return s.gpus.filter((g) => ctx.m.gpu_indexes.includes(g.index));
}

/** Shared by the checks. */
export function finding(ctx: Ctx, f: Omit<Finding, "verify">): Finding {
  return { ...f, verify: f.knobs.length > 0 ? tuneCommandLine(ctx.meta.command, f.knobs) : null };
}

/** Shared by the checks. */
export function powersUpTo(from: number, limit: number, count: number): number[] {
  const out = [from];
  let v = Math.max(1, from);
  while (out.length < count) {
    v *= 2;
    if (v > limit) break;
    out.push(v);
  }
  return out;
}

/** Shared by the checks. */
export function workerValues(current: number | null, cpus: number | null): number[] {
  const limit = Math.max(2, Math.min(16, (cpus ?? 4) - 1));
  const values = new Set<number>([current ?? 0]);
  for (const w of [2, 4, 8, 16]) if (w <= limit && w > (current ?? 0)) values.add(w);
  return [...values].sort((a, b) => a - b).slice(0, 4);
}

/** Shared by the checks. */
export function knobSeen(ctx: Ctx, name: string): boolean {
  return name in ctx.meta.knobs || ctx.tl.events.some((e) => e.event === "knob_read" && e.details.name === name);
}

/** The step a sampler reading fell in, and whether in its data wait or its compute. */
export function phaseAt(steps: readonly StepEntry[], t: number): "wait" | "compute" | null {
  let lo = 0;
  let hi = steps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = steps[mid] as StepEntry;
    if (s.t < t) lo = mid + 1;
    else hi = mid - 1;
  }
  const s = steps[lo];
  if (s === undefined || t < stepStart(s)) return null;
  return t < stepStart(s) + (s.wait_s ?? 0) ? "wait" : "compute";
}

/** Shared by the checks. */
export function suggestedMicroBatch(m: RunMeasures): number | null {
  const peak = m.peak_tree_gpu_bytes ?? m.framework_peak_reserved_bytes;
  if (m.micro_batch === null || peak === null || m.memory_limit_bytes === null || peak <= 0) return null;
  // Memory is fixed + per-sample × micro-batch, so peak / micro-batch over-states the per-sample cost:
  // scaling the whole peak is a conservative estimate of what fits.
  return Math.max(m.micro_batch, Math.floor((m.micro_batch * m.memory_limit_bytes * (1 - T.MEMORY_MARGIN)) / peak));
}
