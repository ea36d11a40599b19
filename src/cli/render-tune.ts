import { formatBytes } from "../bytes.ts";
import type { TuneRecord } from "../record/types.ts";
import type { ApplyTuneResult } from "../tune/apply.ts";
import type { Knobs, TrialResult } from "../tune/search.ts";

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
 * One line for a finished trial.
 *
 * @example
 * ```ts
 * renderTrialLine(2, 12, "batch_size=64", result, "3.1 GiB cap"); // "trial 2/12 batch_size=64 → 412 samples/s, peak 1.20 GiB, ok"
 * ```
 */
export function renderTrialLine(index: number, planned: number, knobs: string, result: TrialResult): string {
  const rate = result.samplesPerSecond !== null ? `${result.samplesPerSecond.toPrecision(4)} samples/s` : "no throughput";
  const peak = result.peakBytes !== null ? `, peak ${formatBytes(result.peakBytes)}` : "";
  const recovered = result.oomRecoveries > 0 ? `, ${result.oomRecoveries} OOM split(s): did not fit as given` : "";
  return `trial ${index}/${planned} ${knobs} → ${rate}${peak}, ${result.end}${recovered}`;
}

function pad(text: string, width: number): string {
  if (text.length > width) return `${text.slice(0, Math.max(1, width - 1))}…`;
  return text + " ".repeat(width - text.length);
}

/**
 * The table of all trials and the winner, as printed at the end of `brim tune`.
 *
 * @example
 * ```ts
 * process.stderr.write(renderTuneTable(record));
 * ```
 */
export function renderTuneTable(record: TuneRecord): string {
  const baseline = record.trials.find((trial) => trial.index === 0)?.knobs ?? {};
  const rows = [...record.trials]
    .sort((a, b) => a.index - b.index)
    .map((trial) => [
      `${trial.index === record.winner?.index ? "*" : " "}${trial.index}`,
      trial.index === 0 ? `${knobDelta(trial.knobs, {})} (before)` : knobDelta(trial.knobs, baseline),
      trial.samples_per_s !== null ? trial.samples_per_s.toPrecision(4) : "–",
      trial.peak_bytes !== null ? formatBytes(trial.peak_bytes) : "–",
      trial.end + (trial.oom_recoveries > 0 ? " (split)" : ""),
      trial.purpose,
    ]);
  const header = ["#", "knobs", "samples/s", `peak ${record.cap_scope === "gpu" ? "GPU" : "RAM"}`, "end", "why"];
  const limits = [4, 48, 10, 10, 16, 72];
  const widths = header.map((title, column) => Math.min(limits[column] ?? 60, Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length))));
  const line = (cells: string[]): string => cells.map((cell, column) => pad(cell, widths[column] ?? 0)).join("  ").trimEnd();
  const out = [line(header), line(widths.map((width) => "─".repeat(width))), ...rows.map(line)];
  const winner = record.winner;
  const before = record.trials.find((trial) => trial.index === 0);
  if (winner) {
    const speedup = winner.speedup !== null ? `${winner.speedup.toFixed(2)}× the mean samples/s of your configuration` : "speedup unknown (trial 0 measured no throughput)";
    out.push("", `winner: trial ${winner.index}: ${knobDelta(winner.knobs, before?.knobs ?? {})} — ${speedup}`);
  } else {
    out.push("", "no winner: no trial finished under the cap with a measured throughput");
  }
  if (record.memory_line) {
    const line = record.memory_line;
    out.push(`memory line: peak ≈ ${formatBytes(line.intercept_bytes)} + ${formatBytes(line.bytes_per_sample)} × micro-batch (margin ${formatBytes(line.margin_bytes)}); largest micro-batch under the cap ≈ ${line.predicted_max_micro_batch}`);
  }
  out.push(`cap ${formatBytes(record.cap_bytes)} ${record.cap_scope === "gpu" ? "GPU" : "RAM"} · ${record.trials.length} trials · stopped: ${record.stop_reason ?? "?"} · tune ${record.id}`);
  return `${out.join("\n")}\n`;
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
    out.push(dryRun ? `brim: would change ${file.path} (dry run: nothing written)` : `brim: wrote ${file.path}${file.backupPath ? ` (backup: ${file.backupPath})` : ""}`);
  }
  for (const file of result.alreadyApplied) out.push(`brim: ${file} already has the winning values; nothing to change`);
  if (result.command) out.push(`brim: run the job with: ${result.command.map((arg) => (/[\s"'$]/.test(arg) ? JSON.stringify(arg) : arg)).join(" ")}`);
  const env = Object.entries(result.envKnobs);
  if (env.length > 0) {
    out.push(`brim: these knobs reach the job only through brim.knob; set them where your job takes its defaults: ${env.map(([k, v]) => `${k}=${String(v)}`).join(", ")}`);
  }
  if (out.length === 0) out.push("brim: the winner is your configuration as it is; nothing to change");
  return `${out.join("\n")}\n`;
}
