import { cpSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseTuneRecord } from "../../src/record/schema.ts";
import { RunStore } from "../../src/record/store.ts";
import { tuneHtml } from "../../src/report/html.ts";
import { tuneMarkdown } from "../../src/report/markdown.ts";
import { tuneReport } from "../../src/report/model.ts";
import { parityLoss, parityLossChart, parityLossLines, paritySpeedup, type ParityRecord } from "../../src/report/parity-chart.ts";
import { renderChart } from "../../src/report/svg.ts";
import { writeReport } from "../../src/report/write.ts";

// Real tunes of test/jobs/parity_mlp.py. batch-changed.json: `brim tune --strategy grid --knob batch_size=4,16
// --fix num_workers --fix accumulation --free-batch --max-trials 2 --steps 40 -- python test/jobs/parity_mlp.py
// --batch-size 4 --accumulation 4 --sleep-ms 15` (effective batch 16 → 64); plain.json holds it at 16.
const fixture = (name: string) => new URL(`../fixtures/tune-parity/${name}.json`, import.meta.url);
const load = (name: string) => parseTuneRecord(JSON.parse(readFileSync(fixture(name), "utf8")), `${name}.json`);
const parityOf = (name: string): ParityRecord => {
  const parity = load(name).parity;
  if (parity === undefined) throw new Error(`${name} has no parity`);
  return parity;
};
const mean = (xs: readonly (number | string | null)[]): string => (xs.map(Number).reduce((a, b) => a + b, 0) / xs.length).toPrecision(4);
const dataX = (svg: string, series: string): string | undefined =>
  new RegExp(`data-series="${series}"[^>]*>\\s*<polyline [^>]*data-x="([^"]*)"`).exec(svg)?.[1];

describe("the loss of yours and the winner's, from tune.json's parity", () => {
  it("puts a winner that changes the effective batch on samples seen: (step + 1) × that run's samples per step", () => {
    const parity = parityOf("batch-changed");
    const view = parityLoss(parity);
    expect(view?.axis).toBe("samples");
    expect(view?.caption).toBe("effective batch 16 → 64: losses by samples seen");
    const [yours, winner] = view?.runs ?? [];
    expect(yours?.points).toEqual(parity.baseline_losses.map((loss, i) => [(i + 1) * 16, loss]));
    expect(winner?.points).toEqual(parity.winner_losses.map((loss, i) => [(i + 1) * 64, loss]));
    expect([yours?.label, yours?.trial, winner?.label, winner?.trial]).toEqual(["yours", 2, "winner", 3]);
  });

  it("keeps the step where the effective batch is held, or unknown", () => {
    const parity = parityOf("plain");
    const view = parityLoss(parity);
    expect(view?.axis).toBe("step");
    expect(view?.caption).toBe("effective batch held at 16: losses by step");
    expect(view?.runs[1].points.slice(0, 3)).toEqual(parity.winner_losses.slice(0, 3).map((loss, i) => [i, loss]));
    const unknown = parityLoss({ ...parity, effective_batch: { before: null, after: 64, held: false } });
    expect(unknown?.caption).toBe("effective batch unknown: losses by step");
  });

  it("breaks the line at a non-finite loss, names it in the spans, and has nothing to draw without a finite loss", () => {
    const parity = parityOf("plain");
    const broken: ParityRecord = { ...parity, winner_losses: [2.4, "nan", 2.2, 2.1], baseline_losses: [2.4, 2.3, 2.2, 2.1] };
    const view = parityLoss(broken);
    expect(view?.runs[1].points).toEqual([
      [0, 2.4],
      [1, null],
      [2, 2.2],
      [3, 2.1],
    ]);
    expect(parityLossLines(broken, 2)).toEqual([
      "effective batch held at 16: losses by step (mean over each span)",
      "  steps   0–1    2–3",
      "  yours   2.350  2.150",
      "  winner  nan    2.150",
    ]);
    expect(parityLoss({ ...parity, winner_losses: ["nan"], baseline_losses: [null] })).toBeNull();
  });

  it("prints each run's mean loss over spans of the samples both saw", () => {
    const parity = parityOf("batch-changed");
    // 16 steps of 16 against 16 of 64: both saw 256 samples, four of the winner's steps
    const b = parity.baseline_losses;
    const w = parity.winner_losses;
    expect(parityLossLines(parity)).toEqual([
      "effective batch 16 → 64: losses by samples seen (mean over each span)",
      "  samples  1–64   65–128  129–192  193–256",
      `  yours    ${mean(b.slice(0, 4))}  ${mean(b.slice(4, 8))}   ${mean(b.slice(8, 12))}    ${mean(b.slice(12, 16))}`,
      `  winner   ${mean(w.slice(0, 1))}  ${mean(w.slice(1, 2))}   ${mean(w.slice(2, 3))}    ${mean(w.slice(3, 4))}`,
    ]);
    expect(parityLossLines(parity, 2)[1]).toBe("  samples  1–128  129–256");
    expect(parityLossLines({ ...parity, baseline_losses: b.slice(0, 3) })).toEqual([]); // 48 samples: no step of the winner's
    expect(parityLossLines(undefined)).toEqual([]);
  });

  it("draws both series with the shared chart code: yours solid with points, the winner's dashed, on samples seen", () => {
    const view = parityLoss(parityOf("batch-changed"));
    if (view === null) throw new Error("no view");
    const spec = parityLossChart(view);
    expect(spec.x.label).toBe("samples seen");
    expect(spec.series.map((s) => [s.name, s.style])).toEqual([
      ["yours (trial 2)", "line+points"],
      ["winner (trial 3)", "dashed"],
    ]);
    const svg = renderChart(spec);
    expect(svg).toContain('data-chart="tune_loss"');
    expect(svg).toContain("Loss, yours and the winner&#39;s: effective batch 16 → 64: losses by samples seen");
    expect(dataX(svg, "yours \\(trial 2\\)")).toBe(Array.from({ length: 16 }, (_, i) => (i + 1) * 16).join(" "));
    expect(dataX(svg, "winner \\(trial 3\\)")).toBe(Array.from({ length: 16 }, (_, i) => (i + 1) * 64).join(" "));
  });

  it("says the speedup it stands beside, and that throughput counts samples when the effective batch changed", () => {
    expect(paritySpeedup(load("plain"))).toBe("the winner: ×4.04 your throughput, confirmed interleaved (95 % interval ×2.56–×6.39)");
    expect(paritySpeedup(load("batch-changed"))).toBe(
      "the winner: ×3.82 your throughput, confirmed interleaved (95 % interval ×3.19–×4.56); its steps hold 64 samples to your 16: throughput counts samples, the losses by samples seen show whether it learns as much from each",
    );
    expect(paritySpeedup({ ...load("plain"), confirmation: null })).toBe("the winner: ×4.04 your throughput (not confirmed interleaved)");
    expect(paritySpeedup({ ...load("plain"), winner: null })).toBeNull();
  });
});

describe("the tune report shows it beside the speedup", () => {
  it("HTML: after the before/after table, before the other charts", () => {
    const model = tuneReport(load("batch-changed"));
    const html = tuneHtml(model);
    const at = (text: string): number => html.indexOf(text);
    expect(at('<table class="comparison"')).toBeGreaterThan(at("<h2>Before and after</h2>"));
    expect(at("<section data-parity>")).toBeGreaterThan(at('<table class="comparison"'));
    expect(at("<h2>Charts</h2>")).toBeGreaterThan(at('data-chart="tune_loss"'));
    expect(html).toContain("<h3>effective batch 16 → 64: losses by samples seen</h3>");
    expect(html).toContain("throughput counts samples");
    expect(model.charts.map((c) => c.id)).toEqual(["tune_throughput", "tune_memory"]);
  });

  it("Markdown: the caption, the speedup, the image and the spans' mean losses", () => {
    const model = tuneReport(load("plain"));
    const md = tuneMarkdown(model, new Map([["tune_loss", { path: "charts/tune_loss.png", title: "Loss" }]]));
    expect(md).toContain("### effective batch held at 16: losses by step\n\nthe winner: ×4.04");
    expect(md).toContain("![Loss](charts/tune_loss.png)");
    expect(md).toContain("| mean loss over steps | 0–9 | 10–19 | 20–29 | 30–39 |\n|---|---:|---:|---:|---:|\n| yours | 2.358 |");
    expect(md.indexOf("## Trials")).toBeGreaterThan(md.indexOf("| winner | 2.358 |"));
  });

  it("writes the chart's file beside the others and links it, from a store holding the recorded tune.json", async () => {
    const root = mkdtempSync(join(tmpdir(), "brim-parity-report-"));
    const id = load("batch-changed").id;
    mkdirSync(join(root, "tunes", id), { recursive: true });
    cpSync(fixture("batch-changed"), join(root, "tunes", id, "tune.json"));
    const out = join(root, "out");
    const result = await writeReport(new RunStore(root), id, { out, png: false });
    expect(result.files.map((f) => f.path)).toContain(join(out, "charts", "tune_loss.svg"));
    expect(readFileSync(join(out, "charts", "tune_loss.svg"), "utf8")).toContain('data-x-label="samples seen"');
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("](charts/tune_loss.svg)");
  });

  it("leaves it out of a tune without parity", () => {
    const tune = load("plain");
    const model = tuneReport({ ...tune, parity: undefined });
    expect(model.parity).toBeNull();
    expect(tuneHtml(model)).not.toContain("data-parity");
  });
});
