// bench/gpu/memory_history.py: the summary of a CUDA memory snapshot (issue 26, item 5), on a trace
// written as PyTorch writes one (torch.cuda.memory._snapshot(): device_traces of alloc /
// free_completed / segment actions with their frames); and the wrapper around an unmodified script
// under `brim run --steps N` on this CPU-only host, which says there was nothing to record.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const dir = mkdtempSync(join(tmpdir(), "brim-memory-history-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MiB = 2 ** 20;
const py = (f: string, l: number, n: string) => ({ filename: f, line: l, name: n });
const linear = py("/usr/lib/python3/site-packages/torch/nn/modules/linear.py", 125, "forward");
const conv = py("/usr/lib/python3/site-packages/torch/nn/modules/conv.py", 370, "_conv_forward");
const adam = py("/usr/lib/python3/site-packages/torch/optim/adam.py", 400, "_multi_tensor_adam");
const train = py("/home/u/train.py", 40, "main");
// a forward (two activations), a cuDNN workspace that lives for one op, backward buffers made on the
// autograd engine's thread (no Python frames), then the optimizer's temporary after the activations are gone
const trace = [
  { action: "segment_alloc", addr: 0, size: 64 * MiB, frames: [] },
  { action: "alloc", addr: 1, size: 10 * MiB, frames: [linear, train] },
  { action: "alloc", addr: 2, size: 20 * MiB, frames: [conv, train] },
  { action: "alloc", addr: 3, size: 8 * MiB, frames: [{ filename: "??", line: 0, name: "at::native::cudnn_convolution_forward" }, conv, train] },
  { action: "free_completed", addr: 3, size: 8 * MiB, frames: [] },
  { action: "alloc", addr: 4, size: 12 * MiB, frames: [] },
  { action: "alloc", addr: 5, size: 4 * MiB, frames: [] },
  { action: "free_completed", addr: 2, size: 20 * MiB, frames: [] },
  { action: "free_completed", addr: 1, size: 10 * MiB, frames: [] },
  { action: "alloc", addr: 6, size: 6 * MiB, frames: [adam, train] },
];

describe("bench/gpu/memory_history.py", () => {
  it("replays the trace to the peak of allocated bytes and names what was live then", () => {
    const pickle = join(dir, "snapshot.pickle");
    const made = spawnSync(
      PYTHON,
      [
        "-c",
        "import json, pickle, sys; pickle.dump(json.loads(sys.argv[1]), open(sys.argv[2], 'wb'))",
        JSON.stringify({ segments: [{ total_size: 64 * MiB, allocated_size: 22 * MiB }], device_traces: [trace] }),
        pickle,
      ],
      { encoding: "utf8" },
    );
    expect(made.status, made.stderr).toBe(0);
    const r = spawnSync(PYTHON, [join(REPO, "bench/gpu/memory_history.py"), "--summarize", pickle], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as {
      peak_allocated_bytes: number;
      peak_at_entry: number;
      peak_reserved_bytes_traced: number;
      by_category_at_peak: Record<string, number>;
      largest_at_peak: { bytes: number; category: string; lived_entries: number | null; frames: string[] }[];
      segments_at_end: { count: number; reserved_bytes: number; allocated_bytes: number };
    };
    // 10 + 20 + 12 + 4 MiB after the backward's second buffer: the workspace had gone, the optimizer came later
    expect(s.peak_allocated_bytes).toBe(46 * MiB);
    expect(s.peak_at_entry).toBe(6);
    expect(s.peak_reserved_bytes_traced).toBe(64 * MiB);
    expect(s.by_category_at_peak).toEqual({ "forward: conv": 20 * MiB, "backward (autograd engine) or C++": 16 * MiB, "forward: linear": 10 * MiB });
    expect(s.largest_at_peak[0]).toMatchObject({
      bytes: 20 * MiB,
      category: "forward: conv",
      lived_entries: 5,
      frames: ["conv.py:370 _conv_forward", "train.py:40 main"],
    });
    expect(s.segments_at_end).toEqual({ count: 1, reserved_bytes: 64 * MiB, allocated_bytes: 22 * MiB });
  });

  it("names cuDNN's allocations by their C++ frames, and the optimizer's by torch/optim", () => {
    const r = spawnSync(
      PYTHON,
      [
        "-c",
        "import json, sys; sys.path.insert(0, sys.argv[1]); import memory_history as m; print(json.dumps([m.category(f) for f in json.loads(sys.argv[2])]))",
        join(REPO, "bench/gpu"),
        JSON.stringify([trace[3]!.frames, trace[9]!.frames, [{ filename: "??", line: 0, name: "cublasLtMatmul" }], [train]]),
      ],
      { encoding: "utf8" },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(["cudnn", "optimizer", "cublas", "other: train.py"]);
  });

  it(
    "wraps an unmodified script under brim run --steps N, and on a host with no CUDA says there was nothing to record",
    () => {
      const summary = join(dir, "summary.json");
      const r = spawnSync(
        process.execPath,
        [
          join(REPO, "bin/brim.js"),
          "run",
          "--quiet",
          "--steps",
          "3",
          "--store",
          join(dir, "store"),
          "--",
          PYTHON,
          "bench/gpu/memory_history.py",
          "--summary",
          summary,
          "--",
          "examples/nbeats/train.py",
          "--config",
          "bench/gpu/quick/config.yaml",
        ],
        { cwd: REPO, encoding: "utf8", timeout: scaled(120_000) },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/\[nbeats\] done steps=3 /);
      expect(JSON.parse(readFileSync(summary, "utf8"))).toMatchObject({ cuda: false, why: "no CUDA device: nothing to record" });
    },
    scaled(120_000),
  );
});
