/**
 * Knobs in a DeepSpeed config (`--deepspeed_config ds_config.json`, `--deepspeed ds.json`). DeepSpeed
 * keeps three batch keys and checks `train_batch_size == train_micro_batch_size_per_gpu ×
 * gradient_accumulation_steps × ranks` at start. brim's micro-batch is the per-rank one, its
 * accumulation the steps key; the global key, when the file sets it, is kept equal to their product
 * times the ranks the file implies, so that no trial dies of DeepSpeed's own check. Pure.
 *
 * @example
 * ```ts
 * deepSpeedKnobs({ train_batch_size: 32, train_micro_batch_size_per_gpu: 8, gradient_accumulation_steps: 2 }).globalBatch;
 * // { key: "train_batch_size", ranks: 2 }
 * ```
 * @module
 */
import type { DetectedKey } from "./binding.ts";

const MICRO = "train_micro_batch_size_per_gpu";
const ACCUMULATION = "gradient_accumulation_steps";
const GLOBAL = "train_batch_size";
/** Top-level keys only DeepSpeed's config has (beside the batch keys). */
const DEEPSPEED_ONLY = [
  "zero_optimization",
  "zero_allow_untested_optimizer",
  "steps_per_print",
  "wall_clock_breakdown",
  "gradient_clipping",
  "prescale_gradients",
];

const record = (data: unknown): Record<string, unknown> | null =>
  typeof data === "object" && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : null;

const count = (value: unknown): number | null => (typeof value === "number" && Number.isInteger(value) && value >= 1 ? value : null);

/**
 * Whether a parsed config is a DeepSpeed config: its per-rank micro-batch key, or the global batch
 * key beside a key only DeepSpeed reads.
 *
 * @example
 * ```ts
 * isDeepSpeedConfig({ train_batch_size: 16, zero_optimization: { stage: 2 } }); // true
 * isDeepSpeedConfig({ data: { batch_size: 16 } }); // false
 * ```
 */
export function isDeepSpeedConfig(data: unknown): boolean {
  const top = record(data);
  if (top === null) return false;
  return MICRO in top || (DEEPSPEED_ONLY.some((key) => key in top) && (GLOBAL in top || ACCUMULATION in top));
}

/**
 * The micro-batch and accumulation keys of a DeepSpeed config, and the global key to keep in step
 * with them (`ranks` = the file's global batch over micro × accumulation). A key set to "auto" is
 * the HF Trainer's to fill (its flags are the knobs); a global batch brim cannot keep consistent
 * leaves both batch knobs unbound, with a note that says what to write.
 *
 * @example
 * ```ts
 * deepSpeedKnobs({ train_batch_size: 16 }).notes[0]; // "DeepSpeed config: train_batch_size 16 is set without …"
 * ```
 */
export function deepSpeedKnobs(data: unknown): { found: DetectedKey[]; globalBatch: { key: string; ranks: number } | null; notes: string[] } {
  const top = record(data) ?? {};
  const notes: string[] = [];
  const auto = [MICRO, ACCUMULATION, GLOBAL].filter((key) => top[key] === "auto");
  if (auto.length > 0)
    notes.push(
      `DeepSpeed config: ${auto.join(", ")} ${auto.length === 1 ? "is" : "are"} "auto", filled by the HF Trainer from its flags (those are the knobs)`,
    );
  const micro = count(top[MICRO]);
  const accumulation = count(top[ACCUMULATION]);
  const global = count(top[GLOBAL]);
  const found: DetectedKey[] = [];
  if (micro !== null) found.push({ knob: "batch_size", key: MICRO, value: micro });
  if (accumulation !== null) found.push({ knob: "accumulation", key: ACCUMULATION, value: accumulation });
  if (global === null) return { found, globalBatch: null, notes };
  if (micro !== null && accumulation !== null && global % (micro * accumulation) === 0)
    return { found, globalBatch: { key: GLOBAL, ranks: global / (micro * accumulation) }, notes };
  notes.push(
    micro !== null && accumulation !== null
      ? `DeepSpeed config: ${GLOBAL} ${global} is not ${MICRO} ${micro} × ${ACCUMULATION} ${accumulation} × a whole number of ranks (DeepSpeed will refuse it): the batch knobs are left as they are`
      : `DeepSpeed config: ${GLOBAL} ${global} is set without both ${MICRO} and ${ACCUMULATION}, so the ranks it assumes are unknown and the batch knobs are left as they are; write both beside it (${GLOBAL} = micro × accumulation × ranks) to let brim tune them`,
  );
  return { found: found.filter((f) => f.knob !== "batch_size" && f.knob !== "accumulation"), globalBatch: null, notes };
}
