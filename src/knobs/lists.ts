/**
 * The knobs brim knows, as the stages read them: every list here is derived from {@link KNOB_SPECS}
 * (`specs.ts`), the one place a knob is defined. Pure: no I/O.
 *
 * @example
 * ```ts
 * knobOfName("dataloader_num_workers"); // "num_workers"
 * MICRO_BATCH_KNOB; // "batch_size"
 * ```
 * @module
 */
import { KNOB_SPECS, MICRO_BATCH_KNOB, type CandidateContext, type KnobSpec, type KnobValue } from "./specs.ts";

/**
 * The spec of knob `name`, undefined for a knob brim does not know.
 *
 * @example
 * ```ts
 * knobSpec("pin_memory")?.type; // "boolean"
 * ```
 */
export function knobSpec(name: string): KnobSpec | undefined {
  return KNOB_SPECS.find((spec) => spec.name === name);
}

function named(test: (spec: KnobSpec) => boolean): ReadonlySet<string> {
  return new Set(KNOB_SPECS.filter(test).map((spec) => spec.name));
}

/**
 * The names the micro-batch knob may have in a job's knobs or a tune's record, brim's own first.
 *
 * @example
 * ```ts
 * MICRO_BATCH_NAMES; // ["batch_size", "micro_batch", "micro_batch_size", "per_device_train_batch_size", "bs"]
 * ```
 */
export const MICRO_BATCH_NAMES: readonly string[] = [MICRO_BATCH_KNOB, ...(knobSpec(MICRO_BATCH_KNOB)?.knobNames ?? [])];

/** Knobs brim knows how to tune, with the config keys they are usually found under (last segment). */
export const KNOWN_KNOBS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(KNOB_SPECS.map((spec) => [spec.name, spec.configKeys]));

/** Knobs whose values are whole numbers. */
export const INTEGER_KNOBS = named((spec) => spec.type === "integer");
/** Knobs whose values are true or false. */
export const BOOLEAN_KNOBS = named((spec) => spec.type === "boolean");
/** DataLoader arguments: knobs whose evidence is the loop's wait for data. */
export const DATA_WAIT_KNOBS = named((spec) => spec.evidence?.kind === "data-wait");
/** DataLoader arguments PyTorch takes only from a loader with workers. */
export const NEED_WORKERS = named((spec) => spec.loader?.needsWorkers === true);
/** Knobs whose values are walked to the end before the micro-batch is looked at again. */
export const WALK_FIRST = named((spec) => spec.walkFirst === true);
/** Knobs each value of which gets a memory line of its own. */
export const OWN_MEMORY_LINE = named((spec) => spec.ownMemoryLine === true);

/**
 * The knob a command-line name stands for (normalised: no dashes, `-` as `_`, lower case): a config
 * key or a flag name of a knob; null for none.
 *
 * @example
 * ```ts
 * knobOfName("grad_accum"); // "accumulation"
 * ```
 */
export function knobOfName(name: string): string | null {
  return KNOB_SPECS.find((spec) => spec.configKeys.includes(name) || spec.flagNames?.includes(name) === true)?.name ?? null;
}

/**
 * The knob a one-letter flag stands for (`b` of `-b 256`), null for none.
 *
 * @example
 * ```ts
 * knobOfShortFlag("j"); // "num_workers"
 * ```
 */
export function knobOfShortFlag(letter: string): string | null {
  return KNOB_SPECS.find((spec) => spec.shortFlags?.includes(letter) === true)?.name ?? null;
}

/**
 * The knob and value a switch sets by being present (`bf16` of `--bf16`), undefined for none.
 *
 * @example
 * ```ts
 * switchOf("bf16"); // { knob: "precision", value: "bf16-mixed" }
 * ```
 */
export function switchOf(name: string): { knob: string; value: KnobValue } | undefined {
  for (const spec of KNOB_SPECS) {
    const value = spec.switches?.[name];
    if (value !== undefined) return { knob: spec.name, value };
  }
  return undefined;
}

/**
 * The values of `knob` a command line can say by a switch or in another spelling (`--bf16`,
 * `--dtype=float32`); empty for a knob with neither.
 *
 * @example
 * ```ts
 * spelledValues("precision"); // Set { "fp32", "bf16-mixed", "fp16-mixed" }
 * ```
 */
export function spelledValues(knob: string): ReadonlySet<KnobValue> {
  const spec = knobSpec(knob);
  return new Set([...Object.values(spec?.switches ?? {}), ...(spec?.spellings ?? []).flatMap((spelling) => Object.keys(spelling))]);
}

/**
 * The candidate values of the knobs in `knobs` that have any, in the table's order, each with the
 * job's value in `baseline`; knobs with fewer than two values on this machine are left out.
 *
 * @example
 * ```ts
 * candidateValues(["precision", "num_workers"], { precision: "fp32", num_workers: 0 }, { backend: "cpu", bf16: false, tensorCores: false, cpus: 4 });
 * // [{ knob: "num_workers", values: [0, 1, 2, 4] }]
 * ```
 */
export function candidateValues(
  knobs: readonly string[],
  baseline: Readonly<Record<string, KnobValue>>,
  context: CandidateContext,
): { knob: string; values: KnobValue[] }[] {
  return KNOB_SPECS.flatMap((spec) =>
    spec.candidates === undefined || !knobs.includes(spec.name) ? [] : [{ knob: spec.name, values: spec.candidates(baseline[spec.name], context) }],
  ).filter((entry) => entry.values.length > 1);
}

/**
 * The knobs of a trial that sets `knob` to `value` from `knobs`: where the knob holds a product with
 * another the job has (`holds`: `num_envs` × `rollout_steps`), that one changes inversely; null when it
 * would not be a whole number (the value is not tried), or when either is not a number.
 *
 * @example
 * ```ts
 * withHeld({ num_envs: 4, rollout_steps: 128 }, "num_envs", 8); // { num_envs: 8, rollout_steps: 64 }
 * withHeld({ num_envs: 4, rollout_steps: 128 }, "num_envs", 3); // null: 512 / 3 is not whole
 * withHeld({ num_envs: 4 }, "num_envs", 8); // { num_envs: 8 }: no rollout knob, the rollout grows
 * ```
 */
export function withHeld(knobs: Readonly<Record<string, KnobValue>>, knob: string, value: KnobValue): Record<string, KnobValue> | null {
  const next: Record<string, KnobValue> = { ...knobs, [knob]: value };
  const held = knobSpec(knob)?.holds;
  const partner = held === undefined ? undefined : knobs[held.knob];
  const from = knobs[knob];
  if (held === undefined || partner === undefined || from === value) return next;
  if (typeof partner !== "number" || typeof from !== "number" || typeof value !== "number" || value <= 0) return null;
  const product = partner * from;
  if (product % value !== 0) return null;
  next[held.knob] = product / value;
  return next;
}

/**
 * The knobs among `found` whose names count only beside another knob (`foundWith`) that is not among
 * them: a `num_steps` key or flag in a job with no number of environments is a training length, not a
 * rollout's, and is left alone.
 *
 * @example
 * ```ts
 * lonePartners(["batch_size", "rollout_steps"]); // ["rollout_steps"]
 * lonePartners(["num_envs", "rollout_steps"]); // []
 * ```
 */
export function lonePartners(found: readonly string[]): string[] {
  return found.filter((knob) => {
    const partner = knobSpec(knob)?.foundWith;
    return partner !== undefined && !found.includes(partner);
  });
}
