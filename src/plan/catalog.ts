/**
 * Catalog of GPUs people train neural networks on, with the vendor numbers the
 * memory and throughput planner needs. Every entry names the document its
 * numbers come from; numbers that could not be confirmed against a citable
 * source are marked "(unconfirmed)" in that entry's `source`.
 *
 * Conventions used for every entry:
 * - Peak TFLOP/s are dense (no 2:4 sparsity). Datasheets that only print the
 *   sparse figure were halved.
 * - `fp32` is plain (non-tensor) FP32 on the CUDA cores.
 * - `fp16`/`bf16` are tensor-core rates with FP32 accumulate. GeForce cards run
 *   FP16-with-FP32-accumulate at half the FP16-accumulate rate; the halved
 *   number is the one stored here.
 * - Pascal has no tensor cores: its `fp16` is the packed-half2 CUDA-core rate.
 */
import type { GpuArchitecture } from "../devices/gpu-facts.ts";

/** Tensor-core generation decides which precisions run fast (the names are the devices' own). */
export type { GpuArchitecture };

/**
 * One GPU model. Peak numbers are dense (no sparsity), in TFLOP/s, from the vendor's datasheet.
 *
 * @example
 * const gpu: GpuSpec = {
 *   id: "rtx-4090",
 *   aliases: ["4090", "geforce-rtx-4090"],
 *   name: "NVIDIA GeForce RTX 4090",
 *   architecture: "ada",
 *   memoryGiB: 24,
 *   reportedTotalMiB: 24564,
 *   bandwidthGBs: 1008,
 *   peakTflops: { fp32: 82.6, tf32: 82.6, fp16: 165.2, bf16: 165.2 },
 *   sms: 128,
 *   source: "NVIDIA Ada GPU Architecture whitepaper, Appendix A",
 * };
 */
export interface GpuSpec {
  /** kebab-case id used on the command line, e.g. "rtx-4090", "a100-80gb", "h100-sxm" */
  id: string;
  /** other accepted spellings, lower-case, e.g. ["4090", "geforce-rtx-4090"] */
  aliases: readonly string[];
  /** full marketing name, e.g. "NVIDIA GeForce RTX 4090" */
  name: string;
  architecture: GpuArchitecture;
  /** memory as sold, in GiB units the vendor states (e.g. 24 for a "24 GB" card) */
  memoryGiB: number;
  /** total memory the driver reports (nvidia-smi "memory.total", MiB) where known; else undefined */
  reportedTotalMiB?: number;
  /** memory bandwidth in GB/s */
  bandwidthGBs: number;
  /** dense peak TFLOP/s by precision; omit a precision the card has no fast path for (e.g. bf16 before Ampere). fp32 = non-tensor FP32; tf32/fp16/bf16 = tensor-core dense with FP32 accumulate where the datasheet distinguishes (GeForce cards halve FP16-with-FP32-accumulate: use that number) */
  peakTflops: { fp32: number; tf32?: number; fp16?: number; bf16?: number };
  /** SM count (for small-batch efficiency estimates) */
  sms: number;
  /** URL or document title of the datasheet/whitepaper the numbers come from */
  source: string;
}

const AMPERE_GA102_WP = "NVIDIA Ampere GA102 GPU Architecture whitepaper (V2.0)";
const ADA_WP = "NVIDIA Ada GPU Architecture whitepaper (V2.01)";
const HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper";

/**
 * Every GPU brim knows by name, oldest architecture first.
 *
 * @example
 * const big = GPU_CATALOG.filter((g) => g.memoryGiB >= 80).map((g) => g.id);
 * // ["a100-80gb", "h100-pcie", "h100-sxm", "h200"]
 */
export const GPU_CATALOG: readonly GpuSpec[] = [
  // ---------------------------------------------------------------- Pascal
  {
    id: "p100-16gb",
    aliases: ["p100", "tesla-p100", "p100-pcie", "p100-pcie-16gb", "tesla-p100-pcie-16gb"],
    name: "NVIDIA Tesla P100 PCIe 16 GB",
    architecture: "pascal",
    memoryGiB: 16,
    bandwidthGBs: 732,
    // No tensor cores: fp16 is the 2x packed-half2 CUDA-core rate.
    peakTflops: { fp32: 9.3, fp16: 18.7 },
    sms: 56,
    source: "NVIDIA Tesla P100 datasheet, PCIe 16 GB column (FP32 9.3, FP16 18.7 TFLOPS, 732 GB/s); 56 SMs per NVIDIA Tesla P100 (GP100) whitepaper",
  },
  // ---------------------------------------------------------------- Volta
  {
    id: "v100-16gb",
    aliases: ["v100", "tesla-v100", "v100-sxm2", "v100-sxm2-16gb", "tesla-v100-sxm2-16gb"],
    name: "NVIDIA Tesla V100 SXM2 16 GB",
    architecture: "volta",
    memoryGiB: 16,
    bandwidthGBs: 900,
    peakTflops: { fp32: 15.7, fp16: 125 },
    sms: 80,
    source:
      "NVIDIA Tesla V100 GPU datasheet, SXM2 column (FP32 15.7, Tensor 125 TFLOPS, 900 GB/s; PCIe variant is 14 / 112); 80 SMs per NVIDIA Tesla V100 GPU Architecture whitepaper",
  },
  {
    id: "v100-32gb",
    aliases: ["v100-sxm2-32gb", "tesla-v100-32gb", "tesla-v100-sxm2-32gb"],
    name: "NVIDIA Tesla V100 SXM2 32 GB",
    architecture: "volta",
    memoryGiB: 32,
    bandwidthGBs: 900,
    peakTflops: { fp32: 15.7, fp16: 125 },
    sms: 80,
    source: "NVIDIA Tesla V100 GPU datasheet, SXM2 column (FP32 15.7, Tensor 125 TFLOPS, 900 GB/s); 80 SMs per NVIDIA Tesla V100 GPU Architecture whitepaper",
  },
  // ---------------------------------------------------------------- Turing
  {
    id: "t4",
    aliases: ["tesla-t4", "t4-16gb"],
    name: "NVIDIA T4",
    architecture: "turing",
    memoryGiB: 16,
    reportedTotalMiB: 15360,
    bandwidthGBs: 320,
    peakTflops: { fp32: 8.1, fp16: 65 },
    sms: 40,
    source:
      "NVIDIA T4 Tensor Core GPU datasheet (FP32 8.1, mixed-precision FP16/FP32 65 TFLOPS, 320 GB/s); 40 SMs (2,560 CUDA cores) per NVIDIA Turing GPU Architecture whitepaper",
  },
  {
    id: "quadro-rtx-6000",
    aliases: ["rtx-6000-turing", "quadro-rtx6000"],
    name: "NVIDIA Quadro RTX 6000",
    architecture: "turing",
    memoryGiB: 24,
    bandwidthGBs: 672,
    peakTflops: { fp32: 16.3, fp16: 130.5 },
    sms: 72,
    source: "NVIDIA Quadro RTX 6000 datasheet (FP32 16.3, Tensor 130.5 TFLOPS, 24 GB GDDR6, 672 GB/s; 4,608 CUDA cores = 72 SMs)",
  },
  // ---------------------------------------------------------------- Ampere
  {
    id: "rtx-3060",
    aliases: ["3060", "rtx3060", "geforce-rtx-3060", "rtx-3060-12gb"],
    name: "NVIDIA GeForce RTX 3060 12 GB",
    architecture: "ampere",
    memoryGiB: 12,
    bandwidthGBs: 360,
    peakTflops: { fp32: 12.7, tf32: 12.7, fp16: 25.5, bf16: 25.5 },
    sms: 28,
    source:
      "NVIDIA GeForce RTX 3060 family specifications (3,584 CUDA cores, 1.78 GHz boost, 12 GB 192-bit 15 Gbps = 360 GB/s); tensor rates computed from GA10x GeForce per-SM rates in the " +
      AMPERE_GA102_WP +
      " (unconfirmed)",
  },
  {
    id: "rtx-3080",
    aliases: ["3080", "rtx3080", "geforce-rtx-3080", "rtx-3080-10gb"],
    name: "NVIDIA GeForce RTX 3080 10 GB",
    architecture: "ampere",
    memoryGiB: 10,
    bandwidthGBs: 760,
    peakTflops: { fp32: 29.8, tf32: 29.8, fp16: 59.5, bf16: 59.5 },
    sms: 68,
    source: AMPERE_GA102_WP + ", GeForce RTX 3080 specification table",
  },
  {
    id: "rtx-3090",
    aliases: ["3090", "rtx3090", "geforce-rtx-3090"],
    name: "NVIDIA GeForce RTX 3090",
    architecture: "ampere",
    memoryGiB: 24,
    bandwidthGBs: 936,
    peakTflops: { fp32: 35.6, tf32: 35.6, fp16: 71, bf16: 71 },
    sms: 82,
    source: AMPERE_GA102_WP + ", Appendix A (GeForce RTX 3090)",
  },
  {
    id: "rtx-a6000",
    aliases: ["a6000", "rtxa6000"],
    name: "NVIDIA RTX A6000",
    architecture: "ampere",
    memoryGiB: 48,
    bandwidthGBs: 768,
    peakTflops: { fp32: 38.7, tf32: 77.4, fp16: 154.8, bf16: 154.8 },
    sms: 84,
    source: AMPERE_GA102_WP + ", Appendix C (RTX A6000); NVIDIA RTX A6000 datasheet (768 GB/s)",
  },
  {
    id: "a10",
    aliases: ["a10-24gb"],
    name: "NVIDIA A10",
    architecture: "ampere",
    memoryGiB: 24,
    bandwidthGBs: 600,
    peakTflops: { fp32: 31.2, tf32: 62.5, fp16: 125, bf16: 125 },
    sms: 72,
    source: "NVIDIA A10 Tensor Core GPU datasheet (FP32 31.2; TF32 62.5, BF16/FP16 125 dense; 600 GB/s; 9,216 CUDA cores = 72 SMs)",
  },
  {
    id: "a100-40gb",
    aliases: ["a100", "a100-sxm4-40gb", "a100-sxm-40gb", "a100-40gb-sxm"],
    name: "NVIDIA A100 40 GB SXM",
    architecture: "ampere",
    memoryGiB: 40,
    bandwidthGBs: 1555,
    peakTflops: { fp32: 19.5, tf32: 156, fp16: 312, bf16: 312 },
    sms: 108,
    source: "NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM column (1,555 GB/s); 108 SMs per NVIDIA A100 Tensor Core GPU Architecture whitepaper",
  },
  {
    id: "a100-80gb",
    aliases: ["a100-sxm4-80gb", "a100-sxm-80gb", "a100-80gb-sxm"],
    name: "NVIDIA A100 80 GB SXM",
    architecture: "ampere",
    memoryGiB: 80,
    reportedTotalMiB: 81920,
    bandwidthGBs: 2039,
    peakTflops: { fp32: 19.5, tf32: 156, fp16: 312, bf16: 312 },
    sms: 108,
    source: "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column (2,039 GB/s); 108 SMs per NVIDIA A100 Tensor Core GPU Architecture whitepaper",
  },
  // ---------------------------------------------------------------- Ada
  {
    id: "rtx-4060",
    aliases: ["4060", "rtx4060", "geforce-rtx-4060"],
    name: "NVIDIA GeForce RTX 4060",
    architecture: "ada",
    memoryGiB: 8,
    bandwidthGBs: 272,
    peakTflops: { fp32: 15.1, tf32: 15.1, fp16: 30.2, bf16: 30.2 },
    sms: 24,
    source:
      "NVIDIA GeForce RTX 4060 family specifications (3,072 CUDA cores, 2.46 GHz boost, 8 GB 128-bit 17 Gbps = 272 GB/s, 242 AI TOPS); tensor rates computed from GeForce Ada per-SM rates in the " +
      ADA_WP +
      " (unconfirmed)",
  },
  {
    id: "rtx-4060-laptop",
    aliases: ["4060-laptop", "rtx-4060-mobile", "rtx-4060-laptop-gpu", "geforce-rtx-4060-laptop-gpu"],
    name: "NVIDIA GeForce RTX 4060 Laptop GPU",
    architecture: "ada",
    memoryGiB: 8,
    bandwidthGBs: 256,
    peakTflops: { fp32: 14.6, tf32: 14.6, fp16: 29.1, bf16: 29.1 },
    sms: 24,
    source:
      "NVIDIA GeForce RTX 40 Series Laptop GPU specifications (3,072 CUDA cores, boost 1,470-2,370 MHz depending on 35-115 W TGP, 8 GB 128-bit 16 Gbps = 256 GB/s, 233 AI TOPS); peaks computed at the 2,370 MHz top boost, real laptops are often lower (unconfirmed)",
  },
  {
    id: "rtx-4070",
    aliases: ["4070", "rtx4070", "geforce-rtx-4070"],
    name: "NVIDIA GeForce RTX 4070",
    architecture: "ada",
    memoryGiB: 12,
    bandwidthGBs: 504,
    peakTflops: { fp32: 29.1, tf32: 29.1, fp16: 58.3, bf16: 58.3 },
    sms: 46,
    source:
      "NVIDIA GeForce RTX 4070 family specifications (5,888 CUDA cores, 2.475 GHz boost, 12 GB 192-bit 21 Gbps = 504 GB/s, 466 AI TOPS); tensor rates computed from GeForce Ada per-SM rates in the " +
      ADA_WP +
      " (unconfirmed)",
  },
  {
    id: "rtx-4080",
    aliases: ["4080", "rtx4080", "geforce-rtx-4080", "rtx-4080-16gb"],
    name: "NVIDIA GeForce RTX 4080",
    architecture: "ada",
    memoryGiB: 16,
    bandwidthGBs: 716.8,
    peakTflops: { fp32: 48.7, tf32: 48.7, fp16: 97.5, bf16: 97.5 },
    sms: 76,
    source: ADA_WP + ", Appendix A (GeForce RTX 4080 16 GB)",
  },
  {
    id: "rtx-4090",
    aliases: ["4090", "rtx4090", "geforce-rtx-4090"],
    name: "NVIDIA GeForce RTX 4090",
    architecture: "ada",
    memoryGiB: 24,
    reportedTotalMiB: 24564,
    bandwidthGBs: 1008,
    peakTflops: { fp32: 82.6, tf32: 82.6, fp16: 165.2, bf16: 165.2 },
    sms: 128,
    source: ADA_WP + ", Appendix A (GeForce RTX 4090)",
  },
  {
    id: "rtx-6000-ada",
    aliases: ["6000-ada", "rtx-6000-ada-generation", "rtx6000-ada"],
    name: "NVIDIA RTX 6000 Ada Generation",
    architecture: "ada",
    memoryGiB: 48,
    bandwidthGBs: 960,
    peakTflops: { fp32: 91.1, tf32: 182.1, fp16: 364.2, bf16: 364.2 },
    sms: 142,
    source:
      "NVIDIA RTX 6000 Ada Generation datasheet (FP32 91.1 TFLOPS, 1,457 FP8 sparse tensor TFLOPS, 48 GB, 960 GB/s, 18,176 CUDA cores = 142 SMs); dense TF32/FP16/BF16 derived from the sparse FP8 figure (unconfirmed)",
  },
  {
    id: "l4",
    aliases: ["l4-24gb"],
    name: "NVIDIA L4",
    architecture: "ada",
    memoryGiB: 24,
    reportedTotalMiB: 23034,
    bandwidthGBs: 300,
    peakTflops: { fp32: 30.3, tf32: 60, fp16: 121, bf16: 121 },
    sms: 58,
    source: "NVIDIA L4 Tensor Core GPU datasheet (FP32 30.3; TF32 120, FP16/BF16 242 sparse; 300 GB/s); 58 SMs (7,424 CUDA cores) per " + ADA_WP,
  },
  {
    id: "l40s",
    aliases: ["l40s-48gb"],
    name: "NVIDIA L40S",
    architecture: "ada",
    memoryGiB: 48,
    bandwidthGBs: 864,
    peakTflops: { fp32: 91.6, tf32: 183, fp16: 362, bf16: 362 },
    sms: 142,
    source: "NVIDIA L40S datasheet (FP32 91.6; TF32 183 / 366 sparse; FP16/BF16 362 / 733 sparse; 864 GB/s; 18,176 CUDA cores = 142 SMs)",
  },
  // ---------------------------------------------------------------- Hopper
  {
    id: "h100-pcie",
    aliases: ["h100-pcie-80gb", "h100-pcie5"],
    name: "NVIDIA H100 PCIe",
    architecture: "hopper",
    memoryGiB: 80,
    bandwidthGBs: 2000,
    peakTflops: { fp32: 51.2, tf32: 378, fp16: 756, bf16: 756 },
    sms: 114,
    source: "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column (FP32 51; TF32 756, BF16/FP16 1,513 sparse; 2 TB/s); 114 SMs per " + HOPPER_WP,
  },
  {
    id: "h100-sxm",
    aliases: ["h100", "h100-sxm5", "h100-sxm-80gb", "h100-sxm5-80gb", "h100-80gb-hbm3"],
    name: "NVIDIA H100 SXM",
    architecture: "hopper",
    memoryGiB: 80,
    reportedTotalMiB: 81559,
    bandwidthGBs: 3350,
    peakTflops: { fp32: 66.9, tf32: 494.7, fp16: 989.4, bf16: 989.4 },
    sms: 132,
    source: "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column (3.35 TB/s; TF32 989, BF16/FP16 1,979 sparse); dense values and 132 SMs per " + HOPPER_WP,
  },
  {
    id: "h200",
    aliases: ["h200-sxm", "h200-141gb", "h200-sxm-141gb"],
    name: "NVIDIA H200 SXM",
    architecture: "hopper",
    memoryGiB: 141,
    reportedTotalMiB: 143771,
    bandwidthGBs: 4800,
    peakTflops: { fp32: 66.9, tf32: 494.7, fp16: 989.4, bf16: 989.4 },
    sms: 132,
    source:
      "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (141 GB HBM3e, 4.8 TB/s; FP32 67, TF32 989, BF16/FP16 1,979 sparse); same GH100 compute as H100 SXM per " +
      HOPPER_WP,
  },
  // ---------------------------------------------------------------- Blackwell
  {
    id: "rtx-5090",
    aliases: ["5090", "rtx5090", "geforce-rtx-5090"],
    name: "NVIDIA GeForce RTX 5090",
    architecture: "blackwell",
    memoryGiB: 32,
    bandwidthGBs: 1792,
    peakTflops: { fp32: 104.8, tf32: 104.8, fp16: 209.5, bf16: 209.5 },
    sms: 170,
    source:
      "NVIDIA GeForce RTX 5090 specifications (21,760 CUDA cores = 170 SMs, 2.41 GHz boost, 32 GB GDDR7 512-bit 28 Gbps = 1,792 GB/s, 3,352 AI TOPS); tensor rates per NVIDIA RTX Blackwell GPU Architecture whitepaper as recalled, not re-checked (unconfirmed)",
  },
];

/** Lower-case, trim, and turn runs of spaces/underscores/dashes into one dash. */
function normalize(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[\s_-]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

const LOOKUP: ReadonlyMap<string, GpuSpec> = (() => {
  const map = new Map<string, GpuSpec>();
  for (const gpu of GPU_CATALOG) {
    for (const key of [gpu.id, ...gpu.aliases]) {
      const k = normalize(key);
      // First writer wins; the test suite guarantees there are no collisions.
      if (!map.has(k)) map.set(k, gpu);
    }
  }
  return map;
})();

/** Vendor/brand prefixes nvidia-smi puts in front of a model name. */
const PREFIXES = ["nvidia-", "geforce-", "tesla-"] as const;

/**
 * Finds a GPU by id or alias, case-insensitive, ignoring spaces/underscores vs dashes.
 * Names as nvidia-smi prints them ("NVIDIA GeForce RTX 4090", "Tesla T4") also match.
 *
 * @example
 * findGpu("RTX 4090")?.id;        // "rtx-4090"
 * findGpu("a100_80gb")?.memoryGiB; // 80
 * findGpu("NVIDIA H100 80GB HBM3")?.id; // "h100-sxm"
 * findGpu("voodoo-2");             // undefined
 */
export function findGpu(idOrAlias: string): GpuSpec | undefined {
  let key = normalize(idOrAlias);
  if (key === "") return undefined;
  const direct = LOOKUP.get(key);
  if (direct !== undefined) return direct;
  // Peel brand prefixes one at a time ("nvidia-geforce-rtx-4090" -> "geforce-rtx-4090" -> "rtx-4090").
  for (const prefix of PREFIXES) {
    if (key.startsWith(prefix)) {
      key = key.slice(prefix.length);
      const hit = LOOKUP.get(key);
      if (hit !== undefined) return hit;
    }
  }
  return undefined;
}

/** Names people write that fit several cards of the catalog: the plan asks which one is meant. */
const AMBIGUOUS: Readonly<Record<string, readonly string[]>> = {
  "rtx-6000": ["quadro-rtx-6000", "rtx-a6000", "rtx-6000-ada"],
  rtx6000: ["quadro-rtx-6000", "rtx-a6000", "rtx-6000-ada"],
  "6000": ["quadro-rtx-6000", "rtx-a6000", "rtx-6000-ada"],
  "quadro-6000": ["quadro-rtx-6000", "rtx-a6000"],
};

/**
 * The cards a name could mean when it fits several ("RTX 6000": Quadro RTX 6000, RTX A6000 or
 * RTX 6000 Ada), or undefined when it is not ambiguous.
 *
 * @example
 * ```ts
 * ambiguousGpu("RTX 6000")?.map((g) => g.id); // ["quadro-rtx-6000", "rtx-a6000", "rtx-6000-ada"]
 * ```
 */
export function ambiguousGpu(name: string): GpuSpec[] | undefined {
  let key = normalize(name);
  for (;;) {
    const ids = AMBIGUOUS[key];
    if (ids !== undefined) return ids.map((id) => GPU_CATALOG.find((g) => g.id === id)).filter((g): g is GpuSpec => g !== undefined);
    const prefix = PREFIXES.find((p) => key.startsWith(p));
    if (prefix === undefined) return undefined;
    key = key.slice(prefix.length);
  }
}

/**
 * Ids of all GPUs, for error messages and --help.
 *
 * @example
 * `unknown GPU; known: ${gpuIds().join(", ")}`;
 */
export function gpuIds(): string[] {
  return GPU_CATALOG.map((gpu) => gpu.id);
}
