import { describe, expect, it } from "vitest";
import { join, resolve } from "node:path";
import { reachedKnobs } from "../../src/knobs/resolve.ts";
import type { KnobBinding } from "../../src/knobs/binding.ts";
import { codeKnobs, codeValues, dataLimit, loaderArguments, loadersOf, mainScript, scriptBatchLiteral, scriptLiteral } from "../../src/knobs/loaders.ts";

const event = (details: Record<string, unknown>): { event: string; details: Record<string, unknown> } => ({ event: "loader", details });

describe("the DataLoaders a trial built (the attach's loader events)", () => {
  it("caps the micro-batch at the data the training loader sees, per rank under a sharding sampler", () => {
    const loaders = loadersOf([
      event({ where: "/p/train.py:21", batch_size: 32, num_workers: 0, pin_memory: false, drop_last: true, dataset_len: 2048, samples_per_rank: 2048 }),
      event({ where: "/p/train.py:30", batch_size: 1000, dataset_len: 500, samples_per_rank: 500 }),
      { event: "knob_read", details: {} },
    ]);
    expect(loaders).toHaveLength(2);
    expect(dataLimit(loaders, 32)).toEqual({ samples: 2048, where: "/p/train.py:21", sharded: false });
    const ddp = loadersOf([event({ where: "/p/ddp.py:9", batch_size: 64, dataset_len: 1000, samples_per_rank: 500 })]);
    expect(dataLimit(ddp, 64)).toEqual({ samples: 500, where: "/p/ddp.py:9", sharded: true });
    expect(dataLimit([], 32)).toBeNull();
    // the job's loader built again by a library (Lightning's distributed sampler, accelerate's prepare):
    // sent again under its number, the copy's details replace the first ones, at the job's line
    const again = loadersOf([
      event({ loader: 0, where: "/p/module.py:40", batch_size: 64, num_workers: 0, dataset_len: 1000, samples_per_rank: 1000 }),
      { event: "loader_use", details: { loader: 0, use: "train" } },
      event({ loader: 0, where: "/p/module.py:40", batch_size: 64, num_workers: 0, dataset_len: 1000, samples_per_rank: 500 }),
      event({ loader: 1, where: "/p/module.py:44", batch_size: 64, dataset_len: 200, samples_per_rank: 200 }),
    ]);
    expect(again.map((l) => [l.where, l.samplesPerRank, l.use])).toEqual([
      ["/p/module.py:40", 500, "train"],
      ["/p/module.py:44", 200, null],
    ]);
    expect(dataLimit(again, 64)).toEqual({ samples: 500, where: "/p/module.py:40", sharded: true });
  });

  it("names the file:line of a batch size or workers written in the code that no knob reaches", () => {
    const loaders = loadersOf([event({ where: "/p/src/train.py:21", batch_size: 64, num_workers: 0 })]);
    const hints = codeValues(loaders, {}, () => "    loader = DataLoader(ds, batch_size=64, shuffle=True)\n");
    expect(hints[0]).toBe(
      'batch_size=64 is decided in the code at src/train.py:21 (loader = DataLoader(ds, batch_size=64, shuffle=True)): brim cannot vary it there; give the flag that sets it on the command line, or expose it as one (--batch-size) or as a config key, or read it with brim.knob("batch_size", 64)',
    );
    expect(hints[1]).toMatch(/^num_workers=0 is decided in the code at src\/train.py:21 .*--num-workers.*brim\.knob\("num_workers", 0\)/);
    expect(codeValues(loaders, { batch_size: 64, num_workers: 0 }, () => null)).toEqual([]);
    // a loader a library builds (deepspeed.initialize's) is named as the library's, not as a line to edit
    const library = loadersOf([event({ where: "/v/lib/python3.11/site-packages/deepspeed/runtime/dataloader.py:143", batch_size: 8, num_workers: 2 })]);
    expect(codeValues(library, { batch_size: 8 }, () => "x")).toEqual([
      expect.stringMatching(/^num_workers=2 is decided inside deepspeed \(deepspeed\/runtime\/dataloader.py:143\): brim cannot vary it there;/),
    ]);
  });

  it("turns a literal on the loader's line into a knob the trials vary, only when it is the value the job ran with", () => {
    const loaders = loadersOf([event({ where: "/p/src/train.py:21", batch_size: 64, num_workers: 2 })]);
    expect(codeKnobs(loaders, {}, () => "    loader = DataLoader(ds, batch_size=64, num_workers=2)  # batch_size=8 was slower\n")).toEqual([
      { knob: "batch_size", via: "code", file: "/p/src/train.py", line: 21, name: "batch_size", value: 64 },
      { knob: "num_workers", via: "code", file: "/p/src/train.py", line: 21, name: "num_workers", value: 2 },
    ]);
    // a knob already bound elsewhere, a value computed at run time, or a literal the job did not run with: none
    expect(codeKnobs(loaders, { batch_size: 64 }, () => "DataLoader(ds, batch_size=64, num_workers=2)").map((k) => k.knob)).toEqual(["num_workers"]);
    expect(codeKnobs(loaders, {}, () => "DataLoader(ds, batch_size=args.bs, num_workers=n)")).toEqual([]);
    expect(codeKnobs(loaders, {}, () => "DataLoader(ds, batch_size=32, num_workers=2.5)")).toEqual([]);
  });

  it("a knob --knob gave values to that no flag, key, template or brim.knob reaches is varied at its literal in the code", () => {
    const loaders = loadersOf([event({ where: "/p/src/train.py:21", batch_size: 16, num_workers: 0 })]);
    const line = (): string => "DataLoader(ds, batch_size=16, num_workers=0)";
    const baseline = { batch_size: 16, num_workers: 0 };
    const workersFlag: KnobBinding = { knob: "num_workers", via: "argv", flag: "--workers", value: 0 } as KnobBinding;
    // --knob batch_size=16,8 set the baseline's 16, yet nothing passes it to the job: the literal is where it lives
    expect(codeKnobs(loaders, reachedKnobs(baseline, [workersFlag], new Map()), line).map((k) => `${k.knob}:${k.via}`)).toEqual(["batch_size:code"]);
    // the job reads it through brim.knob: it is reached, the code is not the place
    expect(codeKnobs(loaders, reachedKnobs(baseline, [workersFlag], new Map([["batch_size", 16]])), line)).toEqual([]);
  });
});

describe("a batch size written in the job's script (no DataLoader to tell it)", () => {
  const REPO = resolve(import.meta.dirname, "..", "..");
  it("makes the training loader's other arguments knobs the attach sets, only for a loader in the job's own code, only those no other binding reaches", () => {
    const seen = loadersOf([
      event({ where: "/p/dcgan/main.py:107", batch_size: 64, num_workers: 2, pin_memory: false, persistent_workers: false, prefetch_factor: 2 }),
    ]);
    const place = { via: "code", file: "/p/dcgan/main.py", line: 107, argument: true };
    // --workers 2 in argv is the num_workers knob already: the other three come from the loader
    expect(loaderArguments(seen, { batch_size: 64, num_workers: 2 })).toEqual([
      { ...place, knob: "persistent_workers", name: "persistent_workers", value: false },
      { ...place, knob: "prefetch_factor", name: "prefetch_factor", value: 2 },
      { ...place, knob: "pin_memory", name: "pin_memory", value: false },
    ]);
    // no workers: persistent workers and a prefetch factor are left out (PyTorch 2 reports no prefetch factor then)
    const bare = loadersOf([
      event({ where: "/p/train.py:9", batch_size: 8, num_workers: 0, pin_memory: false, persistent_workers: false, prefetch_factor: null }),
    ]);
    expect(loaderArguments(bare, {}).map((k) => `${k.knob}=${String(k.value)}`)).toEqual(["num_workers=0", "pin_memory=false"]);
    // a loader a library builds (the HF Trainer's, DeepSpeed's) is not the job's line
    const library = loadersOf([event({ where: "/v/lib/python3.11/site-packages/transformers/trainer.py:1012", batch_size: 8, num_workers: 0 })]);
    expect(loaderArguments(library, {})).toEqual([]);
  });

  it("finds a JAX module's `batch_size = 128` and a default argument's `get_batch(batch_size=32)`, with their file:line", () => {
    const jobs = join(REPO, "test", "jobs");
    expect(mainScript(["python", "-m", "jax_literal"], jobs)).toBe(join(jobs, "jax_literal.py"));
    const [literal] = scriptLiteral(["python", "-m", "jax_literal"], jobs);
    expect([literal?.where, literal?.batchSize]).toEqual([`${join(jobs, "jax_literal.py")}:39`, 128]);
    const [hint] = codeValues(scriptLiteral(["python", "-m", "jax_literal"], jobs), {});
    expect(hint).toMatch(/^batch_size=128 is decided in the code at jobs\/jax_literal\.py:39 \(batch_size = 128\)/);
    expect(scriptLiteral(["/usr/bin/python3", "literal_sgd.py"], jobs)[0]?.where).toBe(`${join(jobs, "literal_sgd.py")}:12`);
    // a knob on the command line says where it is decided: no hint
    expect(codeValues(scriptLiteral(["python", "-m", "jax_literal"], jobs), { batch_size: 128 })).toEqual([]);
  });

  it("reads code only: a docstring or a string that mentions batch_size=32 is not a second place", () => {
    const text =
      '"""A loop shaped like `get_batch(batch_size=32)`,\nsee batch_size=32 above."""\nhelp = "use batch_size=32"\n\ndef get_batch(batch_size=32):\n  pass\n';
    expect(scriptBatchLiteral("t.py", text)?.where).toBe("t.py:5");
  });

  it("says nothing when several lines set different batch sizes, or none does", () => {
    expect(scriptBatchLiteral("t.py", "train_bs = 1\nbatch_size = 32\neval = dict(batch_size=64)\n")).toBeNull();
    expect(scriptBatchLiteral("t.py", "x = 1 # batch_size = 4\nif batch_size == 3: pass\n")).toBeNull();
    expect(scriptBatchLiteral("t.py", "lr = 0.1\nbatch_size = 16  # per device\n")?.where).toBe("t.py:2");
    expect(mainScript(["python", "missing.py"], "/nonexistent")).toBeNull();
  });
});
