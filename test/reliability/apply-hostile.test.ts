// The apply side against a user who edited the file since, read-only configs, huge files and lines,
// and YAML anchors, aliases and merge keys: real files, real writes.
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { applyConfigEdits, readConfig } from "../../src/configs/index.ts";
import { MAX_CONFIG_BYTES } from "../../src/configs/document.ts";
import { noteOutcome } from "../helpers/outcomes.ts";

const T = "test/reliability/apply-hostile.test.ts";

const root = mkdtempSync(join(tmpdir(), "brim-apply-hostile-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(root, name);
  writeFileSync(path, text);
  return path;
}

describe("apply writes only what the tune changed", () => {
  it("a key the tune never varied keeps the value the user set since (num_workers: 3 stays 3)", async () => {
    const path = file("edited.yaml", "batch_size: 32  # tuned\nnum_workers: 0\n");
    writeFileSync(path, "batch_size: 32  # tuned\nnum_workers: 3  # the user's own\n");
    const result = await applyConfigEdits(path, [
      { key: "batch_size", value: 64, baseline: 32 },
      { key: "num_workers", value: 0, baseline: 0 },
    ]);
    expect(result.changes).toEqual([{ key: "batch_size", before: 32, after: 64 }]);
    expect(readFileSync(path, "utf8")).toBe("batch_size: 64  # tuned\nnum_workers: 3  # the user's own\n");
    noteOutcome("apply over a user's later edit of a key the tune never varied: edit reverted", 1, 0, T);
  });
});

describe("a read-only config", () => {
  it("is refused with one line, and nothing is written or backed up", async () => {
    const path = file("readonly.yaml", "batch_size: 32\n");
    chmodSync(path, 0o444);
    await expect(applyConfigEdits(path, [{ key: "batch_size", value: 64 }])).rejects.toThrow(
      /^.*readonly\.yaml is read-only \(mode 0444\): brim does not write it; make it writable \(chmod u\+w\) to apply, or set the values by hand$/,
    );
    expect(readFileSync(path, "utf8")).toBe("batch_size: 32\n");
    expect(readdirSync(root).filter((n) => n.startsWith("readonly.yaml."))).toEqual([]);
    // a dry run still shows what would change
    expect((await applyConfigEdits(path, [{ key: "batch_size", value: 64 }], { dryRun: true })).changed).toBe(true);
    noteOutcome("apply to a read-only (0444) config: written", 1, 0, T);
  });
});

describe("size", () => {
  it("a config over the cap is refused before it is read whole (one line, no stack)", async () => {
    const line = "x: 1\n";
    const path = file("huge.yaml", line.repeat(Math.ceil((MAX_CONFIG_BYTES + 1) / line.length)));
    const before = process.memoryUsage().rss;
    await expect(readConfig(path)).rejects.toThrow(/huge\.yaml is 4\.00 MiB: brim reads and edits config files up to 4\.00 MiB$/);
    await expect(applyConfigEdits(path, [{ key: "x", value: 2 }])).rejects.toThrow(/brim reads and edits config files up to/);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 2 ** 20);
    noteOutcome("config over 4 MiB: parsed whole", 1, 0, T);
  });

  it("a long line is cut in the diff, and written whole", async () => {
    const long = "a".repeat(2 ** 20);
    const path = file("longline.yaml", `batch_size: 32\nnote: ${long}\n`);
    const result = await applyConfigEdits(path, [{ key: "note", value: "short" }]);
    expect(result.diff.length).toBeLessThan(2000);
    expect(result.diff).toMatch(/^-note: a{394}… \[\d+ more characters not shown\]$/m);
    expect(readFileSync(path, "utf8")).toBe("batch_size: 32\nnote: short\n");
    expect(existsSync(`${path}.brim-backup`)).toBe(true);
    expect(readFileSync(`${path}.brim-backup`, "utf8")).toBe(`batch_size: 32\nnote: ${long}\n`);
    noteOutcome("a 1 MiB line in a config: printed whole in the diff", 1, 0, T);
  });
});

describe("YAML anchors, aliases and merge keys", () => {
  it("a key that reads through a merge key gets its own value; the anchor's stays", async () => {
    const path = file("merge.yaml", "defaults: &d\n  batch_size: 32\ntrain:\n  <<: *d\n");
    const result = await applyConfigEdits(path, [{ key: "train.batch_size", value: 64 }]);
    expect(result.changes).toEqual([{ key: "train.batch_size", before: 32, after: 64 }]);
    expect(readFileSync(path, "utf8")).toBe("defaults: &d\n  batch_size: 32\ntrain:\n  <<: *d\n  batch_size: 64\n");
    expect((await readConfig(path)).data).toEqual({ defaults: { batch_size: 32 }, train: { batch_size: 64 } });
  });

  it("an alias of a whole mapping, or an anchored value others reuse, is refused with the reason", async () => {
    const alias = file("alias.yaml", "defaults: &d\n  batch_size: 32\ntrain: *d\n");
    await expect(applyConfigEdits(alias, [{ key: "train.batch_size", value: 64 }])).rejects.toThrow(
      /train is the alias \*d; set the key under its anchor &d instead/,
    );
    const anchored = file("anchored.yaml", "bs: &x 32\nother: *x\n");
    await expect(applyConfigEdits(anchored, [{ key: "bs", value: 64 }])).rejects.toThrow(/bs has the anchor &x, which aliases \(\*x\) reuse/);
    expect(readFileSync(alias, "utf8")).toBe("defaults: &d\n  batch_size: 32\ntrain: *d\n");
    noteOutcome("YAML merge keys, whole-mapping aliases, reused anchors: a wrong value written or 'nothing to change'", 3, 0, T);
  });

  it("never says 'nothing to change' while the file holds another value", async () => {
    const path = file("override.yaml", "defaults: &d\n  batch_size: 32\ntrain:\n  <<: *d\n  batch_size: 16\n");
    const same = await applyConfigEdits(path, [{ key: "train.batch_size", value: 32 }], { dryRun: true });
    expect(same.changed).toBe(true);
    expect(same.changes).toEqual([{ key: "train.batch_size", before: 16, after: 32 }]);
  });
});
