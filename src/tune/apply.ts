import { applyConfigEdits, interruptedMessage, type ApplyResult, type ConfigEdit } from "../configs/index.ts";
import { BrimError, isBrimError } from "../errors/index.ts";
import type { TuneRecord } from "../record/types.ts";
import { configValue, fillTemplate, rewriteArgv, type ArgvKnob } from "../knobs/index.ts";
import { applyNote } from "./parity.ts";

/** What applying a tune's winner did. */
export interface ApplyTuneResult {
  tuneId: string;
  files: ApplyResult[];
  /** Files that already held the winner's values (applying twice changes nothing). */
  alreadyApplied: string[];
  /** The command with template knobs filled in, when the command has templates. */
  command: string[] | null;
  /** Knobs that reach the job only through the SDK's environment: set them in code or config yourself. */
  envKnobs: Record<string, number | string | boolean>;
  /** Values written in the job's code that the winner changes: brim does not edit source, it says the line. */
  codeEdits: { file: string; line: number; name: string; from: number | string | boolean; to: number | string | boolean; argument?: boolean }[];
}

/**
 * Writes a tune's winning knob values into the files they are bound to: comment-preserving edits,
 * atomic writes, a backup beside each file; refuses (E_STALE) a file that changed since the tune
 * read it unless `force`. Knobs bound to a command template or flag, or to the environment, are
 * returned for printing (the command with the winner's flags).
 *
 * @example
 * ```ts
 * const result = await applyTune(await store.readTune(id), { force: false, dryRun: false });
 * for (const file of result.files) console.log(file.diff);
 * ```
 */
export async function applyTune(
  record: TuneRecord,
  options: { force: boolean; dryRun: boolean; state?: "ended" | "running" | "interrupted" | "missing" },
): Promise<ApplyTuneResult> {
  if (record.winner === null && options.state === "interrupted") throw new BrimError("E_NO_TRIAL_FIT", interruptedMessage(record));
  // the same reason the tune gave
  if (record.winner === null)
    throw new BrimError(
      "E_NO_TRIAL_FIT",
      `tune ${record.id} has no winner: ${record.no_winner?.reason ?? "no trial fitted the cap and finished"}; nothing to apply`,
    );
  const knobs = record.winner.knobs;
  const before = record.trials.find((trial) => trial.index === 0)?.knobs ?? {};
  const byFile = new Map<string, { sha: string; edits: ConfigEdit[] }>();
  const envKnobs: Record<string, number | string | boolean> = {};
  let templated = false;
  const argv: ArgvKnob[] = [];
  const codeEdits: ApplyTuneResult["codeEdits"] = [];
  const note = applyNote(record);
  for (const binding of record.bindings) {
    const value = knobs[binding.knob];
    if (value === undefined) continue;
    if (binding.via === "template") templated = true;
    else if (binding.via === "code") {
      if (binding.file !== undefined && binding.line !== undefined && binding.value !== undefined && value !== binding.value)
        codeEdits.push({
          file: binding.file,
          line: binding.line,
          name: binding.name ?? binding.knob,
          from: binding.value,
          to: value,
          ...(binding.argument === true ? { argument: true } : {}),
        });
    } else if (binding.via === "argv") {
      if (binding.index !== undefined && binding.form !== undefined && binding.flag !== undefined && binding.value !== undefined)
        argv.push({ knob: binding.knob, index: binding.index, form: binding.form, flag: binding.flag, value: binding.value });
    } else if (binding.via === "env") envKnobs[binding.knob] = value;
    else if (binding.file !== undefined && binding.key !== undefined) {
      const entry = byFile.get(binding.file) ?? { sha: binding.file_sha256 ?? "", edits: [] };
      const config = { knob: binding.knob, via: "config" as const, file: binding.file, key: binding.key };
      const global = binding.global_batch_ranks === undefined ? config : { ...config, globalBatch: { ranks: binding.global_batch_ranks } };
      // a key the tune left at its baseline is not written: --force keeps what the user set since
      entry.edits.push({
        key: binding.key,
        value: configValue(global, knobs) ?? value,
        baseline: configValue(global, before),
        ...(note !== null ? { comment: note } : {}),
      });
      byFile.set(binding.file, entry);
    }
  }
  for (const [knob, value] of Object.entries(knobs)) {
    if (!record.bindings.some((binding) => binding.knob === knob) && before[knob] !== value) envKnobs[knob] = value;
  }
  const files: ApplyResult[] = [];
  const alreadyApplied: string[] = [];
  for (const [file, { sha, edits }] of byFile) {
    let result: ApplyResult;
    try {
      result = await applyConfigEdits(file, edits, { expectedSha256: options.force || sha === "" ? undefined : sha, dryRun: options.dryRun });
    } catch (error) {
      if (!isBrimError(error) || error.code !== "E_STALE") throw error;
      const check = await applyConfigEdits(file, edits, { dryRun: true });
      if (check.changed) throw error;
      alreadyApplied.push(file);
      continue;
    }
    if (result.changed) files.push(result);
    else alreadyApplied.push(file);
  }
  const changedArgv = argv.some((entry) => entry.value !== knobs[entry.knob]);
  const command = templated || changedArgv ? rewriteArgv(fillTemplate(record.command, knobs), argv, knobs) : null;
  return { tuneId: record.id, files, alreadyApplied, command, envKnobs, codeEdits };
}
