import { describe, expect, it } from "vitest";
import { divisibilityFailure, dividingMicroBatches, globalBatchBeside, globalBatchObserved, keptBatchLine, nearestDividing } from "../../src/tune/divisible.ts";
import { buildSpace, effectiveBatchPolicy } from "../../src/tune/space.ts";

const doc = (values: Record<string, unknown>) => ({ get: (key: string) => values[key] });

describe("micro-batches that divide the job's global batch", () => {
  it("finds the global batch beside the micro-batch key, in the same mapping only", () => {
    expect(globalBatchBeside(doc({ "train.global_batch_size": 8, "train.micro_batch_size": 4 }), "train.micro_batch_size")).toEqual({
      value: 8,
      from: "train.global_batch_size",
    });
    expect(globalBatchBeside(doc({ total_batch_size: 524288 }), "micro_batch_size")).toEqual({ value: 524288, from: "total_batch_size" });
    expect(globalBatchBeside(doc({ global_batch_size: 8 }), "train.micro_batch_size")).toBeNull();
    expect(globalBatchBeside(doc({ "train.global_batch_size": "8" }), "train.micro_batch_size")).toBeNull();
  });

  it("reads a derived accumulation from trial 0's steps", () => {
    expect(globalBatchObserved(4, 2)?.value).toBe(8);
    expect(globalBatchObserved(4, 1)).toBeNull();
    expect(globalBatchObserved("4", 2)).toBeNull();
  });

  it("keeps to the divisors per rank, within the space's bounds, and says the batch it keeps", () => {
    // litgpt's corpus entry: global 8; the bench tried 16 and 10, which crashed
    const values = dividingMicroBatches(8, 1, { min: 1 });
    expect(values).toEqual([1, 2, 4, 8]);
    expect(values).not.toContain(16);
    expect(values).not.toContain(10);
    expect(dividingMicroBatches(48, 2, { min: 2, max: 12 })).toEqual([2, 3, 4, 6, 8, 12]);
    expect(dividingMicroBatches(7, 2, {})).toEqual([]);
    expect(nearestDividing(10, values)).toBe(8);
    expect(nearestDividing(3, values)).toBe(2);
    expect(nearestDividing(3, [])).toBeNull();
    expect(keptBatchLine({ value: 8, from: "train.global_batch_size" }, 2, [1, 2, 4])).toBe(
      "micro-batch: only values that divide train.global_batch_size = 8 over 2 ranks (4 each) (1, 2, 4): the job derives its accumulation from it, so the effective batch stays 8",
    );
  });

  it("tells a trial that died on a value that does not divide from other failures", () => {
    const litgpt = [
      '  File "/venv/lib/python3.12/site-packages/litgpt/args.py", line 59, in gradient_accumulation_iters',
      "    assert gradient_accumulation_iters > 0",
      "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
      "AssertionError",
    ];
    expect(divisibilityFailure(litgpt)).toBe("assert gradient_accumulation_iters > 0");
    const nano = ['  File "train_gpt2.py", line 30, in <module>', "    assert total_batch_size % (B * T * ddp_world_size) == 0", "AssertionError"];
    expect(divisibilityFailure(nano)).toBe("assert total_batch_size % (B * T * ddp_world_size) == 0");
    expect(divisibilityFailure(["ValueError: batch size 6 must be divisible by the number of devices"])).toMatch(/divisible/);
    expect(divisibilityFailure(["RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"])).toBeNull();
    expect(divisibilityFailure(["the batch is divisible by 8, fine"])).toBeNull();
  });
});

describe("a space whose job derives its accumulation from a global batch", () => {
  const context = { backend: "cpu" as const, bf16: false, tensorCores: false, cpus: 2 };

  it("keeps the micro-batch to the divisors per rank and calls the effective batch held by the job", () => {
    const notes: string[] = [];
    const space = buildSpace(
      { batch_size: 4 },
      { jobBatch: { value: 8, from: "train.global_batch_size", ranks: 1 }, maxMicroBatch: 6 },
      ["batch_size"],
      context,
      (line) => notes.push(line),
    );
    expect(space.microBatch?.values).toEqual([1, 2, 4]);
    expect(notes).toContain(
      "micro-batch: only values that divide train.global_batch_size = 8 (1, 2, 4): the job derives its accumulation from it, so the effective batch stays 8",
    );
    expect(effectiveBatchPolicy(space, {})).toMatchObject({ kind: "held", value: 8 });
    expect(
      buildSpace({ batch_size: 2 }, { jobBatch: { value: 8, from: "global_batch_size", ranks: 2 } }, ["batch_size"], context, () => {}).microBatch?.values,
    ).toEqual([1, 2, 4]);
  });

  it("leaves the micro-batch free when the job's own value does not divide it, and says so", () => {
    const notes: string[] = [];
    const space = buildSpace({ batch_size: 3 }, { jobBatch: { value: 8, from: "global_batch_size", ranks: 1 } }, ["batch_size"], context, (l) => notes.push(l));
    expect(space.microBatch?.values).toBeUndefined();
    expect(notes[0]).toMatch(/global_batch_size = 8 is not a whole number of micro-batches of 3 per rank/);
    expect(effectiveBatchPolicy(space, {}).kind).toBe("free");
  });
});
