// No import cycles among the files of src/ (type imports included: a cycle through types still ties two
// files to each other's changes), nor among the modules of python/brim.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const REPO = resolve(import.meta.dirname, "..", "..");

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === "__pycache__" || name === "tests") return [];
    return statSync(path).isDirectory() ? files(path, ext) : ext.test(name) ? [path] : [];
  });
}

/** The cycles of a graph, each once, as the list of its nodes (Tarjan's strongly connected components of two nodes or more). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const part: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        part.push(w);
      } while (w !== v);
      if (part.length > 1) out.push(part.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

describe("import cycles", () => {
  it("none among the files of src/", () => {
    const graph = new Map<string, string[]>();
    for (const path of files(join(REPO, "src"), /\.ts$/)) {
      const text = readFileSync(path, "utf8");
      const targets = [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"(\.{1,2}\/[^"]+)"/gms)].map((m) => resolve(dirname(path), m[1] as string));
      graph.set(
        relative(REPO, path),
        targets.map((t) => relative(REPO, t)),
      );
    }
    expect(graph.size).toBeGreaterThan(100);
    expect(cycles(graph)).toEqual([]);
  });

  it("none among the modules of python/brim", () => {
    const root = join(REPO, "python", "brim");
    const graph = new Map<string, string[]>();
    for (const path of files(root, /\.py$/)) {
      const text = readFileSync(path, "utf8");
      const here = dirname(path);
      const targets: string[] = [];
      // module-level imports only: an import inside a function runs late, on purpose
      for (const m of text.matchAll(/^from (\.+)([\w.]*) import ([\w, ()\n]+)/gm)) {
        let base = here;
        for (let i = 1; i < (m[1] as string).length; i++) base = dirname(base);
        const mod = (m[2] as string).replace(/\./g, "/");
        if (mod !== "") targets.push(join(base, mod));
        else for (const name of (m[3] as string).replace(/[()\s]/g, "").split(",")) if (name !== "") targets.push(join(base, name));
      }
      const key = (p: string): string =>
        relative(REPO, p)
          .replace(/\.py$/, "")
          .replace(/\/__init__$/, "");
      graph.set(
        key(path),
        targets.map((t) => key(t)).filter((t) => t !== key(path)),
      );
    }
    expect(graph.size).toBeGreaterThan(20);
    expect(cycles(graph)).toEqual([]);
  });
});
