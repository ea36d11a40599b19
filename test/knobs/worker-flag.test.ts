import { describe, expect, it } from "vitest";
import { workersArgvKnob, workersFlagNote, workersSourceOf } from "../../src/knobs/worker-flag.ts";

const threads = { dest: "threads", flags: ["-j", "--threads"], expr: "args.threads" };

describe("loader workers under a flag brim does not know", () => {
  it("takes the source from the training loader's event, else the first that says one", () => {
    const events = [
      { event: "loader", details: { loader: 0, num_workers_from: { dest: "eval_workers", flags: ["--eval-workers"], expr: "args.eval_workers" } } },
      { event: "loader", details: { loader: 1, num_workers_from: threads } },
      { event: "loader_use", details: { loader: 1, use: "train" } },
    ];
    expect(workersSourceOf(events, new Set([1]))).toEqual(threads);
    expect(workersSourceOf(events)?.dest).toBe("eval_workers");
    expect(workersSourceOf([{ event: "loader", details: { loader: 0, num_workers: 2 } }])).toBeNull();
    expect(workersSourceOf([{ event: "loader", details: { num_workers_from: { dest: "x", flags: [] } } }])).toBeNull();
  });

  it("finds the flag on the command line in each form, and none past --", () => {
    expect(workersArgvKnob(["python", "train.py", "-j", "4"], threads)).toEqual({ knob: "num_workers", index: 2, form: "separate", flag: "-j", value: 4 });
    expect(workersArgvKnob(["python", "train.py", "--lr", "0.1", "--threads=2"], threads)).toEqual({
      knob: "num_workers",
      index: 4,
      form: "equals",
      flag: "--threads",
      value: 2,
    });
    const numProc = { dest: "num_proc", flags: ["--num-proc"], expr: "args.num_proc" };
    expect(workersArgvKnob(["torchrun", "train.py", "--num-proc", "8"], numProc)?.value).toBe(8);
    expect(workersArgvKnob(["python", "train.py", "-j", "auto"], threads)).toBeNull();
    expect(workersArgvKnob(["python", "train.py", "--", "-j", "4"], threads)).toBeNull();
    expect(workersArgvKnob(["python", "train.py"], threads)).toBeNull();
  });

  it("says how to let brim tune workers the command does not give", () => {
    expect(workersFlagNote(threads, 0)).toBe(
      "DataLoader workers come from -j/--threads (num_workers=args.threads), which the command does not give (the job's default, 0, is in force): add --threads N to the command to let brim tune them",
    );
  });
});
