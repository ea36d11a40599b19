import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { planJson } from "./plan-json.ts";
import { scaled } from "../helpers/time.ts";

// `brim plan --sharding fsdp|hybrid` against PyTorch's own FSDPMemTracker (issue 27): FSDP2 (fully_shard on
// every transformer block and the root) on a fake process group of 8 and 16 ranks, and HSDP (HYBRID_SHARD:
// a 2-D mesh of 2 replicas × 8 shards, as 2 nodes of 8 GPUs run it), the whole model in
// FakeTensorMode (a 7B Llama costs no memory), one AdamW step; the tracker's sharded parameters,
// sharded gradients and optimizer state of one rank against the plan's weights, gradients and
// optimizer state, each within 1 %, in fp32 and bf16-mixed (MixedPrecisionPolicy: bf16 compute, fp32
// master weights and reductions). Each model keeps 2 of its blocks: GPT-2's widths on 2 of its 12, the
// Llama 7B's on 2 of its 32 (a block's states are the same whatever their number, and the embeddings and
// head stay whole; the fake forward and backward of every block, 12 times, cost 50 s to minutes of CPU), and
// the plan reads the same config the tracker builds.
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? join(REPO, ".venv", "bin", "python");
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";

const TRACK = String.raw`
import json, sys, warnings
warnings.filterwarnings("ignore")
try:
    import torch, torch.distributed as dist, transformers
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch._subclasses.fake_tensor import FakeTensorMode
except Exception as e:  # torch < 2.6 or no transformers: the test is skipped (exit 3)
    print("unusable: %r" % e)
    sys.exit(3)

models, worlds = json.loads(sys.argv[1]), json.loads(sys.argv[2])
dist.init_process_group("fake", rank=0, world_size=max(n * g for n, g in worlds), store=FakeStore())
out = {"torch": torch.__version__, "models": {}}
for name, path in models:
    config = transformers.AutoConfig.from_pretrained(path)
    rows = {}
    for nodes, gpus in worlds:
        # one node: FULL_SHARD over all ranks; several: HSDP, replicate across nodes, shard within one
        mesh = init_device_mesh("cpu", (gpus,)) if nodes == 1 else init_device_mesh("cpu", (nodes, gpus), mesh_dim_names=("replicate", "shard"))
        for precision in ("fp32", "bf16-mixed"):
            # the mesh is built outside fake mode (DeviceMesh reads its ranks); everything else is fake
            with FakeTensorMode():
                model = transformers.AutoModelForCausalLM.from_config(config)
                mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if precision == "bf16-mixed" else MixedPrecisionPolicy()
                blocks = model.transformer.h if hasattr(model, "transformer") else model.model.layers
                for block in blocks:
                    fully_shard(block, mesh=mesh, mp_policy=mp)
                fully_shard(model, mesh=mesh, mp_policy=mp)
                optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
                ids = torch.randint(0, config.vocab_size, (1, 8))
                tracker = FSDPMemTracker(model, optim)
                tracker.track_inputs((ids,))
                with tracker:
                    model(input_ids=ids, labels=ids).loss.backward()
                    optim.step()
                    snap = {str(k).split(".")[-1]: v for k, v in next(iter(tracker.get_tracker_snapshot().values())).items()}
            rows["%d|%d|%s" % (nodes, gpus, precision)] = {k: snap.get(k, 0) for k in ("SHARDED_PARAM", "SHARDED_GRAD", "OPT")}
    out["models"][name] = rows
print(json.dumps(out))
`;

// whether this Python can run the check is known from the check's own run (exit 3 when an import
// fails): a separate probe would import torch, transformers and FSDP2 once more, seconds of CPU
const UNUSABLE = `skipped: ${PYTHON} lacks torch ≥ 2.6 with FSDP2's FSDPMemTracker, or transformers`;

const root = mkdtempSync(join(tmpdir(), "brim-fsdp-memtracker-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A fixture's config on `layers` of its blocks (`key` counts them), written where both the tracker and the plan read it. */
function onBlocks(fixture: string, key: string, layers: number): string {
  const config = JSON.parse(readFileSync(join(REPO, "test/fixtures/hf", `${fixture}.json`), "utf8")) as Record<string, unknown>;
  expect(config[key]).toBeGreaterThan(layers);
  const file = join(root, `${fixture}-${layers}-blocks.json`);
  writeFileSync(file, JSON.stringify({ ...config, [key]: layers }));
  return file;
}

describe("brim plan's FSDP model states against PyTorch's FSDPMemTracker", () => {
  it(
    "GPT-2 and a 7B Llama's widths, 8 and 16 ranks and 2 nodes × 8 (hybrid), fp32 and bf16-mixed: parameters, gradients and optimizer state per rank within 1 %",
    { timeout: scaled(300_000) },
    (ctx) => {
      const unusable = (why: string): void => {
        if (required) throw new Error(`BRIM_REQUIRE_FRAMEWORKS=1 but ${PYTHON} lacks torch ≥ 2.6 with FSDP2's FSDPMemTracker, or transformers (${why})`);
        console.warn(UNUSABLE);
        ctx.skip();
      };
      if (!existsSync(PYTHON)) return unusable("no such file");
      const models = [
        ["gpt2", onBlocks("gpt2", "n_layer", 2)],
        ["llama-2-7b", onBlocks("llama-2-7b", "num_hidden_layers", 2)],
      ] as const;
      const tracked = spawnSync(
        PYTHON,
        [
          "-c",
          TRACK,
          JSON.stringify(models),
          JSON.stringify([
            [1, 8],
            [1, 16],
            [2, 8],
          ]),
        ],
        {
          encoding: "utf8",
          env: { ...process.env, TRANSFORMERS_OFFLINE: "1", HF_HUB_OFFLINE: "1" },
          timeout: scaled(280_000),
        },
      );
      if (tracked.status === 3) return unusable(tracked.stdout.trim());
      expect(tracked.status, tracked.stderr.slice(-3000)).toBe(0);
      const theirs = JSON.parse(tracked.stdout.trim().split("\n").pop() as string) as {
        torch: string;
        models: Record<string, Record<string, { SHARDED_PARAM: number; SHARDED_GRAD: number; OPT: number }>>;
      };
      for (const [name, file] of models) {
        const rows = Object.entries(theirs.models[name] ?? {});
        expect(rows).toHaveLength(6);
        for (const [key, tracker] of rows) {
          const [nodes, gpus, precision] = key.split("|") as [string, string, string];
          const planned = planJson(file, { gpus, nodes, sharding: nodes === "1" ? "fsdp" : "hybrid", precision });
          expect(planned.status, planned.stderr).toBe(0);
          const c = (JSON.parse(planned.stdout) as { memory: { components: Record<string, number> } }).memory.components;
          const pairs: [string, number | undefined, number][] = [
            ["weights", c["weights"], tracker.SHARDED_PARAM],
            ["gradients", c["gradients"], tracker.SHARDED_GRAD],
            ["optimizer_state", c["optimizer_state"], tracker.OPT],
          ];
          for (const [what, ours, measured] of pairs)
            expect(
              Math.abs((ours ?? 0) / measured - 1),
              `${name} ${nodes} node(s) × ${gpus} ${precision} ${what}: brim ${ours}, FSDPMemTracker (torch ${theirs.torch}) ${measured}`,
            ).toBeLessThanOrEqual(0.01);
        }
      }
    },
  );
});
