import { InputError } from "../errors/index.ts";
import type { Block, ModelGraph } from "./graph.ts";
import { BlockBuilder } from "./ops.ts";
import { MAX_GRAPH_UNITS } from "./spec.ts";

/** What `brim plan` takes from a Hugging Face `config.json`. */
export interface HfPlanOptions {
  seqLen?: number | undefined;
  file?: string | undefined;
}

const SUPPORTED = ["bert", "roberta", "gpt2", "llama", "mistral", "qwen2"] as const;

/**
 * True when a parsed JSON value looks like a Hugging Face model config.
 *
 * @example
 * ```ts
 * isHfConfig({ model_type: "gpt2", n_embd: 768 }); // true
 * ```
 */
export function isHfConfig(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && typeof (value as Record<string, unknown>)["model_type"] === "string";
}

function int(config: Record<string, unknown>, key: string, file: string | undefined, fallback?: number): number {
  const value = config[key] ?? fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new InputError(value === undefined ? "missing; the planner needs it" : `must be a positive integer, got ${JSON.stringify(value)}`, {
      field: key,
      ...(file === undefined ? {} : { file }),
    });
  }
  return value;
}

function layerCount(config: Record<string, unknown>, key: string, file: string | undefined): number {
  const layers = int(config, key, file);
  if (layers > MAX_GRAPH_UNITS) {
    throw new InputError(`${layers.toLocaleString("en-US")} layers; brim plans up to ${MAX_GRAPH_UNITS.toLocaleString("en-US")} (a typo?)`, {
      field: key,
      ...(file === undefined ? {} : { file }),
    });
  }
  return layers;
}

/**
 * Builds the planner's graph of a Hugging Face model from its `config.json`: BERT and RoBERTa (base
 * model with pooler), GPT-2 and the Llama family (causal LM with its head, tied where configured).
 *
 * @example
 * ```ts
 * const graph = graphFromHfConfig(JSON.parse(readFileSync("config.json", "utf8")), { seqLen: 512 });
 * summarizeParams(graph).total; // 124439808 for gpt2
 * ```
 */
export function graphFromHfConfig(config: Record<string, unknown>, options: HfPlanOptions = {}): ModelGraph {
  const type = String(config["model_type"]);
  const file = options.file;
  switch (type) {
    case "bert":
    case "roberta":
      return bertGraph(config, type, options);
    case "gpt2":
      return gpt2Graph(config, options);
    case "llama":
    case "mistral":
    case "qwen2":
      return llamaGraph(config, type, options);
    default:
      throw new InputError(`model_type ${JSON.stringify(type)} is not supported yet; supported: ${SUPPORTED.join(", ")}`, {
        field: "model_type",
        ...(file === undefined ? {} : { file }),
        code: "E_UNKNOWN_FAMILY",
      });
  }
}

function modelName(config: Record<string, unknown>, fallback: string): string {
  const name = config["_name_or_path"];
  return typeof name === "string" && name !== "" ? name : fallback;
}

function sequence(positions: number, options: HfPlanOptions): number {
  const seqLen = options.seqLen ?? Math.min(512, positions);
  if (seqLen > positions) {
    throw new InputError(`--seq-len ${seqLen} is longer than the model's ${positions} positions`, { field: "seq_len" });
  }
  return seqLen;
}

function bertGraph(config: Record<string, unknown>, type: string, options: HfPlanOptions): ModelGraph {
  const f = options.file;
  const d = int(config, "hidden_size", f);
  const layers = layerCount(config, "num_hidden_layers", f);
  const heads = int(config, "num_attention_heads", f);
  const ffn = int(config, "intermediate_size", f);
  const vocab = int(config, "vocab_size", f);
  const positions = int(config, "max_position_embeddings", f);
  const types = int(config, "type_vocab_size", f, 2);
  const T = sequence(type === "roberta" ? positions - 2 : positions, options);
  const rows = T;

  const embed = new BlockBuilder("embeddings", rows, true)
    .embedding("embeddings.word_embeddings", vocab, d, rows)
    .embedding("embeddings.position_embeddings", positions, d, rows)
    .embedding("embeddings.token_type_embeddings", types, d, rows)
    .residual(rows * d)
    .layerNorm("embeddings.LayerNorm", d, rows)
    .dropout(rows * d, 0.1);
  const blocks: Block[] = [embed.build()];
  for (let i = 0; i < layers; i++) {
    const n = `encoder.layer.${i}`;
    const b = new BlockBuilder(n, rows * d, true, { checkpoint: true })
      .linear(`${n}.attention.self.query`, d, d, rows)
      .linear(`${n}.attention.self.key`, d, d, rows, { inputShared: true })
      .linear(`${n}.attention.self.value`, d, d, rows, { inputShared: true })
      .attention(d, heads, T, 1, "sdpa")
      .linear(`${n}.attention.output.dense`, d, d, rows)
      .dropout(rows * d, 0.1)
      .residual(rows * d)
      .layerNorm(`${n}.attention.output.LayerNorm`, d, rows)
      .linear(`${n}.intermediate.dense`, d, ffn, rows)
      .activation("gelu", rows * ffn)
      .linear(`${n}.output.dense`, ffn, d, rows)
      .dropout(rows * d, 0.1)
      .residual(rows * d)
      .layerNorm(`${n}.output.LayerNorm`, d, rows);
    blocks.push(b.build());
  }
  const pooler = new BlockBuilder("pooler", d, true).linear("pooler.dense", d, d, 1).activation("tanh", d).crossEntropyLoss(1, 2);
  blocks.push(pooler.build());
  return { name: modelName(config, type), family: `hf-${type}`, blocks, inputBytesPerSample: 3 * 8 * rows + 8, rowsPerSample: rows };
}

function gpt2Graph(config: Record<string, unknown>, options: HfPlanOptions): ModelGraph {
  const f = options.file;
  const d = int(config, "n_embd", f);
  const layers = layerCount(config, "n_layer", f);
  const heads = int(config, "n_head", f);
  const vocab = int(config, "vocab_size", f);
  const positions = int(config, "n_positions", f);
  const inner = typeof config["n_inner"] === "number" ? int(config, "n_inner", f) : 4 * d;
  const T = sequence(positions, options);
  const rows = T;
  const tied = config["tie_word_embeddings"] !== false;

  const blocks: Block[] = [
    new BlockBuilder("embed", rows, true)
      .embedding("wte", vocab, d, rows)
      .embedding("wpe", positions, d, rows)
      .residual(rows * d)
      .dropout(rows * d, 0.1)
      .build(),
  ];
  for (let i = 0; i < layers; i++) {
    const n = `h.${i}`;
    const b = new BlockBuilder(n, rows * d, true, { checkpoint: true })
      .layerNorm(`${n}.ln_1`, d, rows)
      .linear(`${n}.attn.c_attn`, d, 3 * d, rows)
      .attention(d, heads, T, 1, "sdpa")
      .linear(`${n}.attn.c_proj`, d, d, rows)
      .dropout(rows * d, 0.1)
      .residual(rows * d)
      .layerNorm(`${n}.ln_2`, d, rows)
      .linear(`${n}.mlp.c_fc`, d, inner, rows)
      // GPT-2's tanh GELU is written out in Python: input, x³ and tanh outputs are kept
      .elementwise("gelu-new", 4 * rows * inner, rows * inner, 10 * rows * inner)
      .linear(`${n}.mlp.c_proj`, inner, d, rows)
      .dropout(rows * d, 0.1)
      .residual(rows * d);
    blocks.push(b.build());
  }
  const head = new BlockBuilder("head", rows * d, true).layerNorm("ln_f", d, rows);
  if (tied) head.elementwise("lm_head(tied)", rows * d, rows * vocab, 2 * d * vocab * rows);
  else head.linear("lm_head", d, vocab, rows, { bias: false });
  head.crossEntropyLoss(rows, vocab);
  blocks.push(head.build());
  return { name: modelName(config, "gpt2"), family: "hf-gpt2", blocks, inputBytesPerSample: 2 * 8 * rows, rowsPerSample: rows };
}

function llamaGraph(config: Record<string, unknown>, type: string, options: HfPlanOptions): ModelGraph {
  const f = options.file;
  const d = int(config, "hidden_size", f);
  const layers = layerCount(config, "num_hidden_layers", f);
  const heads = int(config, "num_attention_heads", f);
  const kvHeads = int(config, "num_key_value_heads", f, heads);
  const ffn = int(config, "intermediate_size", f);
  const vocab = int(config, "vocab_size", f);
  const positions = int(config, "max_position_embeddings", f);
  const headDim = typeof config["head_dim"] === "number" ? int(config, "head_dim", f) : d / heads;
  const qkvBias = type === "qwen2" || config["attention_bias"] === true;
  const mlpBias = config["mlp_bias"] === true;
  const tied = config["tie_word_embeddings"] === true;
  const T = sequence(positions, options);
  const rows = T;
  const q = heads * headDim;
  const kv = kvHeads * headDim;

  const blocks: Block[] = [new BlockBuilder("embed", rows, true).embedding("model.embed_tokens", vocab, d, rows).build()];
  for (let i = 0; i < layers; i++) {
    const n = `model.layers.${i}`;
    const b = new BlockBuilder(n, rows * d, true, { checkpoint: true })
      .rmsNorm(`${n}.input_layernorm`, d, rows)
      .linear(`${n}.self_attn.q_proj`, d, q, rows, { bias: qkvBias })
      .linear(`${n}.self_attn.k_proj`, d, kv, rows, { bias: qkvBias, inputShared: true })
      .linear(`${n}.self_attn.v_proj`, d, kv, rows, { bias: qkvBias, inputShared: true })
      // rotary embedding writes new q and k
      .elementwise("rotary", rows * (q + kv), rows * (q + kv), 6 * rows * (q + kv))
      .attention(q, heads, T, 1, "sdpa")
      .linear(`${n}.self_attn.o_proj`, q, d, rows, { bias: false })
      .residual(rows * d)
      .rmsNorm(`${n}.post_attention_layernorm`, d, rows)
      .linear(`${n}.mlp.gate_proj`, d, ffn, rows, { bias: mlpBias })
      .linear(`${n}.mlp.up_proj`, d, ffn, rows, { bias: mlpBias, inputShared: true })
      // SwiGLU: silu keeps the gate, the product keeps silu(gate) and up
      .elementwise("swiglu", 3 * rows * ffn, rows * ffn, 6 * rows * ffn)
      .linear(`${n}.mlp.down_proj`, ffn, d, rows, { bias: mlpBias })
      .residual(rows * d);
    blocks.push(b.build());
  }
  const head = new BlockBuilder("head", rows * d, true).rmsNorm("model.norm", d, rows);
  if (tied) head.elementwise("lm_head(tied)", rows * d, rows * vocab, 2 * d * vocab * rows);
  else head.linear("lm_head", d, vocab, rows, { bias: false });
  head.crossEntropyLoss(rows, vocab);
  blocks.push(head.build());
  return { name: modelName(config, type), family: `hf-${type}`, blocks, inputBytesPerSample: 2 * 8 * rows, rowsPerSample: rows };
}
