import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BrimError } from "../../src/errors/index.ts";
import { applyConfigEdits, readConfig, removeStaleTemps, writeFileAtomic, type ConfigEdit } from "../../src/configs/index.ts";

const SAMPLES = {
  yaml: { text: "# tuned by hand\ndata_loader:\n  batch_size: 16  # small\n", key: "data_loader.batch_size" },
  json: { text: '{\n  "data_loader": {\n    "batch_size": 16\n  }\n}\n', key: "data_loader.batch_size" },
  toml: { text: "[data_loader]\nbatch_size = 16  # small\n", key: "data_loader.batch_size" },
} as const;

function sample(format: keyof typeof SAMPLES): string {
  const path = join(mkdtempSync(join(tmpdir(), "brim-apply-")), `conf.${format}`);
  writeFileSync(path, SAMPLES[format].text);
  return path;
}

function dirOf(path: string): string[] {
  return readdirSync(join(path, "..")).sort();
}

async function rejection(promise: Promise<unknown>): Promise<BrimError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof BrimError) return error;
    throw error;
  }
  throw new Error("expected a BrimError");
}

describe.each(Object.keys(SAMPLES) as (keyof typeof SAMPLES)[])("applyConfigEdits on %s", (format) => {
  const edits: ConfigEdit[] = [{ key: SAMPLES[format].key, value: 64 }];

  it("writes the edit, returns the changes and the diff, and backs up the original", async () => {
    const path = sample(format);
    const result = await applyConfigEdits(path, edits);
    expect(result.changed).toBe(true);
    expect(result.changes).toEqual([{ key: SAMPLES[format].key, before: 16, after: 64 }]);
    expect(result.diff).toMatch(new RegExp(`^--- ${path}\\n\\+\\+\\+ ${path}\\n@@ `));
    expect(result.diff).toContain("+");
    expect(result.backupPath).toBe(`${path}.brim-backup`);
    expect(readFileSync(`${path}.brim-backup`, "utf8")).toBe(SAMPLES[format].text);
    expect((await readConfig(path)).get(SAMPLES[format].key)).toBe(64);
    expect(dirOf(path)).toEqual([`conf.${format}`, `conf.${format}.brim-backup`]);
  });

  it("changes nothing the second time: no write, no second backup", async () => {
    const path = sample(format);
    await applyConfigEdits(path, edits);
    const after = readFileSync(path, "utf8");
    const mtime = statSync(path).mtimeMs;
    const again = await applyConfigEdits(path, edits);
    expect(again).toEqual({ path, changed: false, changes: [], diff: "", backupPath: null });
    expect(readFileSync(path, "utf8")).toBe(after);
    expect(statSync(path).mtimeMs).toBe(mtime);
    expect(dirOf(path)).toEqual([`conf.${format}`, `conf.${format}.brim-backup`]);
  });

  it("refuses with E_STALE when the file changed since it was read, leaving it untouched", async () => {
    const path = sample(format);
    const doc = await readConfig(path);
    writeFileSync(path, SAMPLES[format].text.replace("16", "24"));
    const error = await rejection(applyConfigEdits(path, edits, { expectedSha256: doc.sha256 }));
    expect(error.code).toBe("E_STALE");
    expect(error.message).toMatch(
      new RegExp(`^${path} changed since brim read it \\(sha256 [0-9a-f]{12}… is now [0-9a-f]{12}…\\); re-run the tune or apply with --force$`),
    );
    expect(readFileSync(path, "utf8")).toBe(SAMPLES[format].text.replace("16", "24"));
    expect(dirOf(path)).toEqual([`conf.${format}`]);
  });

  it("writes when the hash still matches", async () => {
    const path = sample(format);
    const doc = await readConfig(path);
    expect((await applyConfigEdits(path, edits, { expectedSha256: doc.sha256 })).changed).toBe(true);
  });

  it("numbers further backups instead of overwriting one", async () => {
    const path = sample(format);
    const first = await applyConfigEdits(path, edits);
    const second = await applyConfigEdits(path, [{ key: SAMPLES[format].key, value: 128 }]);
    const third = await applyConfigEdits(path, [{ key: SAMPLES[format].key, value: 256 }]);
    expect([first.backupPath, second.backupPath, third.backupPath]).toEqual([`${path}.brim-backup`, `${path}.brim-backup.1`, `${path}.brim-backup.2`]);
    expect(readFileSync(`${path}.brim-backup`, "utf8")).toBe(SAMPLES[format].text);
    expect(readFileSync(`${path}.brim-backup.1`, "utf8")).toContain("64");
    expect(readFileSync(`${path}.brim-backup.2`, "utf8")).toContain("128");
  });

  it("computes but does not write in a dry run, and can skip the backup", async () => {
    const path = sample(format);
    const dry = await applyConfigEdits(path, edits, { dryRun: true });
    expect(dry.changed).toBe(true);
    expect(dry.diff).not.toBe("");
    expect(dry.backupPath).toBeNull();
    expect(readFileSync(path, "utf8")).toBe(SAMPLES[format].text);
    const real = await applyConfigEdits(path, edits, { backup: false });
    expect(real.backupPath).toBeNull();
    expect(dirOf(path)).toEqual([`conf.${format}`]);
  });

  it("writes nothing when an edit is refused", async () => {
    const path = sample(format);
    await expect(applyConfigEdits(path, [...edits, { key: `${SAMPLES[format].key}.deeper`, value: 1 }])).rejects.toThrow(
      /deeper: data_loader.batch_size holds 64, not a/,
    );
    expect(readFileSync(path, "utf8")).toBe(SAMPLES[format].text);
    expect(dirOf(path)).toEqual([`conf.${format}`]);
  });
});

describe("applyConfigEdits on files", () => {
  it("keeps the file's mode", async () => {
    const path = sample("yaml");
    chmodSync(path, 0o640);
    await applyConfigEdits(path, [{ key: "data_loader.batch_size", value: 32 }]);
    expect(statSync(path).mode & 0o777).toBe(0o640);
    expect(statSync(`${path}.brim-backup`).mode & 0o777).toBe(0o640);
  });

  it("follows a symbolic link and keeps the link", async () => {
    const real = sample("yaml");
    const link = join(real, "..", "link.yaml");
    symlinkSync(real, link);
    await applyConfigEdits(link, [{ key: "data_loader.batch_size", value: 32 }]);
    expect(readFileSync(real, "utf8")).toContain("batch_size: 32");
    expect(statSync(link).isFile()).toBe(true);
    expect(readFileSync(link, "utf8")).toBe(readFileSync(real, "utf8"));
    expect(existsSync(`${real}.brim-backup`)).toBe(true);
  });

  it("says what went wrong reading", async () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-read-"));
    await expect(readConfig(join(dir, "nope.yaml"))).rejects.toThrow(`cannot read ${join(dir, "nope.yaml")}: no such file`);
    mkdirSync(join(dir, "d.yaml"));
    await expect(readConfig(join(dir, "d.yaml"))).rejects.toThrow(/is a directory/);
    writeFileSync(join(dir, "latin1.yaml"), Buffer.from([0x61, 0x3a, 0x20, 0xe9, 0x0a]));
    const error = await rejection(readConfig(join(dir, "latin1.yaml")));
    expect([error.code, error.message]).toEqual(["E_PARSE", `${join(dir, "latin1.yaml")}: not UTF-8 text; brim only edits UTF-8 config files`]);
    expect((await rejection(readConfig(join(dir, "nope.yaml")))).code).toBe("E_IO");
  });

  it("keeps the bytes of a file with a byte order mark", async () => {
    const path = sample("json");
    writeFileSync(path, `\ufeff${SAMPLES.json.text}`);
    await applyConfigEdits(path, [{ key: "data_loader.batch_size", value: 32 }]);
    expect(readFileSync(path).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(readFileSync(`${path}.brim-backup`)).toEqual(Buffer.from(`\ufeff${SAMPLES.json.text}`));
  });
});

describe("writeFileAtomic", () => {
  it("creates and replaces files, leaving no temp file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-atomic-"));
    await writeFileAtomic(join(dir, "a.txt"), "one\n");
    await writeFileAtomic(join(dir, "a.txt"), "two\n");
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("two\n");
    expect(readdirSync(dir)).toEqual(["a.txt"]);
  });

  it("fails with E_IO and removes its temp file when the rename fails", async () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-atomic-"));
    mkdirSync(join(dir, "target"));
    const error = await rejection(writeFileAtomic(join(dir, "target"), "x"));
    expect(error.code).toBe("E_IO");
    expect(error.message).toMatch(/^cannot write .*target: /);
    expect(readdirSync(dir)).toEqual(["target"]);
  });

  it("fails with E_IO when the directory does not exist", async () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-atomic-"));
    await expect(writeFileAtomic(join(dir, "no", "a.txt"), "x")).rejects.toThrow(/cannot write .*a\.txt: no such file/);
  });
});

/** A process id no process has now (above pid_max, or free below it). */
function gonePid(): number {
  let pid = 4_194_000;
  while (existsSync(`/proc/${pid}`)) pid--;
  return pid;
}

describe("removeStaleTemps", () => {
  it("removes temp files of processes that are gone, and only those", async () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-stale-"));
    const target = join(dir, "conf.yaml");
    writeFileSync(target, "a: 1\n");
    const dead = gonePid();
    const names = [
      `.conf.yaml.brim-tmp-${dead}-0a1b2c`,
      `.conf.yaml.brim-tmp-${process.pid}-0a1b2c`,
      `.conf.yaml.brim-tmp-${process.ppid}-0a1b2c`,
      `.other.yaml.brim-tmp-${dead}-0a1b2c`,
    ];
    for (const name of names) writeFileSync(join(dir, name), "partial");
    expect(await removeStaleTemps(target)).toEqual([join(dir, names[0] ?? "")]);
    expect(readdirSync(dir).sort()).toEqual(["conf.yaml", ...names.slice(1)].sort());
  });

  it("runs before applyConfigEdits writes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-stale-"));
    const target = join(dir, "conf.yaml");
    writeFileSync(target, "a: 1\n");
    const dead = gonePid();
    writeFileSync(join(dir, `.conf.yaml.brim-tmp-${dead}-ffee`), "a: 2\n");
    await applyConfigEdits(target, [{ key: "a", value: 3 }], { backup: false });
    expect(readdirSync(dir)).toEqual(["conf.yaml"]);
  });
});
