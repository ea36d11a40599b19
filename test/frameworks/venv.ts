/** The Python with the real frameworks (the CI venv, .ci/venv) and the process-tree helper the framework tests share. */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { scaled } from "../helpers/time.ts";

export const FRAMEWORKS = ["torch", "lightning", "transformers", "accelerate", "jax", "optax"] as const;

export interface FrameworkPython {
  available: boolean;
  /** why the frameworks are not there */
  reason: string;
  path: string;
  version: string | null;
  versions: Record<(typeof FRAMEWORKS)[number], string>;
  /** "torch 2.13.0+cpu, lightning 2.6.6, ..." */
  summary: string;
}

/**
 * The Python of BRIM_FRAMEWORKS_PYTHON, else the repository's .venv, and the releases of the
 * frameworks installed for it (read from their metadata: nothing heavy is imported).
 */
export function frameworkPython(repo: string): FrameworkPython {
  const path = process.env.BRIM_FRAMEWORKS_PYTHON ?? join(repo, ".venv", "bin", "python");
  const none = { path, version: null, versions: {} as FrameworkPython["versions"], summary: "" };
  if (!existsSync(path)) return { ...none, available: false, reason: `no framework venv at ${path}` };
  const script = `import json, sys, importlib.metadata as m
out = {"python": sys.version.split()[0]}
for name in ${JSON.stringify(FRAMEWORKS)}:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))`;
  const r = spawnSync(path, ["-c", script], { encoding: "utf8", timeout: scaled(60_000) });
  if (r.status !== 0) return { ...none, available: false, reason: `${path} does not run: ${r.stderr.trim().split("\n").pop() ?? ""}` };
  const found = JSON.parse(r.stdout) as Record<string, string | null>;
  const missing = FRAMEWORKS.filter((name) => found[name] == null);
  if (missing.length > 0) return { ...none, available: false, reason: `${path} lacks ${missing.join(", ")}` };
  const versions = Object.fromEntries(FRAMEWORKS.map((name) => [name, found[name] as string])) as FrameworkPython["versions"];
  return {
    available: true,
    reason: "",
    path,
    version: found.python ?? null,
    versions,
    summary: `python ${found.python}, ${FRAMEWORKS.map((name) => `${name} ${versions[name]}`).join(", ")}`,
  };
}

/** Every process under `pid` (read from /proc). */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const at = queue.shift() as number;
    for (const child of children.get(at) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}
