/**
 * Knobs: what each knob brim knows is (`specs.ts`, the one table, and the lists derived from it in
 * `lists.ts`), how a knob's value reaches a job (`binding.ts`: config keys, `{name}` templates, the
 * environment, code literals; `argv.ts`: flags; `resolve.ts`: the bindings of a command, with
 * DeepSpeed's batch keys in `deepspeed.ts`, a section keyed by environment id in `keyed-section.ts`
 * and loader workers under a flag of the job's own in `worker-flag.ts`), and the one launch of a
 * command with knob values (`launch.ts`), which a tune's trials and plan's measuring runs share.
 *
 * @example
 * ```ts
 * import { launchWithKnobs, resolveBindings } from "../knobs/index.ts";
 * const { bindings, documents } = await resolveBindings(command, cwd, []);
 * const launch = await launchWithKnobs(command, bindings, { batch_size: 64 }, { copyTag, documents, cwd });
 * ```
 * @module
 */
export {
  ACCUMULATION_KNOB,
  ENVS_KNOB,
  KNOB_SPECS,
  MICRO_BATCH_KNOB,
  ROLLOUT_KNOB,
  type CandidateContext,
  type EvidenceRule,
  type KnobSpec,
  type KnobValue,
  type Knobs,
} from "./specs.ts";
export { candidateValues, KNOWN_KNOBS, knobSpec, MICRO_BATCH_NAMES, NEED_WORKERS, OWN_MEMORY_LINE, spelledValues, WALK_FIRST, withHeld } from "./lists.ts";
export {
  asKnobValue,
  configBaseline,
  configFilesInCommand,
  configValue,
  fillTemplate,
  parseBinding,
  templateKnobs,
  type CodeKnob,
  type ConfigKnob,
  type KnobBinding,
} from "./binding.ts";
export { rewriteArgv, type ArgvKnob } from "./argv.ts";
export { codePlace, describeBindings, reachedKnobs, resolveBindings } from "./resolve.ts";
export { launchWithKnobs, type CopyTag, type KnobLaunch, type LaunchOptions } from "./launch.ts";
export { workersArgvKnob, workersFlagNote, workersSourceIn, type WorkersSource } from "./worker-flag.ts";
export { codeKnobs, codeValues, dataLimit, LOADER_ARGUMENTS, loaderArguments, loadersOf, pythonLiteral, scriptLiteral, type LoaderSeen } from "./loaders.ts";
