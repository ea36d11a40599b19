import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { tunePage } from "../../src/dashboard/pages.ts";
import { parseTuneRecord } from "../../src/record/schema.ts";
import { tuneReport } from "../../src/report/model.ts";

// A real tune of test/jobs/parity_mlp.py whose winner changes the effective batch from 16 to 64
// (test/report/parity-chart.test.ts has its command).
const tune = parseTuneRecord(JSON.parse(readFileSync(new URL("../fixtures/tune-parity/batch-changed.json", import.meta.url), "utf8")), "batch-changed.json");

describe("the tune's page", () => {
  it("shows the winner's loss beside yours by samples seen, under the speedup, above the curves, with the hover readout", () => {
    const html = tunePage({ model: tuneReport(tune), tune, running: false }, "/store", "n0nce");
    const at = (text: string): number => html.indexOf(text);
    expect(at("<h2>Your configuration and the winner</h2>")).toBeGreaterThan(at('<table class="facts">'));
    expect(at("<p data-parity-speedup>the winner: ×3.82 your throughput")).toBeGreaterThan(at("<h2>Your configuration and the winner</h2>"));
    expect(at('data-chart="tune_loss"')).toBeGreaterThan(at("data-parity-speedup"));
    expect(at("<h2>Curves</h2>")).toBeGreaterThan(at('data-chart="tune_loss"'));
    expect(html).toContain('data-x-label="samples seen"');
    expect(html).toContain('<script nonce="n0nce">');
    expect(html).toContain("data-hover-tip");
  });

  it("has no such section for a tune without parity", () => {
    const plain = { ...tune, parity: undefined };
    const html = tunePage({ model: tuneReport(plain), tune: plain, running: false }, "/store", "n0nce");
    expect(html).not.toContain("Your configuration and the winner");
    expect(html).toContain('data-chart="tune_memory"');
  });
});
