import { describe, expect, it } from "vitest";
import { parseProgressLine, progressPattern, ProgressSteps } from "../../src/record/progress-lines.ts";

describe("parseProgressLine", () => {
  it("reads tqdm bars: it/s, s/it, the counter, and the last of several \\r updates", () => {
    expect(parseProgressLine(" 45%|████▌     | 45/100 [00:02<00:02, 19.80it/s]")).toEqual({ kind: "rate", stepsPerSec: 19.8, step: 45, total: 100 });
    expect(parseProgressLine("  3%|▎         | 3/100 [00:06<03:14,  2.00s/it]")).toMatchObject({ stepsPerSec: 0.5, step: 3 });
    expect(
      parseProgressLine("a: 1/10 [00:00<?, ?it/s]\rb:  20%|##  | 2/10 [00:01<00:04, 2.00it/s]\rc:  30%|### | 3/10 [00:01<00:03, 2.50it/s]\r"),
    ).toMatchObject({ stepsPerSec: 2.5, step: 3 });
    expect(parseProgressLine("Epoch 0: 100%|██████████| 32/32 [00:01<00:00, 18.80it/s, loss=2.33, samples_per_s=601.5]")).toEqual({
      kind: "rate",
      stepsPerSec: 18.8,
      samplesPerSec: 601.5,
      step: 32,
      total: 32,
    });
  });

  it("reads Lightning's bars (tqdm and rich) and the Hugging Face Trainer's bar and summary", () => {
    expect(parseProgressLine("Epoch 3:  40%|████      | 40/100 [00:04<00:06,  9.52it/s, v_num=1, train_loss=0.412]")).toMatchObject({
      stepsPerSec: 9.52,
      step: 40,
    });
    expect(parseProgressLine("Epoch 0/9  ━━━━━━━━━━━━━━━━━ 45/100 0:00:02 • 0:00:03 19.80it/s v_num: 0 loss: 0.3")).toMatchObject({
      stepsPerSec: 19.8,
      step: 45,
      total: 100,
    });
    expect(parseProgressLine(" 12%|█▏        | 60/500 [00:31<03:50,  1.91it/s]")).toMatchObject({ stepsPerSec: 1.91, step: 60 });
    expect(parseProgressLine("{'train_runtime': 12.3, 'train_samples_per_second': 325.2, 'train_steps_per_second': 10.2, 'epoch': 1.0}")).toMatchObject({
      samplesPerSec: 325.2,
    });
  });

  it("reads ms/batch (word_language_model) and samples/s lines", () => {
    const rate = parseProgressLine("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.12 | loss  7.63 | ppl  2056.12");
    expect(rate?.step).toBe(200);
    expect(rate?.total).toBe(2983);
    expect(rate?.stepsPerSec).toBeCloseTo(1000 / 45.12, 6);
    expect(parseProgressLine("epoch 0 step 40 | loss 0.3 | 1523.5 samples/s")).toMatchObject({ samplesPerSec: 1523.5, step: 40 });
    expect(parseProgressLine("throughput: samples/sec=812.5")).toMatchObject({ samplesPerSec: 812.5 });
    expect(parseProgressLine("[nbeats] done steps=12 samples_per_s=2013.4")).toMatchObject({ samplesPerSec: 2013.4 });
  });

  it("returns null for lines without a rate", () => {
    for (const line of ["loss 0.3", "Epoch 1/10", "", "  0%|          | 0/100 [00:00<?, ?it/s]", "saving checkpoint to ./ckpt/step_200.pt", "lr 1e-4 wd 0.1"]) {
      expect(parseProgressLine(line), line).toBeNull();
    }
  });

  it("uses the user's pattern: named groups, or samples/s from the first group", () => {
    expect(parseProgressLine("it 40 tok/s 12000 seq/s 23.4", progressPattern(String.raw`it (?<step>\d+) .* seq/s (?<samples_per_s>[\d.]+)`))).toEqual({
      kind: "rate",
      samplesPerSec: 23.4,
      step: 40,
    });
    expect(parseProgressLine("speed=88.5 img per second", progressPattern(String.raw`speed=([\d.]+)`))).toEqual({ kind: "rate", samplesPerSec: 88.5 });
    expect(parseProgressLine("iter took 250 ms", progressPattern(String.raw`took (?<ms_per_step>\d+) ms`))).toEqual({ kind: "rate", stepsPerSec: 4 });
    expect(parseProgressLine("12.0 it/s", progressPattern("nothing-matches"))).toBeNull();
    expect(() => progressPattern("(unclosed")).toThrow(/--progress-pattern is not a regular expression/);
  });
});

describe("ProgressSteps", () => {
  it("weights rates by the time they cover and counts steps from the counter", () => {
    const meter = new ProgressSteps();
    expect(meter.push({ kind: "rate", samplesPerSec: 100, step: 10 }, 100)).toBeNull();
    expect(meter.total).toBe(10);
    const a = meter.push({ kind: "rate", samplesPerSec: 200, step: 20 }, 101);
    const b = meter.push({ kind: "rate", samplesPerSec: 100, step: 30 }, 103);
    expect(a).toMatchObject({ samples: 200, compute_s: 1, steps: 10, step: 20, source: "progress" });
    expect(b).toMatchObject({ samples: 200, compute_s: 2, steps: 10 });
    expect(meter.total).toBe(30);
    // a new epoch restarts the counter; another stream's slightly older counter adds nothing
    expect(meter.push({ kind: "rate", stepsPerSec: 10, step: 28 }, 104)?.steps).toBe(0);
    expect(meter.push({ kind: "rate", stepsPerSec: 10, step: 5 }, 105)?.steps).toBe(5);
    expect(meter.total).toBe(35);
  });

  it("without a counter, counts rate × time; steps/s alone gives the time per step", () => {
    const meter = new ProgressSteps();
    meter.push({ kind: "rate", stepsPerSec: 4 }, 10);
    const step = meter.push({ kind: "rate", stepsPerSec: 4 }, 12);
    expect(step).toMatchObject({ samples: null, steps: 8, compute_s: 0.25 });
  });
});
