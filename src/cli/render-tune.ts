import { formatBytes } from "../bytes.ts";
import { wrap } from "../format.ts";
import { knobSpec, pythonLiteral } from "../knobs/index.ts";
import type { TuneRecord } from "../record/types.ts";
import { parityLossLines } from "../report/parity-chart.ts";
import type { ApplyTuneResult } from "../tune/apply.ts";
import type { Knobs, TrialResult } from "../tune/types.ts";
import { withinTrialNoise } from "../tune/strategies/noise.ts";
import { rateLabel, unseenSamples } from "../tune/window.ts";

/**
 * Knob values that differ from the baseline, as `name=value` pairs (all of them for the baseline).
 *
 * @example
 * ```ts
 * knobDelta({ batch_size: 64, num_workers: 0 }, { batch_size: 32, num_workers: 0 }); // "batch_size=64"
 * ```
 */
export function knobDelta(knobs: Knobs, baseline: Knobs): string {
  const changed = Object.entries(knobs).filter(([knob, value]) => baseline[knob] !== value);
  if (changed.length === 0 && Object.keys(baseline).length > 0) return "(your configuration)";
  return changed.map(([knob, value]) => `${knob}=${String(value)}`).join(" ") || "(as configured)";
}

/**
 * A progress bar of `width` cells.
 *
 * @example
 * ```ts
 * progressBar(3, 12, 12); // "███░░░░░░░░░"
 * ```
 */
export function progressBar(done: number, total: number, width: number): string {
  const filled = total <= 0 ? 0 : Math.max(0, Math.min(width, Math.round((done / total) * width)));
  return "█".repeat(filled) + "░".repeat(width - filled);
}

/**
 * Bytes in human units, also below one KiB ("1.2 B", not "1.2105400934595054 B").
 *
 * @example
 * ```ts
 * humanBytes(1.2105400934595054); // "1.2 B"
 * humanBytes(3 * 2 ** 20); // "3.00 MiB"
 * ```
 */
export function humanBytes(bytes: number): string {
  if (Math.abs(bytes) >= 1024) return formatBytes(bytes);
  const value = Math.abs(bytes) >= 10 ? bytes.toFixed(0) : bytes.toFixed(1);
  return `${value} B`;
}

function rateText(samplesPerSecond: number): string {
  return samplesPerSecond >= 100 ? samplesPerSecond.toFixed(0) : samplesPerSecond.toPrecision(3);
}

/** A trial's own error (its steps' batch means), for the engineer who weighs one trial against another. */
function ownError(stepSeconds: readonly number[]): string | null {
  const error = withinTrialNoise(stepSeconds);
  return error === null ? null : `its mean within ±${(error * 100).toFixed(error >= 0.1 ? 0 : 1)} %`;
}

/**
 * One line for a finished trial; a trial that failed gets its cause and the last lines of its output
 * after it, indented, so that the reason is on screen and not only in output.log.
 *
 * @example
 * ```ts
 * renderTrialLine(2, 12, "batch_size=64", result); // "trial 2/12 batch_size=64 → 412 samples/s (stable, 5 steps in 4.1 s; start-up 2.3 s), peak 1.20 GiB"
 * ```
 */
export function renderTrialLine(index: number, planned: number, knobs: string, result: TrialResult): string {
  const head = `trial ${index}/${planned} ${knobs} →`;
  const peak = result.peakBytes !== null ? `, peak ${formatBytes(result.peakBytes)}` : "";
  const startup = result.fixedCostS != null ? `start-up ${result.fixedCostS.toFixed(1)} s` : null;
  if (result.end === "ok" && result.samplesPerSecond !== null) {
    const how = [
      `${result.stoppedBy ?? "ended"}, ${result.stepSeconds.length} steps in ${(result.measuredS ?? 0).toFixed(1)} s`,
      ownError(result.stepSeconds),
      startup,
      result.dataWaitShare != null && result.dataWaitShare >= 0.05 ? `waits for data ${(result.dataWaitShare * 100).toFixed(0)} %` : null,
      result.gpuUtilMean != null ? `GPU ${result.gpuUtilMean.toFixed(0)} %` : null,
      result.samplesFromKnob === true ? "samples counted from the batch_size knob: the job reports none" : null,
      result.rateFrom === "job" ? "the job's own samples/s over the steps brim counted: no step said its samples" : null,
    ].filter((part): part is string => part !== null);
    const recovered = result.oomRecoveries > 0 ? `, ${result.oomRecoveries} OOM split(s): did not fit as given` : "";
    return `${head} ${rateText(result.samplesPerSecond)} ${rateLabel(result.rateUnit)} (${how.join("; ")})${peak}${recovered}`;
  }
  const failure = result.failure;
  if (result.end === "slower" && result.samplesPerSecond !== null) {
    // the same number as the table's, and the one the stop was decided on
    return `${head} ${result.rateIsBound === true ? "≤" : ""}${rateText(result.samplesPerSecond)} ${rateLabel(result.rateUnit)}, stopped early, clearly slower: ${failure?.cause ?? ""}${peak}`;
  }
  const what = failure === null || failure === undefined ? result.end : `${failureLabel(failure.kind)}: ${failure.cause}`;
  const lines = [`${head} ${what}${peak}${startup === null ? "" : ` (${startup})`}`];
  const tail = result.tail ?? [];
  if (tail.length > 0) {
    lines.push("  last lines of its output:");
    for (const line of tail) lines.push(`  | ${line.length > 200 ? `${line.slice(0, 199)}…` : line}`);
  }
  return lines.join("\n");
}

function failureLabel(kind: string): string {
  switch (kind) {
    case "memory":
      return "out of memory";
    case "cap":
      return "over the cap";
    case "time_limit":
      return "time limit (slow, not a memory failure)";
    case "slower":
      return "stopped early, clearly slower";
    case "crash":
      return "crashed (not out of memory)";
    case "data":
      return "no step";
    default:
      return kind.replace("_", " ");
  }
}

function pad(text: string, width: number): string {
  if (text.length > width) return `${text.slice(0, Math.max(1, width - 1))}…`;
  return text + " ".repeat(width - text.length);
}

function endCell(trial: TuneRecord["trials"][number]): string {
  if (trial.not_comparable !== undefined) return "not comparable";
  if (trial.end === "ok") return trial.oom_recoveries > 0 ? "ok (split)" : trial.stopped_by ? `ok, ${trial.stopped_by}` : "ok";
  const kind = trial.failure?.kind;
  return kind === "memory" ? "out of memory" : kind === "crash" ? "crashed" : kind === "data" ? "batch > data" : trial.end.replace("_", " ");
}

/**
 * The table of all trials and the winner, as printed at the end of `brim tune`, fitted to `width`
 * columns (the purpose column takes what is left, then the knobs column gives way).
 *
 * @example
 * ```ts
 * process.stdout.write(renderTuneTable(record, 100));
 * ```
 */
export function renderTuneTable(record: TuneRecord, width = 100): string {
  const baseline = record.trials.find((trial) => trial.index === 0)?.knobs ?? {};
  const unit = record.trials.find((trial) => trial.index === 0)?.rate_unit;
  const rows = [...record.trials]
    .sort((a, b) => a.index - b.index)
    .map((trial) => [
      `${trial.index === record.winner?.index ? "*" : " "}${trial.index}`,
      trial.index === 0 ? `${knobDelta(trial.knobs, {})} (before)` : knobDelta(trial.knobs, baseline),
      trial.samples_per_s !== null
        ? `${trial.samples_per_s_bound === true ? "≤" : ""}${rateText(trial.samples_per_s)}${trial.rate_unit !== unit ? ` ${rateLabel(trial.rate_unit)}` : ""}`
        : "–",
      trial.peak_bytes !== null ? formatBytes(trial.peak_bytes) : "–",
      endCell(trial),
      trial.purpose,
    ]);
  const header = ["#", "knobs", rateLabel(unit), `peak ${record.cap_scope === "gpu" ? "GPU" : "RAM"}`, "end", "why"];
  const natural = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)));
  const limits = [4, 40, 10, 10, 16, 200];
  const widths = natural.map((w, column) => Math.min(w, limits[column] ?? 60));
  const gap = 2 * (widths.length - 1);
  const fixed = (ws: number[]): number => ws.slice(0, 5).reduce((a, b) => a + b, 0) + gap;
  const avail = Math.max(40, width - 1);
  // the purpose column takes what is left; below 24 columns for it, the knobs column gives some back
  let purpose = avail - fixed(widths);
  if (purpose < 24) {
    const give = Math.min(24 - purpose, Math.max(0, (widths[1] ?? 0) - 16));
    widths[1] = (widths[1] ?? 0) - give;
    purpose += give;
  }
  widths[5] = Math.max(10, Math.min(natural[5] ?? 0, purpose));
  const line = (cells: string[]): string =>
    cells
      .map((cell, column) => pad(cell, widths[column] ?? 0))
      .join("  ")
      .trimEnd();
  const out = [line(header), line(widths.map((w) => "─".repeat(w))), ...rows.map(line)];
  const winner = record.winner;
  const before = record.trials.find((trial) => trial.index === 0);
  out.push("");
  const confirmed = record.confirmation;
  if (winner) {
    const speedup =
      confirmed?.verdict === "confirmed" && confirmed.speedup !== null && confirmed.low !== null && confirmed.high !== null
        ? `×${confirmed.speedup.toFixed(2)} your configuration's ${rateLabel(unit)}, confirmed interleaved A/B over ${confirmed.winner_rates.length} pairs (95 % interval ×${confirmed.low.toFixed(2)}–×${confirmed.high.toFixed(2)})`
        : winner.speedup !== null
          ? `${winner.speedup.toFixed(2)}× the mean ${rateLabel(unit)} of your configuration (not confirmed interleaved)`
          : "speedup unknown (trial 0 measured no throughput)";
    out.push(`winner: trial ${winner.index}: ${knobDelta(winner.knobs, before?.knobs ?? {})} — ${speedup}`);
  } else if (record.no_winner && (confirmed?.verdict === "no_gain" || confirmed?.verdict === "slower")) {
    out.push(record.no_winner.reason, `next: ${record.no_winner.next}`);
  } else if (record.no_winner) {
    out.push(`no winner: ${record.no_winner.reason}`, `next: ${record.no_winner.next}`);
  } else {
    out.push("no winner: no trial finished under the cap with a measured throughput");
  }
  const parity = record.parity;
  if (parity !== undefined) {
    out.push(winner ? parity.line : `the best configuration found, against yours: ${parity.line}`);
    for (const evidence of parity.evidence) out.push(`  ${evidence.text}`);
    out.push(...parityLossLines(parity));
  }
  const unseen = unseenSamples(unit);
  if (unseen !== null) out.push(unseen);
  if (record.trials.find((trial) => trial.index === 0)?.rate_from === "job")
    out.push(
      "brim compared the job's own samples/s (the rate lines it prints, over the optimizer steps brim counted): no step said its samples; to count them itself, name the batch size as a knob (--knob batch_size=N) or report them (brim.track(loader, samples=lambda batch: …))",
    );
  if (record.effective_batch_policy) out.push(record.effective_batch_policy.text);
  for (const limit of record.limits ?? []) out.push(limit);
  if (record.evaluation) out.push(record.evaluation.line);
  if (record.memory_line) {
    const m = record.memory_line;
    const line =
      m.bytes_per_sample >= 1024
        ? `peak ≈ ${formatBytes(m.intercept_bytes)} + ${humanBytes(m.bytes_per_sample)} × micro-batch`
        : m.bytes_per_sample >= 0
          ? `peak ≈ ${formatBytes(m.intercept_bytes)} + ${humanBytes(m.bytes_per_sample)} × micro-batch (no measurable growth)`
          : "the peak did not grow with the micro-batch in these trials (no slope to extrapolate)";
    out.push(`memory line: ${line}, margin ${formatBytes(m.margin_bytes)}; largest micro-batch under the cap ≈ ${m.predicted_max_micro_batch}`);
  }
  // where the noise every verdict above leans on came from: this tune's repeats, or assumed
  const noise = (record.notes ?? []).find((note) => note.startsWith("noise ±"));
  if (noise !== undefined) out.push(noise);
  const costs = record.trials.map((trial) => trial.fixed_cost_s).filter((value): value is number => typeof value === "number");
  if (costs.length > 0) {
    const sorted = [...costs].sort((a, b) => a - b);
    const total = record.trials.reduce((a, trial) => a + trial.duration_s, 0);
    out.push(
      `time: ${total.toFixed(0)} s in trials; start-up before the first step (imports, device, data) ${(sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(1)} s a trial (median)`,
    );
  }
  const budget = record.budget ? ` of ${record.budget.max_trials}` : "";
  const confirming = record.trials.filter((trial) => trial.purpose.startsWith("confirm ")).length;
  const searched = record.trials.length - confirming;
  out.push(
    `cap ${formatBytes(record.cap_bytes)} ${record.cap_scope === "gpu" ? "GPU" : "RAM"} · ${searched}${budget} trials${confirming > 0 ? ` + ${confirming} to confirm` : ""} · stopped: ${record.stop_reason ?? "?"} · tune ${record.id}`,
  );
  return `${out.map((text) => (text.length > avail + 1 && !text.startsWith("─") ? wrap(text, avail, "", "  ").join("\n") : text)).join("\n")}\n`;
}

/**
 * What `brim apply` did, for people.
 *
 * @example
 * ```ts
 * process.stdout.write(renderApply(result));
 * ```
 */
export function renderApply(result: ApplyTuneResult, dryRun: boolean): string {
  const out: string[] = [];
  for (const file of result.files) {
    out.push(file.diff.trimEnd());
    out.push(
      dryRun
        ? `brim: would change ${file.path} (dry run: nothing written)`
        : `brim: wrote ${file.path}${file.backupPath ? ` (backup: ${file.backupPath})` : ""}`,
    );
  }
  for (const file of result.alreadyApplied) out.push(`brim: ${file} already has the winning values; nothing to change`);
  if (result.command) out.push(`brim: run the job with: ${result.command.map((arg) => (/[\s"'$]/.test(arg) ? JSON.stringify(arg) : arg)).join(" ")}`);
  for (const edit of result.codeEdits)
    out.push(
      edit.argument === true
        ? `brim: change your code at ${edit.file}:${edit.line}: give the DataLoader built there ${edit.name}=${pythonLiteral(edit.to)} (it ran with ${pythonLiteral(edit.from)}; brim does not edit source files)`
        : `brim: change your code at ${edit.file}:${edit.line}: ${edit.name}=${String(edit.from)} → ${edit.name}=${String(edit.to)} (brim does not edit source files)`,
    );
  const entries = Object.entries(result.envKnobs);
  for (const [knob, value] of entries) {
    const jobWide = knobSpec(knob)?.jobWide;
    if (jobWide !== undefined) out.push(`brim: ${knob}=${String(value)} has no key in your job: set ${jobWide.howToSet(value)}`);
  }
  const env = entries.filter(([knob]) => knobSpec(knob)?.jobWide === undefined);
  if (env.length > 0) {
    out.push(
      `brim: these knobs reach the job only through brim.knob; set them where your job takes its defaults: ${env.map(([k, v]) => `${k}=${String(v)}`).join(", ")}`,
    );
  }
  if (out.length === 0) out.push("brim: the winner is your configuration as it is; nothing to change");
  return `${out.join("\n")}\n`;
}
