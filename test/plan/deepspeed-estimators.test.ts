import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

// `brim plan --sharding zero2|zero3` against DeepSpeed's own estimators (issue 27): per-rank model
// states (parameters, gradients, optimizer state) within 1 % of estimate_zero{2,3}_model_states_mem_needs,
// with the parameter count and largest layer DeepSpeed's model_to_params takes from a real model
// (GPT-2 built on CPU) or from the model built on the meta device (a 7B Llama).
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? join(REPO, ".venv", "bin", "python");
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";

const ESTIMATE = String.raw`
import json, sys, warnings
warnings.filterwarnings("ignore")
import torch, transformers
from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
import deepspeed

def counts(model):
    # DeepSpeed's model_to_params, keyed by tensor identity: on the meta device every data_ptr is 0
    total = sum(dict((id(p), p.numel()) for p in model.parameters()).values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return total, largest

out = {"deepspeed": deepspeed.__version__, "models": {}}
for name, path, meta in json.loads(sys.argv[1]):
    config = transformers.AutoConfig.from_pretrained(path)
    if meta:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
    total, largest = counts(model)
    if not meta:
        total = sum(dict((p.data_ptr(), p.numel()) for p in model.parameters()).values())
    rows = {}
    for gpus, nodes in ((8, 1), (8, 2)):
        world = gpus * nodes
        rows[str(world)] = {
            "zero2": estimate_zero2_model_states_mem_needs(total, gpus, nodes, cpu_offload=False)[1],
            "zero3": estimate_zero3_model_states_mem_needs(total, largest, gpus, nodes, cpu_offload=False, cpu_offload_params=False)[1],
        }
    out["models"][name] = {"params": total, "largest_layer": largest, "gpu_bytes": rows}
print(json.dumps(out))
`;

function hasDeepSpeed(): boolean {
  if (!existsSync(PYTHON)) return false;
  return spawnSync(PYTHON, ["-c", "import deepspeed, transformers"], { encoding: "utf8", env: { ...process.env, DS_ACCELERATOR: "cpu" } }).status === 0;
}

const available = hasDeepSpeed();
if (!available && required) throw new Error(`BRIM_REQUIRE_FRAMEWORKS=1 but ${PYTHON} has no deepspeed (bash .ci/venv installs it)`);
if (!available) console.warn(`skipped: ${PYTHON} has no deepspeed (bash .ci/venv installs it)`);

describe.skipIf(!available)("brim plan's ZeRO model states against DeepSpeed's estimators", () => {
  it("GPT-2 (a real model) and a 7B Llama (on the meta device): within 1 % per rank, ZeRO-2 and ZeRO-3, 8 and 16 ranks", { timeout: 300_000 }, () => {
    const models = [
      ["gpt2", join(REPO, "test/fixtures/hf/gpt2.json"), false],
      ["llama-2-7b", join(REPO, "test/fixtures/hf/llama-2-7b.json"), true],
    ] as const;
    const estimated = spawnSync(PYTHON, ["-c", ESTIMATE, JSON.stringify(models)], {
      encoding: "utf8",
      env: { ...process.env, DS_ACCELERATOR: "cpu", TRANSFORMERS_OFFLINE: "1", HF_HUB_OFFLINE: "1" },
      timeout: 240_000,
    });
    expect(estimated.status, estimated.stderr).toBe(0);
    const ds = JSON.parse(estimated.stdout.trim().split("\n").pop() as string) as {
      deepspeed: string;
      models: Record<string, { params: number; largest_layer: number; gpu_bytes: Record<string, { zero2: number; zero3: number }> }>;
    };
    for (const [name, file] of models) {
      const theirs = ds.models[name];
      expect(theirs).toBeDefined();
      for (const [world, row] of Object.entries(theirs?.gpu_bytes ?? {})) {
        for (const sharding of ["zero2", "zero3"] as const) {
          const planned = spawnSync(
            process.execPath,
            [
              BRIM,
              "plan",
              file,
              "--gpu",
              "h100-sxm",
              "--gpus",
              world,
              "--sharding",
              sharding,
              "--precision",
              "bf16-mixed",
              "--optimizer",
              "adamw",
              "--batch",
              "1",
              "--json",
            ],
            { encoding: "utf8" },
          );
          expect(planned.status, planned.stderr).toBe(0);
          const plan = JSON.parse(planned.stdout) as { params: { total: number }; memory: { components: Record<string, number> } };
          expect(plan.params.total).toBe(theirs?.params);
          const c = plan.memory.components;
          const ours = (c.weights ?? 0) + (c.gradients ?? 0) + (c.optimizer_state ?? 0);
          const deepspeed = row[sharding];
          expect(Math.abs(ours / deepspeed - 1), `${name} ${sharding} ×${world}: brim ${ours}, DeepSpeed ${ds.deepspeed} ${deepspeed}`).toBeLessThanOrEqual(
            0.01,
          );
        }
      }
    }
  });
});
