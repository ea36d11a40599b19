import { describe, expect, it } from "vitest";
import { dataLimit, loadersOf } from "../../src/knobs/loaders.ts";

// recorded from test/jobs/lightning_cli_val.py under brim: Lightning's sanity check builds the
// validation loader first, at the same line as the training loader
const WHERE = "/work/main/test/jobs/lightning_cli_val.py:24";
const built = (loader: number, len: number) => ({
  event: "loader",
  details: { where: WHERE, loader, batch_size: 8, num_workers: 0, pin_memory: false, drop_last: false, dataset_len: len, samples_per_rank: len },
});
const use = (loader: number, what: string) => ({ event: "loader_use", details: { loader, use: what } });

describe("loaders told apart by object and by use", () => {
  it("takes the ceiling from the training loader, not the validation loader built first at the same line", () => {
    const loaders = loadersOf([built(0, 80), built(1, 480), use(0, "eval"), use(1, "train")]);
    expect(loaders.map((l) => [l.datasetLen, l.use])).toEqual([
      [480, "train"],
      [80, "eval"],
    ]);
    expect(dataLimit(loaders, 8)).toEqual({ samples: 480, where: WHERE, sharded: false });
  });

  it("never takes a validation loader for the ceiling, and keeps the old order without uses", () => {
    expect(dataLimit(loadersOf([built(0, 80), built(1, 480), use(0, "eval")]), 8)?.samples).toBe(480);
    // older records: no loader numbers, no uses: the first loader whose batch size is the micro-batch
    const old = loadersOf([{ event: "loader", details: { where: "t.py:3", batch_size: 32, dataset_len: 1000 } }]);
    expect(old[0]?.use).toBeNull();
    expect(dataLimit(old, 32)?.samples).toBe(1000);
    // a loader seen training once stays a training loader
    expect(loadersOf([built(0, 480), use(0, "eval"), use(0, "train")])[0]?.use).toBe("train");
    expect(loadersOf([built(0, 480), use(0, "train"), use(0, "eval")])[0]?.use).toBe("train");
  });
});
