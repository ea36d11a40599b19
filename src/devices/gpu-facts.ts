/**
 * What a GPU can do fast, the one source of these facts for the tuner and the analysis: its
 * architecture, whether it has tensor cores, and whether bf16 runs on them. Decided by the compute
 * capability when the driver gives one (exact), else by an architecture the caller already knows
 * (brim's GPU catalog), else by the marketing name. The GeForce GTX 16xx cards are Turing without
 * tensor cores.
 *
 * @example
 * ```ts
 * gpuCapabilities({ name: "NVIDIA H100 80GB HBM3", computeCapability: "9.0" });
 * // { architecture: "hopper", tensorCores: true, bf16: true, fp16: true, basis: "compute capability 9.0" }
 * gpuCapabilities({ name: "NVIDIA GeForce GTX 1660 SUPER" }).tensorCores; // false
 * ```
 * @module
 */

/** GPU architectures brim tells apart, oldest first (the same names as the plan's catalog). */
export type GpuArchitecture = "pascal" | "volta" | "turing" | "ampere" | "ada" | "hopper" | "blackwell";

/** Architectures in order, oldest first. */
export const ARCHITECTURES: readonly GpuArchitecture[] = ["pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"];

/** What a GPU runs fast. */
export interface GpuCapabilities {
  /** null when nothing identifies it (or it is older than Pascal) */
  architecture: GpuArchitecture | null;
  /** tensor cores (Volta and newer, not GTX 16xx); null when unknown */
  tensorCores: boolean | null;
  /** bf16 on tensor cores (Ampere and newer); null when unknown */
  bf16: boolean | null;
  /** fp16 on tensor cores, the speed-up mixed precision buys (same as tensorCores) */
  fp16: boolean | null;
  /** how it was decided, for notes: "compute capability 8.6", "catalog", "name", "unknown" */
  basis: string;
}

const NAME_HINTS: readonly [RegExp, GpuArchitecture][] = [
  [/\b(B100|B200|GB200|RTX 50\d\d|RTX PRO 6000)\b/i, "blackwell"],
  [/\b(H100|H200|H800|H20|GH200)\b/i, "hopper"],
  [/\b(L4|L40S?|RTX 40\d\d|RTX \d000 Ada)\b/i, "ada"],
  [/\b(A100|A800|A10G?|A30|A40|A16|A2|RTX 30\d\d|RTX A\d000)\b/i, "ampere"],
  [/\b(T4|RTX 20\d\d|TITAN RTX|Quadro RTX \d000|GTX 16\d\d)\b/i, "turing"],
  [/\b(V100|TITAN V)\b/i, "volta"],
  [/\b(P100|P40|P4|GTX 10\d\d|TITAN X)\b/i, "pascal"],
];

/**
 * The architecture of a CUDA compute capability ("8.6" → ampere); null for older than Pascal or an
 * unreadable value.
 *
 * @example
 * ```ts
 * architectureOfCapability("7.5"); // "turing"
 * architectureOfCapability("8.9"); // "ada"
 * ```
 */
export function architectureOfCapability(capability: string): GpuArchitecture | null {
  const match = /^(\d+)\.(\d+)$/.exec(capability.trim());
  if (match === null) return null;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major >= 10) return "blackwell";
  if (major === 9) return "hopper";
  if (major === 8) return minor >= 9 ? "ada" : "ampere";
  if (major === 7) return minor >= 5 ? "turing" : "volta";
  if (major === 6) return "pascal";
  return null;
}

/**
 * Tensor cores and bf16 of a GPU, from its compute capability, else a known architecture (the
 * catalog's), else its name (see the module doc).
 *
 * @example
 * ```ts
 * gpuCapabilities({ name: "Tesla T4", computeCapability: "7.5" }).bf16; // false
 * gpuCapabilities({ name: "NVIDIA A10G" }).bf16;                       // true (by name)
 * ```
 */
export function gpuCapabilities(gpu: { name: string; computeCapability?: string | null; knownArchitecture?: GpuArchitecture | null }): GpuCapabilities {
  const gtx16 = /\bGTX 16\d\d\b/i.test(gpu.name);
  let architecture: GpuArchitecture | null = null;
  let basis = "unknown";
  const fromCapability = gpu.computeCapability ? architectureOfCapability(gpu.computeCapability) : null;
  if (gpu.computeCapability && (fromCapability !== null || /^[0-5]\.\d+$/.test(gpu.computeCapability.trim()))) {
    architecture = fromCapability;
    basis = `compute capability ${gpu.computeCapability.trim()}`;
  } else if (gpu.knownArchitecture) {
    architecture = gpu.knownArchitecture;
    basis = "catalog";
  } else {
    architecture = NAME_HINTS.find(([pattern]) => pattern.test(gpu.name))?.[1] ?? null;
    if (architecture !== null) basis = "name";
  }
  const identified = basis !== "unknown";
  const from = (first: GpuArchitecture): boolean | null =>
    !identified ? null : architecture !== null && ARCHITECTURES.indexOf(architecture) >= ARCHITECTURES.indexOf(first);
  const tensorCores = gtx16 ? false : from("volta");
  const bf16 = gtx16 ? false : from("ampere");
  return { architecture: gtx16 && architecture === null ? "turing" : architecture, tensorCores, bf16, fp16: tensorCores, basis };
}
