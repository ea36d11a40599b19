import { describe, expect, it } from "vitest";
import { BlockBuilder } from "../../src/plan/ops.ts";
import { convWorkspaceBytes, cudnnBytes, recurrentBytes, type RecurrentCall } from "../../src/plan/cudnn.ts";

const call = (over: Partial<RecurrentCall> = {}): RecurrentCall => ({
  mode: "LSTM",
  input_size: 24,
  hidden_size: 256,
  layers: 2,
  bidirectional: false,
  proj_size: 0,
  tokens: 16 * 128,
  elem_bytes: 4,
  saved_bytes: 70_000_000,
  input_saved: false,
  output_saved_after: false,
  ...over,
});

describe("recurrent layers on the script path, as cuDNN keeps them", () => {
  it("counts the same elements per token as the spec families' LSTM (one rule)", () => {
    const seq = 128;
    const op = new BlockBuilder("lstm", seq * 24, true, { inputIsBatch: true }).recurrent("lstm", "lstm", 24, 256, 2, false, seq).build().ops[0];
    const c = cudnnBytes(call({ tokens: seq, elem_bytes: 1 }));
    expect(c?.saved).toBe(op?.saved.compute);
    expect(c?.backward).toBe(op?.backwardElems);
    expect(c?.workspace).toBe(op?.workspace?.elems);
  });

  it("adds the input where the CPU layer kept it, and not the output a later layer saved already", () => {
    const base = cudnnBytes(call())?.saved ?? 0;
    expect(cudnnBytes(call({ input_saved: true }))?.saved).toBe(base + 16 * 128 * 24 * 4);
    expect(cudnnBytes(call({ output_saved_after: true }))?.saved).toBe(base - 16 * 128 * 256 * 4);
    // a bidirectional GRU: 3 gates + candidate and hidden, both directions
    expect(cudnnBytes(call({ mode: "GRU", bidirectional: true, layers: 1, tokens: 1, elem_bytes: 1 }))?.saved).toBe(2 * 256 * 5 + 2 * 256);
  });

  it("has no rule for a plain RNN or LSTM projections: the forward's CPU figures stand", () => {
    expect(cudnnBytes(call({ mode: "RNN_TANH" }))).toBeNull();
    expect(cudnnBytes(call({ proj_size: 64 }))).toBeNull();
    expect(recurrentBytes([call(), call({ proj_size: 64 })], 10)).toBeNull();
    expect(recurrentBytes([], 10)).toBeNull();
    const two = recurrentBytes([call(), call({ hidden_size: 128 })], 10);
    expect(two).toMatchObject({ calls: 2, cpu_saved_bytes: 140_000_000, largest_saved_outside_bytes: 10 });
    expect(two?.cudnn_backward_bytes).toBe(cudnnBytes(call())?.backward);
  });
});

describe("1-D convolutions on the script path: cuDNN's workspace from the im2col matrix", () => {
  it("is the spec families' conv1d rule, for the largest 1-D convolution of the forward", () => {
    const op = new BlockBuilder("conv", 24 * 128, true).conv1d("c", 24, 64, 5, 128, 128).build().ops[0];
    const ws = convWorkspaceBytes([
      { dims: 1, in_channels: 24, kernel: 5, positions: 128, batch: 1, elem_bytes: 1 },
      { dims: 1, in_channels: 8, kernel: 3, positions: 64, batch: 1, elem_bytes: 1 },
    ]);
    expect(ws).toBe(op?.workspace?.elems);
    expect(convWorkspaceBytes([{ dims: 1, in_channels: 24, kernel: 5, positions: 128, batch: 16, elem_bytes: 4 }])).toBe(16 * 4 * (op?.workspace?.elems ?? 0));
  });

  it("models no 2-D or 3-D convolution: it has no calibration for them", () => {
    expect(convWorkspaceBytes([{ dims: 2, in_channels: 3, kernel: 49, positions: 112 * 112, batch: 8, elem_bytes: 4 }])).toBeNull();
    expect(convWorkspaceBytes([])).toBeNull();
  });
});
