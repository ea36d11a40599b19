// brim tune with knobs, the built CLI and real trials (the bindings and knob logic in-process: knobs.test.ts)
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-knobs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("brim tune with a {batch_size} template (the built CLI, real trials)", () => {
  it("fills the template per trial and prints the winner's command", () => {
    const script = join(root, "template_job.py");
    writeFileSync(
      script,
      [
        "import sys, time, brim",
        "bs = int(sys.argv[1])",
        "held = bytearray(bs * (1 << 20))",
        "for _ in brim.track(range(10**6), samples=bs):",
        "    time.sleep(0.004 + 0.0002 * bs)",
      ].join("\n"),
    );
    const store = join(root, "store-template");
    const result = spawnSync(
      process.execPath,
      [
        join(REPO, "bin/brim.js"),
        "tune",
        "--store",
        store,
        "--quiet",
        "--cap",
        "200MiB",
        "--knob",
        "batch_size=8",
        // the baseline and two larger batches: three sizes, and a winner to confirm and apply
        "--max-trials",
        "3",
        "--warmup",
        "1",
        "--steps",
        "6",
        "--",
        PYTHON,
        script,
        "{batch_size}",
      ],
      { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(300_000) },
    );
    expect(result.status, result.stderr).toBe(0);
    const [id] = readdirSync(join(store, "tunes"));
    const record = JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord;
    expect(record.bindings).toEqual([{ knob: "batch_size", via: "template" }]);
    const sizes = record.trials.map((trial) => trial.knobs.batch_size);
    expect(sizes[0]).toBe(8);
    expect(new Set(sizes).size).toBeGreaterThan(2);
    const winner = record.winner?.knobs.batch_size as number;
    expect(winner).toBeGreaterThan(8);
    const applied = spawnSync(process.execPath, [join(REPO, "bin/brim.js"), "apply", "--store", store], { cwd: root, encoding: "utf8" });
    expect(applied.stdout).toContain(`brim: run the job with: ${PYTHON} ${script} ${winner}`);
  });

  it.each([
    ["SIGINT", "Ctrl-C"],
    ["SIGHUP", "a lost terminal"],
  ] as const)("%s (%s) mid-tune: exit 130, the record finished as interrupted, no config copy left, the config untouched", async (signal, _why) => {
    const dir = join(root, `interrupt-${signal}`);
    mkdirSync(dir, { recursive: true });
    const config = join(dir, "conf.yaml");
    const original = "# trial knobs\ndata_loader:\n  batch_size: 4   # small\n";
    writeFileSync(config, original);
    const script = join(dir, "job.py");
    writeFileSync(
      script,
      [
        "import sys, time, yaml, brim",
        "bs = yaml.safe_load(open(sys.argv[1]))['data_loader']['batch_size']",
        "for _ in brim.track(range(10**6), samples=bs):",
        "    time.sleep(0.05)",
      ].join("\n"),
    );
    const store = join(dir, "store");
    const child = spawn(
      process.execPath,
      [join(REPO, "bin/brim.js"), "tune", "--store", store, "--quiet", "--cap", "1GiB", "--warmup", "1", "--steps", "400", "--", PYTHON, script, config],
      { cwd: dir },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const deadline = Date.now() + scaled(60_000);
    while (!readdirSync(dir).some((file) => file.includes("brim-trial")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 1500));
    child.kill(signal);
    const status = await new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    expect(status, stderr).toBe(130);
    expect(readdirSync(dir).filter((file) => file.includes("brim-trial"))).toEqual([]);
    expect(readFileSync(config, "utf8")).toBe(original);
    const [id] = readdirSync(join(store, "tunes"));
    const record = JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord;
    expect(record.ended_at).not.toBeNull();
    expect(record.stop_reason).toBe("interrupted");
  });

  it("no winner when trial 0 (the configuration as it is) crashes: exit 3, its cause and last output lines inline, the next thing to try", () => {
    const store = join(root, "store-fail");
    const result = spawnSync(
      process.execPath,
      [
        join(REPO, "bin/brim.js"),
        "tune",
        "--store",
        store,
        "--quiet",
        "--",
        "sh",
        "-c",
        "echo step one; echo 'ValueError: batch larger than the dataset' >&2; exit 3",
      ],
      { cwd: root, encoding: "utf8" },
    );
    expect(result.status, result.stderr).toBe(3);
    expect(result.stderr).toMatch(/trial 0\/16 .* crashed \(not out of memory\): ValueError: batch larger than the dataset/);
    expect(result.stderr).toContain("  | step one");
    expect(result.stdout).toMatch(/^no winner: your configuration \(trial 0\) crashed: ValueError: batch larger than the dataset$/m);
    expect(result.stdout).toMatch(/^next: fix the job/m);
  });
});
