/**
 * Config files keyed by what a job trains on, and knob names that count only beside another knob:
 * rl_zoo3's hyperparameter files hold one section per environment id (`CartPole-v1: {n_envs: 8, …}`),
 * and the command names the one it runs (`--env CartPole-v1`); a `num_steps` key or flag is a
 * rollout's length only in a job that has a number of environments. Pure: no I/O.
 *
 * @example
 * ```ts
 * namedSection({ "CartPole-v1": { n_envs: 8 }, "Pendulum-v1": { n_envs: 4 } }, ["python", "-m", "rl_zoo3.train", "--env", "CartPole-v1"]);
 * // { "CartPole-v1": { n_envs: 8 } }
 * ```
 * @module
 */
import { knobSpec, lonePartners } from "./lists.ts";
import type { KnobBinding } from "./binding.ts";

type Section = Record<string, unknown>;

const isSection = (value: unknown): value is Section => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The part of a parsed config the command selects: where two or more top-level sections are tables
 * and one of them is named by an argument of the command (`--env CartPole-v1`, `--env=CartPole-v1`),
 * that section alone (under its own key, so keys read `CartPole-v1.n_envs`); else the whole config.
 *
 * @example
 * ```ts
 * namedSection({ data: { batch_size: 8 } }, ["python", "train.py", "data"]); // the whole config: one section only
 * ```
 */
export function namedSection(data: unknown, command: readonly string[]): unknown {
  if (!isSection(data)) return data;
  const sections = Object.keys(data).filter((key) => isSection(data[key]));
  if (sections.length < 2) return data;
  const words = new Set(command.slice(1).map((arg) => (/^--?[\w.-]+=/.test(arg) ? arg.slice(arg.indexOf("=") + 1) : arg)));
  const named = sections.filter((key) => words.has(key));
  if (named.length !== 1) return data;
  const key = named[0] as string;
  return { [key]: data[key] };
}

/**
 * `bindings` without the knobs found by name only (a config key or a flag) whose names count only
 * beside a knob the job does not have (`foundWith`), with a note for each; templates and `--bind`s stay.
 *
 * @example
 * ```ts
 * dropLonePartners([{ knob: "rollout_steps", via: "argv", index: 2, form: "separate", flag: "--num-steps", value: 1000 }]);
 * // { bindings: [], notes: ["rollout_steps: --num-steps left alone: ..."] }
 * ```
 */
export function dropLonePartners(bindings: readonly KnobBinding[], explicit: readonly KnobBinding[] = []): { bindings: KnobBinding[]; notes: string[] } {
  const lone = new Set(lonePartners(bindings.map((binding) => binding.knob)));
  const notes: string[] = [];
  const kept = bindings.filter((binding) => {
    if (!lone.has(binding.knob) || binding.via === "template" || explicit.includes(binding)) return true;
    const where = binding.via === "argv" ? binding.flag : binding.via === "config" ? binding.key : binding.via;
    notes.push(
      `${binding.knob}: ${where} left alone: the job has no ${knobSpec(binding.knob)?.foundWith ?? "partner"} knob beside it, so the name may mean something else (bind it with --bind to tune it)`,
    );
    return false;
  });
  return { bindings: kept, notes };
}
