import { describe, expect, it } from "vitest";
import { parseProgressLine, progressPattern, ProgressSteps } from "../../src/job/progress-lines.ts";

describe("parseProgressLine", () => {
  it("reads tqdm bars: it/s, s/it, the counter, and the last of several \\r updates", () => {
    expect(parseProgressLine(" 45%|████▌     | 45/100 [00:02<00:02, 19.80it/s]")).toEqual({
      kind: "rate",
      stepsPerSec: 19.8,
      step: 45,
      total: 100,
      counter: "bar:",
    });
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
      counter: "bar:Epoch #:",
    });
  });

  it("a bar counting examples (datasets' map) shows no step counter; each counter is named by its form and label", () => {
    const map = parseProgressLine("Running tokenizer on dataset: 100%|██████████| 7501/7501 [00:01<00:00, 5432.10 examples/s]");
    expect(map).toMatchObject({ samplesPerSec: 5432.1 });
    expect(map?.step).toBeUndefined();
    expect(parseProgressLine("Epoch 12:  25%|██▌       | 8/32 [00:00<00:00, 74.51it/s]")?.counter).toBe("bar:Epoch #:");
    expect(parseProgressLine("Validation DataLoader 0:  40%|████      | 4/10 [00:00<00:00, 74.51it/s]")?.counter).toBe("bar:Validation DataLoader #:");
    expect(parseProgressLine("step 10 samples/s 2794.4")?.counter).toBe("word:");
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
  it("gives one entry per step the counter advanced, samples/s × step time each", () => {
    const meter = new ProgressSteps();
    const first = meter.push({ kind: "rate", samplesPerSec: 100, step: 10 }, 100);
    expect(first).toHaveLength(10); // the steps before the first line, untimed: it prints no step rate
    expect(first[0]).toMatchObject({ step: 1, compute_s: null, samples: null });
    expect(meter.total).toBe(10);
    const a = meter.push({ kind: "rate", samplesPerSec: 200, step: 20 }, 101);
    const b = meter.push({ kind: "rate", samplesPerSec: 100, step: 30 }, 103);
    expect(a).toHaveLength(10);
    expect(a[0]).toMatchObject({ step: 11, samples: 20, compute_s: 0.1, steps: 1, source: "progress" });
    expect(a[9]).toMatchObject({ step: 20, t: 101 });
    expect(b.reduce((n, s) => n + (s.samples ?? 0), 0)).toBeCloseTo(200);
    expect(b.reduce((n, s) => n + (s.compute_s ?? 0), 0)).toBeCloseTo(2);
    expect(meter.total).toBe(30);
    // a new epoch restarts the counter; another stream's slightly older counter adds nothing
    expect(meter.push({ kind: "rate", stepsPerSec: 10, step: 28 }, 104)).toEqual([]);
    expect(meter.push({ kind: "rate", stepsPerSec: 10, step: 5 }, 105)).toHaveLength(5);
    expect(meter.total).toBe(35);
  });

  it("counts every line of a burst (one arrival time) and times steps by the job's own it/s", () => {
    const meter = new ProgressSteps();
    expect(meter.push({ kind: "rate", stepsPerSec: 2, step: 5, total: 100 }, 50).map((s) => s.compute_s)).toEqual([0.5, 0.5, 0.5, 0.5, 0.5]);
    const burst = [10, 15, 20].flatMap((step) => meter.push({ kind: "rate", stepsPerSec: 1000, step, total: 100 }, 51));
    expect(burst).toHaveLength(15);
    expect(meter.total).toBe(20);
    expect(burst.every((s) => s.compute_s === 0.001)).toBe(true);
    expect(burst.map((s) => s.step)).toEqual([...Array(15).keys()].map((i) => i + 6));
  });

  it("without a counter, counts rate × time (carrying fractions); steps/s gives the time per step", () => {
    const meter = new ProgressSteps();
    meter.push({ kind: "rate", stepsPerSec: 4 }, 10);
    const steps = meter.push({ kind: "rate", stepsPerSec: 4 }, 12);
    expect(steps).toHaveLength(8);
    expect(steps[0]).toMatchObject({ samples: null, steps: 1, compute_s: 0.25 });
    expect(meter.push({ kind: "rate", stepsPerSec: 4 }, 12.1)).toHaveLength(0);
    expect(meter.push({ kind: "rate", stepsPerSec: 4 }, 12.3)).toHaveLength(1);
    expect(meter.total).toBe(9);
  });

  it("follows one counter: a bar beside a printed step counts once, and a late bar's reset is not an epoch", () => {
    // tqdm_loop.py on stderr and its own "step N" prints on stdout; the bar's 0/32 arrives after "step 5"
    const meter = new ProgressSteps();
    meter.push({ kind: "rate", samplesPerSec: 2000, step: 5, counter: "word:" }, 1.0, 1);
    expect(meter.push({ kind: "rate", samplesPerSec: 2000, step: 0, total: 32, counter: "bar:Epoch #:" }, 1.01, 2)).toEqual([]);
    expect(meter.push({ kind: "rate", stepsPerSec: 74.5, step: 8, total: 32, counter: "bar:Epoch #:" }, 1.05, 2)).toEqual([]);
    expect(meter.push({ kind: "rate", samplesPerSec: 2800, step: 10, counter: "word:" }, 1.1, 1)).toHaveLength(5);
    expect(meter.push({ kind: "rate", stepsPerSec: 70 }, 1.2, 2)).toEqual([]);
    expect(meter.total).toBe(10);
  });

  it("a counter that went quiet hands over: the loading bar before training, then the training bar", () => {
    const meter = new ProgressSteps();
    expect(meter.push({ kind: "rate", stepsPerSec: 1.5, step: 2, total: 2, counter: "bar:Loading checkpoint shards:" }, 0, 2)).toHaveLength(2);
    expect(meter.push({ kind: "rate", stepsPerSec: 20, step: 5, total: 100, counter: "bar:" }, 5, 2)).toEqual([]);
    expect(meter.push({ kind: "rate", stepsPerSec: 20, step: 60, total: 100, counter: "bar:" }, 12, 2)).toHaveLength(55);
    expect(meter.push({ kind: "rate", stepsPerSec: 20, step: 70, total: 100, counter: "bar:" }, 12.5, 2)).toHaveLength(10);
    expect(meter.total).toBe(67);
  });

  it("samples/s alone spans the time since the previous line and counts no step", () => {
    const meter = new ProgressSteps();
    meter.push({ kind: "rate", samplesPerSec: 50 }, 1);
    expect(meter.push({ kind: "rate", samplesPerSec: 50 }, 3)).toEqual([
      { t: 3, step: 0, samples: 100, wait_s: null, compute_s: 2, steps: 0, source: "progress" },
    ]);
    expect(meter.total).toBe(0);
  });
});
