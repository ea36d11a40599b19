import { describe, expect, it } from "vitest";
import { codeValues, dataLimit, loadersOf } from "../../src/tune/loaders.ts";

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
  });

  it("names the file:line of a batch size or workers written in the code that no knob reaches", () => {
    const loaders = loadersOf([event({ where: "/p/src/train.py:21", batch_size: 64, num_workers: 0 })]);
    const hints = codeValues(loaders, {}, () => "    loader = DataLoader(ds, batch_size=64, shuffle=True)\n");
    expect(hints[0]).toBe(
      'batch_size=64 is decided in the code at src/train.py:21 (loader = DataLoader(ds, batch_size=64, shuffle=True)): brim cannot vary it there; give the flag that sets it on the command line, or expose it as one (--batch-size) or as a config key, or read it with brim.knob("batch_size", 64)',
    );
    expect(hints[1]).toMatch(/^num_workers=0 is decided in the code at src\/train.py:21 .*--num-workers.*brim\.knob\("num_workers", 0\)/);
    expect(codeValues(loaders, { batch_size: 64, num_workers: 0 }, () => null)).toEqual([]);
  });
});
