/**
 * `brim plan [--gpu a,b,c] -- <command>`: runs the job a few steps under the attach at its own
 * config and at a second micro-batch (the batch knob found as `brim tune` finds it), captures what
 * its steps held, and plans it for each GPU side by side (src/plan/script.ts).
 * @module
 */
import { rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { editConfigText, writeFileAtomic, type ConfigDocument } from "../configs/index.ts";
import { openDevices, type Devices } from "../devices/index.ts";
import { BrimError, InputError, UsageError } from "../errors/index.ts";
import { guardRun, type GuardResult } from "../guard/guard.ts";
import { DEFAULT_SCRIPT_GPUS, planScript, pointFromEvents, type MeasuredPoint, type ScriptPlan } from "../plan/script.ts";
import { PRECISIONS, type Optimizer, type Precision } from "../plan/spec.ts";
import { newRecordId, RunStore, storeRoot } from "../record/store.ts";
import {
  codeKnobEnv,
  codeKnobs,
  codePlace,
  configBaseline,
  configEditsByFile,
  configFilesInCommand,
  describeBindings,
  fillTemplate,
  MICRO_BATCH_KNOB,
  ACCUMULATION_KNOB,
  parseBinding,
  resolveBindings,
  loadersOf,
  rewriteArgv,
  scriptLiteral,
  type CodeKnob,
  type KnobBinding,
  type LoaderSeen,
} from "../tune/tune.ts";
import type { Output } from "./output.ts";

/** What `brim plan -- <command>` is asked. */
export interface PlanScriptOptions {
  gpu?: string | undefined;
  precision?: Precision | undefined;
  margin?: number | undefined;
  steps?: number | undefined;
  measureBatch?: number | undefined;
  store?: string | undefined;
  /** seconds a measuring run may take, start-up included */
  timeLimitS?: number | undefined;
  bindings?: KnobBinding[] | undefined;
  /** knob values set in both measuring runs (e.g. a stage) */
  knobs?: Record<string, number | string> | undefined;
  cwd?: string | undefined;
  /** --optimizer: planned over the one the job was seen to create */
  optimizer?: Optimizer | undefined;
}

const TAIL_LINES = 15;
type Knobs = Record<string, number | string | boolean>;

/**
 * Measures the job (see the module doc) and returns the side-by-side plan.
 *
 * @example
 * ```ts
 * const p = await planScriptCommand(["python", "train.py", "--config", "config.yaml"], { gpu: "t4,a100-80gb,h100-sxm" }, out);
 * ```
 */
export async function planScriptCommand(command: string[], options: PlanScriptOptions, out: Output, devices?: Devices): Promise<ScriptPlan> {
  if (command.length === 0) throw new UsageError("brim plan needs a model file or the job's command after --, e.g. brim plan -- python train.py");
  const gpus = (options.gpu ?? DEFAULT_SCRIPT_GPUS.join(",")).split(",").map((g) => g.trim());
  if (gpus.some((g) => g === ""))
    throw new UsageError(`--gpu: an empty name in ${JSON.stringify(options.gpu)}; separate GPU ids with commas, e.g. t4,a100-80gb,h100-sxm`);
  const cwd = options.cwd ?? process.cwd();
  const machine = devices ?? openDevices();
  const store = new RunStore(storeRoot(options.store, process.env, cwd));
  const resolved = await resolveBindings(command, cwd, options.bindings ?? []);
  const { documents, notes } = resolved;
  const bindings: KnobBinding[] = [...resolved.bindings];
  out.stderr(`brim: ${describeBindings(bindings, documents, cwd)}\n`);
  const baseline: Knobs = configBaseline(bindings, documents);
  // a batch size written as a literal in the script (a loop with no DataLoader): the runs vary it there, in memory
  const bindCode = (code: CodeKnob | undefined): void => {
    if (code === undefined || bindings.some((b) => b.knob === code.knob)) return;
    bindings.push(code);
    baseline[code.knob] = code.value;
    out.stderr(
      `brim: ${code.knob}=${String(code.value)} is written in the code at ${codePlace(code, cwd)}: the measuring runs vary it there, in memory (the file is not touched)\n`,
    );
  };
  bindCode(codeKnobs(scriptLiteral(command, cwd), baseline).find((code) => code.knob === MICRO_BATCH_KNOB));
  const fixed: Knobs = { ...(options.knobs ?? {}) };
  // On a host with no GPU the measuring runs go in fp32 and 16-bit is modelled from them: CPU autocast
  // keeps other bytes than CUDA's (the CNN-LSTM 0.40x of fp32 where the H100 keeps 0.55x, so a bf16 plan
  // measured on the CPU came out up to 32 % under) and some layers do not run under it at all
  // (bench/results/plan-script-h100.json: 3 pairs under instead of 13, every largest micro-batch fits).
  // A precision given with --knob is measured as asked.
  const asked = baseline.precision;
  const cpuHost = machine.inventory().backend === "cpu";
  const measuredIn: Knobs =
    cpuHost && fixed.precision === undefined && bindings.some((b) => b.knob === "precision") && asked !== undefined && /16|half/i.test(String(asked))
      ? { precision: "fp32" }
      : {};
  if (measuredIn.precision !== undefined)
    notes.push(
      `measured in fp32 on this host with no GPU, your ${String(asked)} modelled from it (CPU autocast keeps other bytes than CUDA's; --knob precision=${String(asked)} measures it as it is)`,
    );
  const first: Knobs = { ...fixed, ...measuredIn };
  if (options.measureBatch !== undefined) first[MICRO_BATCH_KNOB] = options.measureBatch;
  else if (baseline[MICRO_BATCH_KNOB] === undefined && bindings.some((b) => b.knob === MICRO_BATCH_KNOB && b.via === "template"))
    throw new UsageError("the command uses {batch_size} and brim plan has no value for it: give your micro-batch with --measure-batch <n>");
  const steps = options.steps ?? 3;
  const session = newRecordId();
  const a = await measure(command, cwd, bindings, documents, first, steps, session, 0, options, out, machine, store, baseline[MICRO_BATCH_KNOB]);
  const points: MeasuredPoint[] = [a.point];
  const micro = a.point.micro_batch;
  // a DataLoader whose line writes its batch size as a literal: the second run varies it there
  bindCode(codeKnobs(a.loaders, baseline).find((code) => code.knob === MICRO_BATCH_KNOB && code.value === micro));
  if (bindings.some((b) => b.knob === MICRO_BATCH_KNOB)) {
    const other = micro >= 2 ? Math.floor(micro / 2) : 2;
    const b = await measure(
      command,
      cwd,
      bindings,
      documents,
      { ...fixed, ...measuredIn, [MICRO_BATCH_KNOB]: other },
      steps,
      session,
      1,
      options,
      out,
      machine,
      store,
      baseline[MICRO_BATCH_KNOB],
    );
    if (b.point.micro_batch !== micro) points.push(b.point);
    else notes.push(`the job ran micro-batch ${micro} both times: the ${MICRO_BATCH_KNOB} knob did not reach its DataLoader`);
  } else {
    notes.push(`no ${MICRO_BATCH_KNOB} knob found on the command line or in a config file it names: measured at the job's own micro-batch only`);
  }
  const baselineAcc = baseline[ACCUMULATION_KNOB];
  const accumulation = typeof baselineAcc === "number" && baselineAcc >= 1 ? baselineAcc : (a.result.summary.accumulation ?? 1);
  // a precision given with --knob is the one the measuring runs ran in: it wins over the config file's
  const precision =
    fixed.precision !== undefined
      ? precisionOf(options.precision, fixed.precision, "--knob precision", a.point)
      : precisionOf(options.precision, baseline.precision, "the config's precision", a.point);
  return planScript(points, a.params, a.optimizers, {
    command,
    gpus,
    yours: { micro_batch: micro, accumulation: Math.max(1, Math.round(accumulation)), precision: precision.value, precision_from: precision.from },
    margin: options.margin,
    notes: [...notes, ...a.cudnnNotes],
    convolutions: a.convolutions,
    optimizer: options.optimizer,
  });
}

function precisionOf(
  flag: Precision | undefined,
  configured: number | string | boolean | undefined,
  configuredFrom: string,
  point: MeasuredPoint,
): { value: Precision; from: string } {
  if (flag !== undefined) return { value: flag, from: "--precision" };
  if (configured !== undefined) {
    const text = String(configured).toLowerCase();
    const value: Precision | undefined = (PRECISIONS as readonly string[]).includes(text)
      ? (text as Precision)
      : /bf16.*mixed|^bf16$|bfloat16/.test(text) && !text.includes("true")
        ? "bf16-mixed"
        : /16.*mixed|^16$|fp16|float16|half/.test(text)
          ? "fp16-mixed"
          : /^(32|fp32|32-true|float32)$/.test(text)
            ? "fp32"
            : undefined;
    if (value !== undefined) return { value, from: `${configuredFrom}: ${String(configured)}` };
  }
  if (point.autocast?.includes("bfloat16") === true) return { value: "bf16-mixed", from: "autocast seen in the measuring run" };
  if (point.autocast?.includes("float16") === true) return { value: "fp16-mixed", from: "autocast seen in the measuring run" };
  return { value: "fp32", from: "the measuring run (a script that autocasts only on CUDA shows fp32 on a CPU: give --precision)" };
}

interface Measured {
  point: MeasuredPoint;
  params: Parameters<typeof planScript>[1];
  optimizers: string[];
  result: GuardResult;
  cudnnNotes: string[];
  /** the model has convolution layers (cuDNN's) */
  convolutions: boolean;
  /** the DataLoaders the run built, as the attach saw them */
  loaders: LoaderSeen[];
}

async function measure(
  command: string[],
  cwd: string,
  bindings: readonly KnobBinding[],
  documents: ReadonlyMap<string, ConfigDocument>,
  knobs: Knobs,
  steps: number,
  session: string,
  index: number,
  options: PlanScriptOptions,
  out: Output,
  devices: Devices,
  store: RunStore,
  baselineBatch: number | string | boolean | undefined,
): Promise<Measured> {
  const copies: string[] = [];
  try {
    const filled = [...command];
    for (const [file, edits] of configEditsByFile(bindings, knobs)) {
      const document = documents.get(file);
      const places = configFilesInCommand(command, cwd).filter((entry) => entry.path === file);
      if (document === undefined || places.length === 0) continue;
      const copy = join(dirname(file), `.${basename(file)}.brim-plan-${session}-${index}${file.slice(file.lastIndexOf("."))}`);
      await writeFileAtomic(copy, editConfigText(document, edits).text);
      copies.push(copy);
      for (const place of places) filled[place.index] = (filled[place.index] ?? "").replace(place.arg, copy);
    }
    const argv = bindings.filter((b): b is Extract<KnobBinding, { via: "argv" }> => b.via === "argv");
    const final = rewriteArgv(fillTemplate(filled, knobs), argv, knobs);
    const others = Object.entries(knobs).filter(([name]) => name !== MICRO_BATCH_KNOB);
    const at =
      (knobs[MICRO_BATCH_KNOB] !== undefined ? `at micro-batch ${String(knobs[MICRO_BATCH_KNOB])}` : "at its own config") +
      (others.length > 0 ? ` with ${others.map(([k, v]) => `${k}=${String(v)}`).join(", ")}` : "");
    out.stderr(`brim: measuring the job ${at} for ${steps} steps: ${final.join(" ")}\n`);
    const result = await guardRun(
      {
        command: final,
        cwd,
        capBytes: null,
        shrink: false,
        knobs,
        stepBudget: steps,
        warmupSteps: 1,
        hz: 10,
        env: { BRIM_FOOTPRINT: "1", ...codeKnobEnv(bindings, knobs) },
        hungAfterS: 600,
        timeLimitS: options.timeLimitS ?? 900,
        killGraceS: 10,
        forwardSignals: true,
        removeOnLoss: copies,
      },
      { devices, store },
    );
    const end = result.job.end;
    if (end.cause !== "ok") {
      const tail = result.job.tail.slice(-TAIL_LINES);
      if (tail.length > 0)
        out.stderr(
          `brim: the last lines of the measuring run's output (all of it in ${store.root}/runs/${result.meta.id}/output.log):\n${tail.map((l) => `  | ${l}`).join("\n")}\n`,
        );
      throw new BrimError(
        "E_JOB_START",
        `the measuring run ${result.meta.id} ${at} did not end ok (${end.cause}: ${end.message.replace(/the last lines of its output are above and in output\.log/, "its last lines are printed above")}); nothing is planned`,
      );
    }
    const events = result.timeline.events.filter((e) => e.event === "footprint").map((e) => e.details);
    const knob = knobs[MICRO_BATCH_KNOB] ?? baselineBatch;
    const micro = typeof knob === "number" ? knob : (result.summary.micro_batch ?? null);
    // a JAX loop steps (the attach counts its jitted calls) but runs no autograd for the footprint to see
    if (events.length === 0 && result.timeline.steps.some((step) => step.trigger === "jax"))
      throw new InputError(
        `run ${result.meta.id} is a JAX job: brim plan -- <command> measures what PyTorch's autograd holds, and JAX's steps have none of it; plan the model from a spec instead (brim plan model.yaml, docs/model-spec.md)`,
      );
    const { point, params, optimizers } = pointFromEvents(events, result.meta.id, micro, result.summary.peak_tree_rss_bytes);
    const cudnn = result.timeline.events.flatMap((e) => {
      const kinds = (e.details as { params?: { cudnn_modules?: unknown } } | undefined)?.params?.cudnn_modules;
      return e.event === "footprint" && Array.isArray(kinds) ? kinds.map(String) : [];
    });
    // recurrent layers with a cuDNN rule are planned as cuDNN runs them (src/plan/cudnn.ts); the others are not
    const unmodelled = [...new Set(cudnn)].filter(
      (k) => !((point.recurrent !== null && /^(LSTM|GRU)$/.test(k)) || (point.conv_workspace_bytes !== null && k === "Conv1d")),
    );
    const cudnnNotes =
      unmodelled.length > 0
        ? [
            `the model has ${unmodelled.join(", ")} layers: on a GPU cuDNN adds workspaces a CPU run cannot see; the planned peak leaves them out, and a plan for such a model may be under by that much (docs/plan-script.md: the cnn-lstm example on the H100)`,
            ...(point.recurrent === null && unmodelled.some((k) => /LSTM|GRU|RNN/.test(k))
              ? [
                  "the CPU's recurrent kernels save more for backward than cuDNN's (about 2.6× for the bundled LSTM, docs/plan-script.md): for these layers the plan over-states the activations, so its largest micro-batch errs low",
                ]
              : []),
          ]
        : [];
    const convolutions = point.conv_workspace_bytes !== null || cudnn.some((k) => k.startsWith("Conv"));
    return { point, params, optimizers, result, cudnnNotes, convolutions, loaders: loadersOf(result.timeline.events) };
  } finally {
    for (const copy of copies) rmSync(copy, { force: true });
  }
}

/** What `brim plan [--knob k=a,b] [--bind ...] -- <command>` is asked. */
export interface PlanScriptStagesOptions extends Omit<PlanScriptOptions, "bindings" | "knobs"> {
  knob?: Record<string, (number | string | boolean)[]> | undefined;
  bind?: string[] | undefined;
}

/** `brim plan --knob stage=a,b -- <command>`: one script plan per value of the knob given several values. */
export interface StagedScriptPlans {
  schema: "brim.plan-script-stages/v1";
  /** the knob planned per value; null when every knob has one value (one plan) */
  knob: string | null;
  plans: { value: number | string | boolean | null; plan: ScriptPlan }[];
}

/**
 * Plans a script once, or once per value of the one knob given several values (a stage, a curriculum
 * step): both measuring runs of each plan run with that value.
 *
 * @example
 * ```ts
 * const staged = await planScriptStages(["python", "train.py", "--config", "c.yaml"], { knob: { stage: ["short", "long"] } }, out);
 * ```
 */
export async function planScriptStages(command: string[], options: PlanScriptStagesOptions, out: Output): Promise<StagedScriptPlans> {
  const knobs = options.knob ?? {};
  const several = Object.entries(knobs).filter(([, values]) => values.length > 1);
  if (several.length > 1) throw new UsageError(`--knob: brim plan plans per value of one knob; ${several.map(([k]) => k).join(" and ")} both have several`);
  const fixed: Record<string, number | string> = {};
  for (const [name, values] of Object.entries(knobs))
    if (values.length === 1) fixed[name] = typeof values[0] === "boolean" ? String(values[0]) : (values[0] as number | string);
  const cwd = process.cwd();
  const bindings = (options.bind ?? []).map((text) => parseBinding(text, cwd));
  const base = { ...options, bindings };
  const per = several[0];
  if (per === undefined)
    return {
      schema: "brim.plan-script-stages/v1",
      knob: null,
      plans: [{ value: null, plan: await planScriptCommand(command, { ...base, knobs: fixed }, out) }],
    };
  const [name, values] = per;
  const plans: StagedScriptPlans["plans"] = [];
  for (const value of values) {
    out.stderr(`brim: ${name}=${String(value)}\n`);
    plans.push({
      value,
      plan: await planScriptCommand(command, { ...base, knobs: { ...fixed, [name]: typeof value === "boolean" ? String(value) : value } }, out),
    });
  }
  return { schema: "brim.plan-script-stages/v1", knob: name, plans };
}
