// `brim plan <model> --json` on an H100, AdamW, micro-batch 1: the plan both engine checks
// (deepspeed-estimators, fsdp-memtracker) hold against the engines' own figures.
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";

const BRIM = join(resolve(import.meta.dirname, "..", ".."), "bin", "brim.js");

/** The parallel setup a check plans; `offload` is left out when absent. */
export interface PlanSetup {
  gpus: string;
  nodes: string;
  sharding: string;
  precision: string;
  offload?: string;
}

/**
 * Runs the built CLI's plan of `file` for one setup; the caller checks the status and parses stdout.
 *
 * @example
 * ```ts
 * planJson("gpt2/config.json", { gpus: "8", nodes: "1", sharding: "fsdp", precision: "bf16-mixed" }).status; // 0
 * ```
 */
export function planJson(file: string, setup: PlanSetup): { status: number | null; stdout: string; stderr: string } {
  const offload = setup.offload === undefined ? [] : ["--offload", setup.offload];
  const args = ["plan", file, "--gpu", "h100-sxm", "--gpus", setup.gpus, "--nodes", setup.nodes, "--sharding", setup.sharding];
  const rest = [...offload, "--precision", setup.precision, "--optimizer", "adamw", "--batch", "1", "--json"];
  const r = spawnSync(process.execPath, [BRIM, ...args, ...rest], { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
