import { formatBytes } from "../bytes.ts";
import { InputError } from "../errors/index.ts";
import { ambiguousGpu, findGpu, GPU_CATALOG, type GpuSpec } from "./catalog.ts";
import { CALIBRATIONS } from "./calibrations.ts";
import { resolveConstants, type Calibration, type CalibrationUse, type PlanConstants, type ResolvedConstants } from "./constants.ts";
import { graphFromSpec } from "./families.ts";
import { footprintFromGraph, type ModelFootprint } from "./footprint.ts";
import { graphFromHfConfig } from "./hf.ts";
import { anchoredMemory, anchorOn, type Anchor, type TrialMeasurement } from "./anchor.ts";
import { COMPONENTS, maxMicroBatch, memoryAt, type Component, type MemoryBreakdown, type Sharding, type TrainingSetup } from "./memory.ts";
import type { ModelInput } from "./model-file.ts";
import { footprintFromProfile, type ModelProfile } from "./profile.ts";
import { peakFor, predictedSamplesPerSecond, SPEED_MODEL } from "./speed.ts";
import type { ModelSpec, Optimizer, Precision, StageSpec } from "./spec.ts";

/** What to plan for. Every field is optional but the GPU: `gpu` or `gpuMemoryBytes`. */
export interface PlanOptions {
  gpu?: string | undefined;
  gpuMemoryBytes?: number | undefined;
  precision?: Precision | undefined;
  optimizer?: Optimizer | undefined;
  batch?: number | undefined;
  effectiveBatch?: number | undefined;
  seqLen?: number | undefined;
  checkpointing?: boolean | undefined;
  gpus?: number | undefined;
  sharding?: Sharding | undefined;
  capBytes?: number | undefined;
  /** share of the cap kept free, 0.1 by default */
  margin?: number | undefined;
  /** measured calibrations to use; the bundled ones ({@link CALIBRATIONS}) by default */
  calibrations?: readonly Calibration[] | undefined;
  /** the PyTorch major version the job runs (calibrations are per major version); 2 by default */
  frameworkMajor?: number | undefined;
  /** a calibrating trial of this job: the plan is re-anchored on its measured peak */
  trial?: PlanTrial | undefined;
}

/** A calibrating trial as the planner takes it: what ran, and what it measured. */
export interface PlanTrial extends TrialMeasurement {
  precision: Precision;
  /** what the peak is: the process tree's GPU memory, or its RAM when the job ran on the CPU */
  memory: "gpu" | "ram";
  /** where it was measured, e.g. "run 20261122-145759-4fa3 (python3 train.py)" */
  source: string;
}

/** One ranked way to reach the effective batch. */
export interface Suggestion {
  micro_batch: number;
  accumulation: number;
  precision: Precision;
  checkpointing: boolean;
  peak_bytes: number;
  samples_per_s: number;
  relative_speed: number;
  /** predicted samples/s over those of the user's config (1 = the same) */
  speedup_vs_yours: number;
  /** this row is the user's config */
  is_yours: boolean;
}

/** The configuration the user has now (spec, config or flags), as the plan predicts it. */
export interface YourConfig {
  micro_batch: number;
  accumulation: number;
  precision: Precision;
  checkpointing: boolean;
  peak_bytes: number;
  /** share of the budget (cap × (1 − margin)) the predicted peak uses */
  budget_share: number;
  samples_per_s: number;
}

/** The plan of one model shape (the whole model, or one training stage). */
export interface PlanSection {
  name?: string;
  seq_len?: number;
  params: { total: number; trainable: number; frozen: number };
  setup: {
    precision: Precision;
    optimizer: Optimizer;
    micro_batch: number;
    micro_batch_from: "--batch" | "spec" | "largest that fits";
    accumulation: number;
    effective_batch: number;
    checkpointing: boolean;
    gpus: number;
    sharding: Sharding;
  };
  memory: { components: Record<Component, number>; shares: Record<Component, number>; peak_bytes: number; fits: boolean };
  max_micro_batch: number;
  /** false when the whole per-GPU effective batch fits in one micro-batch: memory does not limit the job */
  memory_limited: boolean;
  your_config: YourConfig;
  suggestions: Suggestion[];
  notes: string[];
}

/** A named value the plan used, with its source. */
export interface Assumption {
  name: string;
  value: number | string;
  source: string;
  calibrated: boolean;
}

/** The whole answer of `brim plan`. */
export interface PlanReport extends PlanSection {
  model: { name: string; family: string; source: ModelFootprint["source"]; file?: string };
  gpu: { id: string; name: string; memory_bytes: number; cap_bytes: number; margin: number; budget_bytes: number; gpus: number };
  stages: PlanSection[];
  speed_model: string;
  /** the GPU calibration the plan used and which constants it set (the rest are defaults); null when none matched */
  calibration: CalibrationUse | null;
  /** the calibrating trial the plan was re-anchored on, and what the model had said at its micro-batch; null without one */
  trial: (PlanTrial & { predicted_before_bytes: number; correction: Anchor }) | null;
  assumptions: Assumption[];
}

const SUGGESTED_PRECISIONS: readonly Precision[] = ["fp32", "tf32", "bf16-mixed", "fp16-mixed"];

/**
 * Plans the memory of a training job on a GPU: the breakdown at the chosen micro-batch, the largest
 * micro-batch that fits the cap with the margin, ranked ways to reach the effective batch, and one
 * plan per training stage. Pure: give it a parsed model ({@link parseModelFile}).
 *
 * @example
 * ```ts
 * import { plan, parseModelFile } from "brim-gpu";
 * const report = plan(parseModelFile(text, "model.yaml"), { gpu: "rtx-4080", precision: "bf16-mixed" });
 * report.max_micro_batch; // e.g. 412
 * ```
 */
export function plan(model: ModelInput, options: PlanOptions): PlanReport {
  const gpu = resolveGpu(options);
  const margin = options.margin ?? 0.1;
  if (!(margin >= 0 && margin < 1)) throw new InputError(`must be at least 0 and below 1, got ${margin}`, { field: "--margin" });
  const capBytes = options.capBytes ?? gpu.memoryBytes;
  if (capBytes > gpu.memoryBytes) {
    throw new InputError(`cap ${formatBytes(capBytes)} is above the card's ${formatBytes(gpu.memoryBytes)}`, { field: "--cap" });
  }
  const gpus = options.gpus ?? 1;
  if (!Number.isInteger(gpus) || gpus < 1) throw new InputError(`must be a positive integer, got ${gpus}`, { field: "--gpus" });
  const sharding: Sharding = options.sharding ?? (gpus > 1 ? "ddp" : "none");
  if (gpus === 1 && sharding !== "none" && sharding !== "ddp") {
    throw new InputError(`${sharding} shards states over several GPUs; add --gpus N`, { field: "--sharding" });
  }
  const constants = resolveConstants(gpu.spec?.id, options.calibrations ?? CALIBRATIONS, gpu.spec?.architecture, options.frameworkMajor);
  const budget = Math.floor(capBytes * (1 - margin));

  const training = model.kind === "spec" ? model.spec.training : undefined;
  const precision = options.precision ?? training?.precision ?? "fp32";
  if (gpu.spec !== undefined && peakFor(gpu.spec, precision) === undefined) {
    throw new InputError(`${gpu.spec.name} (${gpu.spec.architecture}) has no fast ${precision}; use ${precision.startsWith("bf16") ? "fp16-mixed" : "fp32"}`, {
      field: "--precision",
    });
  }
  const base = {
    precision,
    optimizer: options.optimizer ?? training?.optimizer ?? "adamw",
    checkpointing: options.checkpointing ?? training?.checkpointing ?? false,
    gpus,
    sharding,
  } satisfies TrainingSetup;

  const notes: string[] = [];
  const mainFootprint = footprintOf(model, options.seqLen, undefined, notes);
  let trial: PlanReport["trial"] = null;
  let memoryOf = (footprint: ModelFootprint, s: TrainingSetup, b: number): MemoryBreakdown => memoryAt(footprint, s, b, constants.values);
  if (options.trial !== undefined) {
    const measured = options.trial;
    const trialSetup = { ...base, precision: measured.precision };
    const correction = anchorOn(mainFootprint, trialSetup, constants.values, measured);
    const before = memoryAt(mainFootprint, trialSetup, measured.micro_batch, constants.values).peak_bytes;
    trial = { ...measured, predicted_before_bytes: before, correction };
    memoryOf = (footprint, s, b) => anchoredMemory(memoryAt(footprint, s, b, constants.values), correction);
    notes.push(
      `re-anchored on a trial (${measured.source}): ${formatBytes(measured.peak_bytes)} ${measured.memory === "ram" ? "RAM" : "GPU memory"} measured at micro-batch ${measured.micro_batch} (${measured.precision}) where the model said ${formatBytes(before)}; ` +
        (correction.on === "offset"
          ? `the fixed part moved by ${formatBytes(correction.offset)}`
          : `the per-sample part × ${correction.scale.toFixed(2)}${correction.on === "allocated" ? ", the allocator's slack as measured" : ""}`) +
        "; other micro-batches and precisions follow the model with that correction",
    );
  }
  const context: PlanContext = { gpu: gpu.spec, budget, constants: constants.values, memory: memoryOf };
  const section = planSection(
    mainFootprint,
    base,
    {
      batch: options.batch ?? training?.batch,
      batchFrom: options.batch !== undefined ? "--batch" : "spec",
      effectiveBatch: options.effectiveBatch ?? training?.effective_batch,
    },
    context,
  );
  section.notes.unshift(...notes);

  const stages: PlanSection[] = [];
  if (model.kind === "spec") {
    for (const stage of model.spec.stages ?? []) {
      const stageNotes: string[] = [];
      const footprint = footprintOf(model, options.seqLen, stage, stageNotes);
      const s = planSection(
        footprint,
        base,
        {
          batch: options.batch ?? stage.batch ?? training?.batch,
          batchFrom: options.batch !== undefined ? "--batch" : "spec",
          effectiveBatch: options.effectiveBatch ?? stage.effective_batch ?? training?.effective_batch,
        },
        context,
      );
      s.name = stage.name;
      const seq = options.seqLen ?? stage.seq_len ?? model.spec.seq_len;
      if (seq !== undefined) s.seq_len = seq;
      s.notes.unshift(...stageNotes);
      stages.push(s);
    }
  }
  const seq = options.seqLen ?? (model.kind === "spec" ? model.spec.seq_len : undefined);
  if (seq !== undefined) section.seq_len = seq;

  const report: PlanReport = {
    ...section,
    model: {
      name: mainFootprint.name,
      family: mainFootprint.family,
      source: mainFootprint.source,
      ...(model.file === undefined ? {} : { file: model.file }),
    },
    gpu: { id: gpu.id, name: gpu.name, memory_bytes: gpu.memoryBytes, cap_bytes: capBytes, margin, budget_bytes: budget, gpus },
    stages,
    speed_model: SPEED_MODEL,
    calibration: constants.calibration,
    trial,
    assumptions: assumptionsOf(base, constants, gpu, mainFootprint),
  };
  return report;
}

interface PlanContext {
  gpu: GpuSpec | undefined;
  budget: number;
  constants: PlanConstants;
  /** the memory model, re-anchored when the plan has a trial */
  memory: (footprint: ModelFootprint, setup: TrainingSetup, microBatch: number) => MemoryBreakdown;
}

interface ResolvedGpu {
  id: string;
  name: string;
  memoryBytes: number;
  memorySource: string;
  spec: GpuSpec | undefined;
}

function resolveGpu(options: PlanOptions): ResolvedGpu {
  if (options.gpu !== undefined) {
    const spec = findGpu(options.gpu);
    if (spec === undefined) {
      const several = ambiguousGpu(options.gpu);
      if (several !== undefined) {
        const which = several.map((g) => `${g.id} (${g.name.replace(/^NVIDIA /, "")}, ${g.memoryGiB} GB, ${g.architecture})`);
        throw new InputError(`${JSON.stringify(options.gpu)} could be ${which.slice(0, -1).join(", ")} or ${which.at(-1) ?? ""}: name one with --gpu`, {
          field: "--gpu",
          code: "E_UNKNOWN_GPU",
        });
      }
      const close = closestIds(options.gpu);
      const hint = `${close.length > 0 ? `did you mean ${close.slice(0, 4).join(", ")}? ` : ""}see \`brim plan --list-gpus\`, or give any card's memory with --gpu-memory <GiB>`;
      throw new InputError(`unknown GPU ${JSON.stringify(options.gpu)}; ${hint}`, { field: "--gpu", code: "E_UNKNOWN_GPU" });
    }
    const memoryBytes = options.gpuMemoryBytes ?? (spec.reportedTotalMiB !== undefined ? spec.reportedTotalMiB * 2 ** 20 : spec.memoryGiB * 2 ** 30);
    const memorySource =
      options.gpuMemoryBytes !== undefined
        ? "--gpu-memory"
        : spec.reportedTotalMiB !== undefined
          ? "total the driver reports (catalog)"
          : "memory as sold (catalog); the driver may report slightly less";
    return { id: spec.id, name: spec.name, memoryBytes, memorySource, spec };
  }
  if (options.gpuMemoryBytes !== undefined) {
    return {
      id: "custom",
      name: `GPU with ${formatBytes(options.gpuMemoryBytes)}`,
      memoryBytes: options.gpuMemoryBytes,
      memorySource: "--gpu-memory",
      spec: undefined,
    };
  }
  throw new InputError("name the GPU to plan for: --gpu <id> (e.g. rtx-4090) or --gpu-memory <GiB>", { field: "--gpu" });
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

function closestIds(wanted: string): string[] {
  const w = wanted.toLowerCase();
  return GPU_CATALOG.map((gpu) => ({
    id: gpu.id,
    d: Math.min(...[gpu.id, ...gpu.aliases].map((name) => (name.includes(w) || w.includes(name) ? 0 : editDistance(w, name)))),
  }))
    .filter((x) => x.d <= Math.max(3, Math.floor(w.length / 3)))
    .sort((a, b) => a.d - b.d)
    .slice(0, 3)
    .map((x) => x.id);
}

function footprintOf(model: ModelInput, seqLen: number | undefined, stage: StageSpec | undefined, notes: string[]): ModelFootprint {
  const footprint = buildFootprint(model, seqLen, stage, notes);
  const perSample = Math.max(...Object.values(footprint.activations).map((a) => a.perSample), footprint.inputBytesPerSample);
  if (!Number.isSafeInteger(footprint.params.total) || !(perSample <= Number.MAX_SAFE_INTEGER)) {
    const what = Number.isSafeInteger(footprint.params.total)
      ? `${formatBytes(perSample)} of activations per sample`
      : `${footprint.params.total.toExponential(2)} parameters`;
    throw new InputError(
      `the model has ${what}: beyond what brim can count exactly (2^53); check the sizes for a typo`,
      model.file === undefined ? {} : { file: model.file },
    );
  }
  return footprint;
}

function buildFootprint(model: ModelInput, seqLen: number | undefined, stage: StageSpec | undefined, notes: string[]): ModelFootprint {
  switch (model.kind) {
    case "spec":
      return footprintFromGraph(graphFromSpec(withStage(model.spec, seqLen, stage)), "spec");
    case "hf-config":
      return footprintFromGraph(graphFromHfConfig(model.config, { seqLen, file: model.file }), "hf-config");
    case "profile": {
      if (seqLen !== undefined) {
        throw new InputError("a profile is measured at one input shape; --seq-len does not apply (profile again at the new length)", { field: "--seq-len" });
      }
      notes.push("activations are the SDK's CPU measurement; checkpointing is not modelled for profiles");
      const footprint = footprintFromProfile(model.profile, model.file);
      const saved = (model.profile as ModelProfile).per_sample.saved_bytes;
      const missing = (["bf16-mixed", "fp16-mixed"] as const).filter((precision) => saved[precision] === undefined);
      if (missing.length > 0) {
        const from =
          saved["bf16-mixed"] !== undefined
            ? "the bf16-mixed measurement"
            : saved["fp16-mixed"] !== undefined
              ? "the fp16-mixed measurement"
              : "half the fp32 measurement";
        notes.push(
          `the profile has no ${missing.join(" or ")} measurement: those activations are estimated from ${from} (profile on a device whose autocast supports it for a measured number)`,
        );
      }
      return footprint;
    }
  }
}

const SEQUENCE_FAMILIES = new Set(["lstm", "gru", "cnn1d-lstm", "transformer-encoder"]);

function withStage(spec: ModelSpec, seqLen: number | undefined, stage: StageSpec | undefined): ModelSpec {
  const field = stage === undefined ? "--seq-len" : `stages.${stage.name}.seq_len`;
  const length = seqLen ?? stage?.seq_len;
  if (length !== undefined && !SEQUENCE_FAMILIES.has(spec.family)) {
    throw new InputError(`family ${spec.family} has no sequence length`, { field });
  }
  if (stage !== undefined && (stage.positives !== undefined || stage.negatives !== undefined) && spec.family !== "transformer-encoder") {
    throw new InputError(`positives/negatives apply to transformer-encoder specs, not ${spec.family}`, { field: `stages.${stage.name}` });
  }
  const out = { ...spec } as Record<string, unknown>;
  if (length !== undefined) out["seq_len"] = length;
  if (stage?.positives !== undefined) out["positives"] = stage.positives;
  if (stage?.negatives !== undefined) out["negatives"] = stage.negatives;
  return out as ModelSpec;
}

function divisors(n: number): number[] {
  const out: number[] = [];
  for (let d = 1; d * d <= n; d++) {
    if (n % d === 0) {
      out.push(d);
      if (d * d !== n) out.push(n / d);
    }
  }
  return out.sort((a, b) => a - b);
}

function planSection(
  footprint: ModelFootprint,
  setup: TrainingSetup,
  wanted: { batch: number | undefined; batchFrom: "--batch" | "spec"; effectiveBatch: number | undefined },
  context: PlanContext,
): PlanSection {
  const notes: string[] = [];
  const peakAt = (s: TrainingSetup) => (b: number) => context.memory(footprint, s, b).peak_bytes;
  const canCheckpoint = footprint.activations[setup.precision].perSampleCheckpointed !== undefined;
  const effectiveSetup: TrainingSetup = { ...setup, checkpointing: setup.checkpointing && canCheckpoint };
  if (setup.checkpointing && !canCheckpoint) notes.push("checkpointing is not modelled for this model; planned without it");
  const maxMicro = maxMicroBatch(peakAt(effectiveSetup), context.budget);

  let effective = wanted.effectiveBatch;
  if (effective !== undefined && effective % setup.gpus !== 0) {
    throw new InputError(`effective batch ${effective} does not divide over ${setup.gpus} GPUs`, { field: "--effective-batch" });
  }
  let micro: number;
  let microFrom: PlanSection["setup"]["micro_batch_from"];
  if (wanted.batch !== undefined) {
    micro = wanted.batch;
    microFrom = wanted.batchFrom;
  } else if (effective !== undefined) {
    const perGpu = effective / setup.gpus;
    micro =
      divisors(perGpu)
        .filter((d) => d <= Math.max(1, maxMicro))
        .pop() ?? 1;
    microFrom = "largest that fits";
  } else {
    micro = Math.max(1, maxMicro);
    microFrom = "largest that fits";
  }
  if (effective === undefined) effective = micro * setup.gpus;
  const perGpuEffective = effective / setup.gpus;
  if (perGpuEffective % micro !== 0) {
    throw new InputError(`effective batch ${effective} is not a multiple of micro-batch ${micro} × ${setup.gpus} GPU(s)`, { field: "--effective-batch" });
  }
  const accumulation = perGpuEffective / micro;

  const memory = context.memory(footprint, effectiveSetup, micro);
  const shares = Object.fromEntries(COMPONENTS.map((c) => [c, memory.peak_bytes === 0 ? 0 : memory.components[c] / memory.peak_bytes])) as Record<
    Component,
    number
  >;
  const fits = memory.peak_bytes <= context.budget;
  if (maxMicro === 0)
    notes.push("not even one sample fits the budget with these settings; see the suggestions (checkpointing, 16-bit precision, sharding, a smaller optimizer)");
  else if (!fits) notes.push(`micro-batch ${micro} does not fit: at most ${maxMicro} does`);
  const yours: YourConfig = {
    micro_batch: micro,
    accumulation,
    precision: setup.precision,
    checkpointing: effectiveSetup.checkpointing,
    peak_bytes: memory.peak_bytes,
    budget_share: round(memory.peak_bytes / context.budget, 4),
    samples_per_s: round(predictedSamplesPerSecond(footprint, effectiveSetup, { microBatch: micro, accumulation }, context.gpu, context.constants), 3),
  };
  const memoryLimited = maxMicro < perGpuEffective;
  notes.push(...underuseNotes(yours, perGpuEffective, effective, maxMicro, memoryLimited, context.budget));

  return {
    params: { total: footprint.params.total, trainable: footprint.params.trainable, frozen: footprint.params.total - footprint.params.trainable },
    setup: {
      precision: setup.precision,
      optimizer: setup.optimizer,
      micro_batch: micro,
      micro_batch_from: microFrom,
      accumulation,
      effective_batch: effective,
      checkpointing: effectiveSetup.checkpointing,
      gpus: setup.gpus,
      sharding: setup.sharding,
    },
    memory: { components: memory.components, shares, peak_bytes: memory.peak_bytes, fits },
    max_micro_batch: maxMicro,
    memory_limited: memoryLimited,
    your_config: yours,
    suggestions: suggest(footprint, setup, perGpuEffective, canCheckpoint, context, peakAt, yours),
    notes,
  };
}

const UNDERUSED = 0.25;

/** Says plainly when the user's config leaves most of the memory unused, and what would use it. */
function underuseNotes(yours: YourConfig, perGpuEffective: number, effective: number, maxMicro: number, memoryLimited: boolean, budget: number): string[] {
  if (yours.budget_share >= UNDERUSED || yours.peak_bytes > budget) return [];
  const used = `${yours.micro_batch} × ${yours.accumulation} uses ${Math.max(1, Math.round(100 * yours.budget_share))} % of ${formatBytes(budget)}`;
  const bigger =
    divisors(perGpuEffective)
      .filter((d) => d <= maxMicro)
      .pop() ?? yours.micro_batch;
  if (yours.accumulation > 1 && bigger > yours.micro_batch) {
    return [`${used}: ${bigger} × ${perGpuEffective / bigger} keeps the effective batch at ${effective} with fewer, larger steps`];
  }
  if (!memoryLimited) {
    return [
      `${used}, and the whole effective batch is one micro-batch: memory is not what limits this job (data, the CPU or step overhead is); a larger effective batch would fit, up to ${maxMicro.toLocaleString("en-US")} per micro-batch`,
    ];
  }
  return [`${used}: memory is underused`];
}

function suggest(
  footprint: ModelFootprint,
  setup: TrainingSetup,
  perGpuEffective: number,
  canCheckpoint: boolean,
  context: PlanContext,
  peakAt: (s: TrainingSetup) => (b: number) => number,
  yours: YourConfig,
): Suggestion[] {
  const precisions = new Set<Precision>([
    setup.precision,
    ...SUGGESTED_PRECISIONS.filter((p) => context.gpu === undefined || peakFor(context.gpu, p) !== undefined),
  ]);
  const candidates: Suggestion[] = [];
  for (const precision of precisions) {
    for (const checkpointing of canCheckpoint ? [false, true] : [false]) {
      const s: TrainingSetup = { ...setup, precision, checkpointing };
      const peak = peakAt(s);
      const largest = maxMicroBatch(peak, context.budget, perGpuEffective);
      const options = divisors(perGpuEffective).filter((m) => m <= largest);
      const ranked = options
        .map((m) => ({
          m,
          speed: predictedSamplesPerSecond(footprint, s, { microBatch: m, accumulation: perGpuEffective / m }, context.gpu, context.constants),
        }))
        .sort((a, b) => b.speed - a.speed);
      for (const { m, speed } of ranked.slice(0, 2)) {
        candidates.push({
          micro_batch: m,
          accumulation: perGpuEffective / m,
          precision,
          checkpointing,
          peak_bytes: peak(m),
          samples_per_s: speed,
          relative_speed: 0,
          speedup_vs_yours: 0,
          is_yours: precision === yours.precision && checkpointing === yours.checkpointing && m === yours.micro_batch,
        });
      }
    }
  }
  dropDominated(candidates, yours);
  // one per (precision, checkpointing), then runners-up up to three rows
  const seen = new Set<string>();
  const firsts: Suggestion[] = [];
  const rest: Suggestion[] = [];
  for (const c of candidates) {
    const key = `${c.precision}/${c.checkpointing}`;
    (seen.has(key) ? rest : firsts).push(c);
    seen.add(key);
  }
  const chosen = [...firsts];
  for (const c of rest.sort((a, b) => b.samples_per_s - a.samples_per_s)) {
    if (chosen.length >= 3) break;
    // a runner-up slower than the user's own config answers nothing
    if (c.samples_per_s < yours.samples_per_s && yours.peak_bytes <= context.budget) continue;
    chosen.push(c);
  }
  chosen.sort((a, b) => b.samples_per_s - a.samples_per_s || a.peak_bytes - b.peak_bytes);
  const best = chosen[0]?.samples_per_s ?? 1;
  return chosen.map((c) => ({
    ...c,
    samples_per_s: round(c.samples_per_s, 3),
    relative_speed: round(c.samples_per_s / best, 3),
    speedup_vs_yours: yours.samples_per_s > 0 ? round(c.samples_per_s / yours.samples_per_s, 3) : 0,
  }));
}

/**
 * Removes rows nobody should pick: checkpointing where the same precision without it already
 * reaches that micro-batch (slower for nothing), and a row that repeats another's micro-batch,
 * peak and speed (tf32 on a GPU where it runs at fp32's rate). The user's own row stays.
 */
function dropDominated(candidates: Suggestion[], yours: YourConfig): void {
  const keep = (c: Suggestion): boolean => {
    if (c.is_yours) return true;
    if (c.checkpointing && candidates.some((o) => !o.checkpointing && o.precision === c.precision && o.micro_batch >= c.micro_batch)) return false;
    const twin = candidates.find(
      (o) =>
        o !== c &&
        o.micro_batch === c.micro_batch &&
        o.checkpointing === c.checkpointing &&
        o.peak_bytes === c.peak_bytes &&
        Math.abs(o.samples_per_s - c.samples_per_s) <= 1e-9 * c.samples_per_s,
    );
    // of two identical rows keep the user's precision, else the first (fp32 before tf32)
    if (twin !== undefined && (twin.precision === yours.precision || candidates.indexOf(twin) < candidates.indexOf(c)) && c.precision !== yours.precision)
      return false;
    return true;
  };
  const kept = candidates.filter(keep);
  candidates.splice(0, candidates.length, ...kept);
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

function assumptionsOf(setup: TrainingSetup, constants: ResolvedConstants, gpu: ResolvedGpu, footprint: ModelFootprint): Assumption[] {
  const out: Assumption[] = [];
  for (const [name, value] of Object.entries(constants.values) as [keyof PlanConstants, number][]) {
    out.push({ name, value, ...constants.sources[name] });
  }
  out.push(
    { name: "gpu_memory_bytes", value: gpu.memoryBytes, source: gpu.memorySource + (gpu.spec === undefined ? "" : `; ${gpu.spec.source}`), calibrated: false },
    {
      name: "bytes_per_parameter",
      value: setup.precision === "bf16" ? "weights 2, gradients 2, optimizer state in bf16" : "weights 4, gradients 4, optimizer state in fp32",
      source: setup.precision.endsWith("-mixed")
        ? "mixed precision keeps fp32 master weights and gradients and a 16-bit copy of matmul weights during forward/backward (HF 'model training anatomy'; torch autocast weight cache)"
        : "PyTorch stores parameters, gradients and optimizer state in the parameter dtype",
      calibrated: false,
    },
    {
      name: "optimizer_state",
      value: setup.optimizer,
      source:
        "sgd 0, sgd-momentum 1 state, adam/adamw 2 states per trainable parameter; adamw-8bit 2 bytes + block absmax (bitsandbytes); adafactor factored second moment (rows + columns)",
      calibrated: false,
    },
    {
      name: "activations",
      value: footprint.source === "profile" ? "measured by the SDK on CPU" : "from the model graph, op by op",
      source:
        footprint.source === "profile"
          ? "saved-tensor hooks, per-sample slope between two batch sizes (docs/schemas/model-profile.v1.json)"
          : "tensors autograd keeps for backward as PyTorch's derivative formulas save them; a tensor kept by two ops counted once; attention through fused SDPA kernels (no seq² tensor) unless `attention: math`; see docs/model-spec.md",
      calibrated: false,
    },
    {
      name: "input_batch",
      value: "one micro-batch resident",
      source: "inputs and targets of the current micro-batch; a prefetched batch in flight is inside the margin",
      calibrated: false,
    },
    {
      name: "sharding",
      value: setup.sharding,
      source:
        "zero1 shards optimizer state, zero2 also gradients, zero3/fsdp also weights (plus two gathered tensors); ddp keeps a second copy of gradients in its buckets",
      calibrated: false,
    },
  );
  return out;
}
