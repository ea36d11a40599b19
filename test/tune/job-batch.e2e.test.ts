// A job of ours whose config fixes the global batch beside its micro-batch and derives its
// accumulation from them (test/jobs/global_batch_config.py): brim tune, built and run for real, keeps
// to the micro-batches that divide the global batch, says so, and calls the effective batch held.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
// found, not imported: an import of torch is seconds of CPU, and the trials import it anyway
const ready =
  spawnSync(PYTHON, ["-c", "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None or u.find_spec('yaml') is None)"], { encoding: "utf8" })
    .status === 0;
const root = mkdtempSync(join(tmpdir(), "brim-job-batch-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!ready)("brim tune on a job that derives its accumulation from a global batch", () => {
  it("tries only micro-batches that divide it, none fails, and the effective batch is held", { timeout: scaled(300_000) }, () => {
    const config = join(root, "config.yaml");
    writeFileSync(config, "train:\n  global_batch_size: 12   # samples per optimizer step\n  micro_batch_size: 4\n");
    const store = join(root, "store");
    const r = spawnSync(
      process.execPath,
      [
        BRIM,
        "tune",
        "--store",
        store,
        "--max-trials",
        "2",
        "--steps",
        "3",
        "--fix",
        "cpu_threads",
        "--",
        PYTHON,
        join(REPO, "test", "jobs", "global_batch_config.py"),
        config,
      ],
      { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(280_000) },
    );
    expect([0, 3], r.stderr).toContain(r.status);
    expect(r.stderr).toMatch(/micro-batch: only values that divide train\.global_batch_size = 12 \(1, 2, 3, 4, 6, 12\)/);
    const [id] = readdirSync(join(store, "tunes"));
    const record = JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord;
    const tried = record.trials.map((t) => Number(t.knobs.batch_size));
    expect(tried.length).toBeGreaterThan(1);
    for (const m of tried) expect(12 % m).toBe(0);
    expect(record.trials.every((t) => t.end === "ok")).toBe(true);
    expect(record.effective_batch_policy?.kind).toBe("held");
    expect(r.stderr).toMatch(/effective batch held at 12 by the job itself \(train\.global_batch_size\)/);
  });
});
