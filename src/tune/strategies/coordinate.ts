/**
 * Coordinate descent over the knobs beside the micro-batch: one knob at a time in the given order,
 * starting from the best configuration so far; a value is kept only when it is faster by more than
 * the noise. From the knob's current value the search walks up the list of values, then down,
 * stopping a direction at the first value that is clearly slower or fails. A kept value that moves
 * the memory off the line (a lower precision) gets a line of its own and a new micro-batch phase.
 *
 * @example
 * ```ts
 * const winner = await tuneOthers(s, s.fastest(s.ledger.estimates())!);
 * ```
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { knobSpec, OWN_MEMORY_LINE, WALK_FIRST, withHeld } from "../../knobs/index.ts";
import type { KnobValue, SearchTrial } from "../types.ts";
import { MARGIN_FLOOR } from "../memory-line.ts";
import { knobsKey } from "./axis.ts";
import { peakOf, ranAsGiven, type ConfigEstimate } from "./ledger.ts";
import { exploreMicroBatch } from "./micro-batch.ts";
import { compareThroughput, noiseThreshold, pickFastest } from "./noise.ts";
import { pct, rate, type Searcher } from "./searcher.ts";
import { measureApart } from "./settle.ts";

/**
 * Tunes every knob of `space.others` in order from `start`; returns the configuration kept.
 *
 * @example
 * ```ts
 * const kept = await tuneOthers(s, start);
 * kept.knobs; // e.g. { batch_size: 96, num_workers: 2, precision: "bf16-mixed" }
 * ```
 */
export async function tuneOthers(
  s: Searcher,
  start: ConfigEstimate,
  order?: readonly { knob: string; values: readonly KnobValue[]; why?: string }[],
): Promise<ConfigEstimate> {
  s.incumbent = start;
  // every comparison below leans on the incumbent's mean, and a repeat shows the trial-to-trial noise
  // that the steps of one trial cannot: measure it twice before comparing anything against it
  if (start.count === 1 && (order ?? s.space.others).some((o) => o.values.some((v) => v !== start.knobs[o.knob]))) {
    s.ledger.expect(1);
    await s.ledger.run(start.knobs, "re-measure: the best so far, before the other knobs are compared against it", null);
  }
  const knobs: readonly { knob: string; values: readonly KnobValue[]; why?: string }[] = order ?? s.space.others;
  for (const { knob, values, why } of knobs) {
    if (s.ledger.stopReason !== null) break;
    await tuneKnob(s, knob, values, why);
  }
  return s.ledger.estimate(s.incumbent.knobs) ?? s.incumbent;
}

/**
 * What tuning one knob came to: a value was kept, a value did not run as given (and none was kept),
 * or every value tried ran and none was kept (within noise or clearly slower).
 */
export type KnobOutcome = "kept" | "failed" | "unchanged";

/**
 * Tunes one knob from the incumbent: up the list of values, then down, keeping a value only when it is
 * faster beyond the noise. `why` (the evidence that chose the knob) goes into each trial's purpose.
 *
 * @example
 * ```ts
 * await tuneKnob(s, "num_workers", [0, 1, 2, 4], "the loop waits for data 43 % of step time");
 * ```
 */
export async function tuneKnob(s: Searcher, knob: string, values: readonly KnobValue[], why?: string, settle = true): Promise<KnobOutcome> {
  const startValue = s.incumbent?.knobs[knob];
  const i0 = values.findIndex((v) => v === startValue);
  const said: string[] = [];
  let kept = false;
  let failed = false;
  let walked: { estimate: ConfigEstimate; label: string } | null = null;
  const outcome = (): KnobOutcome => {
    finish(s, knob, said);
    return kept ? "kept" : failed ? "failed" : "unchanged";
  };
  for (const direction of [1, -1]) {
    if (direction === -1 && kept) break;
    for (let j = i0 + direction; j >= 0 && j < values.length; j += direction) {
      // estimates move as trials are repeated: always compare against the incumbent's latest mean
      let incumbent = s.incumbent === null ? null : (s.ledger.estimate(s.incumbent.knobs) ?? s.incumbent);
      if (incumbent === null || s.ledger.stopReason !== null) return outcome();
      const value = values[j] as KnobValue;
      const from = incumbent.knobs[knob];
      // a knob that holds a product with another (num_envs × rollout_steps) moves that one inversely
      const knobs = withHeld(incumbent.knobs, knob, value);
      const label = heldLabel(knob, value, incumbent.knobs, knobs);
      if (knobs === null) {
        said.push(label);
        continue;
      }
      const m = s.axis.microOf(knobs);
      let estimate = s.ledger.estimate(knobs);
      if (estimate === undefined) {
        if (s.ledger.trialsOf(knobs).length > 0) {
          failed = true;
          break;
        }
        s.ledger.expect(2);
        const family = s.memory.familyOf(s.axis.contextOf(incumbent.knobs));
        const expected = family === undefined || m === null ? null : (s.memory.predict(family, m)?.peakBytes ?? null);
        const against = from === undefined ? `the job's default ${knob}` : `${knob}=${String(from)}`;
        const reason = from !== startValue ? walkedOn(s, incumbent, knob) : why;
        const trial = await s.ledger.run(
          knobs,
          `knob ${label}: against ${against}${m === null ? "" : ` at micro-batch ${m}`}${reason === undefined ? "" : ` — ${reason}`}`,
          expected,
        );
        if (trial === null) return outcome();
        placeOnLine(s, trial, incumbent, said, label, knob);
        if (!ranAsGiven(trial.result)) {
          failed = true;
          said.push(`${label} ${trial.result.end === "ok" ? "needed an out-of-memory split" : `ended ${trial.result.end}`}`);
          break;
        }
        estimate = s.ledger.estimate(knobs);
        if (estimate === undefined) break;
      }
      // neither value is dropped while their intervals overlap: both are measured again, interleaved (settle.ts)
      const apart = await measureApart(s, estimate, incumbent, (e) => `${knob}=${String(e.knobs[knob])}`);
      if (apart.overlap && s.ledger.stopReason !== null) return outcome();
      [estimate, incumbent] = [apart.a, apart.b];
      const verdict = apart.verdict;
      const change = `${pct(estimate.mean / incumbent.mean - 1)} (${rate(estimate.mean)} vs ${rate(incumbent.mean)}, noise ±${pct(noiseThreshold(estimate, incumbent, s.ledger.noise()))})`;
      if (verdict === "better" && s.eligible([estimate]).length === 1) {
        said.push(`${label}: ${change} — kept`);
        kept = true;
        s.incumbent = estimate;
        // a loader knob walks on first (more workers while the wait keeps falling); the micro-batch
        // is looked at again once, for the value the walk ends on
        if (WALK_FIRST.has(knob)) walked = { estimate, label };
        else await afterKeeping(s, estimate, said, label);
      } else if (verdict === "worse") {
        said.push(`${label}: ${change} — clearly slower; stopped looking ${direction > 0 ? "further along" : "further back"} the list`);
        break;
      } else {
        said.push(`${label}: ${change} — ${verdict === "better" ? "faster but too close to the cap" : "within noise"}, not kept`);
      }
    }
  }
  if (walked !== null && s.ledger.stopReason === null) {
    const last = s.ledger.estimate(walked.estimate.knobs) ?? walked.estimate;
    await afterKeeping(s, last, said, walked.label);
  }
  if (settle && s.ledger.stopReason === null && (await settleLeader(s, knob, values, said))) kept = true;
  return outcome();
}

/**
 * Why the walk goes on past a value it kept: that value's own evidence, not the evidence that started
 * the walk (the baseline's data wait says nothing of the wait left at the value kept).
 */
function walkedOn(s: Searcher, incumbent: ConfigEstimate, knob: string): string {
  const kept = `${knob}=${String(incumbent.knobs[knob])} kept`;
  const last = s.ledger.trials[incumbent.indices.at(-1) ?? -1]?.result;
  const wait = last?.dataWaitShare;
  if (!WALK_FIRST.has(knob) || wait == null) return kept;
  return `${kept}; the loop still waits for data ${pct(wait)} of step time there`;
}

/** How many times the leader and the incumbent are each measured, at most, while they stay within noise of each other. */
export const SETTLE_MAX = 3;

/**
 * After the walk, the value measured fastest among the others (the leader) is not dropped, nor the
 * incumbent kept, on a verdict of single noisy trials. While the two are within noise of each other,
 * the one measured fewer times runs again (on equal counts, the one ahead: its lead may be a lucky
 * trial), until:
 *
 * - the leader is clearly faster: it is kept;
 * - it is clearly slower, or behind an incumbent measured more than once: the incumbent stays;
 * - both have run {@link SETTLE_MAX} times: the winner among ties (the one measured more often, then
 *   the faster) is kept.
 *
 * Where the walk's verdicts were clear (low noise), this runs no trial. Returns whether a value was kept.
 */
async function settleLeader(s: Searcher, knob: string, values: readonly KnobValue[], said: string[]): Promise<boolean> {
  for (;;) {
    if (s.incumbent === null || s.ledger.stopReason !== null) return false;
    const incumbent = s.ledger.estimate(s.incumbent.knobs) ?? s.incumbent;
    const rivals = s.eligible(
      values
        .filter((v) => v !== incumbent.knobs[knob])
        .flatMap((v) => {
          const knobs = withHeld(incumbent.knobs, knob, v);
          return knobs === null ? [] : (s.ledger.estimate(knobs) ?? []);
        }),
    );
    const leader = rivals.sort((a, b) => b.mean - a.mean)[0];
    if (leader === undefined) return false;
    const noise = s.ledger.noise();
    const label = `${knob}=${String(leader.knobs[knob])}`;
    const held = `${knob}=${String(incumbent.knobs[knob])}`;
    const change = `${pct(leader.mean / incumbent.mean - 1)} (${rate(leader.mean)} over ${leader.count} vs ${rate(incumbent.mean)} over ${incumbent.count}, noise ±${pct(noiseThreshold(leader, incumbent, noise))})`;
    const verdict = compareThroughput(leader, incumbent, noise);
    const ahead = leader.mean > incumbent.mean;
    if (verdict === "worse" || (!ahead && incumbent.count >= 2)) return false;
    const settled = leader.count >= SETTLE_MAX && incumbent.count >= SETTLE_MAX;
    if (verdict === "better" || (settled && pickFastest([incumbent, leader], noise) === leader)) {
      said.push(`${label}: ${change} after re-measuring — ${verdict === "better" ? "kept" : `kept: within noise of ${held}, measured as often and faster`}`);
      s.incumbent = leader;
      await afterKeeping(s, leader, said, label);
      return true;
    }
    if (settled) {
      if (ahead) said.push(`${label}: ${change} after re-measuring — within noise, and ${held} was measured more often: not kept`);
      return false;
    }
    // the one measured fewer times runs again; on equal counts the one ahead, whose lead may be a lucky trial
    const target = incumbent.count !== leader.count ? (incumbent.count < leader.count ? incumbent : leader) : ahead ? leader : incumbent;
    s.ledger.expect(1);
    const again = await s.ledger.run(
      target.knobs,
      `re-measure: ${target === leader ? label : `${held}, the value held`}; ${label} measured ${pct(Math.abs(leader.mean / incumbent.mean - 1))} ${ahead ? "faster" : "slower"} than ${held}, within noise`,
      null,
    );
    if (again === null || !ranAsGiven(again.result)) return false;
  }
}

/**
 * A trial's label in the notes and its purpose: `num_envs=8`, with the knob it holds a product with
 * where that one moved (`num_envs=8 with rollout_steps=64, the rollout kept at 512`), or why the value
 * was not tried (`knobs` null).
 *
 * @example
 * ```ts
 * heldLabel("num_envs", 8, { num_envs: 4, rollout_steps: 128 }, { num_envs: 8, rollout_steps: 64 });
 * // "num_envs=8 with rollout_steps=64 (the rollout: transitions each update sees, kept at 512)"
 * ```
 */
export function heldLabel(
  knob: string,
  value: KnobValue,
  from: Readonly<Record<string, KnobValue>>,
  knobs: Readonly<Record<string, KnobValue>> | null,
): string {
  const label = `${knob}=${String(value)}`;
  const held = knobSpec(knob)?.holds;
  if (held === undefined) return label;
  const partner = knobs?.[held.knob];
  const product = Number(from[knob]) * Number(from[held.knob]);
  if (knobs === null) return `${label} not tried: ${held.knob} would not be a whole number (${held.what}, ${product}, kept)`;
  if (partner === undefined || partner === from[held.knob]) return label;
  return `${label} with ${held.knob}=${String(partner)} (${held.what}, kept at ${product})`;
}

function finish(s: Searcher, knob: string, said: string[]): void {
  if (said.length > 0) s.notes.push(`${knob}: ${said.join("; ")}`);
}

/** Decides whether the trial's configuration shares the memory line it was compared against. */
function placeOnLine(s: Searcher, trial: SearchTrial, incumbent: ConfigEstimate, said: string[], label: string, knob: string): void {
  const context = s.axis.contextOf(trial.knobs);
  if (s.memory.familyOf(context) !== undefined) return;
  if (OWN_MEMORY_LINE.has(knob) && s.axis.knob !== undefined) {
    // a precision decides the bytes of every term: its memory is never the line of another value
    s.memory.open(context);
    s.ownLines.add(knobsKey(context));
    said.push(`${label} changes the bytes per sample, so it gets a memory line of its own`);
    return;
  }
  const family = s.memory.familyOf(s.axis.contextOf(incumbent.knobs));
  const peak = peakOf(trial.result);
  const m = s.axis.microOf(trial.knobs);
  if (family === undefined || m === null || peak === null || !ranAsGiven(trial.result)) {
    if (family !== undefined && ranAsGiven(trial.result)) s.memory.join(context, family);
    else s.memory.open(context);
    return;
  }
  const expected = s.memory.predict(family, m);
  let reference: number;
  let tolerance: number;
  if (expected !== null) {
    reference = expected.peakBytes;
    tolerance = expected.marginBytes;
  } else {
    const peaks = incumbent.indices.map((i) => (s.ledger.trials[i] === undefined ? null : peakOf(s.ledger.trials[i].result)));
    reference = Math.max(...peaks.map((p) => p ?? 0));
    tolerance = MARGIN_FLOOR * s.options.capBytes;
  }
  if (Math.abs(peak - reference) > tolerance) {
    s.memory.open(context);
    s.ownLines.add(knobsKey(context));
    said.push(
      `${label} changed memory: peak ${formatBytes(peak)} where the line says ${formatBytes(reference)} (tolerance ${formatBytes(tolerance)}), so it gets a memory line of its own`,
    );
  } else {
    s.memory.join(context, family);
  }
}

/** After keeping a value that moved the memory off the line, the micro-batch is searched again on its own line. */
async function afterKeeping(s: Searcher, kept: ConfigEstimate, said: string[], label: string): Promise<void> {
  const context = s.axis.contextOf(kept.knobs);
  const family = s.memory.familyOf(context);
  const key = knobsKey(context);
  if (family === undefined || s.axis.knob === undefined || s.ledger.dropped !== null || !s.ownLines.has(key) || s.explored.has(key)) return;
  s.explored.add(key);
  await exploreMicroBatch(s, context, family, false);
  const best = s.fastest(s.inContext(context));
  if (best !== null && best.key !== kept.key) {
    said.push(`with ${label} the micro-batch moved to ${s.axis.microOf(best.knobs)} (${rate(best.mean)})`);
    s.incumbent = best;
  }
}
