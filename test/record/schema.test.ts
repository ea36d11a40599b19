import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadTune } from "../../src/record/load.ts";
import { parseRunMeta } from "../../src/record/schema.ts";
import { RunStore } from "../../src/record/store.ts";
import { syntheticRun, writeSyntheticRun, writeSyntheticTune, TUNE_ID } from "../analyze/synthetic.ts";

const root = mkdtempSync(join(tmpdir(), "brim-schema-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("records are validated on read", () => {
  it("fills what older records lack with its documented default", () => {
    const { meta } = syntheticRun();
    const old = JSON.parse(
      JSON.stringify({
        ...meta,
        summary: {
          duration_s: 1,
          steps: 1,
          steady_steps: 1,
          samples: 1,
          samples_per_s: 1,
          data_wait_share: 0,
          step_time_s: 1,
          peak_tree_gpu_bytes: null,
          peak_tree_rss_bytes: null,
          framework_peak_allocated_bytes: null,
          framework_peak_reserved_bytes: null,
          gpu_util_mean: null,
          micro_batch: null,
          accumulation: null,
        },
      }),
    ) as unknown;
    const read = parseRunMeta(old, "run.json");
    expect(read.summary?.throughput_source).toBeNull();
    expect(read.summary?.oom_recoveries).toBe(0);
    expect(read.summary?.steady_samples).toBe(1);
  });

  it("names the file and the field of a damaged record", async () => {
    const store = new RunStore(join(root, "damaged"));
    const { id } = await writeSyntheticRun(store);
    const path = join(store.runDir(id), "run.json");
    const { meta } = syntheticRun();
    writeFileSync(path, JSON.stringify({ ...meta, id, device: { ...meta.device, host: { cpus: "many", mem_total_bytes: 1 } } }));
    await expect(store.readRunMeta(id)).rejects.toThrow(`${path} is damaged: field device.host.cpus:`);
    await expect(store.readRunMeta(id)).rejects.toMatchObject({ code: "E_PARSE" });
  });

  it("says a record from a newer brim is from a newer brim", async () => {
    const store = new RunStore(join(root, "newer"));
    const { id } = await writeSyntheticRun(store);
    const path = join(store.runDir(id), "run.json");
    writeFileSync(path, JSON.stringify({ ...syntheticRun().meta, id, schema: "brim.run/v2" }));
    await expect(store.readRunMeta(id)).rejects.toThrow(`${path} is written by a newer brim (schema brim.run/v2); this brim reads brim.run/v1`);
  });

  it("loads a tune with the trial runs the store has; a damaged trial run is an error naming it", async () => {
    const store = new RunStore(join(root, "tune"));
    const { runIds } = await writeSyntheticTune(store);
    const { tune, runs } = await loadTune(store, TUNE_ID);
    expect(runs.size).toBe(runIds.length);
    expect(tune.trials.length).toBeGreaterThanOrEqual(runs.size);
    const broken = runIds[0] as string;
    mkdirSync(store.runDir(broken), { recursive: true });
    writeFileSync(join(store.runDir(broken), "run.json"), "{");
    await expect(loadTune(store, TUNE_ID)).rejects.toThrow(/run\.json is not valid JSON/);
    rmSync(store.runDir(broken), { recursive: true });
    expect((await loadTune(store, TUNE_ID)).runs.size).toBe(runIds.length - 1);
  });
});
