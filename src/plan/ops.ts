import { NO_SAVE, type Block, type Op, type ParamTensor, type Saved } from "./graph.ts";

/** The element-wise non-linearities the families use. */
export type Activation = "relu" | "gelu" | "tanh" | "silu" | "sigmoid";

const SAVES_OUTPUT: ReadonlySet<Activation> = new Set(["relu", "tanh", "sigmoid"]);

interface LinearOptions {
  bias?: boolean;
  trainable?: boolean;
  /** the input tensor is already kept by an earlier op (q, k and v read one normed input) */
  inputShared?: boolean;
}

/**
 * Builds one block op by op, per sample, tracking which tensors autograd keeps so that a tensor
 * kept by two ops (a ReLU's output, then the next Linear's input) is counted once.
 */
export class BlockBuilder {
  readonly ops: Op[] = [];
  private lastOutputKept = false;
  readonly name: string;
  readonly inputElems: number;
  private readonly trainable: boolean;
  private readonly options: { checkpoint?: boolean; shareKey?: string };
  /** the block reads the input batch, which is counted as the input batch, not as an activation */
  private inputIsBatch: boolean;

  /**
   * `inputKept`: the block's input is a tensor the previous block's last op already keeps (a ReLU's
   * output that the next block's convolution reads), so it is not counted twice.
   */
  constructor(
    name: string,
    inputElems: number,
    trainable: boolean,
    options: { checkpoint?: boolean; shareKey?: string; inputIsBatch?: boolean; inputKept?: boolean } = {},
  ) {
    this.name = name;
    this.inputElems = inputElems;
    this.trainable = trainable;
    this.options = options;
    this.inputIsBatch = options.inputIsBatch ?? false;
    this.lastOutputKept = options.inputKept ?? false;
  }

  build(): Block {
    const block: Block = { name: this.name, ops: this.ops, inputElems: this.inputElems };
    if (this.options.shareKey !== undefined) block.shareKey = this.options.shareKey;
    if (this.options.checkpoint === true) block.checkpoint = true;
    return block;
  }

  private push(op: Omit<Op, "trainable"> & { trainable?: boolean }, keepsOutput = false): this {
    const saved = this.batchCopy > 0 ? { ...op.saved, mixedOnly: op.saved.mixedOnly + this.batchCopy } : op.saved;
    this.batchCopy = 0;
    this.ops.push({ ...op, saved, trainable: op.trainable ?? this.trainable });
    this.lastOutputKept = keepsOutput;
    this.inputIsBatch = false;
    return this;
  }

  private batchCopy = 0;

  /**
   * Elements of an input the op keeps, unless the previous op already keeps that tensor. The input
   * batch is already counted; only autocast's 16-bit copy of it is new.
   */
  private keptInput(elems: number): number {
    if (this.inputIsBatch) {
      this.batchCopy = elems;
      return 0;
    }
    return this.lastOutputKept ? 0 : elems;
  }

  linear(name: string, inFeatures: number, outFeatures: number, rows: number, opts: LinearOptions = {}): this {
    const trainable = opts.trainable ?? this.trainable;
    const params: ParamTensor[] = [{ name: `${name}.weight`, shape: [outFeatures, inFeatures], trainable, matmul: true }];
    if (opts.bias !== false) params.push({ name: `${name}.bias`, shape: [outFeatures], trainable, matmul: false });
    // A frozen weight needs no input for its gradient, so autograd keeps nothing for it.
    const kept = trainable && opts.inputShared !== true ? this.keptInput(rows * inFeatures) : 0;
    return this.push({
      kind: "linear",
      params,
      saved: { ...NO_SAVE, compute: kept },
      outElems: rows * outFeatures,
      flops: 2 * inFeatures * outFeatures * rows,
      trainable,
    });
  }

  /** A frozen Linear with LoRA adapters A (in→rank) and B (rank→out) that train. */
  loraLinear(name: string, inFeatures: number, outFeatures: number, rank: number, rows: number, opts: LinearOptions = {}): this {
    const params: ParamTensor[] = [
      { name: `${name}.weight`, shape: [outFeatures, inFeatures], trainable: false, matmul: true },
      { name: `${name}.lora_A.weight`, shape: [rank, inFeatures], trainable: true, matmul: true },
      { name: `${name}.lora_B.weight`, shape: [outFeatures, rank], trainable: true, matmul: true },
    ];
    if (opts.bias !== false) params.splice(1, 0, { name: `${name}.bias`, shape: [outFeatures], trainable: false, matmul: false });
    const input = opts.inputShared === true ? 0 : this.keptInput(rows * inFeatures);
    return this.push({
      kind: "lora-linear",
      params,
      saved: { ...NO_SAVE, compute: input + rows * rank },
      outElems: rows * outFeatures,
      flops: 2 * rows * (inFeatures * outFeatures + rank * (inFeatures + outFeatures)),
      trainable: true,
    });
  }

  activation(kind: Activation, elems: number): this {
    if (SAVES_OUTPUT.has(kind)) {
      return this.push({ kind, params: [], saved: { ...NO_SAVE, compute: elems }, outElems: elems, flops: elems }, true);
    }
    return this.push({ kind, params: [], saved: { ...NO_SAVE, compute: this.keptInput(elems) }, outElems: elems, flops: 8 * elems });
  }

  /** LayerNorm runs in fp32 under autocast: it keeps an fp32 input plus mean and rstd per row. */
  layerNorm(name: string, features: number, rows: number): this {
    return this.push({
      kind: "layernorm",
      params: [
        { name: `${name}.weight`, shape: [features], trainable: this.trainable, matmul: false },
        { name: `${name}.bias`, shape: [features], trainable: this.trainable, matmul: false },
      ],
      saved: { ...NO_SAVE, fp32: rows * features, bytes: 8 * rows },
      outElems: rows * features,
      flops: 5 * rows * features,
    });
  }

  /** RMSNorm (Llama): fp32 input and one rstd per row kept, a weight and no bias. */
  rmsNorm(name: string, features: number, rows: number): this {
    return this.push({
      kind: "rmsnorm",
      params: [{ name: `${name}.weight`, shape: [features], trainable: this.trainable, matmul: false }],
      saved: { ...NO_SAVE, fp32: rows * features, bytes: 4 * rows },
      outElems: rows * features,
      flops: 4 * rows * features,
    });
  }

  /** An element-wise composite (SwiGLU's gate, GPT-2's tanh GELU) that keeps `kept` elements per sample. */
  elementwise(kind: string, kept: number, outElems: number, flops: number, keepsOutput = false): this {
    return this.push({ kind, params: [], saved: { ...NO_SAVE, compute: kept }, outElems, flops }, keepsOutput);
  }

  dropout(elems: number, p: number): this {
    if (p <= 0) return this;
    return this.push({ kind: "dropout", params: [], saved: { ...NO_SAVE, bytes: elems }, outElems: elems, flops: elems });
  }

  /** The looked-up indices are the input batch itself, already counted there. */
  embedding(name: string, count: number, features: number, rows: number, trainable = this.trainable): this {
    return this.push({
      kind: "embedding",
      params: [{ name: `${name}.weight`, shape: [count, features], trainable, matmul: false }],
      saved: NO_SAVE,
      outElems: rows * features,
      flops: 0,
      trainable,
    });
  }

  residual(elems: number): this {
    return this.push({ kind: "add", params: [], saved: NO_SAVE, outElems: elems, flops: elems });
  }

  /**
   * Scaled dot-product attention over `sequences` sequences of `seqLen` tokens each. `sdpa` keeps
   * q, k, v, the output and a log-sum-exp per head and token; `math` keeps the probabilities (fp32
   * under autocast, plus their 16-bit copy for the second matmul).
   */
  attention(dModel: number, heads: number, seqLen: number, sequences: number, impl: "sdpa" | "math"): this {
    const rows = seqLen * sequences;
    const scores = heads * seqLen * seqLen * sequences;
    const saved: Saved =
      impl === "sdpa"
        ? { ...NO_SAVE, compute: 4 * rows * dModel, bytes: 4 * heads * rows }
        : { ...NO_SAVE, compute: 3 * rows * dModel, fp32: scores, mixedOnly: scores };
    return this.push({
      kind: `attention-${impl}`,
      params: [],
      saved,
      outElems: impl === "math" ? Math.max(scores, rows * dModel) : rows * dModel,
      flops: 4 * seqLen * seqLen * dModel * sequences,
    });
  }

  /** Top-k mixture of experts replacing a feed-forward; tokens are copied into the experts they go to. */
  mixtureOfExperts(name: string, dModel: number, experts: number, topK: number, ffn: number, rows: number, act: Activation): this {
    const params: ParamTensor[] = [{ name: `${name}.router.weight`, shape: [experts, dModel], trainable: this.trainable, matmul: true }];
    for (let e = 0; e < experts; e++) {
      params.push(
        { name: `${name}.experts.${e}.0.weight`, shape: [ffn, dModel], trainable: this.trainable, matmul: true },
        { name: `${name}.experts.${e}.0.bias`, shape: [ffn], trainable: this.trainable, matmul: false },
        { name: `${name}.experts.${e}.2.weight`, shape: [dModel, ffn], trainable: this.trainable, matmul: true },
        { name: `${name}.experts.${e}.2.bias`, shape: [dModel], trainable: this.trainable, matmul: false },
      );
    }
    const routed = rows * topK;
    // router input, gathered expert inputs, hidden (act keeps one, second linear another unless shared), weighted outputs
    const hiddenKept = SAVES_OUTPUT.has(act) ? routed * ffn : 2 * routed * ffn;
    return this.push({
      kind: "moe",
      params,
      saved: {
        compute: this.keptInput(rows * dModel) + routed * dModel + hiddenKept + routed * dModel,
        fp32: rows * experts,
        mixedOnly: 0,
        bytes: 8 * routed + 4 * routed,
      },
      outElems: Math.max(routed * ffn, rows * dModel),
      flops: 2 * dModel * experts * rows + routed * 4 * dModel * ffn,
    });
  }

  /** An LSTM or GRU layer stack as cuDNN runs it: inputs, gates and states kept per step. */
  recurrent(kind: "lstm" | "gru", name: string, input: number, hidden: number, layers: number, bidirectional: boolean, seqLen: number): this {
    const gates = kind === "lstm" ? 4 : 3;
    const dirs = bidirectional ? 2 : 1;
    const params: ParamTensor[] = [];
    let flops = 0;
    let kept = this.keptInput(seqLen * input);
    for (let layer = 0; layer < layers; layer++) {
      const layerInput = layer === 0 ? input : hidden * dirs;
      for (let d = 0; d < dirs; d++) {
        const suffix = `l${layer}${d === 1 ? "_reverse" : ""}`;
        params.push(
          { name: `${name}.weight_ih_${suffix}`, shape: [gates * hidden, layerInput], trainable: this.trainable, matmul: true },
          { name: `${name}.weight_hh_${suffix}`, shape: [gates * hidden, hidden], trainable: this.trainable, matmul: true },
          { name: `${name}.bias_ih_${suffix}`, shape: [gates * hidden], trainable: this.trainable, matmul: false },
          { name: `${name}.bias_hh_${suffix}`, shape: [gates * hidden], trainable: this.trainable, matmul: false },
        );
        flops += 2 * seqLen * gates * hidden * (layerInput + hidden);
      }
    }
    const perToken = cudnnRnnPerToken(kind, input, hidden, layers, dirs);
    kept += seqLen * (perToken.reserve + perToken.output);
    const workspace = { kind: "rnn" as const, elems: seqLen * perToken.workspace };
    const out = seqLen * perToken.output;
    return this.push({ kind, params, saved: { ...NO_SAVE, compute: kept }, outElems: out, flops, workspace, backwardElems: seqLen * perToken.backward });
  }

  conv1d(name: string, cin: number, cout: number, kernel: number, lengthIn: number, lengthOut: number): this {
    return this.push({
      kind: "conv1d",
      params: [
        { name: `${name}.weight`, shape: [cout, cin, kernel], trainable: this.trainable, matmul: true },
        { name: `${name}.bias`, shape: [cout], trainable: this.trainable, matmul: false },
      ],
      saved: { ...NO_SAVE, compute: this.keptInput(cin * lengthIn) },
      outElems: cout * lengthOut,
      flops: 2 * cin * kernel * cout * lengthOut,
      workspace: { kind: "conv", elems: im2colElems(cin, kernel, lengthOut) },
    });
  }

  batchNorm(name: string, channels: number, length: number): this {
    return this.push({
      kind: "batchnorm",
      params: [
        { name: `${name}.weight`, shape: [channels], trainable: this.trainable, matmul: false },
        { name: `${name}.bias`, shape: [channels], trainable: this.trainable, matmul: false },
      ],
      saved: { ...NO_SAVE, compute: this.keptInput(channels * length) },
      outElems: channels * length,
      flops: 4 * channels * length,
    });
  }

  /** MaxPool keeps its input and the int64 index of each maximum. */
  maxPool(channels: number, lengthIn: number, lengthOut: number): this {
    return this.push({
      kind: "maxpool",
      params: [],
      saved: { ...NO_SAVE, compute: this.keptInput(channels * lengthIn), bytes: 8 * channels * lengthOut },
      outElems: channels * lengthOut,
      flops: channels * lengthIn,
    });
  }

  /** A free-standing parameter such as a Gaussian policy's log_std. */
  parameter(name: string, shape: readonly number[]): this {
    return this.push({ kind: "parameter", params: [{ name, shape, trainable: this.trainable, matmul: false }], saved: NO_SAVE, outElems: 0, flops: 0 });
  }

  /** Mean squared error: autocast runs it in fp32; it keeps the prediction and the target (part of the input batch). */
  mseLoss(elems: number): this {
    return this.push({ kind: "mse-loss", params: [], saved: { ...NO_SAVE, fp32: elems }, outElems: elems, flops: 3 * elems });
  }

  /** Cross-entropy keeps log-softmax of the logits in fp32. */
  crossEntropyLoss(rows: number, classes: number): this {
    return this.push({ kind: "cross-entropy", params: [], saved: { ...NO_SAVE, fp32: rows * classes }, outElems: rows * classes, flops: 5 * rows * classes });
  }
}

/**
 * Elements per token (one step of one sequence) of an LSTM or GRU stack on cuDNN: the one rule for
 * recurrent layers on a GPU, used by the spec families and by the script path, whose CPU kernels
 * save per-step tensors of another layout.
 *
 * - `reserve`: the reserve space kept for backward (gates, cell and hidden state of every layer and
 *   direction; GRU: gates, candidate and hidden);
 * - `output`: the output `_cudnn_rnn` returns and saves beside it;
 * - `workspace`: backward-data's workspace, one layer's gate and hidden-state gradients;
 * - `backward`: what `_cudnn_rnn_backward_input` (aten/src/ATen/native/cudnn/RNN.cpp) holds at once
 *   with batch_first: the output's gradient and a seq-major copy of it, a seq-major copy of the input
 *   and the input's gradient (GPU only: the CPU kernels read strided tensors).
 *
 * @example
 * ```ts
 * cudnnRnnPerToken("lstm", 32, 256, 2, 1); // { reserve: 3072, output: 256, workspace: 1280, backward: 576 }
 * ```
 */
export function cudnnRnnPerToken(
  kind: "lstm" | "gru",
  input: number,
  hidden: number,
  layers: number,
  dirs: number,
): { reserve: number; output: number; workspace: number; backward: number } {
  const gates = kind === "lstm" ? 4 : 3;
  const output = hidden * dirs;
  return { reserve: layers * dirs * hidden * (gates + 2), output, workspace: output * (gates + 1), backward: 2 * output + 2 * input };
}

/**
 * Elements of a convolution's im2col matrix per sample, which cuDNN's workspace follows (times a
 * calibrated factor): GEMM-based algorithms unfold the input into input channels (per group) ×
 * kernel elements × output positions. The one rule, for the spec families and the script path.
 *
 * @example
 * ```ts
 * im2colElems(64, 5, 128); // 40960
 * ```
 */
export function im2colElems(inChannelsPerGroup: number, kernelElems: number, outputPositions: number): number {
  return inChannelsPerGroup * kernelElems * outputPositions;
}
