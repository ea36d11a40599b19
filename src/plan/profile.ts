import { z } from "zod";
import { InputError } from "../errors/index.ts";
import type { ParamTensor } from "./graph.ts";
import type { ActivationBytes, ModelFootprint } from "./footprint.ts";
import { recurrentBytes, recurrentCallSchema } from "./cudnn.ts";
import { PRECISIONS, zodToInputError, type Precision } from "./spec.ts";

const nonNegative = z.number().nonnegative();
const integer = z.number().int().nonnegative();

/** The model profile the SDK writes (docs/schemas/model-profile.v1.json), as a zod schema. */
export const modelProfileSchema = z.object({
  schema: z.literal("brim.model-profile"),
  version: z.literal(1),
  name: z.string().optional(),
  framework: z.object({ name: z.string().optional(), version: z.string().optional() }).optional(),
  params: z.object({
    total: integer,
    trainable: integer,
    by_dtype: z.record(z.string(), integer).optional(),
    buffer_bytes: integer.optional(),
    tensors: z.array(z.object({ name: z.string().optional(), shape: z.array(integer), dtype: z.string().optional(), trainable: z.boolean() })).optional(),
  }),
  per_sample: z.object({
    input_bytes: integer,
    saved_bytes: z.object({ fp32: nonNegative, "bf16-mixed": nonNegative.optional(), "fp16-mixed": nonNegative.optional() }),
    largest_saved_bytes: nonNegative.optional(),
    forward_flops: nonNegative.optional(),
    backward_bytes: nonNegative.optional(),
    cudnn_rnn_workspace_bytes: nonNegative.optional(),
    cudnn_conv_workspace_bytes: nonNegative.optional(),
    /**
     * the SDK's record of each nn.LSTM/GRU call of the fp32 forward, per sample (tokens and the
     * bytes the CPU kernels saved inside it): brim plan counts them as cuDNN keeps them
     */
    recurrent: z
      .object({
        calls: z.array(recurrentCallSchema.extend({ tokens: nonNegative, saved_bytes: nonNegative })),
        largest_saved_outside_bytes: nonNegative,
      })
      .optional(),
  }),
  fixed: z.object({ saved_bytes: z.record(z.string(), z.number()).optional() }).optional(),
  measured: z.object({ batches: z.array(z.number().int()).optional(), device: z.string().optional(), created: z.string().optional() }).optional(),
});

/** A model profile written by the SDK. */
export type ModelProfile = z.output<typeof modelProfileSchema>;

/**
 * True when a parsed JSON value claims to be a brim model profile.
 *
 * @example
 * ```ts
 * isModelProfile(JSON.parse(text)); // true for files written by brim.torch.profile
 * ```
 */
export function isModelProfile(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as Record<string, unknown>)["schema"] === "brim.model-profile";
}

/**
 * Validates a profile and turns it into a footprint. Precisions the profile did not measure are
 * derived: tf32 from fp32, 16-bit ones from whichever 16-bit measurement exists (or fp32 / 2).
 *
 * @example
 * ```ts
 * const fp = footprintFromProfile(JSON.parse(readFileSync("profile.json", "utf8")), "profile.json");
 * ```
 */
export function footprintFromProfile(value: unknown, file?: string): ModelFootprint {
  const parsed = modelProfileSchema.safeParse(value);
  if (!parsed.success) {
    const v = (value as Record<string, unknown> | null)?.["version"];
    if (v !== undefined && v !== 1)
      throw new InputError(`profile version ${JSON.stringify(v)} is not supported (this brim reads version 1)`, {
        field: "version",
        ...(file === undefined ? {} : { file }),
      });
    throw zodToInputError(parsed.error, file);
  }
  const profile = parsed.data;
  if (profile.params.trainable > profile.params.total) {
    throw new InputError("trainable parameters exceed the total", { field: "params.trainable", ...(file === undefined ? {} : { file }) });
  }
  // recurrent calls the SDK recorded: the CPU kernels' bytes inside them replaced by cuDNN's (src/plan/cudnn.ts)
  const measuredRecurrent = profile.per_sample.recurrent;
  const rec = measuredRecurrent === undefined ? null : recurrentBytes(measuredRecurrent.calls, measuredRecurrent.largest_saved_outside_bytes);
  const measured = profile.per_sample.saved_bytes;
  // the 16-bit bytes of such a profile were saved by the CPU's kernels too: they are modelled from fp32's
  const saved =
    rec === null
      ? measured
      : { fp32: Math.max(0, measured.fp32 - rec.cpu_saved_bytes + rec.cudnn_saved_bytes), "bf16-mixed": undefined, "fp16-mixed": undefined };
  const half = saved["bf16-mixed"] ?? saved["fp16-mixed"] ?? saved.fp32 / 2;
  const perSample: Record<Precision, number> = {
    fp32: saved.fp32,
    tf32: saved.fp32,
    "bf16-mixed": saved["bf16-mixed"] ?? half,
    "fp16-mixed": saved["fp16-mixed"] ?? half,
    bf16: half,
  };
  const fixedSaved = profile.fixed?.saved_bytes ?? {};
  const tensors: ParamTensor[] | undefined = profile.params.tensors?.map((t, i) => ({
    name: t.name ?? `param${i}`,
    shape: t.shape,
    trainable: t.trainable,
    matmul: t.shape.length >= 2,
  }));
  const matmulElems = tensors?.filter((t) => t.matmul).reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0) ?? profile.params.total;
  const largestTensorElems =
    tensors?.reduce(
      (m, t) =>
        Math.max(
          m,
          t.shape.reduce((a, b) => a * b, 1),
        ),
      0,
    ) ?? 0;
  const largest = rec?.largest_saved_outside_bytes ?? profile.per_sample.largest_saved_bytes ?? saved.fp32;
  const backward = profile.per_sample.backward_bytes ?? rec?.cudnn_backward_bytes;
  const rnnWorkspace = profile.per_sample.cudnn_rnn_workspace_bytes ?? rec?.cudnn_workspace_bytes ?? 0;
  const convWorkspace = profile.per_sample.cudnn_conv_workspace_bytes ?? 0;
  const activations = {} as Record<Precision, ActivationBytes>;
  for (const precision of PRECISIONS) {
    const mixed = precision.endsWith("-mixed");
    const measuredFixed = fixedSaved[precision];
    // the cuDNN terms are given in fp32: 16-bit compute halves them
    const scale = precision === "fp32" || precision === "tf32" ? 1 : 0.5;
    activations[precision] = {
      perSample: perSample[precision],
      perSampleCheckpointed: undefined,
      fixed: Math.max(0, measuredFixed ?? (mixed ? 2 * matmulElems : 0)),
      largestPerSample: largest,
      ...(backward === undefined ? {} : { backwardPerSample: Math.max(2 * largest, scale * backward) }),
      // a CPU run shows no cuDNN workspace: modelled where the profile gives it (src/plan/cudnn.ts)
      workspacePerSample: { conv: scale * convWorkspace, rnn: scale * rnnWorkspace },
    };
  }
  const forward = profile.per_sample.forward_flops ?? 0;
  return {
    name: profile.name ?? file ?? "profile",
    family: "profile",
    source: "profile",
    params: { total: profile.params.total, trainable: profile.params.trainable, matmulElems, largestTensorElems, tensors },
    activations,
    inputBytesPerSample: profile.per_sample.input_bytes,
    flopsPerSample: { forward, backward: 2 * forward },
    rowsPerSample: 1,
    opsPerPass: tensors?.length ?? 50,
    usesCudnn: rnnWorkspace > 0 || convWorkspace > 0,
  };
}
