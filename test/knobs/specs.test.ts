import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  BOOLEAN_KNOBS,
  candidateValues,
  DATA_WAIT_KNOBS,
  INTEGER_KNOBS,
  KNOWN_KNOBS,
  knobOfName,
  knobOfShortFlag,
  MICRO_BATCH_NAMES,
  NEED_WORKERS,
  OWN_MEMORY_LINE,
  spelledValues,
  switchOf,
  WALK_FIRST,
} from "../../src/knobs/lists.ts";
import { KNOB_SPECS, MICRO_BATCH_KNOB } from "../../src/knobs/specs.ts";
import { findArgvKnobs, rewriteArgv } from "../../src/knobs/argv.ts";
import { detectKnobKeys } from "../../src/knobs/binding.ts";
import { LOADER_ARGUMENTS } from "../../src/knobs/loaders.ts";

const REPO = resolve(import.meta.dirname, "..", "..");

/** A Python tuple of strings assigned to `name` at the top of a module, read from its source. */
function pythonTuple(file: string, name: string): string[] {
  const text = readFileSync(join(REPO, file), "utf8");
  const match = new RegExp(`^${name}\\s*=\\s*\\(([^)]*)\\)`, "m").exec(text);
  if (match?.[1] === undefined) throw new Error(`${file} assigns no tuple to ${name}`);
  return [...match[1].matchAll(/["']([^"']+)["']/g)].map((m) => m[1] as string);
}

describe("the knob table", () => {
  it("gives each knob its own name among its config keys, and no name to two knobs", () => {
    const owner = new Map<string, string>();
    for (const spec of KNOB_SPECS) {
      expect(spec.configKeys, spec.name).toContain(spec.name);
      for (const name of [...spec.configKeys, ...(spec.flagNames ?? [])]) {
        expect(owner.get(name) ?? spec.name, `${name} names ${owner.get(name)} and ${spec.name}`).toBe(spec.name);
        owner.set(name, spec.name);
      }
      for (const name of [...spec.configKeys, ...(spec.flagNames ?? []), ...(spec.spelledOnly ?? [])])
        expect(name, "flag names are normalised").toMatch(/^[a-z0-9_]+$/);
    }
    expect(new Set(KNOB_SPECS.map((spec) => spec.name)).size).toBe(KNOB_SPECS.length);
  });

  it("derives the lists the stages kept before it (issue 34)", () => {
    expect(KNOWN_KNOBS).toMatchObject({
      batch_size: ["batch_size", "micro_batch_size", "per_device_train_batch_size", "train_batch_size"],
      accumulation: ["accumulate_grad_batches", "gradient_accumulation_steps", "accumulation", "grad_accum_steps", "gradient_accumulate_every"],
      precision: ["precision", "mixed_precision"],
      num_workers: ["num_workers", "dataloader_num_workers"],
      pin_memory: ["pin_memory", "dataloader_pin_memory"],
      persistent_workers: ["persistent_workers", "dataloader_persistent_workers"],
      prefetch_factor: ["prefetch_factor", "dataloader_prefetch_factor"],
    });
    for (const knob of ["batch_size", "accumulation", "num_workers", "prefetch_factor"]) expect(INTEGER_KNOBS.has(knob), knob).toBe(true);
    for (const knob of ["pin_memory", "persistent_workers"]) expect(BOOLEAN_KNOBS.has(knob), knob).toBe(true);
    for (const knob of ["num_workers", "prefetch_factor", "persistent_workers", "pin_memory"]) expect(DATA_WAIT_KNOBS.has(knob), knob).toBe(true);
    expect([...WALK_FIRST]).toEqual(expect.arrayContaining(["num_workers", "prefetch_factor"]));
    expect(OWN_MEMORY_LINE.has("precision")).toBe(true);
    expect(MICRO_BATCH_KNOB).toBe("batch_size");
    expect(knobOfName("train_bs")).toBe("batch_size");
    expect(knobOfName("gradient_accumulation")).toBe("accumulation");
    expect(knobOfName("dtype")).toBe("precision");
    expect(knobOfName("loader_workers")).toBe("num_workers");
    expect(knobOfShortFlag("b")).toBe("batch_size");
    expect(knobOfShortFlag("j")).toBe("num_workers");
    expect(switchOf("bf16")).toEqual({ knob: "precision", value: "bf16-mixed" });
    expect(spelledValues("precision")).toEqual(new Set(["fp32", "bf16-mixed", "fp16-mixed"]));
  });

  it("names as DataLoader arguments exactly those the attach reports of a loader (knobs/loaders.ts)", () => {
    expect(new Set(KNOB_SPECS.filter((spec) => spec.loader !== undefined).map((spec) => spec.name))).toEqual(new Set(LOADER_ARGUMENTS));
  });

  it("keeps the candidates' walk order: precision, then the loader's knobs", () => {
    const gpu = { backend: "nvml", bf16: true, tensorCores: true, cpus: 4 } as const;
    const all = ["batch_size", "accumulation", "precision", "num_workers", "pin_memory", "persistent_workers", "prefetch_factor"];
    const values = candidateValues(all, { precision: "fp32", num_workers: 3, pin_memory: false, prefetch_factor: 4 }, gpu);
    expect(values).toEqual([
      { knob: "precision", values: ["fp32", "tf32", "bf16-mixed", "fp16-mixed"] },
      { knob: "num_workers", values: [3, 0, 1, 2, 4] },
      { knob: "pin_memory", values: [false, true] },
      { knob: "persistent_workers", values: [false, true] },
      { knob: "prefetch_factor", values: [4, 2] },
    ]);
  });
});

describe("the Python twin (it ships alone, with lists of its own)", () => {
  it("python/brim/_samples.py reads the micro-batch under the same names", () => {
    expect(pythonTuple("python/brim/_samples.py", "BATCH_SIZE_KNOBS")).toEqual([...MICRO_BATCH_NAMES]);
  });

  it("python/brim/_loader_args.py holds back the same settings from a loader without workers", () => {
    expect(new Set(pythonTuple("python/brim/_loader_args.py", "_NEED_WORKERS"))).toEqual(new Set(NEED_WORKERS));
  });
});

describe("the knobs as docs/tune.md tells them", () => {
  it("names every knob of the table in its table of knobs", () => {
    const doc = readFileSync(join(REPO, "docs", "tune.md"), "utf8");
    const section = doc.slice(doc.indexOf("## Knobs and how they reach the job"), doc.indexOf("A knob reaches the job"));
    for (const spec of KNOB_SPECS) expect(section, spec.name).toContain(`\`${spec.name}\``);
  });
});

describe("src/knobs/ in the flow", () => {
  it("imports only its own files, the shared files at the root of src/, errors and configs (the stage before it)", () => {
    const dir = join(REPO, "src", "knobs");
    for (const file of readdirSync(dir).filter((name) => name.endsWith(".ts"))) {
      const text = readFileSync(join(dir, file), "utf8");
      for (const [, from] of text.matchAll(/^(?:import|export)[^"']*from\s+["']([^"']+)["']/gm))
        expect(from, `${file} imports ${from}`).toMatch(
          /^(\.\/[\w-]+\.ts|\.\.\/(stats|format|bytes|files|version)\.ts|\.\.\/(errors|configs)\/index\.ts|node:\w+)$/,
        );
    }
  });
});

describe("a knob added by its entry alone: cudnn_benchmark", () => {
  it("is found in a config, on the command line, and tried on a GPU only", () => {
    expect(detectKnobKeys({ trainer: { cudnn_benchmark: false } }).found).toEqual([{ knob: "cudnn_benchmark", key: "trainer.cudnn_benchmark", value: false }]);
    const command = ["python", "train.py", "--cudnn-benchmark"];
    const found = findArgvKnobs(command).found;
    expect(found).toEqual([{ knob: "cudnn_benchmark", index: 2, form: "switch", flag: "--cudnn-benchmark", value: true }]);
    expect(rewriteArgv(command, found, { cudnn_benchmark: false })).toEqual(["python", "train.py"]);
    expect(findArgvKnobs(["python", "train.py", "model.cudnn_benchmark=False"]).found[0]?.value).toBe(false);
    const gpu = { backend: "nvml", bf16: true, tensorCores: true, cpus: 4 } as const;
    expect(candidateValues(["cudnn_benchmark"], { cudnn_benchmark: false }, gpu)).toEqual([{ knob: "cudnn_benchmark", values: [false, true] }]);
    expect(candidateValues(["cudnn_benchmark"], { cudnn_benchmark: false }, { ...gpu, backend: "cpu" })).toEqual([]);
    expect(BOOLEAN_KNOBS.has("cudnn_benchmark")).toBe(true);
  });
});

describe("a knob every job has, added by its entry and its Python twin: matmul_precision", () => {
  const gpu = { backend: "nvml", bf16: true, tensorCores: true, cpus: 4 } as const;

  it("is tried on a GPU with TF32 only, found under its config keys, and said how to set for good", () => {
    expect(candidateValues(["matmul_precision"], { matmul_precision: "highest" }, gpu)).toEqual([{ knob: "matmul_precision", values: ["highest", "high"] }]);
    expect(candidateValues(["matmul_precision"], { matmul_precision: "highest" }, { ...gpu, bf16: false })).toEqual([]);
    expect(candidateValues(["matmul_precision"], { matmul_precision: "highest" }, { ...gpu, backend: "cpu" })).toEqual([]);
    expect(detectKnobKeys({ trainer: { float32_matmul_precision: "high" } }).found).toEqual([
      { knob: "matmul_precision", key: "trainer.float32_matmul_precision", value: "high" },
    ]);
    const spec = KNOB_SPECS.find((s) => s.name === "matmul_precision");
    expect(spec?.jobWide?.howToSet("high")).toBe(`torch.set_float32_matmul_precision("high") at the job's start`);
    expect([spec?.computesIn?.("high"), spec?.computesIn?.("highest")]).toEqual(["tf32", undefined]);
  });

  it("python/brim/_job_wide.py sets and says the same knobs as the table's job-wide entries", () => {
    expect(pythonTuple("python/brim/_job_wide.py", "JOB_WIDE")).toEqual(KNOB_SPECS.filter((s) => s.jobWide !== undefined).map((s) => s.name));
  });
});
