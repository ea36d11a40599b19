/**
 * The knob search of `brim tune`: from the user's configuration (trial 0), fit a memory line from a
 * few probes, measure throughput at the micro-batches where the curve can still beat the best seen,
 * then tune the other knobs one at a time, all within a trial budget, a time budget and a memory
 * cap. Pure: trials come through a {@link TrialRunner}, time through an injected clock. How it
 * decides is written out in docs/tune-search.md.
 *
 * @example
 * ```ts
 * const outcome = await searchKnobs(
 *   { baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [{ knob: "num_workers", values: [0, 2, 4] }] },
 *   runner,
 *   { capBytes: 12 * 2 ** 30, maxTrials: 20, maxTimeS: 900, now: () => performance.now() / 1000 },
 * );
 * outcome.trials[outcome.bestIndex ?? 0]?.knobs; // e.g. { batch_size: 96, num_workers: 2 }
 * ```
 * @module
 */
import { formatBytes } from "../bytes.ts";
import { InputError } from "../errors/index.ts";
import { MARGIN_FLOOR, peakSigma, predictPeak, t99 } from "./memory-line.ts";
import { knobsKey } from "./strategies/axis.ts";
import { EVIDENCE_FIRST, evidenceOf, rankByEvidence, type RankedKnob } from "./evidence.ts";
import { tuneKnob, tuneOthers } from "./strategies/coordinate.ts";
import { didNotFit, peakOf, ranAsGiven, type ConfigEstimate, type Ledger } from "./strategies/ledger.ts";
import type { MemoryBook } from "./strategies/memory-book.ts";
import { exploreMicroBatch } from "./strategies/micro-batch.ts";
import { compareThroughput, describeNoise, noiseThreshold } from "./strategies/noise.ts";
import { checkOptions, describeKnobs, newSearcher, pct, rate, type Searcher } from "./strategies/searcher.ts";
import { measureApart } from "./strategies/settle.ts";
import { trialTimeText } from "./window.ts";
import type { Knobs, MemoryLineReport, SearchOptions, SearchOutcome, SearchTrial, StopReason, TrialResult, TrialRunner, TuneSpace } from "./types.ts";

export { doublingBisection, exhaustiveGrid } from "./strategies/baselines.ts";
export type {
  KnobValue,
  Knobs,
  MemoryLineReport,
  SearchOptions,
  SearchOutcome,
  SearchTrial,
  StopReason,
  TrialEnd,
  TrialResult,
  TrialRunner,
  TuneSpace,
} from "./types.ts";

/**
 * Searches the tune space for the fastest configuration under the cap (see the module doc and
 * docs/tune-search.md). Trial failures are results; the only errors thrown are for invalid input.
 *
 * @example
 * ```ts
 * const { bestIndex, notes } = await searchKnobs(space, runner, { capBytes, maxTrials: 24, maxTimeS: 1200, now });
 * ```
 */
export async function searchKnobs(space: TuneSpace, runner: TrialRunner, options: SearchOptions): Promise<SearchOutcome> {
  checkOptions(options);
  const s = newSearcher(space, runner, options);
  const { axis, ledger } = s;
  ledger.whenNotComparable = (trial) => dropMicroBatch(s, trial);
  const baseContext = axis.contextOf(space.baseline);
  const family = s.memory.open(baseContext);
  const m0 = axis.microOf(space.baseline);
  if (axis.knob !== undefined && m0 === null) {
    throw new InputError(`the baseline's ${axis.knob} must be a positive integer, got ${JSON.stringify(space.baseline[axis.knob])}`, { field: "baseline" });
  }
  ledger.expect(1 + (axis.knob === undefined ? 0 : 5) + space.others.reduce((n, o) => n + Math.min(2, o.values.length), 0));
  const base = await ledger.run(space.baseline, "baseline", null);
  if (base === null) return outcomeOf(s, null, family);
  noteBaseline(s, base.result, m0);
  if (ledger.stopReason !== null) return outcomeOf(s, null, family);
  // a baseline its window ended, never stable, is one draw of a noisy job: measured again, the spread
  // of the two is the search's first measure of the noise between trials (not a floor)
  if (ranAsGiven(base.result) && base.result.stoppedBy === "window") {
    ledger.expect(1);
    await ledger.run(space.baseline, "re-measure: your configuration — its trial was never stable: the spread of the two is this job's noise", null);
  }
  if (!ranAsGiven(base.result) && !didNotFit(base.result)) {
    s.notes.push(`the baseline ended ${base.result.end}, not for lack of memory: tune a job that runs as it is; nothing else was tried`);
    return outcomeOf(s, null, family);
  }
  if (space.effectiveBatch !== undefined && axis.accumulationKnob !== undefined) {
    const acc = Number(space.baseline[axis.accumulationKnob] ?? 1);
    if (m0 !== null && m0 * acc !== space.effectiveBatch) {
      s.notes.push(
        `the baseline's micro-batch ${m0} × accumulation ${acc} = ${m0 * acc}, not the effective batch ${space.effectiveBatch}; every other trial keeps ${space.effectiveBatch}`,
      );
    }
  }

  // the baseline's evidence first: a knob that promises more than the micro-batch phase is tried before it
  const done = new Set<string>();
  // knobs tried before the micro-batch phase whose values all ran but none was kept there
  const unsettled: RankedKnob[] = [];
  if (ranAsGiven(base.result) && base.result.samplesPerSecond !== null && space.others.length > 0) {
    const { ranked, skipped } = rankByEvidence(space.others, evidenceOf(base.result, space.baseline, options.capBytes), space.baseline, ledger.noise());
    const early = ranked.filter((r) => r.gain >= EVIDENCE_FIRST);
    if (early.length > 0) s.notes.push(`evidence of the baseline: ${early.map((r) => `${r.knob} first (${r.why})`).join("; ")}`);
    for (const r of skipped) {
      s.notes.push(`${r.knob} not tried: ${r.why}`);
      done.add(r.knob);
    }
    const estimate = ledger.estimate(space.baseline);
    if (estimate !== undefined && early.length > 0) {
      s.incumbent = estimate;
      for (const first of early) {
        if (ledger.stopReason !== null) break;
        const r = rerankedAtIncumbent(s, first, space, options.capBytes);
        if (r === null) continue;
        // not settled here: a knob left unchanged is looked at again after the micro-batch phase
        if ((await tuneKnob(s, r.knob, r.values, r.why, false)) === "unchanged") unsettled.push(r);
        done.add(r.knob);
      }
    }
  }
  const kept = s.incumbent === null ? baseContext : axis.contextOf(s.incumbent.knobs);
  const keptFamily = s.memory.familyOf(kept) ?? family;
  if (axis.knob !== undefined) {
    if (!s.explored.has(knobsKey(kept))) {
      s.explored.add(knobsKey(kept));
      await exploreMicroBatch(s, kept, keptFamily, keptFamily === family);
    }
    if (ledger.dropped === null) noteMicroPhase(s, kept, keptFamily);
  } else if (!ranAsGiven(base.result)) {
    s.notes.push("the baseline did not fit under the cap and there is no micro-batch knob to make it smaller");
  }
  // where the context kept has nothing eligible (its runs too close to the cap), a configuration of
  // another context that ran with room (a precision judged a tie, say) is still a safe start
  const start = s.fastest(s.inContext(kept)) ?? s.fastest(ledger.estimates());
  if (start === null) {
    if (axis.knob !== undefined) {
      const lowest = axis.lowest();
      const failedLowest = s.memory.memoryFailures(family).some((t) => axis.microOf(t.knobs) === lowest);
      s.notes.push(
        failedLowest
          ? `nothing fits under the cap ${formatBytes(options.capBytes)}: even micro-batch ${lowest} did not; lower the fixed memory (precision, optimizer, checkpointing) or raise the cap`
          : s.tooClose.size > 0
            ? `no micro-batch ran with ${pct(MARGIN_FLOOR)} of the cap ${formatBytes(options.capBytes)} left free`
            : `no micro-batch ran as given under the cap ${formatBytes(options.capBytes)} before the search stopped`,
      );
    }
    return outcomeOf(s, null, family);
  }
  // a verdict at one micro-batch does not carry to another: fixed costs per step weigh less at a larger
  // one, and a value that changes the bytes per sample (a precision) also moves how far the micro-batch
  // may go. A knob judged early and not kept is tried once more at the micro-batch the phase picked.
  const startMicro = axis.microOf(start.knobs);
  for (const r of unsettled) {
    done.delete(r.knob);
    if (startMicro !== null && startMicro !== m0)
      s.notes.push(`${r.knob}: no value was kept at micro-batch ${m0}; tried again at micro-batch ${startMicro}, where the fixed costs of a step weigh less`);
  }
  // then the rest, in the order the evidence of the best so far gives
  const rest = space.others.filter((o) => !done.has(o.knob));
  let order: RankedKnob[] = [];
  const startTrial = ledger.trials[start.indices.at(-1) ?? 0];
  if (rest.length > 0 && startTrial !== undefined) {
    const { ranked, skipped } = rankByEvidence(rest, evidenceOf(startTrial.result, start.knobs, options.capBytes), start.knobs, ledger.noise());
    for (const r of skipped) s.notes.push(`${r.knob} not tried: ${r.why} (at ${describeKnobs(start.knobs)})`);
    order = ranked;
  }
  let found = order.length > 0 ? await tuneOthers(s, start, order) : start;
  if (ledger.dropped !== null) {
    // nothing measured at the baseline's micro-batch but the baseline: nothing was tunable beside the knob dropped
    if (!s.eligible(ledger.estimates()).some((e) => e.key !== knobsKey(space.baseline))) {
      if (ledger.stopReason !== "interrupted") ledger.stopReason = "untrusted";
      return outcomeOf(s, null, family);
    }
    found = s.eligible([found]).length > 0 ? found : (s.fastest(ledger.estimates()) ?? found);
  }
  const winner = overtaken(s, await confirmAgainstBaseline(s, found));
  s.incumbent = winner;
  return outcomeOf(s, winner, s.memory.familyOf(axis.contextOf(winner.knobs)) ?? family);
}

/**
 * The fastest configuration measured clearly faster than `winner`, if any: re-measures made late in
 * the search (of the incumbent, say) can set apart two configurations an earlier verdict called a tie.
 */
function overtaken(s: Searcher, winner: ConfigEstimate): ConfigEstimate {
  const noise = s.ledger.noise();
  const w = s.ledger.estimate(winner.knobs) ?? winner;
  const faster = s.eligible(s.ledger.estimates()).filter((e) => compareThroughput(e, w, noise) === "better");
  return faster.sort((a, b) => b.mean - a.mean)[0] ?? winner;
}

/** A gain the search could not tell from noise but big enough to be worth the interleaved confirmation's trials. */
const WORTH_CONFIRMING = 0.05;

/**
 * A winner must beat the baseline by more than the measured noise. Finalists measured once, and not
 * clearly apart, are measured again (budget allowing); a winner still within noise of the baseline
 * gives way to it (the baseline is already as good), unless it measured at least 5 % faster: then the
 * interleaved confirmation decides.
 */
async function confirmAgainstBaseline(s: Searcher, found: ConfigEstimate): Promise<ConfigEstimate> {
  const base = s.ledger.estimate(s.space.baseline);
  if (base === undefined || base.key === found.key || s.eligible([base]).length === 0) return found;
  const clearly = (): boolean => {
    const w = s.ledger.estimate(found.knobs) ?? found;
    const b = s.ledger.estimate(base.knobs) ?? base;
    return w.mean / b.mean - 1 > 2 * noiseThreshold(w, b, s.ledger.noise());
  };
  if (!clearly()) {
    for (const e of [found, base]) {
      if ((s.ledger.estimate(e.knobs)?.count ?? 0) >= 2 || s.ledger.stopReason !== null) continue;
      const who = e.key === base.key ? "your configuration" : describeKnobs(e.knobs);
      if ((await s.ledger.run(e.knobs, `re-measure finalist: ${who}, to compare the winner with the baseline beyond noise`, null)) === null) break;
    }
  }
  // neither the best found nor yours is dropped while their intervals overlap: measured again, interleaved
  const own = (e: ConfigEstimate): string => (e.key === base.key ? "your configuration" : describeKnobs(e.knobs));
  await measureApart(s, s.ledger.estimate(found.knobs) ?? found, s.ledger.estimate(base.knobs) ?? base, own);
  const w = s.ledger.estimate(found.knobs) ?? found;
  const b = s.ledger.estimate(base.knobs) ?? base;
  const noise = s.ledger.noise();
  if (compareThroughput(w, b, noise) === "better") return w;
  // another configuration clearly faster than the baseline keeps the search's pick (it is within noise of it)
  if (s.eligible(s.ledger.estimates()).some((e) => compareThroughput(e, b, noise) === "better")) return w;
  // faster by a gain worth having, but within the noise of single trials: the interleaved A/B
  // confirmation measures it against the baseline with an interval and decides (no gain is said there)
  if (w.mean / b.mean - 1 >= WORTH_CONFIRMING) {
    s.notes.push(
      `the best found (${describeKnobs(w.knobs)}, ${rate(w.mean)} over ${w.count}) measured ${pct(w.mean / b.mean - 1)} over your configuration (${rate(b.mean)} over ${b.count}), within the search's noise (±${pct(noiseThreshold(w, b, noise))}): the interleaved confirmation decides`,
    );
    return w;
  }
  s.notes.push(
    `the baseline is already as good: the best found (${describeKnobs(w.knobs)}, ${rate(w.mean)} over ${w.count}) is within the measured noise (±${pct(noiseThreshold(w, b, noise))}) of your configuration (${rate(b.mean)} over ${b.count})`,
  );
  return b;
}

function noteBaseline(s: Searcher, result: TrialResult, m0: number | null): void {
  const peak = peakOf(result);
  const cap = formatBytes(s.options.capBytes);
  if (ranAsGiven(result) && result.samplesPerSecond !== null) {
    s.notes.push(
      `baseline${m0 === null ? "" : ` (micro-batch ${m0})`}: ${rate(result.samplesPerSecond)}, peak ${peak === null ? "not measured" : formatBytes(peak)} of the cap ${cap}`,
      trialTimeText(result, s.ledger.predictDuration(s.space.baseline)),
    );
  } else if (didNotFit(result)) {
    s.notes.push(
      `the baseline${m0 === null ? "" : ` (micro-batch ${m0})`} did not fit under the cap ${cap} (${result.end === "ok" ? `the SDK split it ${result.oomRecoveries}×` : result.end})${m0 === null ? "" : "; looking at smaller micro-batches"}`,
    );
  } else if (result.end === "ok") {
    s.notes.push("the baseline ran but reported no steady steps: no throughput to compare against");
  }
}

function noteMicroPhase(s: Searcher, context: Knobs, family: number): void {
  const { axis, memory, options } = s;
  const line = memory.limit(family);
  const points = memory.points(family);
  if (line !== null) {
    const { fit } = line;
    const failed = memory.failedMicroBatches(family);
    const margin = line.marginBytes;
    const sigma = peakSigma(fit);
    let why: string;
    if (failed.some((f) => margin <= options.capBytes - predictPeak(fit, f) + 2))
      why = `raised so the line clears micro-batch ${Math.min(...failed)}, which did not fit`;
    else if (margin <= MARGIN_FLOOR * options.capBytes + 1) why = `the ${pct(MARGIN_FLOOR)} floor`;
    else why = `99 % prediction bound, t(${sigma.df}) ${t99(sigma.df).toFixed(2)} × σ ${formatBytes(sigma.sigmaBytes)}`;
    why += fit.residualSigmaBytes === null ? "; two trials, so σ is the prior guess" : `; residual σ ${formatBytes(fit.residualSigmaBytes)}`;
    const ms = [...new Set(points.map((p) => p.microBatch))].sort((a, b) => a - b);
    s.notes.push(
      `memory line fitted from ${fit.points} trials (micro-batch ${ms.join(", ")}): peak ≈ ${formatBytes(fit.interceptBytes)} + ${formatBytes(fit.bytesPerSample)} × micro-batch; ` +
        `margin ${formatBytes(margin)} (${why}); ` +
        `largest micro-batch predicted under the cap ${formatBytes(options.capBytes)}: ${line.microBatch}` +
        (fit.bytesPerSample > 0 ? "" : " (the measured peaks do not rise with the micro-batch; the limit is how far they can be trusted)"),
    );
  } else if (points.length > 0) {
    s.notes.push(`memory line not fitted: only micro-batch ${points[0]?.microBatch} ran`);
  }
  const curve = s
    .inContext(context)
    .map((e) => ({ m: axis.microOf(e.knobs) ?? 0, e }))
    .sort((a, b) => a.m - b.m);
  if (curve.length > 0) {
    const best = s.fastest(curve.map((c) => c.e));
    const list = curve.map((c) => `${c.m}: ${c.e.bounded === true ? "≤ " : ""}${rate(c.e.mean)}${c.e.count > 1 ? ` (×${c.e.count})` : ""}`).join(", ");
    const bestM = best === null ? null : axis.microOf(best.knobs);
    const largest = curve[curve.length - 1]?.m;
    s.notes.push(
      `throughput by micro-batch: ${list}` +
        (bestM === null
          ? ""
          : `; fastest ${bestM}${bestM !== largest ? ` — not the largest that ran (${largest}): beyond ${bestM} throughput does not rise` : ""}`),
    );
  }
}

function outcomeOf(s: Searcher, winner: ConfigEstimate | null, family: number): SearchOutcome {
  const { ledger } = s;
  const stopReason = ledger.stopReason ?? "converged";
  noteStop(s, ledger, stopReason);
  const first = ledger.trials[0]?.result;
  const baseline = first !== undefined && ranAsGiven(first) ? first.samplesPerSecond : null;
  // measurements that cannot be compared name no winner, even in the search's notes
  if (winner !== null && stopReason !== "untrusted") {
    const speedup = baseline !== null && baseline > 0 ? ` (×${(winner.mean / baseline).toFixed(2)} the baseline)` : "";
    s.notes.push(`winner: ${describeKnobs(winner.knobs)} — ${rate(winner.mean)} over ${winner.count} trial${winner.count > 1 ? "s" : ""}${speedup}`);
  }
  if (ledger.trials.length > 0) s.notes.push(`noise ${describeNoise(ledger.noiseEstimate())}`);
  return {
    trials: ledger.trials,
    bestIndex: winner?.indices.at(-1) ?? null,
    stopReason,
    // a line over micro-batches whose samples did not follow them fits nothing the job ran
    memoryLine: s.dropped === null ? lineReport(s.memory, family, s.axis.max) : null,
    notes: s.notes,
    best: winner === null ? null : { knobs: winner.knobs, samplesPerSecond: winner.mean, measurements: winner.count },
    noise: ledger.noise(),
    ...(s.dropped === null ? {} : { dropped: s.dropped }),
  };
}

/**
 * A trial at another micro-batch came back not comparable: the finding is about the micro-batch knob
 * (and its accumulation) alone, so the search goes on without them, as with --fix, the other knobs
 * tuned at the baseline's micro-batch; false (the search stops as untrusted) when there are none.
 */
function dropMicroBatch(s: Searcher, trial: SearchTrial): boolean {
  const knobs = [s.axis.knob, s.axis.accumulationKnob].filter((k): k is string => k !== undefined);
  const reason = trial.result.notComparable ?? "";
  if (s.space.others.length === 0 || knobs.length === 0) return false;
  s.dropped = { knobs, trial: trial.index, reason };
  const batch = knobs.map((k) => `${k}=${String(trial.knobs[k])}`).join(" ");
  const line = `${knobs.join(" and ")} dropped from the search: ${reason.split(":")[0]} (trial ${trial.index}, ${batch}); only configurations at micro-batch ${s.axis.microOf(s.space.baseline)} are compared from here`;
  s.notes.push(line);
  s.options.onNote?.(line);
  return true;
}

function noteStop(s: Searcher, ledger: Ledger, reason: StopReason): void {
  if (reason === "max_trials") s.notes.push(`stopped: the budget of ${s.options.maxTrials} trials was spent before the search converged`);
  else if (reason === "max_time")
    s.notes.push(`stopped: the next trial would not have finished within the time budget of ${s.options.maxTimeS} s (${ledger.trials.length} trials ran)`);
  else if (reason === "interrupted") s.notes.push("stopped: a trial was interrupted");
}

function lineReport(memory: MemoryBook, family: number, maxMicro: number): MemoryLineReport | null {
  const line = memory.limit(family);
  if (line === null) return null;
  return {
    interceptBytes: line.fit.interceptBytes,
    bytesPerSample: line.fit.bytesPerSample,
    marginBytes: line.marginBytes,
    predictedMaxMicroBatch: Math.min(line.microBatch, maxMicro),
    points: line.fit.points,
    residualSigmaBytes: line.fit.residualSigmaBytes,
  };
}

/**
 * A knob ranked on the baseline's evidence, ranked again on the evidence of the configuration kept
 * since (a knob walked before it changed what the loop waits for: fewer threads beside busy cores
 * left the loop waiting 95 % instead of 62 %, and one loader worker could then only hide 5 %); null
 * when that evidence now rules it out (said in the notes).
 */
function rerankedAtIncumbent(s: Searcher, first: RankedKnob, space: TuneSpace, capBytes: number): RankedKnob | null {
  const incumbent = s.incumbent;
  if (incumbent === null || knobsKey(incumbent.knobs) === knobsKey(space.baseline)) return first;
  const last = s.ledger
    .trialsOf(incumbent.knobs)
    .filter((trial) => ranAsGiven(trial.result))
    .at(-1);
  const entry = space.others.find((other) => other.knob === first.knob);
  if (last === undefined || entry === undefined) return first;
  const { ranked, skipped } = rankByEvidence([entry], evidenceOf(last.result, incumbent.knobs, capBytes), incumbent.knobs, s.ledger.noise());
  const again = ranked[0];
  if (again === undefined) {
    s.notes.push(`${first.knob} not tried: ${skipped[0]?.why ?? "ruled out"} (at the configuration kept so far)`);
    return null;
  }
  return { ...again, gain: first.gain };
}
