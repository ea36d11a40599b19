import { z } from "zod";
import { InputError } from "../errors/index.ts";

/** The precisions brim plans for. `tf32` keeps fp32 memory and runs matmuls on TF32 tensor cores. */
export const PRECISIONS = ["fp32", "tf32", "fp16-mixed", "bf16-mixed", "bf16"] as const;
/** A training precision. */
export type Precision = (typeof PRECISIONS)[number];

/** The optimizers brim knows the state of. */
export const OPTIMIZERS = ["sgd", "sgd-momentum", "adam", "adamw", "adamw-8bit", "adafactor"] as const;
/** An optimizer. */
export type Optimizer = (typeof OPTIMIZERS)[number];

const count = z.number().int().positive();
const size = z.number().int().nonnegative();
const activation = z.enum(["relu", "gelu", "tanh", "silu", "sigmoid"]);

const training = z.strictObject({
  precision: z.enum(PRECISIONS).optional(),
  optimizer: z.enum(OPTIMIZERS).optional(),
  batch: count.optional(),
  effective_batch: count.optional(),
  checkpointing: z.boolean().optional(),
});

const stage = z.strictObject({
  name: z.string().min(1),
  seq_len: count.optional(),
  positives: size.optional(),
  negatives: size.optional(),
  batch: count.optional(),
  effective_batch: count.optional(),
});

const common = {
  name: z.string().optional(),
  seq_len: count.optional(),
  training: training.optional(),
  stages: z.array(stage).min(1).optional(),
};

const mlp = z.strictObject({
  ...common,
  family: z.literal("mlp"),
  input: count,
  hidden: z.array(count),
  output: count,
  activation: activation.default("relu"),
  norm: z.enum(["none", "layernorm"]).default("none"),
  dropout: z.number().min(0).max(1).default(0),
});

const nbeatsStack = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("generic"), blocks: count, theta: count }),
  z.strictObject({ type: z.literal("trend"), blocks: count, degree: size }),
  z.strictObject({ type: z.literal("seasonality"), blocks: count, harmonics: count }),
]);

const nbeats = z.strictObject({
  ...common,
  family: z.literal("nbeats"),
  lookback: count,
  horizon: count,
  features: count.default(1),
  units: count,
  layers_per_block: count.default(4),
  share_weights_in_stack: z.boolean().default(false),
  stacks: z.array(nbeatsStack).min(1),
});

const recurrentFields = {
  ...common,
  input: count,
  hidden: count,
  layers: count.default(1),
  bidirectional: z.boolean().default(false),
  output: count,
};
const lstm = z.strictObject({ ...recurrentFields, family: z.literal("lstm") });
const gru = z.strictObject({ ...recurrentFields, family: z.literal("gru") });

const cnnLstm = z.strictObject({
  ...common,
  family: z.literal("cnn1d-lstm"),
  input: count,
  conv: z.array(z.strictObject({ out: count, kernel: count, stride: count.default(1) })).min(1),
  batchnorm: z.boolean().default(true),
  pool: count.default(1),
  lstm: z.strictObject({ hidden: count, layers: count.default(1), bidirectional: z.boolean().default(false) }),
  output: count,
});

const LORA_TARGETS = ["q", "k", "v", "o", "ffn_in", "ffn_out"] as const;

const transformer = z
  .strictObject({
    ...common,
    family: z.literal("transformer-encoder"),
    vocab: count.optional(),
    input: count.optional(),
    max_positions: count,
    d_model: count,
    heads: count,
    ffn: count,
    layers: count,
    activation: activation.default("gelu"),
    norm_first: z.boolean().default(true),
    final_norm: z.boolean().default(true),
    pooling: z.enum(["mean", "cls", "last", "none"]).default("mean"),
    output: size.default(0),
    dropout: z.number().min(0).max(1).default(0),
    attention: z.enum(["sdpa", "math"]).default("sdpa"),
    positives: size.default(0),
    negatives: size.default(0),
    lora: z.strictObject({ rank: count, alpha: z.number().positive().optional(), targets: z.array(z.enum(LORA_TARGETS)).min(1) }).optional(),
    moe: z
      .strictObject({ layers: z.array(size).min(1), experts: count, top_k: count, ffn: count })
      .refine((m) => m.top_k <= m.experts, { message: "top_k must not exceed experts", path: ["top_k"] })
      .optional(),
  })
  .superRefine((t, ctx) => {
    if ((t.vocab === undefined) === (t.input === undefined)) {
      ctx.addIssue({ code: "custom", path: ["vocab"], message: "give exactly one of vocab (tokens) or input (features)" });
    }
    if (t.d_model % t.heads !== 0) {
      ctx.addIssue({ code: "custom", path: ["heads"], message: `d_model ${t.d_model} is not divisible by heads ${t.heads}` });
    }
    for (const [i, layer] of (t.moe?.layers ?? []).entries()) {
      if (layer >= t.layers) ctx.addIssue({ code: "custom", path: ["moe", "layers", i], message: `layer ${layer} does not exist (layers: ${t.layers})` });
    }
  });

const actorCritic = z.strictObject({
  ...common,
  family: z.literal("actor-critic"),
  observation: count,
  actions: count,
  continuous: z.boolean().default(true),
  policy: z.array(count).min(1),
  value: z.array(count).min(1),
  activation: activation.default("tanh"),
});

const modelSpec = z.discriminatedUnion("family", [mlp, nbeats, lstm, gru, cnnLstm, transformer, actorCritic]);

/** A validated model spec (see docs/model-spec.md). */
export type ModelSpec = z.output<typeof modelSpec>;
/** One training stage of a spec. */
export type StageSpec = z.output<typeof stage>;

/** The built-in families. */
export const FAMILIES = ["mlp", "nbeats", "lstm", "gru", "cnn1d-lstm", "transformer-encoder", "actor-critic"] as const;

/**
 * Validates a parsed YAML/JSON value as a model spec; the error names the field.
 *
 * @example
 * ```ts
 * const spec = parseModelSpec({ family: "mlp", input: 8, hidden: [32], output: 1 }, "model.yaml");
 * ```
 */
export function parseModelSpec(value: unknown, file?: string): ModelSpec {
  const where = file === undefined ? {} : { file };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InputError("a model spec must be a mapping with a `family` field", where);
  }
  const family = (value as Record<string, unknown>)["family"];
  if (typeof family !== "string" || !(FAMILIES as readonly string[]).includes(family)) {
    throw new InputError(`unknown family ${JSON.stringify(family)}; known: ${FAMILIES.join(", ")}`, {
      ...where,
      field: "family",
      code: "E_UNKNOWN_FAMILY",
    });
  }
  const result = modelSpec.safeParse(value);
  if (!result.success) throw zodToInputError(result.error, file);
  checkGraphSize(result.data, file);
  return result.data;
}

/** The most layers, blocks or experts a spec may build: far beyond any real model, far below what exhausts memory. */
export const MAX_GRAPH_UNITS = 100_000;

/**
 * Refuses a spec whose structure (layers, blocks, experts, list lengths) would make a graph too
 * large to build, with a one-line cause naming the field, before any work starts.
 */
function checkGraphSize(spec: ModelSpec, file: string | undefined): void {
  const units: [string, number][] = [["stages", spec.stages?.length ?? 0]];
  switch (spec.family) {
    case "mlp":
      units.push(["hidden", spec.hidden.length]);
      break;
    case "nbeats":
      spec.stacks.forEach((st, i) => units.push([`stacks[${i}].blocks`, st.blocks * spec.layers_per_block]));
      units.push(["layers_per_block", spec.layers_per_block]);
      break;
    case "lstm":
    case "gru":
      units.push(["layers", spec.layers]);
      break;
    case "cnn1d-lstm":
      units.push(["conv", spec.conv.length], ["lstm.layers", spec.lstm.layers]);
      break;
    case "transformer-encoder":
      units.push(["layers", spec.layers]);
      if (spec.moe !== undefined) units.push(["moe.experts", spec.moe.experts * spec.moe.layers.length], ["moe.layers", spec.moe.layers.length]);
      break;
    case "actor-critic":
      units.push(["policy", spec.policy.length], ["value", spec.value.length]);
      break;
  }
  const total = units.reduce((n, [, u]) => n + u, 0);
  if (total <= MAX_GRAPH_UNITS) return;
  const [field] = units.reduce((a, b) => (b[1] > a[1] ? b : a));
  throw new InputError(
    `the model would have ${total.toLocaleString("en-US")} layers/blocks/experts; brim plans up to ${MAX_GRAPH_UNITS.toLocaleString("en-US")} (a typo?)`,
    {
      field,
      ...(file === undefined ? {} : { file }),
    },
  );
}

/**
 * Turns the first issue of a zod error into an {@link InputError} naming the field (`stacks[1].blocks`).
 *
 * @example
 * ```ts
 * const r = schema.safeParse(v);
 * if (!r.success) throw zodToInputError(r.error, "profile.json");
 * ```
 */
export function zodToInputError(error: z.ZodError, file?: string): InputError {
  const issue = error.issues[0];
  const field = issue === undefined ? "" : formatPath(issue.path);
  let message = issue?.message ?? "invalid";
  if (issue?.code === "unrecognized_keys") message = `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.join(", ")}`;
  const where: { field?: string; file?: string } = {};
  if (field !== "") where.field = field;
  if (file !== undefined) where.file = file;
  return new InputError(message, where);
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out;
}
