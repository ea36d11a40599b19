import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { unifiedDiff } from "../../src/configs/index.ts";

const golden = new URL("./golden/", import.meta.url).pathname;
const pairs = readdirSync(golden).map((name) => {
  const files = readdirSync(join(golden, name));
  const input = files.find((f) => f.startsWith("input.")) ?? "";
  const expected = files.find((f) => f.startsWith("expected.")) ?? "";
  return { name, before: readFileSync(join(golden, name, input), "utf8"), after: readFileSync(join(golden, name, expected), "utf8") };
});

function hasTool(tool: string): boolean {
  return spawnSync(tool, ["--version"], { stdio: "ignore" }).status === 0;
}

/** Applies a unified diff the way patch does, strictly: every context and removed line must match. */
function applyDiff(before: string, diff: string): string {
  if (diff === "") return before;
  const lines = before.match(/[^\n]*\n|[^\n]+$/g) ?? [];
  const patch = diff.split("\n");
  const out: string[] = [];
  let at = 0;
  let i = 2;
  while (i < patch.length && patch[i] !== "") {
    const header = /^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@$/.exec(patch[i] ?? "");
    if (header === null) throw new Error(`bad hunk header ${patch[i]}`);
    const start = Number(header[1]) - (header[2] === "0" ? 0 : 1);
    while (at < start) out.push(lines[at++] ?? "");
    i++;
    while (i < patch.length && /^[ +-]/.test(patch[i] ?? "")) {
      const line = patch[i] ?? "";
      const noEol = patch[i + 1] === "\\ No newline at end of file";
      const text = line.slice(1) + (noEol ? "" : "\n");
      if (line[0] !== "+" && lines[at++] !== text) throw new Error(`context mismatch at ${line}`);
      if (line[0] !== "-") out.push(text);
      i += noEol ? 2 : 1;
    }
  }
  while (at < lines.length) out.push(lines[at++] ?? "");
  return out.join("");
}

describe("unifiedDiff", () => {
  it("is empty for equal texts", () => {
    expect(unifiedDiff("a.yaml", "x: 1\n", "x: 1\n")).toBe("");
  });

  it("writes headers, hunk ranges and three lines of context", () => {
    const before = ["a: 1", "b: 2", "c: 3", "d: 4", "e: 5", "f: 6", "g: 7", "h: 8"].join("\n") + "\n";
    const after = before.replace("e: 5", "e: 50");
    expect(unifiedDiff("conf.yaml", before, after)).toBe(
      "--- conf.yaml\n+++ conf.yaml\n@@ -2,7 +2,7 @@\n b: 2\n c: 3\n d: 4\n-e: 5\n+e: 50\n f: 6\n g: 7\n h: 8\n",
    );
  });

  it("splits hunks more than six unchanged lines apart and joins closer ones", () => {
    const lines = Array.from({ length: 30 }, (_, i) => `k${i}: ${i}`);
    const text = lines.join("\n") + "\n";
    const far = text.replace("k2: 2", "k2: x").replace("k20: 20", "k20: x");
    expect(unifiedDiff("f", text, far).match(/^@@/gm)).toHaveLength(2);
    const near = text.replace("k2: 2", "k2: x").replace("k9: 9", "k9: x");
    expect(unifiedDiff("f", text, near).match(/^@@/gm)).toHaveLength(1);
  });

  it("marks a missing newline at the end of the file", () => {
    expect(unifiedDiff("f", "a\nb", "a\nc")).toBe("--- f\n+++ f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n");
    expect(unifiedDiff("f", "a\n", "a")).toBe("--- f\n+++ f\n@@ -1 +1 @@\n-a\n+a\n\\ No newline at end of file\n");
  });

  it("handles an empty side", () => {
    expect(unifiedDiff("f", "", "a\nb\n")).toBe("--- f\n+++ f\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    expect(unifiedDiff("f", "a\n", "")).toBe("--- f\n+++ f\n@@ -1 +0,0 @@\n-a\n");
  });

  it.skipIf(!hasTool("diff"))("matches GNU diff -u on the golden edits", () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-diff-"));
    for (const { name, before, after } of pairs) {
      writeFileSync(join(dir, "before"), before);
      writeFileSync(join(dir, "after"), after);
      const gnu = spawnSync("diff", ["-u", "before", "after"], { cwd: dir, encoding: "utf8" }).stdout;
      const ours = unifiedDiff("x", before, after);
      expect(ours.split("\n").slice(2), name).toEqual(gnu.split("\n").slice(2));
    }
  });

  it.skipIf(!hasTool("patch"))("produces diffs that patch applies", () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-patch-"));
    for (const { before, after } of pairs) {
      writeFileSync(join(dir, "conf"), before);
      execFileSync("patch", ["-s", "-p0", "--no-backup-if-mismatch"], { cwd: dir, input: unifiedDiff("conf", before, after) });
      expect(readFileSync(join(dir, "conf"), "utf8")).toBe(after);
    }
  });

  it("round-trips random line edits", () => {
    const line = fc.constantFrom("a: 1", "b: 2", "c: 3", "", "  d: 4", "# c");
    const text = fc.tuple(fc.array(line, { maxLength: 40 }), fc.boolean()).map(([ls, eol]) => ls.join("\n") + (eol && ls.length > 0 ? "\n" : ""));
    fc.assert(
      fc.property(text, text, (before, after) => {
        const diff = unifiedDiff("f", before, after);
        expect(diff === "").toBe(before === after);
        expect(applyDiff(before, diff)).toBe(after);
      }),
      { numRuns: 500 },
    );
  });
});
