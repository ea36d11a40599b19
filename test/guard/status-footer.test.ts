import { describe, expect, it } from "vitest";
import { LiveTracker } from "../../src/guard/live.ts";
import { StatusFooter } from "../../src/metrics/view.ts";

const state = new LiveTracker({ startedAt: 100, capBytes: null, capScope: "ram", totalSteps: 15 }).snapshot(112);

describe("the status line off a terminal", () => {
  it("starts on a line of its own after the job's unfinished progress-bar line, and only then", () => {
    let text = "";
    const footer = new StatusFooter({ write: (t) => (text += t), isTTY: false, columns: 100 }, { color: false, everyS: 10 });
    // the job's stderr as it passed through: a tqdm bar's \r update, its line still open
    const bar = "Epoch 0:  47%|████▋     | 7/15 [00:12<00:13]\r";
    text += bar;
    footer.passed(bar);
    footer.update(state, 100);
    expect(text.startsWith(`${bar}\n`)).toBe(true);
    expect(text.slice(bar.length + 1)).toMatch(/\n$/);
    // a finished line: no blank line before the next status line
    const done = text.length;
    text += "epoch 0 done\n";
    footer.passed("epoch 0 done\n");
    footer.update(state, 111);
    expect(text.slice(done)).toMatch(/^epoch 0 done\n[^\n]/);
  });
});
