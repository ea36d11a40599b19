/**
 * The loss of your configuration's run and the winner's, side by side, from the confirmation runs
 * tune.json keeps in `parity`: by samples seen when the winner changes the effective batch (its steps
 * hold other samples, so steps do not line up), by optimizer step when it holds it. A speedup in
 * samples/s says nothing of how much the model learns from each sample; this is the other half. Pure.
 *
 * @module
 */
import { table } from "../format.ts";
import type { TuneRecord } from "../record/types.ts";
import { lossScale } from "./progress.ts";
import type { ChartSpec } from "./svg.ts";

/** tune.json's `parity`, as src/tune/parity.ts writes it. */
export type ParityRecord = NonNullable<TuneRecord["parity"]>;

/**
 * One run's losses on the chart's x axis.
 *
 * @example
 * ```ts
 * const run: ParityRun = { label: "winner", trial: 3, samplesPerStep: 64, points: [[64, 2.3], [128, 2.1]], losses: [2.3, 2.1] };
 * ```
 */
export interface ParityRun {
  label: "yours" | "winner";
  trial: number;
  /** samples per optimizer step (micro-batch × accumulation); null when brim could not tell */
  samplesPerStep: number | null;
  /** x: samples seen after the step (axis "samples") or the step from 0 (axis "step"); y: the loss, null where not a finite number */
  points: [x: number, y: number | null][];
  /** the losses as kept, non-finite words ("nan", "inf") included */
  losses: (number | string | null)[];
}

/**
 * Both runs' losses and how to read them.
 *
 * @example
 * ```ts
 * parityLoss(tune.parity)?.caption; // "effective batch 16 → 64: losses by samples seen"
 * ```
 */
export interface ParityLoss {
  axis: "samples" | "step";
  caption: string;
  runs: [yours: ParityRun, winner: ParityRun];
}

const finite = (loss: number | string | null): number | null => (typeof loss === "number" && Number.isFinite(loss) ? loss : null);

/**
 * The two series of a tune's parity record: x = (step + 1) × that run's samples per step where the
 * winner changes the effective batch, else the step; null when neither run kept a finite loss.
 *
 * @example
 * ```ts
 * parityLoss({ ...parity, effective_batch: { before: 16, after: 64, held: false }, baseline_losses: [2.4, 2.3], winner_losses: [2.4] });
 * // { axis: "samples", caption: "effective batch 16 → 64: losses by samples seen",
 * //   runs: [{ label: "yours", points: [[16, 2.4], [32, 2.3]], … }, { label: "winner", points: [[64, 2.4]], … }] }
 * ```
 */
export function parityLoss(parity: ParityRecord): ParityLoss | null {
  const { before, after, held } = parity.effective_batch;
  const changed = before !== null && after !== null && before > 0 && after > 0 && !held;
  const side = (label: ParityRun["label"], trial: number, samplesPerStep: number | null, losses: ParityRun["losses"]): ParityRun => ({
    label,
    trial,
    samplesPerStep,
    points: losses.map((loss, step): [number, number | null] => [changed ? (step + 1) * (samplesPerStep ?? 0) : step, finite(loss)]),
    losses: [...losses],
  });
  const yours = side("yours", parity.baseline_trial, before, parity.baseline_losses);
  const winner = side("winner", parity.winner_trial, after, parity.winner_losses);
  if (![yours, winner].some((run) => run.points.some(([, y]) => y !== null))) return null;
  const caption = changed
    ? `effective batch ${before} → ${after}: losses by samples seen`
    : held && before !== null
      ? `effective batch held at ${before}: losses by step`
      : "effective batch unknown: losses by step";
  return { axis: changed ? "samples" : "step", caption, runs: [yours, winner] };
}

/**
 * The chart of {@link parityLoss}: yours solid with its points, the winner's dashed over it, so that
 * losses that match step for step still show both.
 *
 * @example
 * ```ts
 * renderChart(parityLossChart(parityLoss(tune.parity)!)); // <svg data-chart="tune_loss" …>
 * ```
 */
export function parityLossChart(view: ParityLoss): ChartSpec {
  const [yours, winner] = view.runs;
  const samples = view.axis === "samples";
  return {
    id: "tune_loss",
    title: `Loss, yours and the winner's: ${view.caption}`,
    x: samples ? { label: "samples seen", kind: "number", min: 0 } : { label: "optimizer step", kind: "number", min: 0 },
    y: { label: "loss", kind: "number", scale: lossScale([...yours.points, ...winner.points]) },
    series: [
      { name: `yours (trial ${yours.trial})`, color: "#0072B2", style: "line+points", points: yours.points },
      { name: `winner (trial ${winner.trial})`, color: "#E69F00", style: "dashed", points: winner.points },
    ],
    empty: "no finite loss in either run",
  };
}

/**
 * Spans of the x range both runs reached, and each run's mean loss over each: a loss per step is
 * noisy, its mean over the same samples is what the two runs can be compared by.
 *
 * @example
 * ```ts
 * paritySpans(parityLoss(tune.parity)!, 4);
 * // { head: "samples", spans: ["1–64", "65–128", …], yours: ["2.409", …], winner: ["2.436", …] }
 * ```
 */
export function paritySpans(view: ParityLoss, most = 4): { head: string; spans: string[]; yours: string[]; winner: string[] } | null {
  const samples = view.axis === "samples";
  // counted in samples seen, or in steps seen; each run's step i ends at count (i + 1) × unit
  const unit = (run: ParityRun): number => (samples ? (run.samplesPerStep ?? 1) : 1);
  const grid = Math.max(...view.runs.map(unit));
  const common = Math.min(...view.runs.map((run) => run.losses.length * unit(run)));
  const cells = Math.floor(common / grid);
  const n = Math.min(most, cells);
  if (n < 1) return null;
  const bounds = Array.from({ length: n + 1 }, (_, i) => Math.round((i * cells) / n) * grid);
  const mean = (run: ParityRun, low: number, high: number): string => {
    const inSpan = run.losses.filter((_, i) => (i + 1) * unit(run) > low && (i + 1) * unit(run) <= high);
    const word = inSpan.find((v): v is string => typeof v === "string");
    if (word !== undefined) return word;
    const values = inSpan.filter((v): v is number => typeof v === "number");
    return values.length === 0 ? "–" : (values.reduce((a, b) => a + b, 0) / values.length).toPrecision(4);
  };
  const pairs = bounds.slice(1).map((high, i) => [bounds[i] ?? 0, high] as const);
  return {
    head: samples ? "samples" : "steps",
    spans: pairs.map(([low, high]) => (samples ? `${low + 1}–${high}` : `${low}–${high - 1}`)),
    yours: pairs.map(([low, high]) => mean(view.runs[0], low, high)),
    winner: pairs.map(([low, high]) => mean(view.runs[1], low, high)),
  };
}

/**
 * The tune's output for a parity record: the caption of {@link parityLoss}, then each run's mean loss
 * over a few spans of what both saw; no lines without a parity, a finite loss, or a whole span.
 *
 * @example
 * ```ts
 * parityLossLines(tune.parity);
 * // ["effective batch 16 → 64: losses by samples seen (mean over each span)",
 * //  "  samples  1–64   65–128  129–192  193–256",
 * //  "  yours    2.409  2.333   2.283    2.290",
 * //  "  winner   2.436  2.380   2.347    2.387"]
 * ```
 */
export function parityLossLines(parity: ParityRecord | undefined, most = 4): string[] {
  const view = parity === undefined ? null : parityLoss(parity);
  const spans = view === null ? null : paritySpans(view, most);
  if (view === null || spans === null) return [];
  const rows = table([
    [spans.head, ...spans.spans],
    ["yours", ...spans.yours],
    ["winner", ...spans.winner],
  ]);
  return [`${view.caption} (mean over each span)`, ...rows.map((row) => `  ${row}`)];
}

/**
 * The speedup the chart stands beside, as the tune measured it; null without a winner. Where the
 * effective batch changed, it says that samples/s counts samples, not what each teaches.
 *
 * @example
 * ```ts
 * paritySpeedup(tune);
 * // "the winner: ×4.04 your throughput, confirmed interleaved (95 % interval ×2.56–×6.39)"
 * ```
 */
export function paritySpeedup(tune: Pick<TuneRecord, "winner" | "confirmation" | "parity">): string | null {
  const winner = tune.winner;
  if (winner === null) return null;
  const c = tune.confirmation;
  const text =
    c?.verdict === "confirmed" && c.speedup !== null && c.low !== null && c.high !== null
      ? `the winner: ×${c.speedup.toFixed(2)} your throughput, confirmed interleaved (95 % interval ×${c.low.toFixed(2)}–×${c.high.toFixed(2)})`
      : winner.speedup !== null
        ? `the winner: ×${winner.speedup.toFixed(2)} your throughput (not confirmed interleaved)`
        : "speedup unknown (your configuration measured no throughput)";
  const eb = tune.parity?.effective_batch;
  if (eb === undefined || eb.held || eb.before === null || eb.after === null) return text;
  return `${text}; its steps hold ${eb.after} samples to your ${eb.before}: throughput counts samples, the losses by samples seen show whether it learns as much from each`;
}
