// Shared by fit-constants.mjs and plan-validation.mjs: finds the campaign's plan-accuracy records,
// loads the planner's TypeScript sources (through tsx, so the figures are always those of the code
// in the working tree) and turns the records into pairs.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { register } from "tsx/esm/api";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

register();
/** The planner's validation module (src/plan/validation.ts). */
export const validation = await import(join(REPO, "src", "plan", "validation.ts"));
const { parseModelFile } = await import(join(REPO, "src", "plan", "model-file.ts"));
/** The planner's default constants (src/plan/constants.ts). */
export const { DEFAULT_CONSTANTS } = await import(join(REPO, "src", "plan", "constants.ts"));

/** plan-accuracy.jsonl files named, or found in the folders named (recursively). */
export function inputFiles(inputs) {
  const roots = inputs.length > 0 ? inputs : [join(REPO, "bench", "results", "gpu")];
  const files = [];
  const walk = (p) => {
    if (!existsSync(p)) return;
    if (statSync(p).isDirectory()) for (const name of readdirSync(p).sort()) walk(join(p, name));
    else if (p.endsWith(".jsonl") && (inputs.includes(p) || p.endsWith("plan-accuracy.jsonl"))) files.push(p);
  };
  roots.forEach(walk);
  return files;
}

export function readRecords(file) {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim().startsWith("{"))
    .flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });
}

/** Model specs named by records are paths relative to the repository (the campaign runs there). */
export function loadModel(path) {
  const file = isAbsolute(path) ? path : join(REPO, path);
  return parseModelFile(readFileSync(file, "utf8"), path);
}

export function pairs(files, source, options = {}) {
  return validation.pairsFromRecords(files.flatMap(readRecords), source, loadModel, options);
}

export const rel = (f) => relative(REPO, resolve(f));

/** The commit of the working tree, with "+dirty" when it has changes; null outside git. */
export function commitOf() {
  try {
    const head = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: REPO, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: REPO, encoding: "utf8" }).trim() !== "";
    return dirty ? `${head}+dirty` : head;
  } catch {
    return null;
  }
}
