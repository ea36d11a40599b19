/**
 * brim's one error module: every failure a user can cause carries a code and a one-line cause.
 *
 * @example
 * ```ts
 * import { BrimError, InputError } from "brim-gpu";
 * try { plan(spec, opts) } catch (e) {
 *   if (e instanceof BrimError) console.error(`${e.code}: ${e.message}`);
 * }
 * ```
 * @module
 */

/** Every code brim's errors carry, with the exit status the CLI gives it. */
export const ERROR_CODES = {
  E_USAGE: 2,
  E_INPUT: 2,
  E_UNKNOWN_GPU: 2,
  E_UNKNOWN_FAMILY: 2,
  E_PARSE: 2,
  E_NOT_FOUND: 2,
  E_IO: 1,
  E_STALE: 1,
  E_JOB_START: 1,
  // the shell's statuses for a command it cannot find or cannot execute
  E_JOB_NOT_EXECUTABLE: 126,
  E_JOB_NOT_FOUND: 127,
  E_NO_TRIAL_FIT: 3,
  E_INTERNAL: 70,
} as const;

/** One of {@link ERROR_CODES}' keys. */
export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * Base of brim's typed errors. `message` is one line that names the cause (and the field, where
 * there is one), fit to print after `brim: `.
 *
 * @example
 * ```ts
 * throw new BrimError("E_IO", "cannot read model.yaml: no such file");
 * ```
 */
export class BrimError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BrimError";
    this.code = code;
  }

  /** The process exit status the CLI uses for this error. */
  get exitCode(): number {
    return ERROR_CODES[this.code];
  }
}

/**
 * Bad input from the user: a field with a wrong value, a file that does not parse. `field` is the
 * dotted path of the offending value where there is one.
 *
 * @example
 * ```ts
 * throw new InputError("must be a positive integer", { field: "hidden[1]", file: "model.yaml" });
 * // message: "model.yaml: hidden[1]: must be a positive integer"
 * ```
 */
export class InputError extends BrimError {
  readonly field: string | undefined;
  readonly file: string | undefined;

  constructor(cause: string, where: { field?: string; file?: string; code?: ErrorCode } = {}, options?: { cause?: unknown }) {
    const prefix = [where.file, where.field].filter((part) => part !== undefined && part !== "").join(": ");
    super(where.code ?? "E_INPUT", prefix === "" ? cause : `${prefix}: ${cause}`, options);
    this.name = "InputError";
    this.field = where.field;
    this.file = where.file;
  }
}

/**
 * The command line itself is wrong: unknown option, missing argument.
 *
 * @example
 * ```ts
 * throw new UsageError("--batch must be a positive integer, got '0'");
 * ```
 */
export class UsageError extends BrimError {
  constructor(message: string) {
    super("E_USAGE", message);
    this.name = "UsageError";
  }
}

/** True when `error` is one of brim's own errors. */
export function isBrimError(error: unknown): error is BrimError {
  return error instanceof BrimError;
}
