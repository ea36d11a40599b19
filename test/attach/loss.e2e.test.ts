import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readTimeline } from "../../src/record/timeline/index.ts";
import type { RunMeta, TimelineEntry } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

// The loss of an unmodified script, under the built CLI as a user runs it: brim keeps the tensor that
// goes backward and reads it once the step is done (python/brim/_loss.py).
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-loss-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("brim run records the loss of an unmodified plain loop", () => {
  it("plain_loop.py: every step has the loss the script itself printed", () => {
    const store = join(root, "store");
    const script = join(REPO, "test", "jobs", "plain_loop.py");
    const args = ["run", "--json", "--store", store, "--steps", "20", "--", PYTHON, script, "--max-steps", "1000", "--log-every", "5", "--hidden", "64"];
    const result = spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), ...args], { encoding: "utf8", timeout: scaled(120_000) });
    expect(result.status, result.stderr).toBe(0);
    const meta = JSON.parse(result.stdout) as RunMeta;
    const dir = join(store, "runs", meta.id);
    const entries = readFileSync(join(dir, "timeline.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as TimelineEntry);
    const steps = readTimeline(entries).steps;
    expect(steps.length).toBe(20);
    expect(steps.every((step) => typeof step.loss === "number" && Number.isFinite(step.loss))).toBe(true);
    // the script prints `loss.item()` of every 5th step (its step counter starts at 1)
    const printed = [...readFileSync(join(dir, "output.log"), "utf8").matchAll(/step (\d+) \| loss ([\d.]+)/g)].map(
      (m) => [Number(m[1]), Number(m[2])] as const,
    );
    expect(printed.length).toBe(4);
    for (const [step, loss] of printed) expect(steps[step - 1]!.loss).toBeCloseTo(loss, 4);
  });
});
