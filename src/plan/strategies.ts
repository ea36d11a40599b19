import { formatBytes } from "../bytes.ts";
import { BrimError, UsageError } from "../errors/index.ts";
import { SHARDINGS, type Offload, type Sharding } from "./distributed.ts";
import type { ModelInput } from "./model-file.ts";
import type { PlanOptions, PlanReport } from "./plan-types.ts";
import { plan } from "./planner.ts";

/** One strategy of a side-by-side plan: its figures and a one-line verdict, or why it cannot be planned. */
export interface StrategyRow {
  sharding: Sharding;
  offload: Offload;
  /** predicted per-GPU peak at the micro-batch in force; null when the strategy cannot be planned */
  peak_bytes: number | null;
  micro_batch: number | null;
  /** largest micro-batch whose peak fits the budget (0: not even one sample) */
  max_micro_batch: number | null;
  /** host RAM per node for the offloaded states (0 without offload) */
  host_bytes_per_node: number | null;
  fits: boolean;
  verdict: string;
  /** the strategy's whole plan; null when it cannot be planned */
  plan: PlanReport | null;
}

/**
 * Reads `--sharding`: one strategy, a comma-separated list, or `all` (every strategy for several
 * GPUs: ddp, zero1, zero2, zero3, fsdp, shard-grad-op, and hybrid when there are several nodes).
 *
 * @example
 * ```ts
 * parseShardings("ddp,zero2,zero3,fsdp"); // ["ddp", "zero2", "zero3", "fsdp"]
 * parseShardings("all", 2); // [..., "hybrid"]
 * ```
 */
export function parseShardings(text: string, nodes = 1): Sharding[] {
  if (text.trim() === "all") return SHARDINGS.filter((s) => s !== "none" && (s !== "hybrid" || nodes > 1));
  const names = text.split(",").map((s) => s.trim());
  const out: Sharding[] = [];
  for (const name of names) {
    if (!(SHARDINGS as readonly string[]).includes(name))
      throw new UsageError(`--sharding must be one of ${SHARDINGS.join(", ")}, a comma-separated list of them, or all; got ${JSON.stringify(name)}`);
    if (!out.includes(name as Sharding)) out.push(name as Sharding);
  }
  return out;
}

/**
 * Plans one job under each strategy, for "which strategy fits this model on 8×H100": per
 * strategy the per-GPU peak, the largest micro-batch that fits, the host RAM its offload needs
 * and a one-line verdict. A strategy the setup rules out (parameter offload under DDP, ZeRO on
 * one GPU) is a row saying why; when every one is ruled out the first cause is thrown.
 *
 * @example
 * ```ts
 * const rows = planStrategies(parseModelFile(text, "config.json"), { gpu: "h100-sxm", gpus: 8, precision: "bf16-mixed" }, ["ddp", "zero2", "zero3", "fsdp"]);
 * rows.filter((r) => r.fits).map((r) => r.sharding);
 * ```
 */
export function planStrategies(model: ModelInput, options: PlanOptions, shardings: readonly Sharding[]): StrategyRow[] {
  const rows: StrategyRow[] = [];
  let firstError: BrimError | undefined;
  for (const sharding of shardings) {
    const offload = options.offload ?? "none";
    try {
      rows.push(rowOf(sharding, plan(model, { ...options, sharding })));
    } catch (error) {
      if (!(error instanceof BrimError) || error.code !== "E_INPUT") throw error;
      firstError ??= error;
      const none = { peak_bytes: null, micro_batch: null, max_micro_batch: null, host_bytes_per_node: null, plan: null };
      rows.push({ sharding, offload, ...none, fits: false, verdict: `cannot plan: ${error.message}` });
    }
  }
  if (firstError !== undefined && rows.every((r) => r.plan === null)) throw firstError;
  return rows;
}

function rowOf(sharding: Sharding, report: PlanReport): StrategyRow {
  const host = report.memory.host_bytes_per_node;
  const offload = report.setup.offload;
  const hostText = host > 0 ? `, ${formatBytes(host)} host RAM per node` : "";
  let verdict: string;
  if (report.max_micro_batch === 0) {
    const states = report.memory.components.weights + report.memory.components.gradients + report.memory.components.optimizer_state;
    verdict = `does not fit: not even one sample (model states alone ${formatBytes(states)} of ${formatBytes(report.gpu.budget_bytes)} per GPU)`;
  } else if (!report.memory.fits) {
    verdict = `does not fit at micro-batch ${report.setup.micro_batch}: at most ${report.max_micro_batch.toLocaleString("en-US")} does${hostText}`;
  } else {
    verdict = `fits: micro-batch up to ${report.max_micro_batch.toLocaleString("en-US")}${hostText}`;
  }
  return {
    sharding,
    offload,
    peak_bytes: report.memory.peak_bytes,
    micro_batch: report.setup.micro_batch,
    max_micro_batch: report.max_micro_batch,
    host_bytes_per_node: host,
    fits: report.memory.fits && report.max_micro_batch > 0,
    verdict,
    plan: report,
  };
}
