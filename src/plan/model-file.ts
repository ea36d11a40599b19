import { parse as parseYaml, YAMLParseError } from "yaml";
import { InputError } from "../errors/index.ts";
import { isHfConfig } from "./hf.ts";
import { isModelProfile } from "./profile.ts";
import { parseModelSpec, type ModelSpec } from "./spec.ts";

/** A model as `brim plan` accepts it: a spec, a Hugging Face config, or an SDK profile. */
export type ModelInput =
  | { kind: "spec"; spec: ModelSpec; file?: string | undefined }
  | { kind: "hf-config"; config: Record<string, unknown>; file?: string | undefined }
  | { kind: "profile"; profile: unknown; file?: string | undefined };

/**
 * Parses the text of a model file (YAML or JSON) and tells which of the three kinds it is.
 *
 * @example
 * ```ts
 * const model = parseModelFile(readFileSync("examples/nbeats/model.yaml", "utf8"), "model.yaml");
 * model.kind; // "spec"
 * ```
 */
export function parseModelFile(text: string, file?: string): ModelInput {
  const where = file === undefined ? {} : { file };
  let value: unknown;
  const isJson = file?.toLowerCase().endsWith(".json") ?? text.trimStart().startsWith("{");
  try {
    value = isJson ? JSON.parse(text) : parseYaml(text, { prettyErrors: false });
  } catch (error) {
    const detail =
      error instanceof YAMLParseError ? `${error.message.split("\n")[0] ?? "invalid YAML"}` : error instanceof Error ? error.message : String(error);
    throw new InputError(`not valid ${isJson ? "JSON" : "YAML"}: ${detail}`, { ...where, code: "E_PARSE" }, { cause: error });
  }
  if (value === null || value === undefined) throw new InputError("the file is empty", where);
  if (isModelProfile(value)) return { kind: "profile", profile: value, file };
  if (isHfConfig(value)) return { kind: "hf-config", config: value, file };
  return { kind: "spec", spec: parseModelSpec(value, file), file };
}
