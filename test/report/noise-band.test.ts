// The tune's noise on its throughput chart: the spread of the interleaved confirmation runs (baseline
// and winner) as bands, else the search's noise of one trial around trial 0 — in the SVG the report
// and the dashboard draw, and inside the chart's y range.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { noiseBands, tuneThroughputChart } from "../../src/report/charts.ts";
import { tuneReport } from "../../src/report/model.ts";
import { renderChart } from "../../src/report/svg.ts";
import { RunStore } from "../../src/record/store.ts";
import type { TuneRecord } from "../../src/record/types.ts";
import { writeSyntheticTune } from "../analyze/synthetic.ts";

const root = mkdtempSync(join(tmpdir(), "brim-noise-band-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function bandsOf(svg: string): { low: number; high: number; label: string }[] {
  return [...svg.matchAll(/<g class="band" data-low="([^"]+)" data-high="([^"]+)" data-label="([^"]+)"/g)].map((m) => ({
    low: Number(m[1]),
    high: Number(m[2]),
    label: m[3] as string,
  }));
}

describe("the tune's noise band", () => {
  it("spans the confirmed runs of the baseline and of the winner", async () => {
    const { tune } = await writeSyntheticTune(new RunStore(join(root, "a")));
    const confirmed: TuneRecord = {
      ...tune,
      confirmation: {
        verdict: "confirmed",
        speedup: 2.1,
        low: 1.9,
        high: 2.3,
        noise: 0.04,
        df: 4,
        baseline_rates: [101, 97, 99],
        winner_rates: [205, 214, 199],
      },
    };
    const svg = renderChart(tuneReport(confirmed).charts.find((c) => c.id === "tune_throughput")!);
    const bands = bandsOf(svg);
    expect(bands.map(({ low, high }) => [low, high])).toEqual([
      [97, 101],
      [199, 214],
    ]);
    expect(bands[0]?.label).toMatch(/^your configuration: 3 interleaved runs/);
    expect(bands[1]?.label).toMatch(/^winner: 3 interleaved runs/);
    // the y range holds the bands
    const yMax = Number(/data-y-max="([^"]+)"/.exec(svg)?.[1]);
    expect(yMax).toBeGreaterThanOrEqual(214);
  });

  it("without a confirmation: the noise of one trial around trial 0; none when the tune says no noise", async () => {
    const { tune } = await writeSyntheticTune(new RunStore(join(root, "b")));
    const base = tune.trials[0]?.samples_per_s as number;
    expect(noiseBands({ ...tune, noise: 0.05 })).toEqual([
      { low: base * 0.95, high: base * 1.05, label: "±5.0 % noise of one trial, around your configuration", color: "#555555" },
    ]);
    expect(bandsOf(renderChart(tuneThroughputChart({ ...tune, noise: 0.05 }, tuneReport(tune).points)))).toHaveLength(1);
    expect(noiseBands(tune)).toEqual([]);
  });
});
