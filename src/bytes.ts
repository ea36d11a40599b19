import { InputError } from "./errors/index.ts";

const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
  k: 2 ** 10,
  m: 2 ** 20,
  g: 2 ** 30,
  t: 2 ** 40,
};

/**
 * Parses a memory size: `12GiB`, `12gib`, `11.5G` (binary), `12GB` (decimal), `512MiB`, or plain bytes.
 *
 * @example
 * ```ts
 * parseByteSize("12GiB"); // 12884901888
 * parseByteSize("12GB");  // 12000000000
 * ```
 */
export function parseByteSize(text: string, field = "size"): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = match?.[2]?.toLowerCase() ?? "";
  const factor = unit === "" ? 1 : UNITS[unit];
  if (match === null || factor === undefined) {
    throw new InputError(`cannot read ${JSON.stringify(text)} as a memory size; write e.g. 12GiB, 12GB or 800MiB`, { field });
  }
  const bytes = Math.round(Number(match[1]) * factor);
  if (!(bytes > 0)) throw new InputError(`must be more than 0 bytes, got ${JSON.stringify(text)}`, { field });
  return bytes;
}

/**
 * Formats bytes in binary units with three significant digits.
 *
 * @example
 * ```ts
 * formatBytes(12884901888); // "12.0 GiB"
 * ```
 */
export function formatBytes(bytes: number): string {
  const sign = bytes < 0 ? "-" : "";
  let value = Math.abs(bytes);
  for (const unit of ["B", "KiB", "MiB", "GiB", "TiB"]) {
    if (value < 1024 || unit === "TiB") {
      // a fitted slope can be a fraction of a byte: never print 1.2105400934595054 B
      return unit === "B"
        ? `${sign}${Number.isInteger(value) ? value : Number(value.toPrecision(3))} B`
        : `${sign}${value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2)} ${unit}`;
    }
    value /= 1024;
  }
  return `${sign}${value} TiB`;
}
