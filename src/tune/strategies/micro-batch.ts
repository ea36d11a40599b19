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
import type { Knobs, SearchTrial } from "../types.ts";
import { knobsKey } from "./axis.ts";
import { didNotFit, peakOf, ranAsGiven } from "./ledger.ts";
import { compareThroughput, gapBound, type CurvePoint } from "./noise.ts";
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
    if (s.ledger.stopReason !== null) return;
    const probe = nextProbe(s, context, family, first);
    if (probe === null) {
      if (remeasured) return;
      remeasured = true;
      const again = tieToSettle(s, context);
      s.ledger.expect(again.length);
      for (const t of again) if ((await s.ledger.run(t.knobs, t.purpose, null)) === null) return;
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
    if (s.ledger.stopReason !== null) return;
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

/** The trials of `context` that carry a micro-batch. */
function trialsIn(s: Searcher, context: Knobs): SearchTrial[] {
  const key = knobsKey(context);
  return s.ledger.trials.filter((t) => s.axis.microOf(t.knobs) !== null && knobsKey(s.axis.contextOf(t.knobs)) === key);
}

function nextProbe(s: Searcher, context: Knobs, family: number, first: boolean): Probe | null {
  const { axis, options, memory } = s;
  const cap = options.capBytes;
  const here = trialsIn(s, context);
  const tried = new Set(here.map((t) => axis.microOf(t.knobs) ?? 0));
  const memFails = memory.memoryFailures(family);
  // a crash or hang at a micro-batch is taken as "too big" for this context too: nothing says it is not
  // a slower trial is a measured point of the curve, not a failure
  const otherFails = here.filter((t) => !ranAsGiven(t.result) && !didNotFit(t.result) && t.result.end !== "interrupted" && t.result.end !== "slower");
  const minFail = Math.min(...[...memFails, ...otherFails].map((t) => axis.microOf(t.knobs) ?? Infinity));
  const hard = Math.min(axis.max, minFail - 1);
  const limit = memory.limit(family);
  const prior = first ? options.prior : undefined;
  const predicted = (m: number): number | null => memory.predict(family, m)?.peakBytes ?? null;

  const points: CurvePoint[] = s
    .inContext(context)
    .map((e) => ({ x: axis.microOf(e.knobs) ?? 0, y: e.mean }))
    .sort((a, b) => a.x - b.x);

  if (points.length === 0) {
    if (!Number.isFinite(minFail)) return null;
    const priorLimit =
      prior === undefined
        ? undefined
        : (prior.maxMicroBatch ?? (prior.bytesPerSample > 0 ? (cap * (1 - MARGIN_SINGLE) - prior.fixedBytes) / prior.bytesPerSample : undefined));
    const target = priorLimit !== undefined && priorLimit >= 1 ? PRIOR_REACH * priorLimit : minFail / GROWTH;
    const lowest = axis.lowest();
    const m = axis.atMost(Math.min(target, hard)) ?? (lowest <= hard ? lowest : null);
    if (m === null || tried.has(m)) return null;
    return { m, purpose: `look lower: micro-batch ${minFail} did not run`, predictedPeakBytes: predicted(m), gain: Infinity };
  }

  const top = points[points.length - 1] as CurvePoint;
  const best = Math.max(...points.map((p) => p.y));
  const topPeaks = here.filter((t) => axis.microOf(t.knobs) === top.x && ranAsGiven(t.result)).map((t) => peakOf(t.result) ?? 0);
  const topPeak = topPeaks.length > 0 ? Math.max(...topPeaks) : null;

  // how far memory lets the micro-batch go: the line with its margin; with one point, the plan's bytes
  // per sample anchored at the measured peak, else the worst case of a line through the origin (all of
  // the peak grows with the micro-batch)
  let edge: number;
  let edgePeak: (m: number) => number | null;
  let reachTarget = GROWTH * top.x;
  let basis: "line" | "plan" | "worst case" | "none";
  if (limit !== null) {
    edge = limit.microBatch;
    edgePeak = predicted;
    basis = "line";
  } else if (topPeak !== null && prior !== undefined && prior.bytesPerSample > 0) {
    const slope = prior.bytesPerSample;
    edge = Math.floor(top.x + (cap * (1 - MARGIN_SINGLE) - topPeak) / slope);
    edgePeak = (m) => topPeak + slope * (m - top.x);
    reachTarget = Math.min(top.x + PRIOR_REACH * (edge - top.x), GROWTH * GROWTH * top.x);
    basis = "plan";
  } else if (topPeak !== null && topPeak > 0) {
    edge = Math.floor((top.x * cap * (1 - MARGIN_SINGLE)) / topPeak);
    edgePeak = (m) => (topPeak * m) / top.x;
    basis = "worst case";
  } else {
    edge = top.x;
    edgePeak = () => null;
    basis = "none";
  }
  // what already ran with the floor margin free is known to fit, and a line through the origin is the
  // worst case of any line with a non-negative fixed part: the edge is never below either
  const knownGood = here
    .filter((t) => ranAsGiven(t.result) && (peakOf(t.result) ?? Infinity) <= cap * (1 - MARGIN_FLOOR))
    .map((t) => axis.microOf(t.knobs) ?? 0);
  const worstCase = topPeak !== null && topPeak > 0 ? Math.floor((top.x * cap * (1 - MARGIN_SINGLE)) / topPeak) : 0;
  if (basis === "line" && worstCase > edge) {
    edge = worstCase;
    edgePeak = (m) => (topPeak === null ? null : (topPeak * m) / top.x);
    basis = "worst case";
  }
  edge = Math.min(Math.max(edge, ...knownGood), hard);
  // a micro-batch the line said would fit did not: near the cap the line is not to be trusted, so halve the distance
  const surprised = memFails.some((t) => t.predictedPeakBytes !== null && t.predictedPeakBytes !== undefined && t.predictedPeakBytes <= cap);
  // a crash above the largest that ran (e.g. a batch larger than the dataset) bounds the axis, not
  // memory: bisect toward it instead of walking down from it one by one
  const crashedAbove = otherFails.some((t) => (axis.microOf(t.knobs) ?? 0) > top.x);
  if ((surprised || crashedAbove) && Number.isFinite(minFail)) reachTarget = Math.min(reachTarget, (top.x + minFail) / 2);
  // a micro-batch whose single step would outlast the measurement window cannot be measured in it
  const maxStep = options.maxStepS;
  const topSteps = here.filter((t) => axis.microOf(t.knobs) === top.x && ranAsGiven(t.result)).flatMap((t) => t.result.stepSeconds);
  const topStep = median(topSteps);
  const stepLimit = maxStep !== undefined && topStep !== null && topStep > 0 ? Math.floor((top.x * maxStep) / topStep) : Infinity;
  if (Number.isFinite(stepLimit) && stepLimit < Math.min(edge, reachTarget) && !s.stepCapped.has(family)) {
    s.stepCapped.add(family);
    s.notes.push(
      `micro-batches above ${Math.max(stepLimit, top.x)} not tried: a step there would take more than the ${maxStep} s measurement window (micro-batch ${top.x} took ${topStep?.toFixed(1)} s a step; raise --window to go further)`,
    );
  }
  const reach = axis.atMost(Math.min(edge, reachTarget, stepLimit));

  const noise = s.ledger.noise();
  // the bound comes from noisy means, so a gain smaller than one trial's noise is not worth a trial
  const threshold = Math.max(GAIN_MIN, noise);
  const probes: Probe[] = [];
  if (reach !== null && reach > top.x && !tried.has(reach)) {
    const gain = gapBound(points, points.length - 1, top.x, reach).bound / best - 1;
    const towardEdge = reach === axis.atMost(edge);
    let purpose: string;
    if (crashedAbove && reach < minFail - 1) {
      const above = otherFails.find((t) => axis.microOf(t.knobs) === minFail)?.result;
      const how =
        above === undefined
          ? "failed"
          : above.end === "time_limit"
            ? "ran past the trial time (slow, not out of memory)"
            : `ended ${above.end}${above.failure ? ` (${above.failure.cause})` : ""}, not for lack of memory`;
      purpose = `bisect: micro-batch ${reach}, between ${top.x} that ran and ${minFail} that ${how}`;
    } else if (basis === "plan") {
      purpose = `memory probe: micro-batch ${reach} (the plan's ${formatBytes(prior?.bytesPerSample ?? 0)} per sample predicts ${formatBytes(edgePeak(reach) ?? 0)})`;
    } else if (basis === "worst case") {
      purpose = `memory probe: micro-batch ${reach} (×${(reach / top.x).toFixed(1)} the largest that ran; at most ${formatBytes(edgePeak(reach) ?? 0)} even if all memory grew with the micro-batch)`;
    } else {
      const at = memory.predict(family, reach);
      purpose = towardEdge
        ? `edge probe: micro-batch ${reach}, the largest the memory line allows (predicted ${formatBytes(at?.peakBytes ?? 0)} + margin ${formatBytes(at?.marginBytes ?? 0)} of cap ${formatBytes(cap)})`
        : `memory probe: micro-batch ${reach} (×${(reach / top.x).toFixed(1)} the largest that ran, toward the line's limit ${edge})`;
    }
    probes.push({ m: reach, purpose, predictedPeakBytes: edgePeak(reach), gain });
  }
  for (let i = 0; i + 1 < points.length; i++) {
    const lo = (points[i] as CurvePoint).x;
    const hi = (points[i + 1] as CurvePoint).x;
    const g = gapBound(points, i, lo, hi);
    const where = g.at === null ? Math.sqrt(lo * hi) : Math.min(Math.max(g.at, lo + 0.25 * (hi - lo)), hi - 0.25 * (hi - lo));
    const m = axis.between(lo, hi, where);
    if (m === null || tried.has(m)) continue;
    const gain = g.bound / best - 1;
    probes.push({
      m,
      purpose: `throughput: micro-batch ${m}, between ${lo} and ${hi} (the curve could reach ${Number.isFinite(gain) ? `+${pct(gain)}` : "higher"} there)`,
      predictedPeakBytes: predicted(m) ?? topPeak,
      gain,
    });
  }
  const lowest = axis.lowest();
  const bottom = points[0] as CurvePoint;
  // below the smallest measured only on the first context: a later knob change keeps the curve's shape below
  if (first && lowest < bottom.x) {
    const g = gapBound(points, -1, lowest, bottom.x);
    const where = g.at === null ? Math.sqrt(lowest * bottom.x) : Math.min(Math.max(g.at, lowest), bottom.x - 0.25 * (bottom.x - lowest));
    const m = axis.between(lowest - 1, bottom.x, where);
    if (m !== null && !tried.has(m)) {
      const gain = g.bound / best - 1;
      probes.push({
        m,
        purpose: `throughput: micro-batch ${m}, below ${bottom.x} (is a smaller micro-batch faster?)`,
        predictedPeakBytes: predicted(m) ?? topPeak,
        gain,
      });
    }
  }
  // outward first: a probe above the largest also bounds the gaps below it
  // a trial above the largest costs its steps ×(reach / top) longer: an extrapolated promise must pay for that
  const [upward] = probes;
  const upThreshold = upward === undefined ? threshold : Math.max(threshold, 2 * GAIN_MIN * (upward.m / top.x));
  if (upward !== undefined && upward.m > top.x && upward.gain > upThreshold) return upward;
  if (upward !== undefined && upward.m > top.x && upward.gain <= upThreshold) probes.shift();
  let chosen: Probe | null = null;
  for (const p of probes) if (p.gain > threshold && (chosen === null || p.gain > chosen.gain)) chosen = p;
  return chosen;
}

/**
 * When the two fastest micro-batches of `context` are within noise of each other, the one measured
 * fewer times is measured once more (both, when both were measured once), so that neither wins on a
 * single lucky trial.
 */
function tieToSettle(s: Searcher, context: Knobs): { knobs: Knobs; purpose: string }[] {
  const estimates = s.eligible(s.inContext(context)).sort((a, b) => b.mean - a.mean);
  const [top, runnerUp] = estimates;
  if (top === undefined || runnerUp === undefined) return [];
  const noise = s.ledger.noise();
  if (compareThroughput(runnerUp, top, noise) !== "tie") return [];
  const targets = top.count === runnerUp.count ? (top.count === 1 ? [top, runnerUp] : []) : [top.count < runnerUp.count ? top : runnerUp];
  return targets.map((target) => {
    const other = target === top ? runnerUp : top;
    return {
      knobs: target.knobs,
      purpose: `re-measure: micro-batch ${s.axis.microOf(target.knobs)} (${rate(target.mean)}) is within noise (±${pct(noise)} a trial) of micro-batch ${s.axis.microOf(other.knobs)} (${rate(other.mean)})`,
    };
  });
}
