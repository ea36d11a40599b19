import { formatBytes } from "../bytes.ts";
import { InputError } from "../errors/index.ts";
import type { GpuSpec } from "./catalog.ts";
import { resolveGpu } from "./gpu-choice.ts";
import { CALIBRATIONS } from "./calibrations.ts";
import { resolveConstants, type PlanConstants } from "./constants.ts";
import { graphFromSpec } from "./families.ts";
import { footprintFromGraph, type ModelFootprint } from "./footprint.ts";
import { graphFromHfConfig } from "./hf.ts";
import { anchoredMemory, anchorOn } from "./anchor.ts";
import { COMPONENTS, maxMicroBatch, memoryAt, type Component, type MemoryBreakdown, type TrainingSetup } from "./memory.ts";
import { resolveParallel } from "./distributed.ts";
import type { ModelInput } from "./model-file.ts";
import { footprintFromProfile, type ModelProfile } from "./profile.ts";
import { peakFor, predictedSamplesPerSecond, SPEED_MODEL } from "./speed.ts";
import type { ModelSpec, Precision, StageSpec } from "./spec.ts";
import { assumptionsOf } from "./assumptions.ts";
import type { PlanOptions, PlanReport, PlanSection, Suggestion, YourConfig } from "./plan-types.ts";

export type { Assumption, PlanOptions, PlanReport, PlanSection, PlanTrial, Suggestion, YourConfig } from "./plan-types.ts";

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
  const parallel = resolveParallel(options);
  const { gpus, nodes, sharding, offload } = parallel;
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
    nodes,
    offload,
  } satisfies TrainingSetup;

  const notes: string[] = [...parallel.notes];
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
    gpu: { id: gpu.id, name: gpu.name, memory_bytes: gpu.memoryBytes, cap_bytes: capBytes, margin, budget_bytes: budget, gpus, nodes },
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

/**
 * The divisors of n, ascending: the micro-batches that split an effective batch into whole steps.
 *
 * @example
 * ```ts
 * divisors(12); // [1, 2, 3, 4, 6, 12]
 * ```
 */
export function divisors(n: number): number[] {
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
      nodes: setup.nodes ?? 1,
      sharding: setup.sharding,
      offload: setup.offload ?? "none",
    },
    memory: { components: memory.components, shares, peak_bytes: memory.peak_bytes, fits, host_bytes_per_node: memory.host_bytes_per_node },
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
