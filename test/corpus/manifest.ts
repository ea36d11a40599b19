// corpus/corpus.json as the corpus tests read it (schema brim.corpus/v2, docs/corpus.md).
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export interface Venv {
  path: string;
  requirements: string;
  /** further requirements files installed after the main one, each with its own pip flags (cleanrl: --ignore-requires-python) */
  also?: { requirements: string; pip_flags: string[] }[];
}
export interface Entry {
  name: string;
  dir: string;
  venv: string;
  packages: Record<string, string>;
  files: string[];
  prepare: string[] | null;
  executable?: string;
  command: string[];
  env?: Record<string, string>;
  fast: boolean;
  run_steps: number;
}
export interface Corpus {
  schema: string;
  venvs: Record<string, Venv>;
  ours: string[];
  entries: Entry[];
}

export const REPO = resolve(import.meta.dirname, "..", "..");
export const CORPUS = join(REPO, "corpus");
export const corpus = JSON.parse(readFileSync(join(CORPUS, "corpus.json"), "utf8")) as Corpus;
