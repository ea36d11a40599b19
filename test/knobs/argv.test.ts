import { describe, expect, it } from "vitest";
import { describeArgvKnob, findArgvKnobs, rewriteArgv } from "../../src/knobs/argv.ts";

const knobsOf = (command: string[]): string[] => findArgvKnobs(command).found.map((k) => `${k.knob}=${String(k.value)} ${k.form} ${describeArgvKnob(k)}`);

describe("knobs on the command line", () => {
  it("finds argparse flags in every spelling: --batch-size N, --batch_size=N, -b N, --workers N, -j N", () => {
    expect(knobsOf(["python", "train.py", "--batch-size", "32", "--workers", "2"])).toEqual([
      "batch_size=32 separate --batch-size 32",
      "num_workers=2 separate --workers 2",
    ]);
    expect(knobsOf(["python", "train.py", "--batch_size=64", "--num-workers=0"])).toEqual([
      "batch_size=64 equals --batch_size=64",
      "num_workers=0 equals --num-workers=0",
    ]);
    expect(knobsOf(["python", "main.py", "-b", "256", "-j", "4", "--lr", "0.1", "data/"])).toEqual([
      "batch_size=256 separate -b 256",
      "num_workers=4 separate -j 4",
    ]);
  });

  it("finds Hugging Face TrainingArguments flags, with --bf16/--fp16 as present-or-absent switches", () => {
    const command = [
      "python",
      "run.py",
      "--per_device_train_batch_size",
      "16",
      "--per_device_eval_batch_size",
      "64",
      "--gradient_accumulation_steps",
      "4",
      "--bf16",
      "--dataloader_num_workers",
      "2",
      "--dataloader_pin_memory",
      "False",
      "--output_dir",
      "out",
    ];
    expect(knobsOf(command)).toEqual([
      "batch_size=16 separate --per_device_train_batch_size 16",
      "accumulation=4 separate --gradient_accumulation_steps 4",
      "precision=bf16-mixed switch --bf16",
      "num_workers=2 separate --dataloader_num_workers 2",
      "pin_memory=false separate --dataloader_pin_memory false",
    ]);
    const found = findArgvKnobs(command).found;
    const rewritten = rewriteArgv(command, found, { batch_size: 64, accumulation: 1, precision: "fp32", num_workers: 4, pin_memory: true });
    expect(rewritten.join(" ")).toBe(
      "python run.py --per_device_train_batch_size 64 --per_device_eval_batch_size 64 --gradient_accumulation_steps 1 --dataloader_num_workers 4 --dataloader_pin_memory True --output_dir out",
    );
    expect(rewriteArgv(command, found, { precision: "fp16-mixed" })).toContain("--fp16");
    expect(rewriteArgv(command, found, { precision: "fp16-mixed" })).not.toContain("--bf16");
  });

  it("finds LightningCLI dotted flags and Hydra overrides, and rewrites them in their own form", () => {
    const lightning = [
      "python",
      "main.py",
      "fit",
      "--config",
      "c.yaml",
      "--data.batch_size",
      "32",
      "--trainer.precision",
      "16-mixed",
      "--trainer.accumulate_grad_batches=8",
    ];
    expect(knobsOf(lightning)).toEqual([
      "batch_size=32 separate --data.batch_size 32",
      "precision=16-mixed separate --trainer.precision 16-mixed",
      "accumulation=8 equals --trainer.accumulate_grad_batches=8",
    ]);
    const hydra = ["python", "train.py", "data.batch_size=32", "+trainer.accumulate_grad_batches=2", "model.lr=0.1", "loader.num_workers=0"];
    const found = findArgvKnobs(hydra).found;
    expect(found.map((k) => `${k.knob}:${k.flag}`)).toEqual([
      "batch_size:data.batch_size",
      "accumulation:+trainer.accumulate_grad_batches",
      "num_workers:loader.num_workers",
    ]);
    expect(rewriteArgv(hydra, found, { batch_size: 128, accumulation: 1, num_workers: 4 })).toEqual([
      "python",
      "train.py",
      "data.batch_size=128",
      "+trainer.accumulate_grad_batches=1",
      "model.lr=0.1",
      "loader.num_workers=4",
    ]);
  });

  it("leaves alone what is not a knob value: other batch sizes, templates, non-numbers, store_true switches read as booleans", () => {
    expect(knobsOf(["python", "t.py", "--test-batch-size", "1000", "--eval_batch_size=8", "--batch-size", "{batch_size}"])).toEqual([]);
    expect(knobsOf(["python", "t.py", "--batch-size", "auto"])).toEqual([]);
    expect(knobsOf(["python", "t.py", "--pin-memory", "--persistent_workers", "--epochs", "1"])).toEqual([
      "pin_memory=true switch --pin-memory",
      "persistent_workers=true switch --persistent_workers",
    ]);
    const command = ["python", "t.py", "--pin-memory", "--epochs", "1"];
    expect(rewriteArgv(command, findArgvKnobs(command).found, { pin_memory: false })).toEqual(["python", "t.py", "--epochs", "1"]);
  });

  it("keeps the first of a knob given twice and says so", () => {
    const { found, notes } = findArgvKnobs(["python", "t.py", "--batch-size", "8", "--bs", "16"]);
    expect(found.map((k) => k.value)).toEqual([8]);
    expect(notes[0]).toMatch(/gives it twice \(--batch-size and --bs\)/);
  });
  it("reads a precision spelt as a torch dtype (nanoGPT --dtype) or accelerate's --mixed_precision, and writes it back the same way", () => {
    const nano = ["python", "train.py", "config/train_shakespeare_char.py", "--dtype=float32", "--batch_size=12"];
    const found = findArgvKnobs(nano).found;
    expect(found.map((k) => `${k.knob}=${String(k.value)}`)).toEqual(["precision=fp32", "batch_size=12"]);
    expect(rewriteArgv(nano, found, { precision: "bf16-mixed", batch_size: 48 })).toEqual([
      "python",
      "train.py",
      "config/train_shakespeare_char.py",
      "--dtype=bfloat16",
      "--batch_size=48",
    ]);
    const accel = ["accelerate", "launch", "t.py", "--mixed_precision", "no"];
    const inAccel = findArgvKnobs(accel).found;
    expect(inAccel.map((k) => `${k.knob}=${String(k.value)}`)).toEqual(["precision=fp32"]);
    expect(rewriteArgv(accel, inAccel, { precision: "fp16-mixed" })).toEqual(["accelerate", "launch", "t.py", "--mixed_precision", "fp16"]);
    // a --dtype that names no precision is not a knob
    expect(findArgvKnobs(["python", "t.py", "--dtype", "int8", "--batch-size", "8"]).found.map((k) => k.knob)).toEqual(["batch_size"]);
  });
});
