// What `brim apply` and `brim tune` do with the apply-side guards, through the real store, real
// files and the built CLI: --force writes only the keys the tune varied; a tune killed mid-way is
// named as interrupted; its trial copies beside the config go on the next tune.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import { applyTune } from "../../src/tune/apply.ts";
import { TUNE_ID, writeSyntheticTune } from "../analyze/synthetic.ts";

const REPO = join(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const root = mkdtempSync(join(tmpdir(), "brim-apply-wired-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every file of a store last written an hour ago: its tune has gone quiet (killed). */
function quiet(storeDir: string): void {
  const old = new Date(Date.now() - 3_600_000);
  for (const entry of readdirSync(storeDir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) utimesSync(join(entry.parentPath, entry.name), old, old);
  }
}

describe("apply-side guards wired into tune and apply", () => {
  it("--force writes the varied key and keeps a key the user changed since the tune but the tune never varied", async () => {
    const store = new RunStore(join(root, "force"));
    const { tune } = await writeSyntheticTune(store);
    const config = join(root, "force.yaml");
    // The tune read batch_size 32 and workers 0; the user set workers 3 since. The winner keeps 0.
    writeFileSync(config, "data_loader:\n  batch_size: 32 # per device\n  num_workers: 3\n");
    const record = {
      ...tune,
      bindings: [
        { knob: "batch_size", via: "config" as const, file: config, key: "data_loader.batch_size", file_sha256: "stale" },
        { knob: "num_workers", via: "config" as const, file: config, key: "data_loader.num_workers", file_sha256: "stale" },
      ],
      trials: tune.trials.map((t) => ({ ...t, knobs: { ...t.knobs, num_workers: 0 } })),
      winner: { index: 1, knobs: { batch_size: 64, num_workers: 0 }, speedup: 1.5 },
    };
    await expect(applyTune(record, { force: false, dryRun: false })).rejects.toThrow(/changed since/);
    await applyTune(record, { force: true, dryRun: false });
    expect(readFileSync(config, "utf8")).toBe("data_loader:\n  batch_size: 64 # per device\n  num_workers: 3\n");
  });

  it("brim apply names a killed tune as interrupted, not 'no winner'", async () => {
    const storeDir = join(root, "killed");
    const store = new RunStore(storeDir);
    const { tune } = await writeSyntheticTune(store);
    await store.writeTune({ ...tune, ended_at: null, winner: null, stop_reason: null });
    quiet(storeDir);
    const r = spawnSync(process.execPath, [BRIM, "apply", TUNE_ID, "--store", storeDir], { encoding: "utf8" });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(new RegExp(`tune ${TUNE_ID} was interrupted .*nothing to apply; run brim tune again`));
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/);
  });

  it("brim tune removes the trial copies an interrupted tune left beside the config", async () => {
    const dir = mkdtempSync(join(root, "copies-"));
    const storeDir = join(dir, ".brim");
    const store = new RunStore(storeDir);
    const { tune } = await writeSyntheticTune(store);
    await store.writeTune({ ...tune, ended_at: null, winner: null, stop_reason: null });
    quiet(storeDir);
    const config = join(dir, "config.yaml");
    writeFileSync(config, "batch_size: 4\n");
    const copy = join(dir, `.config.yaml.brim-trial-${TUNE_ID}-2.yaml`);
    writeFileSync(copy, "batch_size: 8\n");
    // The job fails at once: what matters is what the tune did before its first trial.
    const job = "import sys; sys.exit(3)";
    spawnSync(
      process.execPath,
      [BRIM, "tune", "--store", storeDir, "--max-trials", "1", "--bind", `batch_size=${config}:batch_size`, "--", "python3", "-c", job],
      {
        cwd: dir,
        encoding: "utf8",
      },
    );
    expect(existsSync(copy)).toBe(false);
    expect(readFileSync(config, "utf8")).toBe("batch_size: 4\n");
  });
});
