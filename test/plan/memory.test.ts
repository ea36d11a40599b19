import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_CONSTANTS, type PlanConstants } from "../../src/plan/constants.ts";
import { graphFromSpec } from "../../src/plan/families.ts";
import { footprintFromGraph } from "../../src/plan/footprint.ts";
import { maxMicroBatch, memoryAt, optimizerStateBytes, type TrainingSetup } from "../../src/plan/memory.ts";
import { plan } from "../../src/plan/planner.ts";
import { parseModelSpec, PRECISIONS, OPTIMIZERS } from "../../src/plan/spec.ts";

const constants: PlanConstants = {
  ...DEFAULT_CONSTANTS,
  cuda_context_bytes: 1000,
  cublas_workspace_bytes: 100,
  cudnn_workspace_bytes: 50,
  allocator_slack_fraction: 0.1,
};
// Linear(4,8) → ReLU → Linear(8,2), MSE: 58 parameters, 48 of them matmul weights
const tiny = footprintFromGraph(graphFromSpec(parseModelSpec({ family: "mlp", input: 4, hidden: [8], output: 2 })));
const setup: TrainingSetup = { precision: "fp32", optimizer: "adam", checkpointing: false, gpus: 1, sharding: "none" };

describe("memory components, computed by hand for a 4-8-2 MLP", () => {
  it("fp32 + Adam at micro-batch 10", () => {
    // kept per sample beyond the input batch: ReLU output 8 (Linear2's input, the same tensor), MSE prediction 2 → 10 floats
    // (the SDK measures exactly this with saved-tensor hooks: test/plan/sdk-profile.e2e.test.ts)
    expect(tiny.activations.fp32.perSample).toBe(40);
    expect(memoryAt(tiny, setup, 10, constants).components).toEqual({
      weights: 58 * 4,
      gradients: 58 * 4,
      optimizer_state: 2 * 58 * 4,
      // one GPU: no communication buffers
      communication: 0,
      activations: 400,
      input_batch: 10 * 4 * (4 + 2),
      temporaries: 2 * 10 * 8 * 4, // gradient of the widest activation (8) and its input, fp32
      workspace: 100,
      cuda_context: 1000,
      allocator_slack: Math.ceil(0.1 * (400 + 240 + 640)),
    });
    expect(memoryAt(tiny, setup, 10, constants).peak_bytes).toBe(3436);
  });

  it("bf16-mixed keeps fp32 weights, 16-bit activations, fp32 loss, and 16-bit weight copies", () => {
    const m = memoryAt(tiny, { ...setup, precision: "bf16-mixed" }, 10, constants);
    expect(m.components.weights).toBe(232);
    // (16-bit copy of the input 4 + ReLU output 8) × 2 + fp32 prediction 2 × 4 = 32 per sample, × 10, + 2 bytes × 48 matmul weights
    expect(m.components.activations).toBe(320 + 96);
    // backward's gradient buffers of the widest Linear output (8) are bf16 under autocast: 2 × 10 × 8 × 2
    expect(m.components.temporaries).toBe(320);
    expect(m.peak_bytes).toBe(232 + 232 + 464 + 416 + 240 + 320 + 100 + 1000 + Math.ceil(0.1 * (416 + 240 + 320)));
  });

  it("pure bf16 halves weights, gradients and state", () => {
    const m = memoryAt(tiny, { ...setup, precision: "bf16" }, 1, constants);
    expect([m.components.weights, m.components.gradients, m.components.optimizer_state]).toEqual([116, 116, 232]);
  });

  it("optimizer state per trainable parameter", () => {
    expect(optimizerStateBytes("sgd", "fp32", 1000, undefined)).toBe(0);
    expect(optimizerStateBytes("sgd-momentum", "fp32", 1000, undefined)).toBe(4000);
    expect(optimizerStateBytes("adamw", "bf16-mixed", 1000, undefined)).toBe(8000);
    expect(optimizerStateBytes("adamw-8bit", "fp32", 4096, undefined)).toBe(2 * 4096 + 2 * 4 * 2);
    // factored: a 4×8 matrix keeps 4 + 8, a vector of 8 keeps 8
    expect(optimizerStateBytes("adafactor", "fp32", 40, tiny.params.tensors?.slice(0, 2))).toBe((4 + 8 + 8) * 4);
  });

  it("the optimizer step's temporary wins when activations are small", () => {
    const m = memoryAt(tiny, setup, 1, constants);
    // max(2·1·32 = 64, 232 − 40 − 24 = 168)
    expect(m.components.temporaries).toBe(168);
  });

  it("ZeRO-2 over 4 GPUs shards gradients and state; DDP keeps bucket copies as communication buffers", () => {
    const z2 = memoryAt(tiny, { ...setup, gpus: 4, sharding: "zero2" }, 10, constants).components;
    expect([z2.weights, z2.gradients, z2.optimizer_state]).toEqual([232, 58, 116]);
    const z3 = memoryAt(tiny, { ...setup, gpus: 4, sharding: "fsdp" }, 10, constants).components;
    expect(z3.weights).toBe(58);
    const ddp = memoryAt(tiny, { ...setup, gpus: 2, sharding: "ddp" }, 10, constants).components;
    expect([ddp.gradients, ddp.communication]).toEqual([232, 232]);
  });

  it("ZeRO in 16-bit mixed precision counts its model states as DeepSpeed does: 16-bit parameters, fp32 master in the partition", () => {
    const big = { ...tiny, params: { ...tiny.params, total: 8_000_000, trainable: 8_000_000, largestTensorElems: 1_000_000 } };
    const states = (sharding: "zero1" | "zero2" | "zero3", gpus: number): number => {
      const c = memoryAt(big, { ...setup, precision: "bf16-mixed", gpus, sharding }, 1, constants).components;
      return c.weights + c.gradients + c.optimizer_state;
    };
    const P = 8_000_000;
    const L = 1_000_000;
    expect(states("zero2", 8)).toBe(2 * P + (18 * P) / 8);
    expect(states("zero2", 1)).toBe(2 * P + 18 * P);
    expect(states("zero3", 8)).toBe(4 * L + (18 * P) / 8);
    expect(states("zero1", 4)).toBe(4 * P + (16 * P) / 4);
    // the parameters are 16-bit themselves: no autocast copy among the activations
    const z2 = memoryAt(big, { ...setup, precision: "bf16-mixed", gpus: 8, sharding: "zero2" }, 10, constants).components;
    const ddp = memoryAt(big, { ...setup, precision: "bf16-mixed", gpus: 8, sharding: "ddp" }, 10, constants).components;
    expect(ddp.activations - z2.activations).toBe(Math.ceil(big.activations["bf16-mixed"].fixed));
  });

  it("checkpointing keeps block inputs plus one block's activations", () => {
    const spec = parseModelSpec({ family: "transformer-encoder", vocab: 100, max_positions: 64, d_model: 32, heads: 2, ffn: 64, layers: 6, seq_len: 64 });
    const fp = footprintFromGraph(graphFromSpec(spec));
    const a = fp.activations.fp32;
    expect(a.perSampleCheckpointed).toBeDefined();
    expect(a.perSampleCheckpointed ?? Infinity).toBeLessThan(a.perSample / 2);
  });
});

describe("properties", () => {
  const specArb = fc.record({
    input: fc.integer({ min: 1, max: 256 }),
    hidden: fc.array(fc.integer({ min: 1, max: 2048 }), { minLength: 1, maxLength: 4 }),
    output: fc.integer({ min: 1, max: 64 }),
  });
  const setupArb = fc.record({
    precision: fc.constantFrom(...PRECISIONS),
    optimizer: fc.constantFrom(...OPTIMIZERS),
    checkpointing: fc.boolean(),
    gpus: fc.constant(1),
    sharding: fc.constant("none" as const),
  });

  it("peak is non-decreasing in micro-batch", () => {
    fc.assert(
      fc.property(specArb, setupArb, fc.integer({ min: 1, max: 100_000 }), (spec, s, b) => {
        const fp = footprintFromGraph(graphFromSpec(parseModelSpec({ family: "mlp", ...spec })));
        return memoryAt(fp, s, b + 1, DEFAULT_CONSTANTS).peak_bytes >= memoryAt(fp, s, b, DEFAULT_CONSTANTS).peak_bytes;
      }),
    );
  });

  it("the largest micro-batch fits cap × (1 − margin) and one more does not", () => {
    fc.assert(
      fc.property(specArb, setupArb, fc.double({ min: 1, max: 80, noNaN: true }), fc.double({ min: 0, max: 0.5, noNaN: true }), (spec, s, gib, margin) => {
        const model = { kind: "spec" as const, spec: parseModelSpec({ family: "mlp", ...spec }) };
        const report = plan(model, { gpuMemoryBytes: gib * 2 ** 30, margin, precision: s.precision, optimizer: s.optimizer, checkpointing: s.checkpointing });
        const fp = footprintFromGraph(graphFromSpec(model.spec));
        const budget = Math.floor(gib * 2 ** 30 * (1 - margin));
        const peak = (b: number) => memoryAt(fp, { ...s, checkpointing: report.setup.checkpointing }, b, DEFAULT_CONSTANTS).peak_bytes;
        if (report.max_micro_batch === 0) return peak(1) > budget;
        // the search stops at 2^24 samples
        if (report.max_micro_batch === 2 ** 24) return peak(report.max_micro_batch) <= budget;
        return peak(report.max_micro_batch) <= budget && peak(report.max_micro_batch + 1) > budget;
      }),
      { numRuns: 200 },
    );
  });

  it("every suggestion fits the budget and reaches the effective batch", () => {
    fc.assert(
      fc.property(specArb, fc.integer({ min: 1, max: 512 }), (spec, effective) => {
        const report = plan({ kind: "spec", spec: parseModelSpec({ family: "mlp", ...spec }) }, { gpu: "rtx-4090", effectiveBatch: effective });
        return report.suggestions.every((s) => s.peak_bytes <= report.gpu.budget_bytes && s.micro_batch * s.accumulation === effective);
      }),
      { numRuns: 100 },
    );
  });

  it("maxMicroBatch agrees with a linear scan", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 5000 }), (a, b, budget) => {
        const peak = (m: number) => a + b * m;
        let scan = 0;
        while (peak(scan + 1) <= budget) scan++;
        return maxMicroBatch(peak, budget) === scan;
      }),
    );
  });
});
