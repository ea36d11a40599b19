import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { candidateValues } from "../../src/knobs/lists.ts";
import { codeKnobEnv, configFilesInCommand, detectKnobKeys, fillTemplate, parseBinding, templateKnobs } from "../../src/knobs/binding.ts";
import { loaderBound, stillLimits } from "../../src/tune/evidence.ts";
import { resolveBindings } from "../../src/knobs/index.ts";
import { buildSpace } from "../../src/tune/tune.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-knobs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("knob bindings", () => {
  it("finds {name} templates and fills them, refusing a template without a value", () => {
    expect(templateKnobs(["python", "train.py", "--bs", "{batch_size}", "--tag=run-{precision}-{batch_size}"])).toEqual(["batch_size", "precision"]);
    expect(fillTemplate(["--bs", "{batch_size}", "--tag=x{precision}"], { batch_size: 64, precision: "bf16-mixed" })).toEqual([
      "--bs",
      "64",
      "--tag=xbf16-mixed",
    ]);
    expect(() => fillTemplate(["{batch_size}"], {})).toThrow(/give one with --knob batch_size=<value>/);
  });

  it("finds config files named in the command, as arguments or --flag=value", () => {
    const dir = join(root, "cmd");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "conf.yaml"), "a: 1\n");
    writeFileSync(join(dir, "other.toml"), "a = 1\n");
    const found = configFilesInCommand(
      ["python", "train.py", "--config", "conf.yaml", "--extra=other.toml", "missing.yaml", "-c", "conf.yaml", "config_path=conf.yaml"],
      dir,
    );
    expect(found.map((entry) => [entry.index, entry.arg])).toEqual([
      [3, "conf.yaml"],
      [4, "other.toml"],
      [7, "conf.yaml"],
      [8, "conf.yaml"],
    ]);
  });

  it("detects knobs by key name, the shallowest winning, and reports ties", () => {
    const { found, notes } = detectKnobKeys({
      data_loader: { batch_size: 4, num_workers: 0, pin_memory: false },
      training: { precision: "fp32", trainer: { accumulate_grad_batches: 16 } },
      stages: [{ data_loader: { batch_size: 8 } }],
      a: { prefetch_factor: 2 },
      b: { prefetch_factor: 4 },
    });
    expect(found.map((entry) => `${entry.knob}=${entry.key}`)).toEqual([
      "batch_size=data_loader.batch_size",
      "accumulation=training.trainer.accumulate_grad_batches",
      "precision=training.precision",
      "num_workers=data_loader.num_workers",
      "pin_memory=data_loader.pin_memory",
    ]);
    expect(notes.join("\n")).toMatch(/deeper keys \(stages\.0\.data_loader\.batch_size\)/);
    expect(notes.join("\n")).toMatch(/prefetch_factor: several keys could hold it \(a\.prefetch_factor, b\.prefetch_factor\)/);
  });

  it("parses --bind and names what is wrong in one line", () => {
    writeFileSync(join(root, "c.json"), "{}");
    expect(parseBinding("batch_size=c.json:loader.bs", root)).toEqual({ knob: "batch_size", via: "config", file: join(root, "c.json"), key: "loader.bs" });
    expect(parseBinding("precision=env", root)).toEqual({ knob: "precision", via: "env" });
    expect(() => parseBinding("batch_size", root)).toThrow(/--bind expects knob=<file>:<key> or knob=env/);
    expect(() => parseBinding("batch_size=c.json", root)).toThrow(/expected <file>:<key>/);
    expect(() => parseBinding("batch_size=nope.yaml:a", root)).toThrow(/nope\.yaml: --bind batch_size: no such file/);
  });

  it("offers precision and pinning only on a GPU, workers up to the CPUs, loader extras only with workers", () => {
    const cpu = candidateValues(
      ["precision", "num_workers", "pin_memory"],
      { precision: "fp32", num_workers: 0, pin_memory: false },
      { backend: "cpu", bf16: false, tensorCores: false, cpus: 4 },
    );
    expect(cpu).toEqual([{ knob: "num_workers", values: [0, 1, 2, 4] }]);
    // an I/O-bound loader (the CPUs idle while the loop waits): workers go past the cores
    const io = candidateValues(["num_workers"], { num_workers: 0 }, { backend: "cpu", bf16: false, tensorCores: false, cpus: 2, loader: "io" });
    expect(io).toEqual([{ knob: "num_workers", values: [0, 1, 2, 4, 8, 16] }]);
    const cpuBound = candidateValues(["num_workers"], { num_workers: 0 }, { backend: "cpu", bf16: false, tensorCores: false, cpus: 2, loader: "cpu" });
    expect(cpuBound).toEqual([{ knob: "num_workers", values: [0, 1, 2] }]);
    expect(loaderBound({ dataWait: 0.98, cpuCores: 0.05, cpus: 2 })).toBe("io");
    expect(loaderBound({ dataWait: 0.9, cpuCores: 1.0, cpus: 2 })).toBe("cpu");
    expect(loaderBound({ dataWait: 0.02, cpuCores: 0.05, cpus: 2 })).toBeNull();
    expect(loaderBound({ dataWait: 0.9, cpuCores: null, cpus: 2 })).toBeNull();
    // every core busy with other work: the job's cores must be far under a starved fetch's share
    expect(loaderBound({ dataWait: 0.98, cpuCores: 0.05, cpus: 2, hostBusy: 0.95 })).toBe("io");
    expect(loaderBound({ dataWait: 0.98, cpuCores: 0.3, cpus: 2, hostBusy: 0.95 })).toBe("cpu");
    expect(loaderBound({ dataWait: 0.49, cpuCores: 0.4, cpus: 2 })).toBeNull();
    // two workers on files behind a 30 ms mount (the corpus' pe-dcgan-remote): 81 % waiting, 0.55 of 2 cores busy;
    // two CPU-bound workers would keep 1.8 cores busy through that wait
    expect(loaderBound({ dataWait: 0.81, cpuCores: 0.55, cpus: 2, workers: 2 })).toBe("io");
    expect(loaderBound({ dataWait: 0.81, cpuCores: 1.7, cpus: 2, workers: 2 })).toBe("cpu");
    // more workers than cores: the cores bound what CPU-bound workers can keep busy
    expect(loaderBound({ dataWait: 0.81, cpuCores: 0.8, cpus: 2, workers: 8 })).toBe("io");
    expect(loaderBound({ dataWait: 0.81, cpuCores: 1.2, cpus: 2, workers: 8 })).toBe("cpu");
    expect(stillLimits({ dataWait: 0.6, cpuCores: 0.1, cpus: 2, gpuUtil: null }, { num_workers: 8 })).toEqual([
      "still waits for data 60 % of step time with num_workers=8, its processes busy 0.10 of 2 cores: I/O-bound — the files the dataset reads (or its __getitem__) are the bottleneck",
    ]);
    expect(stillLimits({ dataWait: 0.01, cpuCores: 1, cpus: 2, gpuUtil: null }, {})).toEqual([]);
    // the H100 host: one busy core of 16 with num_workers=0 is not a lack of cores (bench/results/gpu-checks/nvidia-h100-80gb-hbm3/tune-nbeats.log)
    expect(stillLimits({ dataWait: 0.94, cpuCores: 1.01, cpus: 16, gpuUtil: 5 }, { num_workers: 0 })[0]).toMatch(
      /CPU-bound in too few processes — more loader workers \(num_workers, up to the idle cores\)/,
    );
    expect(stillLimits({ dataWait: 0.9, cpuCores: 1.95, cpus: 2, gpuUtil: null }, { num_workers: 1 })[0]).toMatch(/more cores, or cheaper per-sample work/);
    // beside other work: said, with the threads the job ran
    expect(stillLimits({ dataWait: 0.01, cpuCores: 0.3, cpus: 2, gpuUtil: null, hostBusy: 0.65 }, { cpu_threads: 1 })).toEqual([
      "other processes kept 1.00 of 2 cores busy beside the job: its figures, and the winner's edge, hold for a machine this busy (the job ran 1 intra-op thread)",
    ]);
    expect(stillLimits({ dataWait: 0.01, cpuCores: 0.3, cpus: 2, gpuUtil: null, hostBusy: 0.2 }, {})).toEqual([]);
    const h100 = candidateValues(
      ["precision", "pin_memory"],
      { precision: "fp32", pin_memory: false },
      { backend: "nvml", bf16: true, tensorCores: true, cpus: 16 },
    );
    expect(h100).toEqual([
      { knob: "precision", values: ["fp32", "tf32", "bf16-mixed", "fp16-mixed"] },
      { knob: "pin_memory", values: [false, true] },
    ]);
    const context = { backend: "cpu" as const, bf16: false, tensorCores: false, cpus: 4 };
    const noWorkers = buildSpace(
      { batch_size: 8, num_workers: 0, persistent_workers: false },
      {},
      ["batch_size", "num_workers", "persistent_workers"],
      context,
      () => {},
    );
    expect(noWorkers.others.map((other) => other.knob)).toEqual(["num_workers"]);
    const workers = buildSpace(
      { batch_size: 8, num_workers: 2, persistent_workers: false },
      {},
      ["batch_size", "num_workers", "persistent_workers"],
      context,
      () => {},
    );
    expect(workers.others.map((other) => other.knob)).toEqual(["num_workers", "persistent_workers"]);
  });

  it("a precision given as a --bf16/--fp16 switch is tried only as what a switch can say", () => {
    const h100 = { backend: "nvml" as const, bf16: true, tensorCores: true, cpus: 16 };
    const space = buildSpace({ batch_size: 8, precision: "bf16-mixed" }, { precisionSwitch: true }, ["batch_size", "precision"], h100, () => {});
    expect(space.others).toEqual([{ knob: "precision", values: ["fp32", "bf16-mixed", "fp16-mixed"] }]);
  });

  it("holds the configured effective batch when accumulation is above 1, unless told otherwise", () => {
    const context = { backend: "cpu" as const, bf16: false, tensorCores: false, cpus: 2 };
    const notes: string[] = [];
    const held = buildSpace({ batch_size: 4, accumulation: 16 }, {}, ["batch_size", "accumulation"], context, (line) => notes.push(line));
    expect(held.effectiveBatch).toBe(64);
    expect(notes.join("\n")).toMatch(/effective batch held at 64 .*4 × 16/);
    expect(
      buildSpace({ batch_size: 4, accumulation: 16 }, { freeBatch: true }, ["batch_size", "accumulation"], context, () => {}).effectiveBatch,
    ).toBeUndefined();
    expect(buildSpace({ batch_size: 4, accumulation: 16 }, { effectiveBatch: 256 }, ["batch_size", "accumulation"], context, () => {}).effectiveBatch).toBe(
      256,
    );
    expect(() => buildSpace({ batch_size: 4 }, { effectiveBatch: 256 }, ["batch_size"], context, () => {})).toThrow(
      /--effective-batch needs an accumulation knob/,
    );
  });

  it("binds an example's knobs from its config by name", async () => {
    const config = join(REPO, "examples/nbeats/config.yaml");
    const { bindings } = await resolveBindings([PYTHON, "train.py", "--config", config], REPO, []);
    expect(bindings.map((binding) => `${binding.knob}:${binding.via === "config" ? binding.key : binding.via}`)).toEqual([
      "batch_size:data_loader.batch_size",
      "accumulation:training.trainer.accumulate_grad_batches",
      "precision:training.precision",
      "num_workers:data_loader.num_workers",
      "pin_memory:data_loader.pin_memory",
      "persistent_workers:data_loader.persistent_workers",
      "prefetch_factor:data_loader.prefetch_factor",
    ]);
  });
});

describe("codeKnobEnv", () => {
  const literal = { knob: "batch_size", via: "code" as const, file: "/p/main.py", line: 33, name: "batch_size", value: 32 };
  const argument = { knob: "num_workers", via: "code" as const, file: "/p/main.py", line: 50, name: "num_workers", value: 0, argument: true as const };

  it("gives a run the code's knobs that differ from the code: literals edited in memory, DataLoader arguments set by the attach", () => {
    expect(codeKnobEnv([literal, argument], { batch_size: 16, num_workers: 4 })).toEqual({
      BRIM_CODE_KNOBS: JSON.stringify([{ file: "/p/main.py", line: 33, name: "batch_size", value: 16 }]),
      BRIM_LOADER_ARGS: JSON.stringify([{ file: "/p/main.py", line: 50, name: "num_workers", value: 4 }]),
    });
  });

  it("is empty where every code knob keeps its value, or the knob is not asked", () => {
    expect(codeKnobEnv([literal, argument], { batch_size: 32 })).toEqual({});
    expect(codeKnobEnv([{ knob: "batch_size", via: "template" }], { batch_size: 8 })).toEqual({});
  });
});
