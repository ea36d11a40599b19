/**
 * Loss parity: does the winner train the same model as your configuration? When the winner holds
 * the effective batch, the same seed and data order give the same losses step by step, within what
 * the precision allows; the first step where they part, and by how much, is what a user needs before
 * applying a change to a week-long run. Pure: the losses come from the confirmation's own runs.
 *
 * @module
 */
import type { EventEntry, StepEntry } from "../record/timeline/index.ts";
import type { TuneRecord } from "../record/types.ts";
import type { Knobs } from "./types.ts";

/** How far two losses of one step may differ, relative to the loss (at least 1), by precision. */
export const PARITY_TOLERANCE: Readonly<Record<string, number>> = {
  fp32: 1e-4,
  tf32: 5e-3,
  "bf16-mixed": 3e-2,
  "fp16-mixed": 1e-2,
};

/** Steps compared at most: the first optimizer steps, where a difference has not yet been amplified by training. */
export const PARITY_STEPS = 20;

/** A step's loss as the timeline keeps it: a number, a non-finite word ("nan", "inf", "-inf"), or null when unknown. */
export type StepLoss = number | string | null;

/** What the comparison found. */
export type Parity =
  | { verdict: "match"; steps: number; tolerance: number; max_diff: number }
  | { verdict: "parted"; steps: number; tolerance: number; step: number; baseline: number | string; winner: number | string; diff: number | null }
  | { verdict: "nonfinite"; step: number; winner: string; precision: string }
  | { verdict: "not_comparable"; reason: string };

const toleranceOf = (precisions: readonly string[]): number => Math.max(...precisions.map((p) => PARITY_TOLERANCE[p] ?? PARITY_TOLERANCE["fp32"] ?? 1e-4));

/**
 * Compares the first {@link PARITY_STEPS} step losses of your configuration's run and the winner's,
 * both from step 0. A winner that changes the effective batch is not comparable step by step (its
 * steps see other samples), and neither is a run whose losses brim could not read.
 *
 * @example
 * ```ts
 * lossParity([2.3, 2.1, 1.9], [2.3, 2.1, 1.9000001], { baseline: "fp32", winner: "fp32" }, true);
 * // { verdict: "match", steps: 3, tolerance: 0.0001, max_diff: 1e-7 }
 * ```
 */
export function lossParity(
  baseline: readonly StepLoss[],
  winner: readonly StepLoss[],
  precision: { baseline: string; winner: string },
  effectiveBatchHeld: boolean,
): Parity {
  if (!effectiveBatchHeld)
    return { verdict: "not_comparable", reason: "the winner changes the effective batch: its steps see other samples, so losses differ by design" };
  const steps = Math.min(baseline.length, winner.length, PARITY_STEPS);
  if (steps === 0) return { verdict: "not_comparable", reason: "brim read no loss in one of the two runs" };
  const tolerance = toleranceOf([precision.baseline, precision.winner]);
  let maxDiff = 0;
  for (let step = 0; step < steps; step++) {
    const a = baseline[step] ?? null;
    const b = winner[step] ?? null;
    if (a === null || b === null) return { verdict: "not_comparable", reason: `brim read no loss at step ${step} of one of the two runs` };
    if (typeof b === "string" && typeof a !== "string") return { verdict: "nonfinite", step, winner: b, precision: precision.winner };
    if (typeof a === "string" || typeof b === "string") {
      if (a === b) continue;
      return { verdict: "parted", steps, tolerance, step, baseline: a, winner: b, diff: null };
    }
    const diff = Math.abs(a - b) / Math.max(1, Math.abs(a));
    if (diff > tolerance) return { verdict: "parted", steps, tolerance, step, baseline: a, winner: b, diff };
    maxDiff = Math.max(maxDiff, diff);
  }
  return { verdict: "match", steps, tolerance, max_diff: maxDiff };
}

/**
 * The verdict's line for a parity result.
 *
 * @example
 * ```ts
 * parityLine({ verdict: "match", steps: 20, tolerance: 1e-4, max_diff: 3e-7 });
 * // "same model: the first 20 steps' losses match your configuration's within 1e-4 (largest difference 3e-7)"
 * ```
 */
export function parityLine(parity: Parity, expected?: string): string {
  const sci = (x: number): string => (x === 0 ? "0" : x.toExponential(0).replace("e+", "e"));
  switch (parity.verdict) {
    case "match":
      return `same model: the first ${parity.steps} steps' losses match your configuration's within ${sci(parity.tolerance)} (largest difference ${sci(parity.max_diff)})`;
    case "parted": {
      const value = (v: number | string): string => (typeof v === "number" ? v.toPrecision(6) : v);
      const by = parity.diff !== null ? `, ${(parity.diff * 100).toPrecision(2)} % apart (tolerance ${sci(parity.tolerance)})` : "";
      const why = expected !== undefined ? `expected: ${expected}` : "the winner changes what the model sees or computes, beyond the speed";
      return `not the same losses: they part at step ${parity.step} (yours ${value(parity.baseline)}, the winner's ${value(parity.winner)}${by}): ${why}`;
    }
    case "nonfinite":
      return `the winner's loss is ${parity.winner} at step ${parity.step} under ${parity.precision}: not safe to apply (keep your precision, or bf16-mixed where the GPU has it)`;
    case "not_comparable":
      return `losses not compared step by step: ${parity.reason}`;
  }
}

/** tune.json's parity: the comparison, its line, the losses compared and the evidence of what changed. */
export type ParityRecord = NonNullable<TuneRecord["parity"]>;

/** Losses kept per run in tune.json: enough to compare by samples seen when the effective batch changes ×3. */
export const PARITY_KEPT = 64;

/** What the attach read of the model once, at the first optimizer step (a `model_facts` event). */
export interface ModelFacts {
  /** each param group's learning rate (null where it was not a plain number) */
  lr: (number | null)[];
  /** batch-statistic layers in training mode, by class: BatchNorm's statistics are over the micro-batch */
  batchStatLayers: Record<string, number>;
  /** calls of clip_grad_norm_ before the first optimizer step (null from an attach that did not count them) */
  clipCalls?: number | null;
  /** the tokens the loss was averaged over in the first optimizer step's micro-batches, when the model's input showed them */
  tokenLoss?: TokenLoss | null;
}

/** What the attach saw of a loss averaged per token: the model's input before the first optimizer step (`model_facts.token_loss`). */
export interface TokenLoss {
  /** where the tokens were counted: the labels that are not the ignore index -100, or the attention mask */
  source: string;
  /** the tokens of each micro-batch of the first optimizer step */
  tokens: number[];
  /** the fewest and the most tokens of one row, and the rows' padded length */
  rowTokens: [number, number];
  rowLength: number;
  /** whether the number of tokens differs from row to row or micro-batch to micro-batch */
  varying: boolean;
  /** whether the model's call carried `num_items_in_batch` (the Hugging Face Trainer's count of the whole step's tokens) */
  numItems: boolean;
}

/** One confirmation run as the comparison sees it. */
export interface ParitySide {
  trial: number;
  knobs: Knobs;
  /** the optimizer steps' losses from step 0 */
  losses: StepLoss[];
  /** fp32, tf32, bf16-mixed, fp16-mixed */
  precision: string;
  /** samples per optimizer step (micro-batch × accumulation) and the micro-batch; null when unknown */
  effectiveBatch: number | null;
  microBatch: number | null;
  facts: ModelFacts | null;
  /** the first and the last accumulation its steps reported, when it only rose between them (a job that ramps it up as it runs) */
  accumulationSeen?: readonly [number, number] | null;
}

/**
 * The losses of the main process's steps from step 0, in step order, and the precision they ran in.
 *
 * @example
 * ```ts
 * stepLosses(mainSteps(run.timeline)); // { losses: [2.31, 2.29, ...], precision: null }
 * ```
 */
export function stepLosses(steps: readonly StepEntry[]): {
  losses: StepLoss[];
  precision: string | null;
  microBatch: number | null;
  accumulationSeen: readonly [number, number] | null;
} {
  const byStep = new Map<number, StepEntry>();
  for (const step of steps) if (!byStep.has(step.step)) byStep.set(step.step, step);
  const ordered = [...byStep.values()].sort((a, b) => a.step - b.step);
  // a step missing at the start (thinned, or not reported) would shift every comparison: stop at the first gap
  const losses: StepLoss[] = [];
  for (const [i, step] of ordered.entries()) {
    if (step.step !== i) break;
    losses.push(step.loss);
  }
  // a ramp only rises (a warm-up); an epoch's last, shorter step (4, 4, 2, 4) is no ramp
  const accumulations = ordered.map((s) => s.accumulation).filter((a): a is number => a !== null);
  const [first, last] = [accumulations[0], accumulations.at(-1)];
  const rises = first !== undefined && last !== undefined && last > first && accumulations.every((a, i) => i === 0 || a >= (accumulations[i - 1] ?? a));
  return {
    losses,
    accumulationSeen: rises ? [first, last] : null,
    precision: ordered.find((s) => s.precision !== null)?.precision ?? null,
    microBatch: ordered.find((s) => s.micro_batch !== null)?.micro_batch ?? null,
  };
}

/**
 * The attach's `model_facts` event of a run, or null when it sent none (no optimizer, another framework, an older brim).
 *
 * @example
 * ```ts
 * modelFactsOf(run.timeline.events); // { lr: [0.1], batchStatLayers: { BatchNorm1d: 2 } }
 * ```
 */
export function modelFactsOf(events: readonly EventEntry[]): ModelFacts | null {
  const event = events.find((e) => e.event === "model_facts");
  if (event === undefined) return null;
  const lr = Array.isArray(event.details.lr) ? event.details.lr.map((v) => (typeof v === "number" && Number.isFinite(v) ? v : null)) : [];
  const layers: Record<string, number> = {};
  const raw = event.details.batch_stat_layers;
  if (typeof raw === "object" && raw !== null)
    for (const [name, count] of Object.entries(raw)) if (typeof count === "number" && count > 0) layers[name] = count;
  const clips = event.details.clip_grad_norm_calls;
  return { lr, batchStatLayers: layers, clipCalls: typeof clips === "number" ? clips : null, tokenLoss: tokenLossOf(event.details.token_loss) };
}

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

/** The `token_loss` of a model_facts event, or null when absent or malformed. */
function tokenLossOf(raw: unknown): TokenLoss | null {
  if (typeof raw !== "object" || raw === null) return null;
  const t = raw as Record<string, unknown>;
  const rows = t["row_tokens"];
  const tokens = t["tokens"];
  if (typeof t["source"] !== "string" || !Array.isArray(tokens) || !tokens.every(isCount)) return null;
  if (!Array.isArray(rows) || rows.length !== 2 || !isCount(rows[0]) || !isCount(rows[1])) return null;
  return {
    source: t["source"],
    tokens,
    rowTokens: [rows[0], rows[1]],
    rowLength: isCount(t["row_length"]) ? t["row_length"] : 0,
    varying: t["varying"] === true,
    numItems: t["num_items_in_batch"] === true,
  };
}

const num = (x: number): string => (Math.abs(x) >= 1e-3 && Math.abs(x) < 1e4 ? String(Number(x.toPrecision(4))) : x.toExponential(2));
const lrText = (lr: readonly (number | null)[]): string => (lr.length === 1 ? num(lr[0] ?? NaN) : `[${lr.map((v) => (v === null ? "?" : num(v))).join(", ")}]`);

/**
 * What changed between your configuration's run and the winner's beyond the knobs, named from the
 * attach's evidence: a learning rate that moved with the batch size (or did not, while the effective
 * batch changed), batch-statistic layers under a changed micro-batch, clipping per micro-batch or a
 * loss averaged per token over varying lengths under a changed accumulation, loader workers.
 *
 * @example
 * ```ts
 * parityEvidence(baseline, winner).map((e) => e.kind); // ["lr", "batch_norm"]
 * ```
 */
export function parityEvidence(baseline: ParitySide, winner: ParitySide): { kind: string; text: string }[] {
  const out: { kind: string; text: string }[] = [];
  const held = baseline.effectiveBatch !== null && baseline.effectiveBatch === winner.effectiveBatch;
  const a = baseline.facts?.lr ?? [];
  const b = winner.facts?.lr ?? [];
  const moved = a.length > 0 && a.length === b.length && a.some((v, i) => v !== null && b[i] !== null && Math.abs(v - (b[i] ?? v)) > 1e-12 * Math.abs(v));
  const ratio = (x: number, y: number): string => `×${(y / x).toFixed(2)}`;
  const batchRatio = !held && baseline.effectiveBatch !== null && winner.effectiveBatch !== null ? ratio(baseline.effectiveBatch, winner.effectiveBatch) : null;
  // a warm-up from 0: the first step's rate says nothing of how the script sets the rate it warms up to
  const warming = a.length > 0 && b.length > 0 && [...a, ...b].every((v) => v === 0);
  if (warming) {
    out.push({
      kind: "lr_warmup",
      text: "learning rate 0 at the first optimizer step in both runs (a warm-up from 0): whether the script scales the rate it warms up to with the batch size is not seen in the first step; check it before applying a changed batch",
    });
  } else if (moved) {
    const lrRatio = a[0] !== null && b[0] !== null && a[0] !== undefined && b[0] !== undefined && a[0] !== 0 ? ` (${ratio(a[0], b[0])})` : "";
    const advice = held
      ? "the effective batch is held, so it should not move: compute it from micro-batch × accumulation, or pass it as a fixed value"
      : `the effective batch went ${batchRatio ?? "?"}: check that this scaling is the one you mean`;
    out.push({
      kind: "lr",
      text: `learning rate moved with the batch size: ${lrText(a)} in your configuration, ${lrText(b)} in the winner's${lrRatio} (the optimizer's param groups at the first step): the script derives it from the batch size, so the trial changed two things; ${advice}`,
    });
  } else if (!held && batchRatio !== null && a.length > 0 && a.length === b.length) {
    const x = a[0] ?? null;
    const r = (winner.effectiveBatch ?? 1) / (baseline.effectiveBatch ?? 1);
    out.push({
      kind: "lr",
      text: `learning rate unchanged at ${lrText(a)} while the effective batch went ${batchRatio}: scale it (linearly ${x === null ? "?" : num(x * r)}, by the square root ${x === null ? "?" : num(x * Math.sqrt(r))}) or tune again with --effective-batch ${baseline.effectiveBatch ?? "?"} to hold it`,
    });
  }
  const layers = Object.entries(winner.facts?.batchStatLayers ?? baseline.facts?.batchStatLayers ?? {});
  const microA = baseline.microBatch;
  const microB = winner.microBatch;
  if (layers.length > 0 && microA !== microB) {
    const names = layers.map(([name, count]) => `${name} ×${count}`).join(", ");
    out.push({
      kind: "batch_norm",
      text: `BatchNorm in the model (${names}, in training mode, read from the module tree): its statistics are over each micro-batch (yours ${microA ?? "?"}, the winner's ${microB ?? "?"}), so holding the effective batch does not hold the model and the losses part by design; keep the micro-batch (--fix batch_size), or use SyncBatchNorm/GroupNorm where it must change`,
    });
  }
  const accumulation = (side: ParitySide): number | null => {
    const knob = side.knobs["accumulation"];
    if (typeof knob === "number") return knob;
    return side.effectiveBatch !== null && side.microBatch !== null && side.microBatch > 0 ? side.effectiveBatch / side.microBatch : null;
  };
  const [accA, accB] = [accumulation(baseline), accumulation(winner)];
  const [clipA, clipB] = [baseline.facts?.clipCalls ?? 0, winner.facts?.clipCalls ?? 0];
  if (accA !== accB && (clipA > 1 || clipB > 1)) {
    out.push({
      kind: "grad_clip",
      text: `gradient clipping by norm per micro-batch (${clipA} call(s) in your configuration's first optimizer step, ${clipB} in the winner's; accumulation ${accA ?? "?"} and ${accB ?? "?"}): it clips partial gradients, so a changed accumulation changes the update even with the effective batch held; clip once per optimizer step, after the last micro-batch's backward`,
    });
  }
  for (const [who, side] of [
    ["your configuration's", baseline],
    ["the winner's", winner],
  ] as const) {
    const seen = side.accumulationSeen;
    if (seen !== null && seen !== undefined)
      out.push({
        kind: "accumulation_ramp",
        text: `accumulation ${seen[0]} to ${seen[1]} within ${who} run: the job changes it as it runs (a warm-up ramp), so the effective batch of the steps measured is not the one it settles at; the samples/s hold, the effective-batch verdict is of the first steps only`,
      });
  }
  const tokens = tokenLossEvidence(baseline, winner, accA, accB, held);
  if (tokens !== null) out.push(tokens);
  if (baseline.knobs["num_workers"] !== winner.knobs["num_workers"] && winner.knobs["num_workers"] !== undefined) {
    out.push({
      kind: "loader_workers",
      text: `num_workers ${String(baseline.knobs["num_workers"] ?? "?")} → ${String(winner.knobs["num_workers"])}: each loader worker draws its own random numbers, so random augmentations (not the data order) differ from step 0`,
    });
  }
  return out;
}

/**
 * A loss averaged per token over a number of tokens that varies (padded sequences of different
 * lengths), when the winner changes the accumulation (or the micro-batch with the effective batch
 * held): each micro-batch's mean weighs its tokens by one over its own count, so the step's loss is
 * a mean of means that another split of the same samples changes. Not when the Hugging Face Trainer
 * passes `num_items_in_batch` to the model's loss: it is then over the whole step's tokens.
 */
function tokenLossEvidence(
  baseline: ParitySide,
  winner: ParitySide,
  accA: number | null,
  accB: number | null,
  held: boolean,
): { kind: string; text: string } | null {
  const split = accA !== accB || (held && baseline.microBatch !== winner.microBatch);
  const seen = [baseline.facts?.tokenLoss, winner.facts?.tokenLoss].filter((t): t is TokenLoss => t !== null && t !== undefined && t.varying);
  const first = seen[0];
  if (!split || first === undefined) return null;
  const where = first.source === "labels" ? "labels with the ignore index -100" : "an attention mask";
  const low = Math.min(...seen.map((t) => t.rowTokens[0]));
  const high = Math.max(...seen.map((t) => t.rowTokens[1]));
  const counts = (t: TokenLoss | null | undefined): string => (t === null || t === undefined ? "?" : t.tokens.join(", "));
  const evidence =
    `${where}: ${low} to ${high} tokens a row of ${first.rowLength}; the first optimizer step's micro-batches held ` +
    `${counts(baseline.facts?.tokenLoss)} tokens in your configuration, ${counts(winner.facts?.tokenLoss)} in the winner's (accumulation ${accA ?? "?"} and ${accB ?? "?"})`;
  if (seen.every((t) => t.numItems))
    return {
      kind: "token_loss_step",
      text: `loss averaged per token over varying lengths (${evidence}), normalised over the whole step: the Hugging Face Trainer passes num_items_in_batch (the step's token count) to the model's loss, seen in its call, so a changed accumulation does not change it: parity holds, up to rounding`,
    };
  return {
    kind: "token_loss",
    text: `your loss is token-averaged per micro-batch over a varying number of tokens (${evidence}): the step's loss is then a mean of the micro-batches' means, which another accumulation weighs differently, so accumulation changes it even with the effective batch held; keep accumulation = 1, or pass num_items_in_batch / sum the loss and divide by the tokens of the whole step`,
  };
}

/** The loss of each run at the most samples both saw within the kept steps, for a winner that changes the effective batch. */
function bySamples(baseline: ParitySide, winner: ParitySide): string {
  const before = baseline.effectiveBatch ?? 0;
  const after = winner.effectiveBatch ?? 0;
  if (before <= 0 || after <= 0) return "";
  const common = Math.min(baseline.losses.length * before, winner.losses.length * after);
  const j = Math.floor(common / after) - 1;
  const i = Math.round(((j + 1) * after) / before) - 1;
  const a = baseline.losses[i];
  const b = winner.losses[j];
  if (j < 0 || i < 0 || a === undefined || b === undefined || a === null || b === null) return "";
  const value = (v: number | string): string => (typeof v === "number" ? v.toPrecision(4) : v);
  return `; by samples seen, after ${(j + 1) * after} samples yours is ${value(a)} (step ${i}), the winner's ${value(b)} (step ${j})`;
}

/**
 * The parity record of a confirmation pair: the comparison, its line (the effective batch's change
 * said first and loudly where the winner changes it), the losses compared and the evidence.
 *
 * @example
 * ```ts
 * parityRecord(baselineSide, winnerSide).line; // "same model: the first 20 steps' losses match ..."
 * ```
 */
export function parityRecord(baseline: ParitySide, winner: ParitySide): ParityRecord {
  const before = baseline.effectiveBatch;
  const after = winner.effectiveBatch;
  const known = before !== null && after !== null;
  const held = known && before === after;
  const evidence = parityEvidence(baseline, winner);
  const common = {
    effective_batch: { before, after, held },
    baseline_trial: baseline.trial,
    winner_trial: winner.trial,
    precisions: { baseline: baseline.precision, winner: winner.precision },
    baseline_losses: baseline.losses.slice(0, PARITY_KEPT),
    winner_losses: winner.losses.slice(0, PARITY_KEPT),
    evidence,
    ...(baseline.facts !== null && winner.facts !== null ? { lr: { baseline: baseline.facts.lr, winner: winner.facts.lr } } : {}),
  };
  if (!known) {
    const reason = "brim could not tell the effective batch of both runs (no micro-batch knob or sample count)";
    return { ...common, verdict: "not_comparable", reason, line: parityLine({ verdict: "not_comparable", reason }) };
  }
  if (!held) {
    const ramp = evidence.some((e) => e.kind === "accumulation_ramp") ? " in the steps measured (the job ramps its accumulation: below)" : "";
    const reason = `EFFECTIVE BATCH CHANGES${ramp}: ${before} → ${after} samples per optimizer step (×${(after / before).toFixed(2)}): the winner runs another optimisation, not yours sped up, so its losses differ by design${bySamples(baseline, winner)}`;
    return { ...common, verdict: "batch_changed", reason, line: reason };
  }
  const parity = lossParity(baseline.losses, winner.losses, { baseline: baseline.precision, winner: winner.precision }, true);
  const expected = expectedCause(evidence);
  return { ...common, ...parity, line: parityLine(parity, expected === null ? undefined : `${expected} (below)`) };
}

/** Why losses part, in a few words, by the evidence that explains it best first. */
const EXPECTED_CAUSES: readonly (readonly [kind: string, cause: string])[] = [
  ["batch_norm", "the model has BatchNorm"],
  ["lr", "the learning rate moved"],
  ["grad_clip", "gradients are clipped per micro-batch"],
  ["token_loss", "the loss is token-averaged per micro-batch"],
  ["loader_workers", "loader workers draw their own random numbers (augmentation)"],
];

/**
 * The cause a parity's evidence gives for losses that part, or null when it names none.
 *
 * @example
 * ```ts
 * expectedCause([{ kind: "loader_workers", text: "…" }]); // "loader workers draw their own random numbers (augmentation)"
 * ```
 */
export function expectedCause(evidence: readonly { kind: string }[]): string | null {
  for (const [kind, cause] of EXPECTED_CAUSES) if (evidence.some((e) => e.kind === kind)) return cause;
  return null;
}

/**
 * The note `brim apply` writes above each key it changes: what the tune held (the effective batch, the
 * learning rate) and what the loss parity showed, in one line; null for a tune without a parity record.
 *
 * @example
 * ```ts
 * applyNote(record);
 * // "brim tune 20261129-052406-f6a8: effective batch 16 held (micro-batch × accumulation), learning rate 0.05 unchanged; loss parity: the first 19 steps' losses match within 1e-4 (largest difference 2e-7)"
 * ```
 */
export function applyNote(record: Pick<TuneRecord, "id" | "parity">): string | null {
  const parity = record.parity;
  // a tune with no confirmation pair (or one older than parity) has nothing measured to say
  if (parity === undefined) return null;
  const held: string[] = [];
  const { before, after } = parity.effective_batch;
  if (before !== null)
    held.push(
      parity.effective_batch.held ? `effective batch ${before} held (micro-batch × accumulation)` : `effective batch changed ${before} → ${after ?? "?"}`,
    );
  const lr = parity.lr;
  if (lr !== undefined && lr.baseline.length > 0) {
    const same = lr.baseline.length === lr.winner.length && lr.baseline.every((v, i) => v === lr.winner[i]);
    held.push(
      same ? `learning rate ${lrText(lr.baseline)} unchanged` : `learning rate moved ${lrText(lr.baseline)} → ${lrText(lr.winner)} with the batch size`,
    );
  }
  const sci = (x: number): string => (x === 0 ? "0" : x.toExponential(0).replace("e+", "e"));
  let shown = "losses not compared step by step";
  if (parity.verdict === "match" && parity.steps !== undefined && parity.tolerance !== undefined && parity.max_diff !== undefined)
    shown = `loss parity: the first ${parity.steps} steps' losses match within ${sci(parity.tolerance)} (largest difference ${sci(parity.max_diff)})`;
  else if (parity.verdict === "parted") {
    const cause = expectedCause(parity.evidence);
    shown = `loss parity: the losses part at step ${parity.step ?? "?"}${typeof parity.diff === "number" ? ` (${(parity.diff * 100).toPrecision(2)} % apart)` : ""}${cause === null ? "" : `, expected: ${cause}`}`;
  } else if (parity.verdict === "nonfinite") shown = `loss parity: the winner's loss is non-finite at step ${parity.step ?? "?"}`;
  return `brim tune ${record.id}: ${held.length > 0 ? `${held.join(", ")}; ` : ""}${shown}`;
}

/**
 * Why a winner whose loss went non-finite where yours did not (fp16 overflow) is no winner, and the
 * fallback; null for any other parity. Not safe to apply whatever its speed.
 *
 * @example
 * ```ts
 * parityRefusal({ verdict: "nonfinite", step: 3, winner: "nan", precision: "fp16-mixed", ... })?.next;
 * // "keep your precision, or try bf16-mixed where the GPU has it (--knob precision=bf16-mixed), and tune again"
 * ```
 */
export function parityRefusal(parity: ParityRecord | undefined): { reason: string; next: string } | null {
  if (parity?.verdict !== "nonfinite") return null;
  return {
    reason: `the best configuration found is not safe to apply: its loss is ${typeof parity.winner === "string" ? parity.winner : "non-finite"} at step ${parity.step ?? "?"} under ${parity.precision ?? parity.precisions.winner}, where yours stayed finite`,
    next: "keep your precision, or try bf16-mixed where the GPU has it (--knob precision=bf16-mixed), and tune again",
  };
}
