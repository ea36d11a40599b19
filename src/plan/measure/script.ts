/**
 * `brim plan [--gpu a,b,c] -- <command>`: runs the job a few steps under the attach at its own
 * config and at a second micro-batch (the batch knob found as `brim tune` finds it), captures what
 * its steps held, and plans it for each GPU side by side (src/plan/script.ts). Returns the plan; the
 * lines it says on the way go to `say` (the CLI's stderr), the printing is the CLI's.
 *
 * @example
 * ```ts
 * const staged = await planScriptStages(["python", "train.py", "--config", "c.yaml"], {}, (text) => process.stderr.write(text));
 * staged.plans[0]?.plan.gpus;
 * ```
 * @module
 */
import { removeStaleTrialCopies, type ConfigDocument } from "../../configs/index.ts";
import { openDevices, type Devices } from "../../devices/index.ts";
import { InputError, UsageError } from "../../errors/index.ts";
import type { GuardResult } from "../../guard/guard.ts";
import {
  ACCUMULATION_KNOB,
  codeKnobs,
  codePlace,
  configBaseline,
  describeBindings,
  loadersOf,
  MICRO_BATCH_KNOB,
  parseBinding,
  resolveBindings,
  scriptLiteral,
  type CodeKnob,
  type KnobBinding,
  type LoaderSeen,
} from "../../knobs/index.ts";
import { newRecordId, RunStore, storeRoot } from "../../record/store.ts";
import { DEFAULT_SCRIPT_GPUS, planScript, pointFromEvents, type MeasuredPoint, type ScriptPlan } from "../script.ts";
import { PRECISIONS, type Optimizer, type Precision } from "../spec.ts";
import { measuringRun, type MeasureDeps } from "./run.ts";

/**
 * What `brim plan -- <command>` is asked.
 *
 * @example
 * ```ts
 * const options: PlanScriptOptions = { gpu: "t4,h100-sxm", steps: 3, measureBatch: 16 };
 * ```
 */
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

type Knobs = Record<string, number | string | boolean>;

/** What the measuring runs of one plan share. */
interface ScriptSession {
  command: string[];
  cwd: string;
  bindings: readonly KnobBinding[];
  documents: ReadonlyMap<string, ConfigDocument>;
  steps: number;
  /** the plan's session id: its config copies carry it (configs/trial-copies.ts) */
  id: string;
  timeLimitS: number;
  /** the job's own micro-batch, where its config or code says it */
  baselineBatch: number | string | boolean | undefined;
  deps: MeasureDeps;
}

/**
 * Measures the job (see the module doc) and returns the side-by-side plan; the lines it says go to
 * `say`.
 *
 * @example
 * ```ts
 * const p = await planScriptCommand(["python", "train.py", "--config", "config.yaml"], { gpu: "t4,a100-80gb,h100-sxm" }, (text) => process.stderr.write(text));
 * ```
 */
export async function planScriptCommand(command: string[], options: PlanScriptOptions, say: (text: string) => void, devices?: Devices): Promise<ScriptPlan> {
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
  say(`brim: ${describeBindings(bindings, documents, cwd)}\n`);
  await removeStaleCopies(bindings, store, say);
  const baseline: Knobs = configBaseline(bindings, documents);
  // a batch size written as a literal in the script (a loop with no DataLoader): the runs vary it there, in memory
  const bindCode = (code: CodeKnob | undefined): void => {
    if (code === undefined || bindings.some((b) => b.knob === code.knob)) return;
    bindings.push(code);
    baseline[code.knob] = code.value;
    say(
      `brim: ${code.knob}=${String(code.value)} is written in the code at ${codePlace(code, cwd)}: the measuring runs vary it there, in memory (the file is not touched)\n`,
    );
  };
  bindCode(codeKnobs(scriptLiteral(command, cwd), baseline).find((code) => code.knob === MICRO_BATCH_KNOB));
  const fixed: Knobs = { ...(options.knobs ?? {}) };
  const measuredIn = measuredPrecision(baseline, fixed, bindings, machine, notes);
  const first: Knobs = { ...fixed, ...measuredIn };
  if (options.measureBatch !== undefined) first[MICRO_BATCH_KNOB] = options.measureBatch;
  else if (baseline[MICRO_BATCH_KNOB] === undefined && bindings.some((b) => b.knob === MICRO_BATCH_KNOB && b.via === "template"))
    throw new UsageError("the command uses {batch_size} and brim plan has no value for it: give your micro-batch with --measure-batch <n>");
  const session: ScriptSession = {
    command,
    cwd,
    bindings,
    documents,
    steps: options.steps ?? 3,
    id: newRecordId(),
    timeLimitS: options.timeLimitS ?? 900,
    baselineBatch: baseline[MICRO_BATCH_KNOB],
    deps: { devices: machine, store, say },
  };
  const a = await measure(session, first, 0);
  const points: MeasuredPoint[] = [a.point];
  const micro = a.point.micro_batch;
  // a DataLoader whose line writes its batch size as a literal: the second run varies it there
  bindCode(codeKnobs(a.loaders, baseline).find((code) => code.knob === MICRO_BATCH_KNOB && code.value === micro));
  if (bindings.some((b) => b.knob === MICRO_BATCH_KNOB)) {
    const other = micro >= 2 ? Math.floor(micro / 2) : 2;
    const b = await measure(session, { ...fixed, ...measuredIn, [MICRO_BATCH_KNOB]: other }, 1);
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

/** Removes the config copies a killed tune or plan left beside the bound config files, and says so. */
async function removeStaleCopies(bindings: readonly KnobBinding[], store: RunStore, say: (text: string) => void): Promise<void> {
  for (const file of new Set(bindings.flatMap((b) => (b.via === "config" ? [b.file] : [])))) {
    const removed = await removeStaleTrialCopies(file, store);
    if (removed.length > 0) say(`brim: removed ${removed.length} cop${removed.length === 1 ? "y" : "ies"} of ${file} that an interrupted tune or plan left\n`);
  }
}

/**
 * The precision the measuring runs go in, where it is not the config's: on a host with no GPU they go
 * in fp32 and 16-bit is modelled from them. CPU autocast keeps other bytes than CUDA's (the CNN-LSTM
 * 0.40x of fp32 where the H100 keeps 0.55x, so a bf16 plan measured on the CPU came out up to 32 %
 * under) and some layers do not run under it at all (bench/results/plan-script-h100.json: 3 pairs
 * under instead of 13, every largest micro-batch fits). A precision given with --knob is measured as
 * asked.
 */
function measuredPrecision(baseline: Knobs, fixed: Knobs, bindings: readonly KnobBinding[], machine: Devices, notes: string[]): Knobs {
  const asked = baseline.precision;
  const cpuHost = machine.inventory().backend === "cpu";
  if (!cpuHost || fixed.precision !== undefined || !bindings.some((b) => b.knob === "precision") || asked === undefined || !/16|half/i.test(String(asked)))
    return {};
  notes.push(
    `measured in fp32 on this host with no GPU, your ${String(asked)} modelled from it (CPU autocast keeps other bytes than CUDA's; --knob precision=${String(asked)} measures it as it is)`,
  );
  return { precision: "fp32" };
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

async function measure(session: ScriptSession, knobs: Knobs, index: number): Promise<Measured> {
  const others = Object.entries(knobs).filter(([name]) => name !== MICRO_BATCH_KNOB);
  const at =
    (knobs[MICRO_BATCH_KNOB] !== undefined ? `at micro-batch ${String(knobs[MICRO_BATCH_KNOB])}` : "at its own config") +
    (others.length > 0 ? ` with ${others.map(([k, v]) => `${k}=${String(v)}`).join(", ")}` : "");
  const result = await measuringRun(
    {
      command: session.command,
      cwd: session.cwd,
      bindings: session.bindings,
      documents: session.documents,
      knobs,
      copyTag: { kind: "plan", owner: session.id, index },
      steps: session.steps,
      at,
      consequence: "nothing is planned",
      guard: { hz: 10, hungAfterS: 600, timeLimitS: session.timeLimitS, env: { BRIM_FOOTPRINT: "1" } },
    },
    session.deps,
  );
  const events = result.timeline.events.filter((e) => e.event === "footprint").map((e) => e.details);
  const knob = knobs[MICRO_BATCH_KNOB] ?? session.baselineBatch;
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
  const convolutions = point.conv_workspace_bytes !== null || cudnn.some((k) => k.startsWith("Conv"));
  return { point, params, optimizers, result, cudnnNotes: cudnnNotes(cudnn, point), convolutions, loaders: loadersOf(result.timeline.events) };
}

/** What the plan says of the model's cuDNN layers it does not model (recurrent layers with a cuDNN rule are planned as cuDNN runs them, src/plan/cudnn.ts). */
function cudnnNotes(cudnn: readonly string[], point: MeasuredPoint): string[] {
  const unmodelled = [...new Set(cudnn)].filter(
    (k) => !((point.recurrent !== null && /^(LSTM|GRU)$/.test(k)) || (point.conv_workspace_bytes !== null && k === "Conv1d")),
  );
  if (unmodelled.length === 0) return [];
  return [
    `the model has ${unmodelled.join(", ")} layers: on a GPU cuDNN adds workspaces a CPU run cannot see; the planned peak leaves them out, and a plan for such a model may be under by that much (docs/plan-script.md: the cnn-lstm example on the H100)`,
    ...(point.recurrent === null && unmodelled.some((k) => /LSTM|GRU|RNN/.test(k))
      ? [
          "the CPU's recurrent kernels save more for backward than cuDNN's (about 2.6× for the bundled LSTM, docs/plan-script.md): for these layers the plan over-states the activations, so its largest micro-batch errs low",
        ]
      : []),
  ];
}

/**
 * What `brim plan [--knob k=a,b] [--bind ...] -- <command>` is asked.
 *
 * @example
 * ```ts
 * const options: PlanScriptStagesOptions = { knob: { stage: ["short", "long"] }, bind: ["batch_size=conf.yaml:loader.bs"] };
 * ```
 */
export interface PlanScriptStagesOptions extends Omit<PlanScriptOptions, "bindings" | "knobs"> {
  knob?: Record<string, (number | string | boolean)[]> | undefined;
  bind?: string[] | undefined;
}

/**
 * `brim plan --knob stage=a,b -- <command>`: one script plan per value of the knob given several values.
 *
 * @example
 * ```ts
 * const staged: StagedScriptPlans = { schema: "brim.plan-script-stages/v1", knob: null, plans: [{ value: null, plan }] };
 * ```
 */
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
 * const staged = await planScriptStages(["python", "train.py", "--config", "c.yaml"], { knob: { stage: ["short", "long"] } }, (text) => process.stderr.write(text));
 * ```
 */
export async function planScriptStages(command: string[], options: PlanScriptStagesOptions, say: (text: string) => void): Promise<StagedScriptPlans> {
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
      plans: [{ value: null, plan: await planScriptCommand(command, { ...base, knobs: fixed }, say) }],
    };
  const [name, values] = per;
  const plans: StagedScriptPlans["plans"] = [];
  for (const value of values) {
    say(`brim: ${name}=${String(value)}\n`);
    plans.push({
      value,
      plan: await planScriptCommand(command, { ...base, knobs: { ...fixed, [name]: typeof value === "boolean" ? String(value) : value } }, say),
    });
  }
  return { schema: "brim.plan-script-stages/v1", knob: name, plans };
}
