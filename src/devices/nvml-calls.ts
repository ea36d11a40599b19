/**
 * The calls brim makes to NVML for one GPU, each under a key: a call that is missing or answers
 * NOT_SUPPORTED (or another disabling code) is not made again, a call that answered is remembered
 * (the GPU's features), and an answer saying the GPU is gone marks it lost.
 *
 * @example
 * ```ts
 * const calls = new NvmlCalls();
 * const powerMw = calls.u32("power", (out) => api.nvmlDeviceGetPowerUsage?.(handle, out));
 * ```
 * @module
 */
import { NVML_RETURN, readCString, readU32, readU64 } from "./nvml-structs.ts";

const DISABLING: ReadonlySet<number> = new Set([
  NVML_RETURN.NOT_SUPPORTED,
  NVML_RETURN.NO_PERMISSION,
  NVML_RETURN.FUNCTION_NOT_FOUND,
  NVML_RETURN.ARGUMENT_VERSION_MISMATCH,
  NVML_RETURN.DEPRECATED,
]);
const LOSING: ReadonlySet<number> = new Set([NVML_RETURN.GPU_IS_LOST, NVML_RETURN.RESET_REQUIRED]);
const ANSWERS: ReadonlySet<number> = new Set([NVML_RETURN.SUCCESS, NVML_RETURN.NOT_FOUND, NVML_RETURN.INSUFFICIENT_SIZE]);
/** What a call that is missing or switched off returns. */
export const MISSING = NVML_RETURN.FUNCTION_NOT_FOUND;
/** NVML_SUCCESS. */
export const OK = NVML_RETURN.SUCCESS;

/**
 * The keyed calls of one GPU and what their answers taught brim.
 *
 * @example
 * ```ts
 * if (calls.invoke("util", () => api.nvmlDeviceGetUtilizationRates?.(h, out)) === OK) decodeUtilization(out);
 * ```
 */
export class NvmlCalls {
  /** Set once an answer said the GPU is lost or needs a reset (or brim saw a fatal Xid). */
  lost = false;
  #off = new Set<string>();
  #answered = new Set<string>();
  #scratch = Buffer.alloc(8);

  /** Makes one call unless it is missing or switched off; notes lost GPUs and unsupported calls. */
  invoke(key: string, call: () => number | undefined): number {
    if (this.#off.has(key)) return MISSING;
    const ret = call();
    if (ret === undefined) {
      this.#off.add(key);
      return MISSING;
    }
    if (DISABLING.has(ret)) this.#off.add(key);
    else if (ANSWERS.has(ret)) this.#answered.add(key);
    if (LOSING.has(ret)) this.lost = true;
    return ret;
  }

  /** Whether calls under `key` are no longer made. */
  isOff(key: string): boolean {
    return this.#off.has(key);
  }

  /** Makes no more calls under `key`. */
  turnOff(key: string): void {
    this.#off.add(key);
  }

  /** Whether a call under `key` answered and is still made. */
  answers(key: string): boolean {
    return this.#answered.has(key) && !this.#off.has(key);
  }

  u32(key: string, call: (out: Buffer) => number | undefined): number | null {
    const out = this.#scratch;
    return this.invoke(key, () => call(out)) === OK ? readU32(out) : null;
  }

  u64(key: string, call: (out: Buffer) => number | undefined): bigint | null {
    const out = this.#scratch;
    return this.invoke(key, () => call(out)) === OK ? readU64(out) : null;
  }

  text(key: string, length: number, call: (out: Buffer, length: number) => number | undefined): string | null {
    const out = Buffer.alloc(length);
    return this.invoke(key, () => call(out, length)) === OK ? readCString(out) : null;
  }
}
