import { describe, expect, it } from "vitest";
import { renderApply } from "../../src/cli/render-tune.ts";
import type { TuneRecord } from "../../src/record/types.ts";
import { applyTune } from "../../src/tune/apply.ts";

// What `brim apply` tells a user whose knobs live on the command line or in the code, from a recorded
// tune (the e2e tunes reach a winner only when this machine's speed says so; these lines must not wait
// for that): the command with the winner's flags, the literal's line to change, the DataLoader
// argument to give. Nothing is written: brim edits no source file and no command.
const record = {
  id: "20261129-000000-abcd",
  command: ["python", "train.py", "--batch-size", "32", "--workers", "0"],
  bindings: [
    { knob: "batch_size", via: "argv", index: 2, form: "separate", flag: "--batch-size", value: 32 },
    { knob: "num_workers", via: "code", file: "/p/train.py", line: 26, name: "num_workers", value: 0, argument: true },
    { knob: "prefetch_factor", via: "code", file: "/p/train.py", line: 10, name: "prefetch_factor", value: 2 },
  ],
  trials: [{ index: 0, knobs: { batch_size: 32, num_workers: 0, prefetch_factor: 2 } }],
  winner: { index: 3, knobs: { batch_size: 64, num_workers: 2, prefetch_factor: 4 } },
} as unknown as TuneRecord;

describe("brim apply on knobs in the command and in the code", () => {
  it("prints the command with the winner's flag and the lines of code to change, and writes nothing", async () => {
    const result = await applyTune(record, { force: false, dryRun: false });
    expect(result.files).toEqual([]);
    expect(result.command).toEqual(["python", "train.py", "--batch-size", "64", "--workers", "0"]);
    expect(renderApply(result, false).trimEnd().split("\n")).toEqual([
      "brim: run the job with: python train.py --batch-size 64 --workers 0",
      "brim: change your code at /p/train.py:26: give the DataLoader built there num_workers=2 (it ran with 0; brim does not edit source files)",
      "brim: change your code at /p/train.py:10: prefetch_factor=2 → prefetch_factor=4 (brim does not edit source files)",
    ]);
  });

  it("says nothing for a knob the winner left at your value", async () => {
    const same = { ...record, winner: { index: 1, knobs: { batch_size: 32, num_workers: 0, prefetch_factor: 2 } } } as unknown as TuneRecord;
    const result = await applyTune(same, { force: false, dryRun: false });
    expect(result.command).toBeNull();
    expect(result.codeEdits).toEqual([]);
  });
});
