import { gpuCapabilities, type GpuArchitecture } from "../devices/gpu-facts.ts";
import { findGpu } from "../plan/catalog.ts";

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

/**
 * Facts about a GPU from the name the driver gives: its architecture from brim's catalog (or a
 * name pattern), whether it has tensor cores and fast bf16 (src/devices/gpu-facts.ts decides).
 *
 * @example
 * ```ts
 * gpuFacts("NVIDIA H100 80GB HBM3", 85520809984).tensor_cores; // true
 * gpuFacts("NVIDIA GeForce GTX 1660", null).tensor_cores;      // false (Turing without tensor cores)
 * ```
 */
export function gpuFacts(name: string, totalBytes: number | null, computeCapability: string | null = null): GpuFacts {
  const facts = gpuCapabilities({ name, computeCapability, knownArchitecture: findGpu(name)?.architecture ?? null });
  return { name, total_bytes: totalBytes, architecture: facts.architecture, tensor_cores: facts.tensorCores, bf16: facts.bf16 };
}
