import { describe, expect, it } from "vitest";
import { DEFAULT_CONSTANTS, type PlanConstants } from "../../src/plan/constants.ts";
import { resolveParallel, shardFactor, ZERO3_PREFETCH_BUCKET_ELEMS, ZERO_REDUCE_BUCKET_ELEMS } from "../../src/plan/distributed.ts";
import { graphFromSpec } from "../../src/plan/families.ts";
import { footprintFromGraph } from "../../src/plan/footprint.ts";
import { memoryAt, type TrainingSetup } from "../../src/plan/memory.ts";
import { plan } from "../../src/plan/planner.ts";
import { parseModelSpec } from "../../src/plan/spec.ts";
import { parseShardings, planStrategies } from "../../src/plan/strategies.ts";

// nodes, HYBRID_SHARD, SHARD_GRAD_OP, CPU offload and communication buffers (issue 27, item 3); the
// ZeRO figures against DeepSpeed's own estimators are in deepspeed-estimators.e2e.test.ts, FSDP's against
// FSDPMemTracker in fsdp-memtracker.e2e.test.ts
const constants: PlanConstants = { ...DEFAULT_CONSTANTS, cuda_context_bytes: 1000, cublas_workspace_bytes: 100, allocator_slack_fraction: 0.1 };
const tiny = footprintFromGraph(graphFromSpec(parseModelSpec({ family: "mlp", input: 4, hidden: [8], output: 2 })));
const P = 8_000_000;
const L = 1_000_000;
const big = { ...tiny, params: { ...tiny.params, total: P, trainable: P, largestTensorElems: L, tensors: undefined } };
const base: TrainingSetup = { precision: "bf16-mixed", optimizer: "adamw", checkpointing: false, gpus: 8, sharding: "zero2" };
const states = (c: Record<string, number>): number => (c.weights ?? 0) + (c.gradients ?? 0) + (c.optimizer_state ?? 0);
const model = { kind: "spec" as const, spec: parseModelSpec({ family: "mlp", input: 64, hidden: [4096, 4096], output: 8 }) };

describe("CPU offload", () => {
  it("ZeRO-2 optimizer offload: 2P on the GPU, 16P/N per rank on the host, ×1.5 and at least the fp32 model per local rank", () => {
    const m = memoryAt(big, { ...base, offload: "optimizer" }, 1, constants);
    expect(states(m.components)).toBe(2 * P);
    expect(m.host_bytes_per_node).toBe(1.5 * Math.max(16 * P, 4 * P * 8));
    // one GPU (ZeRO-Offload): DeepSpeed's P · max(4, 16) · 1.5
    expect(memoryAt(big, { ...base, gpus: 1, offload: "optimizer" }, 1, constants).host_bytes_per_node).toBe(24 * P);
  });

  it("ZeRO-3: optimizer offload 4L + 2P/N, parameter offload 4L; host 16P and 18P per node", () => {
    const opt = memoryAt(big, { ...base, sharding: "zero3", offload: "optimizer" }, 1, constants);
    expect(states(opt.components)).toBe(4 * L + (2 * P) / 8);
    expect(opt.host_bytes_per_node).toBe(1.5 * 16 * P);
    const params = memoryAt(big, { ...base, sharding: "zero3", offload: "params", gpus: 16, nodes: 2 }, 1, constants);
    expect(states(params.components)).toBe(4 * L);
    expect(params.host_bytes_per_node).toBe((1.5 * 18 * P) / 2);
  });

  it("FSDP CPUOffload: the weight, gradient and optimizer shards on the host, no factor; the gathered unit stays", () => {
    const fsdp = { ...base, sharding: "fsdp" as const };
    const on = memoryAt(big, fsdp, 1, constants);
    const off = memoryAt(big, { ...fsdp, offload: "params" }, 1, constants);
    expect(states(off.components)).toBe(0);
    expect(off.host_bytes_per_node).toBe(states(on.components) * 8);
    expect(off.components.communication).toBe(on.components.communication);
  });

  it("an offloaded optimizer steps on the CPU: no step temporary on the GPU", () => {
    // the tiny model's temporaries are the Adam step's at micro-batch 1
    const on = memoryAt(tiny, { ...base, precision: "fp32", sharding: "zero1", gpus: 1, offload: "none" }, 1, constants);
    const off = memoryAt(tiny, { ...base, precision: "fp32", sharding: "zero1", gpus: 1, offload: "optimizer" }, 1, constants);
    expect(off.components.temporaries).toBeLessThan(on.components.temporaries);
  });
});

describe("HYBRID_SHARD and SHARD_GRAD_OP", () => {
  it("hybrid shards over the GPUs of one node, whatever the nodes", () => {
    expect(shardFactor({ gpus: 32, nodes: 4, sharding: "hybrid" }, "weights")).toBe(8);
    const hybrid = memoryAt(big, { ...base, sharding: "hybrid", gpus: 32, nodes: 4 }, 1, constants).components;
    const fsdp8 = memoryAt(big, { ...base, sharding: "fsdp", gpus: 8 }, 1, constants).components;
    expect(states(hybrid)).toBe(states(fsdp8));
  });

  it("shard-grad-op keeps the whole model unsharded in 16 bits through forward and backward, beside its shards", () => {
    const fsdp = memoryAt(big, { ...base, sharding: "fsdp" }, 1, constants).components;
    const sgo = memoryAt(big, { ...base, sharding: "shard-grad-op" }, 1, constants).components;
    expect(sgo.weights - fsdp.weights).toBe(2 * P);
    expect([sgo.gradients, sgo.optimizer_state]).toEqual([fsdp.gradients, fsdp.optimizer_state]);
    // not ZeRO-2 (2P + 18P/N): DeepSpeed's 16-bit gradient partition is not there
    expect(states(sgo)).toBe(2 * P + (16 * P) / 8);
  });
});

describe("communication buffers", () => {
  it("ZeRO: reduce_bucket_size in 16 bits (one buffer below stage 3), plus ZeRO-3's prefetch", () => {
    expect(memoryAt(big, base, 1, constants).components.communication).toBe(ZERO_REDUCE_BUCKET_ELEMS * 2);
    expect(memoryAt(big, { ...base, sharding: "zero3" }, 1, constants).components.communication).toBe(
      (ZERO_REDUCE_BUCKET_ELEMS + Math.min(ZERO3_PREFETCH_BUCKET_ELEMS, P)) * 2,
    );
  });

  it("DDP's buckets hold a second copy of the gradients; FSDP's all-gather two copies of the largest unit", () => {
    const ddp = memoryAt(big, { ...base, sharding: "ddp" }, 1, constants).components;
    expect(ddp.communication).toBe(ddp.gradients);
    expect(memoryAt(big, { ...base, sharding: "fsdp" }, 1, constants).components.communication).toBe(2 * L * 4);
  });

  it("one GPU keeps none, and its plan is unchanged by the new options' defaults", () => {
    const one = plan(model, { gpu: "h100-sxm", precision: "bf16-mixed" });
    expect(one.memory.components.communication).toBe(0);
    expect(one.memory.host_bytes_per_node).toBe(0);
    const same = plan(model, { gpu: "h100-sxm", precision: "bf16-mixed", gpus: 1, nodes: 1, sharding: "none", offload: "none" });
    expect(same.memory).toEqual(one.memory);
  });
});

describe("the parallel setup", () => {
  it("ranks are gpus × nodes", () => {
    expect(resolveParallel({ gpus: 8, nodes: 2, sharding: "hybrid" })).toEqual({ gpus: 16, nodes: 2, sharding: "hybrid", offload: "none", notes: [] });
    expect(plan(model, { gpu: "h100-sxm", gpus: 8, nodes: 2 }).setup).toMatchObject({ gpus: 16, nodes: 2, sharding: "ddp" });
  });

  it.each([
    [{ gpus: 8, sharding: "ddp", offload: "params" }, /^--offload: ddp keeps every state on the GPU/],
    [{ gpus: 8, sharding: "zero2", offload: "params" }, /^--offload: zero2 keeps the 16-bit parameters on every GPU; parameter offload needs zero3 or FSDP/],
    [{ gpus: 8, sharding: "fsdp", offload: "optimizer" }, /^--offload: FSDP offloads parameters, gradients and optimizer state together/],
    [{ gpus: 1, sharding: "zero3" }, /^--sharding: zero3 shards states over several GPUs; add --gpus N/],
    [{ gpus: 8, nodes: 0 }, /^--nodes: must be a positive integer/],
  ] as const)("refuses %j with one line", (options, message) => {
    expect(() => resolveParallel(options)).toThrow(message);
  });

  it("hybrid on one node plans as fsdp and says so", () => {
    const hybrid = plan(model, { gpu: "h100-sxm", gpus: 8, sharding: "hybrid" });
    const fsdp = plan(model, { gpu: "h100-sxm", gpus: 8, sharding: "fsdp" });
    expect(hybrid.memory.peak_bytes).toBe(fsdp.memory.peak_bytes);
    expect(hybrid.notes.join("\n")).toMatch(/hybrid on one node .* plans as fsdp/);
  });
});

describe("strategies side by side", () => {
  it("--sharding all: every strategy for several GPUs, hybrid only across nodes; a list keeps its order", () => {
    expect(parseShardings("all")).toEqual(["ddp", "zero1", "zero2", "zero3", "fsdp", "shard-grad-op"]);
    expect(parseShardings("all", 2)).toContain("hybrid");
    expect(parseShardings("zero3, ddp,zero3")).toEqual(["zero3", "ddp"]);
    expect(() => parseShardings("ddp,zero4")).toThrow(/^--sharding must be one of .*; got "zero4"/);
  });

  it("one row per strategy: peak, largest micro-batch, host RAM, verdict; a ruled-out strategy says why", () => {
    const rows = planStrategies(model, { gpu: "h100-sxm", gpus: 8, precision: "bf16-mixed", offload: "optimizer" }, ["ddp", "zero2", "zero3"]);
    expect(rows.map((r) => r.sharding)).toEqual(["ddp", "zero2", "zero3"]);
    expect(rows[0]).toMatchObject({ plan: null, fits: false, verdict: expect.stringMatching(/^cannot plan: --offload: ddp keeps every state/) as unknown });
    for (const row of rows.slice(1)) {
      expect(row.fits).toBe(true);
      expect(row.peak_bytes).toBe(row.plan?.memory.peak_bytes);
      expect(row.host_bytes_per_node).toBeGreaterThan(0);
      expect(row.verdict).toMatch(/^fits: micro-batch up to [\d,]+, .* host RAM per node$/);
    }
  });

  it("a model that fits nowhere is told per strategy; when no strategy can be planned the first cause is thrown", () => {
    const rows = planStrategies(model, { gpuMemoryBytes: 2 ** 20, gpus: 8 }, ["ddp", "fsdp"]);
    expect(rows.every((r) => !r.fits && /^does not fit: not even one sample/.test(r.verdict))).toBe(true);
    expect(() => planStrategies(model, { gpu: "h100-sxm", gpus: 1 }, ["zero2", "zero3"])).toThrow(/^--sharding: zero2 shards states over several GPUs/);
  });
});
