/**
 * A knob and the values a tune should try.
 *
 * @example
 * ```ts
 * const k: KnobTrial = { name: "num_workers", values: [0, 2, 4] };
 * ```
 */
export interface KnobTrial {
  name: string;
  values: readonly (number | string | boolean)[];
}

const SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;

/**
 * Quotes one word for a POSIX shell: kept as is when it needs no quoting, else in single quotes.
 *
 * @example
 * ```ts
 * shellQuote("train.py");    // "train.py"
 * shellQuote("a b");         // "'a b'"
 * shellQuote("it's");        // "'it'\\''s'"
 * ```
 */
export function shellQuote(word: string): string {
  if (word !== "" && SAFE.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The `brim tune` command line that verifies a fix on real trials. The one place that knows the tune
 * command's syntax, so that a change there is a change here only.
 *
 * @example
 * ```ts
 * tuneCommandLine(["python", "train.py"], [{ name: "num_workers", values: [0, 2, 4] }]);
 * // "brim tune --knob num_workers=0,2,4 -- python train.py"
 * ```
 */
export function tuneCommandLine(command: readonly string[], knobs: readonly KnobTrial[]): string {
  const flags = knobs.filter((k) => k.values.length > 0).map((k) => `--knob ${shellQuote(`${k.name}=${k.values.map(String).join(",")}`)}`);
  return ["brim tune", ...flags, "--", ...command.map(shellQuote)].join(" ");
}
