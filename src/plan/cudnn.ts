/**
 * cuDNN's layers on the script path. A CPU run shows neither cuDNN's workspaces nor its layout:
 *
 * - an LSTM or GRU on the CPU saves per-step tensors for the backward (gate activations, states,
 *   the stacked outputs) where cuDNN keeps one reserve space, so the bytes a CPU run saved inside the
 *   layer are replaced for a GPU plan by cuDNN's layout ({@link cudnnRnnPerToken}), sized by the
 *   layer's shape and the tokens it saw, with its backward buffers and workspace;
 * - a 1-D convolution's workspace follows its im2col matrix ({@link im2colElems}, times the factor
 *   calibrated on the H100's cnn-lstm). 2-D and 3-D convolutions have no calibration yet: they are
 *   named as left out, not guessed.
 *
 * The same rules as the spec families (src/plan/ops.ts). Measured against the H100's peaks:
 * bench/results/plan-script-h100.json.
 * @module
 */
import { z } from "zod";
import { cudnnRnnPerToken, im2colElems } from "./ops.ts";

const count = z.number().int().nonnegative();

/** One call of an nn.LSTM / nn.GRU / nn.RNN in a measured forward (python/brim/_footprint.py). */
export const recurrentCallSchema = z.looseObject({
  mode: z.string(),
  input_size: count,
  hidden_size: count,
  layers: count,
  bidirectional: z.boolean(),
  proj_size: count,
  tokens: count,
  elem_bytes: count,
  saved_bytes: count,
  input_saved: z.boolean(),
  output_saved_after: z.boolean(),
});

/** A recurrent call, parsed. */
export type RecurrentCall = z.output<typeof recurrentCallSchema>;

/** What the recurrent layers of one forward saved on the CPU, and what cuDNN keeps and allocates for them. */
export interface RecurrentBytes {
  calls: number;
  cpu_saved_bytes: number;
  cudnn_saved_bytes: number;
  /** the largest of the calls' backward buffers on cuDNN (gradients and seq-major copies) */
  cudnn_backward_bytes: number;
  /** the largest of the calls' backward-data workspaces, before the calibrated factor */
  cudnn_workspace_bytes: number;
  /** the largest tensor saved outside the recurrent calls, the one that sizes the other layers' backward */
  largest_saved_outside_bytes: number;
}

/**
 * What cuDNN keeps and allocates for one call: reserve space and output per token saved (the input
 * too where the CPU layer kept it), the backward's buffers and workspace; null for layers it has no
 * rule for (plain RNN, LSTM projections), whose CPU bytes then stand.
 *
 * @example
 * ```ts
 * cudnnBytes({ mode: "LSTM", input_size: 8, hidden_size: 16, layers: 1, bidirectional: false, proj_size: 0, tokens: 100, elem_bytes: 4, saved_bytes: 0, input_saved: true, output_saved_after: false }).saved; // 100 × (96 + 16 + 8) × 4
 * ```
 */
export function cudnnBytes(call: RecurrentCall): { saved: number; backward: number; workspace: number } | null {
  const kind = call.mode === "LSTM" ? "lstm" : call.mode === "GRU" ? "gru" : null;
  if (kind === null || call.proj_size > 0) return null;
  const perToken = cudnnRnnPerToken(kind, call.input_size, call.hidden_size, call.layers, call.bidirectional ? 2 : 1);
  const saved = perToken.reserve + (call.output_saved_after ? 0 : perToken.output) + (call.input_saved ? call.input_size : 0);
  const bytes = (elems: number): number => call.tokens * elems * call.elem_bytes;
  return { saved: bytes(saved), backward: bytes(perToken.backward), workspace: bytes(perToken.workspace) };
}

/**
 * The recurrent layers of one forward: CPU bytes saved inside them and cuDNN's bytes for the same
 * calls, or null when none has a cuDNN rule (then the CPU's bytes stand, and so does its largest
 * saved tensor). `largestOutside` is the largest tensor the forward saved outside those calls.
 *
 * @example
 * ```ts
 * const r = recurrentBytes(event.recurrent ?? [], event.largest_saved_outside_recurrent_bytes ?? 0);
 * const onGpu = event.saved_bytes - (r?.cpu_saved_bytes ?? 0) + (r?.cudnn_saved_bytes ?? 0);
 * ```
 */
export function recurrentBytes(calls: readonly RecurrentCall[], largestOutside: number): RecurrentBytes | null {
  const out: RecurrentBytes = {
    calls: 0,
    cpu_saved_bytes: 0,
    cudnn_saved_bytes: 0,
    cudnn_backward_bytes: 0,
    cudnn_workspace_bytes: 0,
    largest_saved_outside_bytes: largestOutside,
  };
  for (const call of calls) {
    const gpu = cudnnBytes(call);
    // one layer without a rule leaves the CPU's largest tensor possibly inside it: keep the CPU's figures
    if (gpu === null) return null;
    out.calls += 1;
    out.cpu_saved_bytes += call.saved_bytes;
    out.cudnn_saved_bytes += gpu.saved;
    out.cudnn_backward_bytes = Math.max(out.cudnn_backward_bytes, gpu.backward);
    out.cudnn_workspace_bytes = Math.max(out.cudnn_workspace_bytes, gpu.workspace);
  }
  return out.calls > 0 ? out : null;
}

/** The distinct shapes of the convolutions in a measured forward (python/brim/_footprint.py). */
export const convolutionSchema = z.looseObject({
  dims: count,
  in_channels: count,
  kernel: count,
  positions: count,
  batch: count,
  elem_bytes: count,
});

/** A convolution's shape, parsed. */
export type Convolution = z.output<typeof convolutionSchema>;

/** The convolution dimensions whose cuDNN workspace brim models (the calibration's cnn-lstm is 1-D). */
export const MODELLED_CONV_DIMS: readonly number[] = [1];

/**
 * The largest 1-D convolution's im2col matrix in bytes, for the whole batch it ran on: cuDNN's
 * workspace before its calibrated factor; null when the forward had no 1-D convolution.
 *
 * @example
 * ```ts
 * convWorkspaceBytes([{ dims: 1, in_channels: 64, kernel: 5, positions: 128, batch: 16, elem_bytes: 4 }]); // 16 × 40960 × 4
 * ```
 */
export function convWorkspaceBytes(convs: readonly Convolution[]): number | null {
  const modelled = convs.filter((c) => MODELLED_CONV_DIMS.includes(c.dims));
  if (modelled.length === 0) return null;
  return Math.max(...modelled.map((c) => c.batch * im2colElems(c.in_channels, c.kernel, c.positions) * c.elem_bytes));
}
