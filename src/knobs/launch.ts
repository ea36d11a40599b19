/**
 * One launch: the user's command made to run with given knob values, through every channel a knob
 * may take to the job — a copy of a config file the command names, with the values written in
 * (beside the original, `configs/trial-copies.ts` names and sweeps it), `{name}` templates filled,
 * flags rewritten, and the environment that sets values written in the code (`BRIM_CODE_KNOBS`,
 * `BRIM_LOADER_ARGS`). A tune's trials (`trial.ts`) and both of plan's measuring runs
 * (`plan/measure/`) launch through here; the caller runs the command (the guard) and calls
 * `cleanup` after, and hands `copies` to the guard's `removeOnLoss` so that a killed brim leaves
 * none behind.
 *
 * @example
 * ```ts
 * const launch = await launchWithKnobs(["python", "train.py", "--config", "conf.yaml"], bindings, { batch_size: 64 },
 *   { copyTag: { kind: "trial", owner: tuneId, index: 3 }, documents, cwd });
 * try { await guardRun({ command: launch.command, env: launch.env, removeOnLoss: launch.copies, ... }, deps); } finally { launch.cleanup(); }
 * ```
 * @module
 */
import { rmSync } from "node:fs";
import { copyPathOf, editConfigText, writeFileAtomic, type ConfigDocument, type CopyKind } from "../configs/index.ts";
import { rewriteArgv } from "./argv.ts";
import { codeKnobEnv, configEditsByFile, configFilesInCommand, fillTemplate, type KnobBinding } from "./binding.ts";
import type { Knobs } from "./specs.ts";

/**
 * Whose copies these are: a tune's trial (`owner` the tune id) or a plan's measuring run (the plan's
 * session id), and which run.
 *
 * @example
 * ```ts
 * const tag: CopyTag = { kind: "trial", owner: "20261122-101000-aa01", index: 3 };
 * ```
 */
export interface CopyTag {
  kind: CopyKind;
  owner: string;
  index: number;
}

/**
 * How to launch: the copies' tag, the config files as read, and where the command runs.
 *
 * @example
 * ```ts
 * const options: LaunchOptions = { copyTag: { kind: "plan", owner: session, index: 0 }, documents, cwd: "/proj" };
 * ```
 */
export interface LaunchOptions {
  copyTag: CopyTag;
  /** the config files the bindings name, as read (their text is edited into the copies) */
  documents: ReadonlyMap<string, ConfigDocument>;
  /** where the command runs: config files named in it are resolved against it */
  cwd: string;
  /** the config files the command names, when the caller has them already (else found from `cwd`) */
  namedInCommand?: readonly { index: number; path: string; arg: string }[];
}

/**
 * The command to run with the knob values, its extra environment, and the copies to remove after.
 *
 * @example
 * ```ts
 * const { command, env, copies, cleanup } = await launchWithKnobs(argv, bindings, knobs, options);
 * ```
 */
export interface KnobLaunch {
  command: string[];
  /** the code knobs' environment (empty when every code knob keeps its value) and the seed, BRIM_SEED */
  env: Record<string, string>;
  /** the config copies written for this run: the guard's `removeOnLoss` */
  copies: readonly string[];
  /** Removes the copies; safe to call more than once. */
  cleanup(): void;
}

/**
 * The seed of torch's generator in every run launched with knobs (`BRIM_SEED`): the runs of one tune
 * start from the same weights and draw the same data order, so their losses compare step by step
 * (parity.ts) even in a job that seeds nothing itself; a job's own `torch.manual_seed` comes later and wins.
 */
export const TRIAL_SEED = 20261129;

/**
 * Makes `command` run with `knobs` (see the module doc). A config file is copied only where the
 * command names it; a config binding of a file it does not name reaches no job. A `{name}` template
 * without a value is a UsageError. If writing a copy fails, the copies already written are removed.
 *
 * @example
 * ```ts
 * const launch = await launchWithKnobs(command, bindings, { batch_size: 32 }, { copyTag: { kind: "plan", owner: session, index: 0 }, documents, cwd });
 * launch.command; // ["python", "train.py", "--config", "/p/.conf.yaml.brim-plan-20261122-101000-aa01-0.yaml"]
 * launch.cleanup();
 * ```
 */
export async function launchWithKnobs(command: readonly string[], bindings: readonly KnobBinding[], knobs: Knobs, options: LaunchOptions): Promise<KnobLaunch> {
  const copies: string[] = [];
  const cleanup = (): void => {
    for (const file of copies.splice(0)) rmSync(file, { force: true });
  };
  const written = [...command];
  try {
    const named = options.namedInCommand ?? configFilesInCommand(command, options.cwd);
    for (const [file, edits] of configEditsByFile(bindings, knobs)) {
      const document = options.documents.get(file);
      const places = named.filter((entry) => entry.path === file);
      if (document === undefined || places.length === 0) continue;
      const copy = copyPathOf(file, options.copyTag.kind, options.copyTag.owner, options.copyTag.index);
      copies.push(copy);
      await writeFileAtomic(copy, editConfigText(document, edits).text);
      for (const place of places) written[place.index] = (written[place.index] ?? "").replace(place.arg, copy);
    }
    const argv = bindings.filter((binding): binding is Extract<KnobBinding, { via: "argv" }> => binding.via === "argv");
    const final = rewriteArgv(fillTemplate(written, knobs), argv, knobs);
    return { command: final, env: { ...codeKnobEnv(bindings, knobs), BRIM_SEED: String(TRIAL_SEED) }, copies: [...copies], cleanup };
  } catch (error) {
    cleanup();
    throw error;
  }
}
