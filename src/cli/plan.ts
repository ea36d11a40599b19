import { readFile } from "node:fs/promises";
import { Option, type Command } from "commander";
import { parseByteSize } from "../bytes.ts";
import { BrimError, UsageError } from "../errors/index.ts";
import { GPU_CATALOG } from "../plan/catalog.ts";
import { OFFLOADS, type Offload, type Sharding } from "../plan/memory.ts";
import { parseShardings, planStrategies, type StrategyRow } from "../plan/strategies.ts";
import { parseModelFile } from "../plan/model-file.ts";
import { plan, type PlanReport, type PlanTrial } from "../plan/planner.ts";
import { openDevices, type Devices } from "../devices/index.ts";
import { knobList } from "./run.ts";
import { measuredTrial, planMeasuredJob } from "../plan/measure/measured.ts";
import { planScriptStages } from "../plan/measure/script.ts";
import { OPTIMIZERS, PRECISIONS, type Optimizer, type Precision } from "../plan/spec.ts";
import type { Output } from "./output.ts";
import { renderMeasuredJobPlan, renderPlanComparison, renderPlanMarkdown, renderPlanText, renderStrategyComparison, renderGpuList } from "./render-plan.ts";
import { renderScriptPlan } from "./render-plan-script.ts";

/** Options of `brim plan` as the command line gives them. */
export interface PlanCommandOptions {
  gpu?: string;
  gpuMemory?: number;
  precision?: Precision;
  optimizer?: Optimizer;
  batch?: number;
  effectiveBatch?: number;
  seqLen?: number;
  checkpointing?: boolean;
  /** GPUs per node */
  gpus?: number;
  nodes?: number;
  sharding?: Sharding;
  offload?: Offload;
  cap?: number;
  margin?: number;
  json?: boolean;
  markdown?: boolean;
  listGpus?: boolean;
  measure?: boolean;
  steps?: number;
  measureBatch?: number;
  store?: string;
  timeLimit?: number;
  knob?: Record<string, (number | string | boolean)[]>;
  bind?: string[];
}

/**
 * `brim plan`: reads the model file and returns the plan. Printing is {@link printPlan}'s.
 *
 * @example
 * ```ts
 * const report = await planCommand("examples/nbeats/model.yaml", { gpu: "rtx-3060" });
 * ```
 */
export async function planCommand(file: string, options: PlanCommandOptions, trial?: PlanTrial): Promise<PlanReport> {
  return plan(await readModel(file), planOptions(options, trial));
}

async function readModel(file: string): Promise<ReturnType<typeof parseModelFile>> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "is a directory" : ((error as Error).message ?? String(error));
    throw new BrimError("E_INPUT", `cannot read model file ${file}: ${why}`, { cause: error });
  }
  return parseModelFile(text, file);
}

function planOptions(options: PlanCommandOptions, trial?: PlanTrial): Parameters<typeof plan>[1] {
  return {
    gpu: options.gpu,
    gpuMemoryBytes: options.gpuMemory,
    precision: options.precision,
    optimizer: options.optimizer,
    batch: options.batch,
    effectiveBatch: options.effectiveBatch,
    seqLen: options.seqLen,
    checkpointing: options.checkpointing,
    gpus: options.gpus,
    nodes: options.nodes,
    sharding: options.sharding,
    offload: options.offload,
    capBytes: options.cap,
    margin: options.margin,
    trial,
  };
}

/**
 * `brim plan <model> --sharding ddp,zero2,zero3,fsdp` (or `all`): the job planned under each
 * strategy, for a side-by-side choice.
 *
 * @example
 * ```ts
 * const rows = await planCommandStrategies("config.json", { gpu: "h100-sxm", gpus: 8 }, ["ddp", "zero3", "fsdp"]);
 * ```
 */
export async function planCommandStrategies(file: string, options: PlanCommandOptions, shardings: readonly Sharding[]): Promise<StrategyRow[]> {
  return planStrategies(await readModel(file), planOptions(options), shardings);
}

/**
 * `brim plan --gpu t4,p100`: the same job planned for each GPU named, for a side-by-side choice.
 *
 * @example
 * ```ts
 * const reports = await planCommandMany("examples/embedder/model.yaml", { gpu: "t4,p100" });
 * ```
 */
export async function planCommandMany(file: string, options: PlanCommandOptions): Promise<PlanReport[]> {
  const gpus = (options.gpu ?? "").split(",").map((g) => g.trim());
  if (gpus.some((g) => g === "")) throw new UsageError(`--gpu: an empty name in ${JSON.stringify(options.gpu)}; separate GPU ids with commas, e.g. t4,p100`);
  const reports: PlanReport[] = [];
  for (const gpu of gpus) reports.push(await planCommand(file, { ...options, gpu }));
  return reports;
}

/**
 * `brim plan --measure -- <command>`: plans, runs the job briefly under brim's guard at the plan's
 * micro-batch and precision (knobs batch_size, precision, accumulation=1), reads the measured peak
 * (GPU memory, or RAM when the job ran on the CPU) and returns the plan re-anchored on it.
 *
 * @example
 * ```ts
 * const report = await planMeasured("examples/nbeats/model.yaml", { gpuMemory: 8 * 2 ** 30, batch: 64 }, ["python3", "examples/nbeats/train.py"], out);
 * report.trial?.peak_bytes;
 * ```
 */
export async function planMeasured(file: string, options: PlanCommandOptions, command: string[], out: Output, devices?: Devices): Promise<PlanReport> {
  if (command.length === 0) throw new UsageError("--measure needs the job's command after --, e.g. brim plan model.yaml --gpu t4 --measure -- python train.py");
  const first = await planCommand(file, options);
  const machine = devices ?? openDevices();
  if (machine.inventory().backend === "cpu" && options.gpu !== undefined) {
    throw new UsageError(
      `this machine has no GPU: --measure would measure the job's RAM, not ${first.gpu.name}'s memory; measure on the GPU host, or plan against RAM with --gpu-memory <size>`,
    );
  }
  const trial = await measuredTrial(
    command,
    { microBatch: options.measureBatch ?? first.setup.micro_batch, precision: first.setup.precision, steps: options.steps ?? 6, store: options.store },
    (text) => out.stderr(text),
    machine,
  );
  return planCommand(file, { ...options, batch: options.batch ?? first.setup.micro_batch }, trial);
}

/** Prints a plan as text, JSON or Markdown. */
export function printPlan(report: PlanReport, options: Pick<PlanCommandOptions, "json" | "markdown">, out: Output): void {
  if (options.json === true) out.stdout(JSON.stringify(report, null, 2) + "\n");
  else if (options.markdown === true) out.stdout(renderPlanMarkdown(report));
  else out.stdout(renderPlanText(report));
}

/** Prints plans for several GPUs side by side (JSON: the array of plans). */
export function printPlanComparison(reports: PlanReport[], options: Pick<PlanCommandOptions, "json" | "markdown">, out: Output): void {
  if (options.json === true) out.stdout(JSON.stringify(reports, null, 2) + "\n");
  else out.stdout(renderPlanComparison(reports, options.markdown === true ? "markdown" : "text"));
}

function positiveInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1)
      throw new UsageError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
    return n;
  };
}

function choice<T extends string>(flag: string, allowed: readonly T[]) {
  return (value: string): T => {
    if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${allowed.join(", ")}; got ${JSON.stringify(value)}`);
    return value as T;
  };
}

function gib(flag: string) {
  return (value: string): number => {
    const bytes = /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) * 2 ** 30 : parseByteSize(value, flag);
    if (!(bytes > 0)) throw new UsageError(`${flag} must be more than 0, got ${JSON.stringify(value)}`);
    return bytes;
  };
}

function fraction(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n < 0 || n >= 1)
      throw new UsageError(`${flag} must be a fraction from 0 up to (not including) 1, got ${JSON.stringify(value)}`);
    return n;
  };
}

const EXAMPLES = `
Examples:
  $ brim plan -- python train.py --config config.yaml              # your script, unchanged: T4, RTX 4090, A100 80GB, H100 side by side
  $ brim plan --gpu t4,p100-16gb,a100-80gb -- python train.py --batch-size 32
  $ brim plan --knob stage=short,long -- python train.py --config config.yaml   # one plan per stage
  $ brim plan --bind batch_size=conf/data.toml:loader.bs -- python train.py
  $ brim plan examples/nbeats/model.yaml --gpu rtx-3060             # a model spec: no run at all
  $ brim plan examples/embedder/model.yaml --gpu t4,p100            # which Kaggle GPU, side by side
  $ brim plan config.json --gpu a100-80gb --precision bf16-mixed --seq-len 2048 --checkpointing
  $ brim plan config.json --gpu h100-sxm --gpus 8 --sharding fsdp --optimizer adamw --json
  $ brim plan config.json --gpu h100-sxm --gpus 8 --sharding ddp,zero2,zero3,fsdp --precision bf16-mixed   # which strategy fits 8×H100
  $ brim plan config.json --gpu h100-sxm --gpus 8 --nodes 4 --sharding hybrid      # HYBRID_SHARD: shard in a node, replicate over 4
  $ brim plan config.json --gpu a100-80gb --gpus 8 --sharding zero3 --offload params   # parameters and optimizer in host RAM
  $ brim plan config.json --gpu rtx-4090 --sharding zero2 --offload optimizer      # ZeRO-Offload on one GPU: host RAM per node
  $ brim plan model.yaml --gpu-memory 24 --cap 20GiB --margin 0.05 --markdown > PLAN.md
  $ brim plan examples/nbeats/model.yaml --gpu h100 --measure -- python examples/nbeats/train.py --config examples/nbeats/config.yaml
  $ brim plan --measure --measure-batch 64 -- python train.py --batch-size {batch_size}   # the job's measured peak against this machine

-- <command>: brim runs your job for a few steps (--steps, default 3) at its own config and at half
its micro-batch (the batch_size knob found in its flags or the config file it names, as brim tune
finds it; {batch_size} templates filled), on this machine's GPU or CPU, and counts what a training
step holds: parameters, gradients, optimizer state, the bytes autograd saves per forward, the batch.
The fixed and per-sample parts are fitted from the two runs and planned for each --gpu: the largest
micro-batch per precision, what your config uses of each card, and the micro-batch × accumulation
that keeps your effective batch. Every figure says whether it was measured, modelled or calibrated;
GPU-only terms (CUDA context, cuBLAS workspace, allocator slack) a CPU run cannot see are added from
the H100 calibration or named as defaults. A failed measuring run prints its last lines.

<model> is one of:
  a model spec (YAML/JSON) naming a built-in family: mlp, nbeats, lstm, gru, cnn1d-lstm,
    transformer-encoder (LoRA, mixture of experts), actor-critic — see docs/model-spec.md;
  a Hugging Face config.json (bert, roberta, gpt2, llama, mistral, qwen2);
  a model profile written by the Python SDK: brim.torch.profile(model, batch, loss_fn, path).

The plan: memory by component at the micro-batch in force, the largest micro-batch whose
predicted peak stays under cap × (1 - margin), and ranked ways (micro-batch × accumulation,
precision, checkpointing) to reach the effective batch. Numbers in the plan that are not
measured yet are listed as defaults, and the GPU calibration a plan uses (if any) is named
with the GPU, driver, CUDA, torch and cuDNN it was measured with (--json: calibration, assumptions).
`;

/**
 * Declares `brim plan` on a commander program.
 *
 * @example
 * ```ts
 * registerPlan(program, output);
 * ```
 */
export function registerPlan(program: Command, out: Output): void {
  program
    .command("plan")
    .summary("what fits on which GPU: brim plan -- python train.py, or a model spec")
    .description("Plan the memory of a training job on GPUs, present or not: what fits, the largest safe micro-batch, and what your config should say.")
    .usage("[options] -- <command...>   |   brim plan <model> [options]")
    .argument("[model]", "model spec (YAML/JSON), Hugging Face config.json, or SDK model profile; none with -- <command>")
    .argument("[command...]", "the training command, after --")
    .option(
      "--gpu <id[,id...]>",
      "GPU from the catalog, e.g. rtx-4090, a100-80gb, h100-sxm (see --list-gpus); several, comma-separated, plan side by side (-- <command>: default t4,rtx-4090,a100-80gb,h100-sxm)",
    )
    .option("--gpu-memory <GiB>", "memory of any card, in GiB or with a unit (24, 22.5GiB)", gib("--gpu-memory"))
    .addOption(new Option("--precision <p>", "training precision").choices(PRECISIONS).argParser(choice("--precision", PRECISIONS)))
    .addOption(new Option("--optimizer <name>", "optimizer (default adamw, or the spec's)").choices(OPTIMIZERS).argParser(choice("--optimizer", OPTIMIZERS)))
    .option("--batch <n>", "micro-batch per GPU (default: the spec's, else the largest that fits)", positiveInt("--batch"))
    .option("--effective-batch <n>", "samples per optimizer step over all GPUs and accumulation", positiveInt("--effective-batch"))
    .option("--seq-len <n>", "sequence length / tokens per input", positiveInt("--seq-len"))
    .option("--checkpointing", "activation checkpointing per block")
    .option("--gpus <n>", "data-parallel GPUs (per node with --nodes)", positiveInt("--gpus"))
    .option("--nodes <m>", "nodes of --gpus GPUs each: the ranks are gpus × nodes (default 1)", positiveInt("--nodes"))
    .option(
      "--sharding <s[,s...]|all>",
      "how states are split over the GPUs: none, ddp (default), zero1, zero2, zero3, fsdp (FULL_SHARD), shard-grad-op (SHARD_GRAD_OP), hybrid (HYBRID_SHARD: shard in a node, replicate across nodes); several, comma-separated, or all: side by side",
      (v: string) => (parseShardings(v), v),
    )
    .option(
      "--offload <what>",
      "CPU offload: none (default), optimizer (ZeRO-Offload: optimizer state, fp32 master and gradients) or params (ZeRO-3 / FSDP CPUOffload: the parameters too)",
      choice("--offload", OFFLOADS),
    )
    .option("--cap <size>", "memory cap below the card's size, e.g. 12GiB", gib("--cap"))
    .option("--margin <fraction>", "share of the cap kept free", fraction("--margin"), 0.1)
    .option("--json", "print the plan as JSON")
    .option("--markdown", "print the plan as Markdown")
    .option("--list-gpus", "list the GPU catalog and exit")
    .option("--measure", "run the job briefly (the command after --) at the plan's micro-batch, and re-anchor the plan on its measured peak")
    .option("--measure-batch <n>", "with --measure: the micro-batch to measure (default: the plan's)", positiveInt("--measure-batch"))
    .option("--store <dir>", "run store folder for the measuring runs (default .brim, or $BRIM_STORE)")
    .option("--steps <n>", "steps of each measuring run (default 3 for -- <command>, 6 for --measure)", positiveInt("--steps"))
    .option(
      "--knob <name=v1,v2>",
      "with -- <command>: a knob's value for the measuring runs; several values: one plan per value (a stage); repeatable",
      knobList,
    )
    .option(
      "--bind <knob=file:key|knob=env>",
      "with -- <command>: where a knob lives when brim cannot find it, e.g. batch_size=conf.yaml:loader.bs; repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option("--time-limit <s>", "with -- <command>: seconds each measuring run may take (default 900)", positiveInt("--time-limit"))
    .addHelpText("after", EXAMPLES)
    .action(async (model: string | undefined, command: string[], options: PlanCommandOptions, cmd: Command) => {
      if (options.listGpus === true) {
        out.stdout(options.json === true ? `${JSON.stringify(GPU_CATALOG, null, 2)}\n` : renderGpuList());
        return;
      }
      // `brim plan --measure -- python train.py`: everything after -- is the command, no model spec
      // (commander keeps the words it parsed in rawArgs without typing it)
      const raw = (cmd.parent as unknown as { rawArgs?: string[] } | null)?.rawArgs ?? [];
      const dashes = raw.indexOf("--");
      if (options.measure === true && model !== undefined && dashes >= 0 && !raw.slice(0, dashes).includes(model)) {
        if (options.json === true && options.markdown === true) throw new UsageError("choose one of --json and --markdown");
        const measured = await planMeasuredJob(options, [model, ...command], (text) => out.stderr(text));
        out.stdout(options.json === true ? `${JSON.stringify(measured, null, 2)}\n` : renderMeasuredJobPlan(measured));
        return;
      }
      if (model !== undefined && dashes >= 0 && !raw.slice(0, dashes).includes(model)) {
        if (options.json === true && options.markdown === true) throw new UsageError("choose one of --json and --markdown");
        const staged = await planScriptStages([model, ...command], { ...options, timeLimitS: options.timeLimit }, (text) => out.stderr(text));
        if (options.json === true) out.stdout(`${JSON.stringify(staged.knob === null ? staged.plans[0]?.plan : staged, null, 2)}\n`);
        else
          out.stdout(staged.plans.map((p) => (staged.knob === null ? "" : `== ${staged.knob}=${String(p.value)} ==\n`) + renderScriptPlan(p.plan)).join("\n"));
        return;
      }
      if (model === undefined)
        throw new UsageError(
          "brim plan needs the job's command after -- or a model file: brim plan -- python train.py, brim plan <model> --gpu <id> (see brim plan --help)",
        );
      if (options.json === true && options.markdown === true) throw new UsageError("choose one of --json and --markdown");
      if (options.measure !== true && command.length > 0)
        throw new UsageError(`unexpected arguments ${JSON.stringify(command.join(" "))}: a command after -- goes with --measure`);
      // --sharding holds the text as given (a list or all) until --nodes is known
      const rawSharding = options.sharding as string | undefined;
      const shardings = rawSharding === undefined ? undefined : parseShardings(rawSharding, options.nodes ?? 1);
      options.sharding = shardings?.length === 1 && rawSharding?.trim() !== "all" ? shardings[0] : undefined;
      if (options.measure === true) {
        if (options.gpu?.includes(",") === true) throw new UsageError("--measure measures on this machine: name one GPU");
        if (shardings !== undefined && options.sharding === undefined) throw new UsageError("--measure plans one strategy: name one --sharding");
        printPlan(await planMeasured(model, options, command, out), options, out);
      } else if (shardings !== undefined && (shardings.length > 1 || rawSharding?.trim() === "all")) {
        if (options.gpu?.includes(",") === true) throw new UsageError("compare strategies on one GPU, or GPUs under one strategy: not both at once");
        const rows = await planCommandStrategies(model, options, shardings);
        out.stdout(
          options.json === true ? `${JSON.stringify(rows, null, 2)}\n` : renderStrategyComparison(rows, options.markdown === true ? "markdown" : "text"),
        );
      } else if (options.gpu?.includes(",") === true) printPlanComparison(await planCommandMany(model, options), options, out);
      else printPlan(await planCommand(model, options), options, out);
    });
}
