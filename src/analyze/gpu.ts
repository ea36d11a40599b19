import { findGpu, type GpuArchitecture } from "../plan/catalog.ts";

/**
 * What the analysis needs to know about the card a run used.
 *
 * @example
 * ```ts
 * const g: GpuFacts = gpuFacts("Tesla T4", 16e9); // { architecture: "turing", tensor_cores: true, bf16: false, ... }
 * ```
 */
export interface GpuFacts {
  name: string;
  total_bytes: number | null;
  /** from the catalog, or guessed from the name; null when neither knows */
  architecture: GpuArchitecture | null;
  /** Volta and newer (not GeForce GTX 16xx); null when unknown */
  tensor_cores: boolean | null;
  /** fast bf16: Ampere and newer; null when unknown */
  bf16: boolean | null;
}

const ARCH_ORDER: readonly GpuArchitecture[] = ["pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"];

const NAME_HINTS: readonly [RegExp, GpuArchitecture][] = [
  [/\b(B100|B200|GB200|RTX 50\d\d|RTX PRO 6000)\b/i, "blackwell"],
  [/\b(H100|H200|H800|GH200)\b/i, "hopper"],
  [/\b(L4|L40S?|RTX 40\d\d|RTX \d000 Ada)\b/i, "ada"],
  [/\b(A100|A800|A10G?|A30|A40|A16|A2|RTX 30\d\d|RTX A\d000)\b/i, "ampere"],
  [/\b(T4|RTX 20\d\d|TITAN RTX|Quadro RTX \d000)\b/i, "turing"],
  [/\b(V100|TITAN V)\b/i, "volta"],
  [/\b(P100|P40|P4|GTX 10\d\d|TITAN X)\b/i, "pascal"],
];

/**
 * Facts about a GPU from the name the driver gives: its architecture from brim's catalog (or a
 * name pattern), whether it has tensor cores and fast bf16.
 *
 * @example
 * ```ts
 * gpuFacts("NVIDIA H100 80GB HBM3", 85520809984).tensor_cores; // true
 * gpuFacts("NVIDIA GeForce GTX 1660", null).tensor_cores;      // false (Turing without tensor cores)
 * ```
 */
export function gpuFacts(name: string, totalBytes: number | null): GpuFacts {
  const architecture = findGpu(name)?.architecture ?? NAME_HINTS.find(([pattern]) => pattern.test(name))?.[1] ?? null;
  const gtx16 = /\bGTX 16\d\d\b/i.test(name);
  let tensor: boolean | null = architecture === null ? null : ARCH_ORDER.indexOf(architecture) >= ARCH_ORDER.indexOf("volta");
  if (gtx16) tensor = false;
  const bf16 = gtx16 ? false : architecture === null ? null : ARCH_ORDER.indexOf(architecture) >= ARCH_ORDER.indexOf("ampere");
  return { name, total_bytes: totalBytes, architecture: gtx16 ? "turing" : architecture, tensor_cores: tensor, bf16 };
}
