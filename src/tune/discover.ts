/**
 * What trial 0 showed, turned into the tune's knobs: the knobs the job read join the baseline, values
 * written in the code become code knobs, loader workers under a flag of the job's own are bound to it,
 * the data's size caps the micro-batch, a global batch beside the micro-batch keeps the accumulation
 * whole; then the space to search.
 *
 * @example
 * ```ts
 * const space = discoverSpace(options, deps, state, first);
 * ```
 * @module
 */
import {
  codeKnobs,
  codePlace,
  codeValues,
  dataLimit,
  KNOWN_KNOBS,
  loaderArguments,
  pythonLiteral,
  reachedKnobs,
  scriptLiteral,
  workersArgvKnob,
  workersFlagNote,
  type CodeKnob,
  type KnobBinding,
  type LoaderSeen,
} from "../knobs/index.ts";
import { globalBatchBeside, type GlobalBatch } from "./divisible.ts";
import { evidenceOf, loaderBound } from "./evidence.ts";
import type { TuneDeps, TuneOptions } from "./options.ts";
import { bindingRecord } from "./record.ts";
import type { TuneState } from "./setup.ts";
import { buildSpace, contextOfDevices, MICRO_BATCH_KNOB } from "./space.ts";
import type { TrialOutcome } from "./trial.ts";
import type { TuneSpace } from "./types.ts";

/** A knob written in the code joins the tune: the baseline takes its value, trials vary it (BRIM_CODE_KNOBS, or BRIM_LOADER_ARGS for a DataLoader's argument). */
export function bindCode({ bindings, record, documents, baseline, settings, note }: TuneState, code: CodeKnob, say = true): void {
  bindings.push(code);
  record.bindings.push(bindingRecord(code, documents));
  // --knob's first value did not reach the job: trial 0 ran the code's
  const given = baseline[code.knob];
  baseline[code.knob] = code.value;
  for (const trial of record.trials) if (trial.index === 0 && given !== undefined) trial.knobs[code.knob] = code.value;
  if (say)
    note(
      `${code.knob}=${String(code.value)} is written in the code at ${codePlace(code, settings.cwd)}: trials vary it there, in memory (the file is not touched); apply says the line to change${given !== undefined && given !== code.value ? ` (trial 0 ran it, not --knob's ${String(given)})` : ""}`,
    );
}

/** What trial 0 showed: the knobs the job read join the baseline, the values in its code and its data's limit are said; the space to search. */
export function discoverSpace(options: TuneOptions, deps: TuneDeps, state: TuneState, first: TrialOutcome): TuneSpace {
  const { baseline, bindings, settings, note } = state;
  // Knobs the job read through brim.knob join the baseline when brim knows how to tune them or the user named them.
  for (const [knob, value] of first.knobsRead) {
    if (baseline[knob] === undefined && (knob in KNOWN_KNOBS || options.knobValues?.[knob] !== undefined)) baseline[knob] = value;
  }
  const context = { ...contextOfDevices(deps.devices), loader: loaderBound(evidenceOf(first.result, baseline, settings.capBytes)) };
  bindWorkersFlag(options, state, first.loaders);
  // values written in the code: varied there when a literal (in memory), else the file:line to change, said now and at the end
  const seen = first.loaders.length > 0 ? first.loaders : scriptLiteral(options.command, settings.cwd);
  for (const code of codeKnobs(seen, reachedKnobs(baseline, bindings, first.knobsRead))) bindCode(state, code);
  // the training DataLoader's other arguments (pinning only where there is a GPU to pin for): the attach sets them
  const loaderArgs = loaderArguments(first.loaders, baseline).filter((argument) => argument.knob !== "pin_memory" || context.backend !== "cpu");
  for (const argument of loaderArgs) bindCode(state, argument, false);
  const place = loaderArgs[0];
  if (place !== undefined)
    note(
      `the DataLoader built at ${codePlace(place, settings.cwd)} ran with ${loaderArgs.map((a) => `${a.name}=${pythonLiteral(a.value)}`).join(", ")}: trials may give it other values there, in memory (the file is not touched); apply says what to change`,
    );
  state.codeHints = codeValues(seen, baseline);
  state.codeHints.forEach(note);
  return buildSpace(
    baseline,
    {
      ...options,
      maxMicroBatch: microBatchLimit(options, state, first.loaders),
      observedAccumulation: first.result.accumulation ?? undefined,
      jobBatch: jobBatchOf(state, first.result.accumulation ?? 1),
      precisionSwitch: bindings.some((b) => b.via === "argv" && b.knob === "precision"),
    },
    [...bindings.map((b) => b.knob), ...first.knobsRead.keys(), ...Object.keys(options.knobValues ?? {})],
    context,
    note,
  );
}

/** Loader workers that come from a flag brim has no name for (`--threads`): trials vary them on that flag, or the note says to give it. */
function bindWorkersFlag(options: TuneOptions, state: TuneState, loaders: readonly LoaderSeen[]): void {
  const { bindings, record, documents, baseline, settings, note } = state;
  const loader = loaders.find((l) => l.workersFrom != null);
  const source = loader?.workersFrom;
  if (loader === undefined || source == null || bindings.some((b) => b.knob === "num_workers") || baseline.num_workers !== undefined) return;
  const found = workersArgvKnob(options.command, source);
  if (found === null) {
    note(workersFlagNote(source, loader.numWorkers));
    return;
  }
  const binding: KnobBinding = { via: "argv", ...found };
  bindings.push(binding);
  record.bindings.push(bindingRecord(binding, documents));
  baseline.num_workers = found.value;
  const line = loader.where === null ? null : /^(.*):(\d+)$/.exec(loader.where);
  const where = line == null ? "" : ` at ${codePlace({ file: line[1] as string, line: Number(line[2]) }, settings.cwd)}`;
  note(
    `num_workers=${found.value} comes from ${found.flag} on the command line (num_workers=${source.expr}${where}): trials vary it there, and apply rewrites the command`,
  );
}

/**
 * The global batch a config holds beside the micro-batch's key (litgpt's `global_batch_size`), from
 * which the job derives its accumulation; its ranks are what trial 0's micro-batch and accumulation
 * leave of it (1 when they do not divide it).
 */
function jobBatchOf({ bindings, documents, baseline }: TuneState, accumulation: number): (GlobalBatch & { ranks: number }) | undefined {
  const micro = baseline[MICRO_BATCH_KNOB];
  const binding = bindings.find((b) => b.via === "config" && b.knob === MICRO_BATCH_KNOB && b.globalBatch === undefined);
  if (binding?.via !== "config" || typeof micro !== "number" || bindings.some((b) => b.knob === "accumulation")) return undefined;
  const document = documents.get(binding.file);
  const global = document === undefined ? null : globalBatchBeside(document, binding.key);
  if (global === null) return undefined;
  const ranks = global.value / (micro * Math.max(1, accumulation));
  return { ...global, ranks: Number.isInteger(ranks) && ranks >= 1 ? ranks : 1 };
}

/** `--max-micro-batch`, lowered to the samples the job's loader sees. */
function microBatchLimit(options: TuneOptions, { baseline, note }: TuneState, loaders: readonly LoaderSeen[]): number | undefined {
  const data = dataLimit(loaders, typeof baseline[MICRO_BATCH_KNOB] === "number" ? baseline[MICRO_BATCH_KNOB] : null);
  if (data !== null && baseline[MICRO_BATCH_KNOB] !== undefined)
    note(
      `micro-batch at most ${data.samples}: the samples the loader${data.where === null ? "" : ` at ${data.where}`} sees${data.sharded ? " on each rank" : ""}`,
    );
  return data === null ? options.maxMicroBatch : Math.min(options.maxMicroBatch ?? Infinity, data.samples);
}
