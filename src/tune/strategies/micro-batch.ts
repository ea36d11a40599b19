/**
 * The micro-batch phase of {@link searchKnobs}, for one context (the other knobs held fixed): find
 * how far the memory line lets the micro-batch go, and measure throughput where the curve may still
 * be higher than the best seen. One rule picks every probe: the gap between measured micro-batches
 * (or above the largest, up to what memory allows) whose concave upper bound promises the most.
 *
 * @example
 * ```ts
 * await exploreMicroBatch(s, axis.contextOf(space.baseline), family, true);
 * ```
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { MARGIN_FLOOR, MARGIN_SINGLE } from "../memory-line.ts";
import type { Knobs, SearchOptions, SearchTrial } from "../types.ts";
import { knobsKey, type MicroAxis } from "./axis.ts";
import { didNotFit, peakOf, ranAsGiven } from "./ledger.ts";
import { gapBound, intervalsOverlap, type CurvePoint } from "./noise.ts";
import { pct, rate, type Searcher } from "./searcher.ts";
import { median } from "../../stats.ts";

/** How far beyond the largest micro-batch that ran one probe may go, without a prior. */
export const GROWTH = 4;
/** The least throughput gain (share) worth a probe, whatever the noise. */
export const GAIN_MIN = 0.01;
/** How far toward the plan's predicted limit the first probe goes, when a plan is given. */
export const PRIOR_REACH = 0.75;

interface Probe {
  m: number;
  purpose: string;
  predictedPeakBytes: number | null;
  gain: number;
}

/**
 * Runs the micro-batch phase for `context` on memory line `family` until no gap promises more than
 * the noise, or a budget stops it. `first`: this is the baseline's context (the plan's prior
 * describes its memory, and micro-batches below the baseline's are worth a look).
 *
 * @example
 * ```ts
 * await exploreMicroBatch(s, { precision: "bf16-mixed" }, s.memory.open({ precision: "bf16-mixed" }), false);
 * ```
 */
export async function exploreMicroBatch(s: Searcher, context: Knobs, family: number, first: boolean): Promise<void> {
  if (s.axis.explicit) return tryListed(s, context);
  let remeasured = false;
  for (;;) {
    if (stopped(s)) return;
    const probe = nextProbe(s, context, family, first);
    if (probe === null) {
      if (remeasured) return;
      remeasured = true;
      const again = tieToSettle(s, context);
      s.ledger.expect(again.length);
      for (const t of again) if (stopped(s) || (await s.ledger.run(t.knobs, t.purpose, null)) === null) return;
      if (again.length === 0) return;
      continue;
    }
    s.ledger.expect(2);
    if ((await s.ledger.run(s.axis.knobsAt(context, probe.m), probe.purpose, probe.predictedPeakBytes)) === null) return;
  }
}

/** `--knob batch_size=a,b,c`: every listed micro-batch in `context`, ascending, none at or above one that failed. */
async function tryListed(s: Searcher, context: Knobs): Promise<void> {
  const listed = s.axis.values ?? [];
  for (const m of listed) {
    if (stopped(s)) return;
    const here = trialsIn(s, context);
    if (here.some((t) => s.axis.microOf(t.knobs) === m)) continue;
    const failed = here.filter((t) => !ranAsGiven(t.result) && t.result.end !== "interrupted" && (s.axis.microOf(t.knobs) ?? Infinity) < m);
    if (failed.length > 0) {
      const f = failed[0] as SearchTrial;
      s.notes.push(
        `listed micro-batch ${m} not tried: micro-batch ${s.axis.microOf(f.knobs)} already ${didNotFit(f.result) ? "did not fit" : `ended ${f.result.end}`}`,
      );
      continue;
    }
    if (
      (await s.ledger.run(
        s.axis.knobsAt(context, m),
        `listed: micro-batch ${m} (--knob ${s.axis.knob ?? "batch_size"})`,
        s.memory.predict(s.memory.familyOf(context) ?? 0, m)?.peakBytes ?? null,
      )) === null
    )
      return;
  }
}

/** The budget stopped the search, or a trial's samples did not follow its micro-batch: no micro-batch is tried any more. */
function stopped(s: Searcher): boolean {
  return s.ledger.stopReason !== null || s.ledger.dropped !== null;
}

/** The trials of `context` that carry a micro-batch. */
function trialsIn(s: Searcher, context: Knobs): SearchTrial[] {
  const key = knobsKey(context);
  return s.ledger.trials.filter((t) => s.axis.microOf(t.knobs) !== null && knobsKey(s.axis.contextOf(t.knobs)) === key);
}

/** What the trials of one context and its memory family say about the micro-batch axis, read once per probe. */
interface Facts {
  axis: MicroAxis;
  cap: number;
  /** the trials of this context that carry a micro-batch */
  here: SearchTrial[];
  tried: Set<number>;
  memFails: SearchTrial[];
  otherFails: SearchTrial[];
  /** the smallest micro-batch that did not run (Infinity: none) */
  minFail: number;
  /** the largest micro-batch allowed: at most the axis's, below every failure */
  hard: number;
  /** the largest micro-batch the family's memory line allows, null without a line */
  lineEdge: number | null;
  /** the plan's prior, for the baseline's context only */
  prior: SearchOptions["prior"];
  predictAt: (m: number) => { peakBytes: number; marginBytes: number } | null;
  predicted: (m: number) => number | null;
  /** the measured curve: mean throughput by micro-batch, ascending */
  points: CurvePoint[];
}

function factsOf(s: Searcher, context: Knobs, family: number, first: boolean): Facts {
  const { axis, options, memory } = s;
  const here = trialsIn(s, context);
  const memFails = memory.memoryFailures(family);
  // a crash or hang at a micro-batch is taken as "too big" for this context too: nothing says it is not
  // a slower trial is a measured point of the curve, not a failure
  const otherFails = here.filter((t) => !ranAsGiven(t.result) && !didNotFit(t.result) && t.result.end !== "interrupted" && t.result.end !== "slower");
  const minFail = Math.min(...[...memFails, ...otherFails].map((t) => axis.microOf(t.knobs) ?? Infinity));
  const predictAt = (m: number): { peakBytes: number; marginBytes: number } | null => memory.predict(family, m);
  return {
    axis,
    cap: options.capBytes,
    here,
    tried: new Set(here.map((t) => axis.microOf(t.knobs) ?? 0)),
    memFails,
    otherFails,
    minFail,
    hard: Math.min(axis.max, minFail - 1),
    lineEdge: memory.limit(family)?.microBatch ?? null,
    prior: first ? options.prior : undefined,
    predictAt,
    predicted: (m) => predictAt(m)?.peakBytes ?? null,
    points: s
      .inContext(context)
      .map((e) => ({ x: axis.microOf(e.knobs) ?? 0, y: e.mean }))
      .sort((a, b) => a.x - b.x),
  };
}

/** The next micro-batch to measure in `context`, or null when no gap promises more than the noise. */
function nextProbe(s: Searcher, context: Knobs, family: number, first: boolean): Probe | null {
  const f = factsOf(s, context, family, first);
  if (f.points.length === 0) return lookLower(f);
  const top = f.points[f.points.length - 1] as CurvePoint;
  const best = Math.max(...f.points.map((p) => p.y));
  const topPeak = peakAt(f, top.x);
  const edge = memoryEdge(f, top, topPeak);
  const crashed = crashedAbove(f, top);
  const target = reachTarget(f, edge, top, crashed);
  const steps = stepLimit(f, top, s.options.maxStepS);
  if (Number.isFinite(steps.limit) && steps.limit < Math.min(edge.edge, target) && !s.stepCapped.has(family)) {
    s.stepCapped.add(family);
    s.notes.push(
      `micro-batches above ${Math.max(steps.limit, top.x)} not tried: a step there would take more than the ${s.options.maxStepS} s measurement window (micro-batch ${top.x} took ${steps.topStep?.toFixed(1)} s a step; raise --window to go further)`,
    );
  }
  const reach = f.axis.atMost(Math.min(edge.edge, target, steps.limit));
  const upward = upwardProbe(f, reach, top, best, edge, crashed);
  const below = first ? belowProbe(f, best, topPeak) : null;
  const probes = [...(upward === null ? [] : [upward]), ...gapProbes(f, best, topPeak), ...(below === null ? [] : [below])];
  // the bound comes from noisy means, so a gain smaller than one trial's noise is not worth a trial
  return choose(probes, top, Math.max(GAIN_MIN, s.ledger.noise()));
}

/** Nothing in this context ran: a micro-batch below the smallest that failed, toward the plan's limit when there is one. */
function lookLower(f: Facts): Probe | null {
  const { prior, cap, minFail, hard, axis } = f;
  if (!Number.isFinite(minFail)) return null;
  const priorLimit =
    prior === undefined
      ? undefined
      : (prior.maxMicroBatch ?? (prior.bytesPerSample > 0 ? (cap * (1 - MARGIN_SINGLE) - prior.fixedBytes) / prior.bytesPerSample : undefined));
  const target = priorLimit !== undefined && priorLimit >= 1 ? PRIOR_REACH * priorLimit : minFail / GROWTH;
  const lowest = axis.lowest();
  const m = axis.atMost(Math.min(target, hard)) ?? (lowest <= hard ? lowest : null);
  if (m === null || f.tried.has(m)) return null;
  return { m, purpose: `look lower: micro-batch ${minFail} did not run`, predictedPeakBytes: f.predicted(m), gain: Infinity };
}

/** The trials at micro-batch `m` that ran as given. */
function ranAt(f: Facts, m: number): SearchTrial[] {
  return f.here.filter((t) => f.axis.microOf(t.knobs) === m && ranAsGiven(t.result));
}

/** The highest peak measured at micro-batch `m`, null when none ran there. */
function peakAt(f: Facts, m: number): number | null {
  const peaks = ranAt(f, m).map((t) => peakOf(t.result) ?? 0);
  return peaks.length > 0 ? Math.max(...peaks) : null;
}

/** How far memory lets the micro-batch go, what a probe there would peak at, and how far the next upward probe aims. */
interface Edge {
  edge: number;
  peakAt: (m: number) => number | null;
  target: number;
  basis: "line" | "plan" | "worst case" | "none";
}

// how far memory lets the micro-batch go: the line with its margin; with one point, the plan's bytes
// per sample anchored at the measured peak, else the worst case of a line through the origin (all of
// the peak grows with the micro-batch)
function edgeBasis(f: Facts, top: CurvePoint, topPeak: number | null): Edge {
  const { cap, prior } = f;
  if (f.lineEdge !== null) return { edge: f.lineEdge, peakAt: f.predicted, target: GROWTH * top.x, basis: "line" };
  if (topPeak !== null && prior !== undefined && prior.bytesPerSample > 0) {
    const slope = prior.bytesPerSample;
    const edge = Math.floor(top.x + (cap * (1 - MARGIN_SINGLE) - topPeak) / slope);
    const target = Math.min(top.x + PRIOR_REACH * (edge - top.x), GROWTH * GROWTH * top.x);
    return { edge, peakAt: (m) => topPeak + slope * (m - top.x), target, basis: "plan" };
  }
  if (topPeak !== null && topPeak > 0) {
    return {
      edge: Math.floor((top.x * cap * (1 - MARGIN_SINGLE)) / topPeak),
      peakAt: (m) => (topPeak * m) / top.x,
      target: GROWTH * top.x,
      basis: "worst case",
    };
  }
  return { edge: top.x, peakAt: () => null, target: GROWTH * top.x, basis: "none" };
}

/** {@link edgeBasis}, never below what is known to fit, and at most {@link Facts.hard}. */
function memoryEdge(f: Facts, top: CurvePoint, topPeak: number | null): Edge {
  const { cap } = f;
  const e = edgeBasis(f, top, topPeak);
  // what already ran with the floor margin free is known to fit, and a line through the origin is the
  // worst case of any line with a non-negative fixed part: the edge is never below either
  const knownGood = f.here
    .filter((t) => ranAsGiven(t.result) && (peakOf(t.result) ?? Infinity) <= cap * (1 - MARGIN_FLOOR))
    .map((t) => f.axis.microOf(t.knobs) ?? 0);
  const worstCase = topPeak !== null && topPeak > 0 ? Math.floor((top.x * cap * (1 - MARGIN_SINGLE)) / topPeak) : 0;
  const raised: Edge =
    e.basis === "line" && worstCase > e.edge
      ? { ...e, edge: worstCase, peakAt: (m) => (topPeak === null ? null : (topPeak * m) / top.x), basis: "worst case" }
      : e;
  return { ...raised, edge: Math.min(Math.max(raised.edge, ...knownGood), f.hard) };
}

/** A crash above the largest that ran (e.g. a batch larger than the dataset): it bounds the axis, not memory. */
function crashedAbove(f: Facts, top: CurvePoint): boolean {
  return f.otherFails.some((t) => (f.axis.microOf(t.knobs) ?? 0) > top.x);
}

/** How far the next upward probe aims: halfway to the smallest failure after a surprise or a crash above. */
function reachTarget(f: Facts, edge: Edge, top: CurvePoint, crashed: boolean): number {
  // a micro-batch the line said would fit did not: near the cap the line is not to be trusted, so halve the distance
  const surprised = f.memFails.some((t) => t.predictedPeakBytes !== null && t.predictedPeakBytes !== undefined && t.predictedPeakBytes <= f.cap);
  // after a crash above, bisect toward it instead of walking down from it one by one
  return (surprised || crashed) && Number.isFinite(f.minFail) ? Math.min(edge.target, (top.x + f.minFail) / 2) : edge.target;
}

/** A micro-batch whose single step would outlast the measurement window cannot be measured in it: the largest that can. */
function stepLimit(f: Facts, top: CurvePoint, maxStep: number | undefined): { limit: number; topStep: number | null } {
  const topStep = median(ranAt(f, top.x).flatMap((t) => t.result.stepSeconds));
  return { limit: maxStep !== undefined && topStep !== null && topStep > 0 ? Math.floor((top.x * maxStep) / topStep) : Infinity, topStep };
}

/** The probe above the largest micro-batch that ran, when `reach` is above it and new. */
function upwardProbe(f: Facts, reach: number | null, top: CurvePoint, best: number, edge: Edge, crashed: boolean): Probe | null {
  if (reach === null || reach <= top.x || f.tried.has(reach)) return null;
  const gain = gapBound(f.points, f.points.length - 1, top.x, reach).bound / best - 1;
  return { m: reach, purpose: upwardPurpose(f, reach, top, edge, crashed), predictedPeakBytes: edge.peakAt(reach), gain };
}

function upwardPurpose(f: Facts, reach: number, top: CurvePoint, edge: Edge, crashed: boolean): string {
  const { minFail, axis, cap } = f;
  if (crashed && reach < minFail - 1) {
    const above = f.otherFails.find((t) => axis.microOf(t.knobs) === minFail)?.result;
    const how =
      above === undefined
        ? "failed"
        : above.end === "time_limit"
          ? "ran past the trial time (slow, not out of memory)"
          : `ended ${above.end}${above.failure ? ` (${above.failure.cause})` : ""}, not for lack of memory`;
    return `bisect: micro-batch ${reach}, between ${top.x} that ran and ${minFail} that ${how}`;
  }
  if (edge.basis === "plan") {
    return `memory probe: micro-batch ${reach} (the plan's ${formatBytes(f.prior?.bytesPerSample ?? 0)} per sample predicts ${formatBytes(edge.peakAt(reach) ?? 0)})`;
  }
  if (edge.basis === "worst case") {
    return `memory probe: micro-batch ${reach} (×${(reach / top.x).toFixed(1)} the largest that ran; at most ${formatBytes(edge.peakAt(reach) ?? 0)} even if all memory grew with the micro-batch)`;
  }
  const at = f.predictAt(reach);
  return reach === axis.atMost(edge.edge)
    ? `edge probe: micro-batch ${reach}, the largest the memory line allows (predicted ${formatBytes(at?.peakBytes ?? 0)} + margin ${formatBytes(at?.marginBytes ?? 0)} of cap ${formatBytes(cap)})`
    : `memory probe: micro-batch ${reach} (×${(reach / top.x).toFixed(1)} the largest that ran, toward the line's limit ${edge.edge})`;
}

/** A probe in each gap between measured micro-batches, where the curve's concave bound peaks. */
function gapProbes(f: Facts, best: number, topPeak: number | null): Probe[] {
  const { points, axis } = f;
  const probes: Probe[] = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const lo = (points[i] as CurvePoint).x;
    const hi = (points[i + 1] as CurvePoint).x;
    const g = gapBound(points, i, lo, hi);
    const where = g.at === null ? Math.sqrt(lo * hi) : Math.min(Math.max(g.at, lo + 0.25 * (hi - lo)), hi - 0.25 * (hi - lo));
    const m = axis.between(lo, hi, where);
    if (m === null || f.tried.has(m)) continue;
    const gain = g.bound / best - 1;
    probes.push({
      m,
      purpose: `throughput: micro-batch ${m}, between ${lo} and ${hi} (the curve could reach ${Number.isFinite(gain) ? `+${pct(gain)}` : "higher"} there)`,
      predictedPeakBytes: f.predicted(m) ?? topPeak,
      gain,
    });
  }
  return probes;
}

/** A probe below the smallest measured; asked only on the first context: a later knob change keeps the curve's shape below. */
function belowProbe(f: Facts, best: number, topPeak: number | null): Probe | null {
  const { points, axis } = f;
  const lowest = axis.lowest();
  const bottom = points[0] as CurvePoint;
  if (lowest >= bottom.x) return null;
  const g = gapBound(points, -1, lowest, bottom.x);
  const where = g.at === null ? Math.sqrt(lowest * bottom.x) : Math.min(Math.max(g.at, lowest), bottom.x - 0.25 * (bottom.x - lowest));
  const m = axis.between(lowest - 1, bottom.x, where);
  if (m === null || f.tried.has(m)) return null;
  return {
    m,
    purpose: `throughput: micro-batch ${m}, below ${bottom.x} (is a smaller micro-batch faster?)`,
    predictedPeakBytes: f.predicted(m) ?? topPeak,
    gain: g.bound / best - 1,
  };
}

/** The probe to run: the upward one when it promises enough, else the gap that promises most over `threshold`. */
function choose(probes: Probe[], top: CurvePoint, threshold: number): Probe | null {
  // outward first: a probe above the largest also bounds the gaps below it
  // a trial above the largest costs its steps ×(reach / top) longer: an extrapolated promise must pay for that
  const [upward] = probes;
  const upThreshold = upward === undefined ? threshold : Math.max(threshold, 2 * GAIN_MIN * (upward.m / top.x));
  if (upward !== undefined && upward.m > top.x && upward.gain > upThreshold) return upward;
  const rest = upward !== undefined && upward.m > top.x && upward.gain <= upThreshold ? probes.slice(1) : probes;
  let chosen: Probe | null = null;
  for (const p of rest) if (p.gain > threshold && (chosen === null || p.gain > chosen.gain)) chosen = p;
  return chosen;
}

/**
 * When the intervals of the two fastest micro-batches of `context` overlap, the one measured
 * fewer times is measured once more (both, when both were measured once), so that neither wins on a
 * single lucky trial.
 */
function tieToSettle(s: Searcher, context: Knobs): { knobs: Knobs; purpose: string }[] {
  const estimates = s.eligible(s.inContext(context)).sort((a, b) => b.mean - a.mean);
  const [top, runnerUp] = estimates;
  if (top === undefined || runnerUp === undefined) return [];
  const noise = s.ledger.noise();
  if (!intervalsOverlap(runnerUp, top, noise)) return [];
  const targets = top.count === runnerUp.count ? (top.count === 1 ? [top, runnerUp] : []) : [top.count < runnerUp.count ? top : runnerUp];
  return targets.map((target) => {
    const other = target === top ? runnerUp : top;
    return {
      knobs: target.knobs,
      purpose: `re-measure: micro-batch ${s.axis.microOf(target.knobs)} (${rate(target.mean)}) is within noise (±${pct(noise)} a trial) of micro-batch ${s.axis.microOf(other.knobs)} (${rate(other.mean)})`,
    };
  });
}
