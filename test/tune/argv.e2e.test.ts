import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";
import { expectRecordDecides } from "../helpers/tune-record.ts";

// `brim tune -- python train.py --batch-size 32`: the built CLI finds the knobs on the command line
// and varies them by rewriting it, on every PyTorch this host has (the venv's 2.x, Debian's 1.13).
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const root = mkdtempSync(join(tmpdir(), "brim-argv-e2e-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// asked once per interpreter, from the installed packages' metadata: an import of torch is seconds of
// CPU, and every describe asks (a torch installed without metadata is imported to ask it)
const PROBE = [
  "import importlib.metadata as m, importlib.util as u, sys",
  "if u.find_spec('torch') is None: sys.exit(1)",
  "try: version = m.version('torch')",
  "except m.PackageNotFoundError: import torch; version = torch.__version__",
  "print(version); print('accelerate' if u.find_spec('accelerate') is not None else '')",
].join("\n");
const probes = new Map<string, { torch: string; accelerate: boolean } | null>();
function probeOf(python: string): { torch: string; accelerate: boolean } | null {
  if (!probes.has(python)) {
    const probe = existsSync(python) ? spawnSync(python, ["-c", PROBE], { encoding: "utf8" }) : null;
    const [torch = "", accelerate = ""] = probe?.status === 0 ? probe.stdout.split("\n").map((line) => line.trim()) : [];
    probes.set(python, torch === "" ? null : { torch, accelerate: accelerate === "accelerate" });
  }
  return probes.get(python) ?? null;
}
const torchOf = (python: string): string | null => probeOf(python)?.torch ?? null;

const PYTHONS = [process.env.BRIM_TEST_PYTHON, join(REPO, ".venv", "bin", "python"), "/usr/bin/python3"].filter(
  (python, index, all): python is string => python !== undefined && all.indexOf(python) === index,
);
// the first interpreter with PyTorch runs the whole case; the others (Debian's 1.13) its smallest form
const MAIN = PYTHONS.find((python) => torchOf(python) !== null);

/**
 * The least tune that still varies a knob: the grid over the configuration as given and one smaller
 * batch (`slower`), baseline first. The smaller batch of these jobs runs at fewer samples/s (their
 * steps cost about the same whatever the batch), so the tune ends without a winner and without the A/B
 * confirmation of one (4 more trials, each a job process: seconds of CPU); the cases take an eighth of
 * the batch or less, further below than a busy machine's noise reaches. If the machine still makes it
 * win, it is confirmed and the test only takes longer. A winner's confirmation and apply are run by the cases that need them. The PyTorch
 * threads (cpu_threads, tried first when other processes hold cores, as on a busy test machine) are
 * fixed: on the grid they would join the smaller batch's trial and could make it the faster one.
 */
const oneSmallerBatch = (given: number, smaller: number): string[] => [
  "--strategy",
  "grid",
  "--knob",
  `batch_size=${given},${smaller}`,
  "--fix",
  "cpu_threads",
  "--max-trials",
  "2",
];
/** The trials that ran the job on their knobs to the end of a measurement (a trial stopped as slower measured too). */
const measured = (record: TuneRecord): TuneRecord["trials"] => record.trials.filter((trial) => trial.end === "ok" || trial.end === "slower");

/**
 * The built CLI. Every tune here measures at most 2 s a trial (--window 2s): what is asserted is which
 * knobs reached the job and how the record reads, never a speed, and on a loaded machine a trial's
 * noise stretches the default window's floor to 3.3 s of every trial.
 */
function brim(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const [command, ...rest] = args;
  const full = command === "tune" ? ["tune", "--window", "2s", ...rest] : args;
  const result = spawnSync(process.execPath, [BRIM, ...full], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1" },
    timeout: scaled(600_000),
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function onlyTune(store: string): TuneRecord {
  const [id] = readdirSync(join(store, "tunes"));
  return JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord;
}

describe.each(PYTHONS)("brim tune with knobs on the command line (%s)", (python) => {
  const version = torchOf(python);
  if (version === null) console.warn(`skipped: ${python} has no PyTorch (argv knobs are tested on the other interpreters)`);
  it.skipIf(version === null)(
    `varies --batch-size${python === MAIN ? " / --workers" : ""} of a plain argparse script (PyTorch ${version ?? "absent"})`,
    { timeout: scaled(600_000) },
    () => {
      const store = join(root, `store-${python.replace(/\W/g, "_")}`);
      // the least tune that varies the flags: the main Python, the grid over given values, so both flags
      // are varied whatever the search would pick first (a re-measure of a never-stable baseline, a walk
      // of loader workers): the batch as given (32, workers 0), then 4 with workers 1 (the grid takes
      // the workers in the order given, each with its micro-batches ascending), both flags changed in
      // the one trial after the baseline, PyTorch's threads (tried first beside busy cores) fixed; the
      // others: one smaller batch, 2 trials. The smaller batch runs at fewer samples/s, so neither ends
      // with a winner to confirm (4–6 more trials); if the machine makes one win, it is confirmed and
      // applied, and apply is asserted
      const given = 32;
      const search =
        python === MAIN
          ? ["--strategy", "grid", "--knob", "batch_size=32,4", "--knob", "num_workers=1,0", "--fix", "cpu_threads", "--max-trials", "2"]
          : [...oneSmallerBatch(32, 4), "--fix", "num_workers"];
      const result = brim([
        "tune",
        "--store",
        store,
        "--quiet",
        ...search,
        "--steps",
        "6",
        "--",
        python,
        join(REPO, "test/jobs/plain_loop.py"),
        "--batch-size",
        String(given),
        "--workers",
        "0",
        "--max-steps",
        "100000",
        "--hidden",
        "128",
      ]);
      expect(result.stderr).toContain(`knobs found: batch_size (command line: --batch-size ${given}), num_workers (command line: --workers 0)`);
      const record = onlyTune(store);
      expect(record.bindings.map((binding) => `${binding.knob}:${binding.via}:${binding.flag ?? ""}`)).toEqual([
        "batch_size:argv:--batch-size",
        "num_workers:argv:--workers",
      ]);
      const ok = measured(record);
      expect(ok.length, result.stderr).toBeGreaterThanOrEqual(2);
      expect(new Set(ok.map((trial) => trial.knobs.batch_size)).size).toBeGreaterThanOrEqual(2);
      if (python === MAIN) expect(new Set(ok.map((trial) => trial.knobs.num_workers)).size).toBe(2);
      // the job itself counts x.shape[0]: the samples of a step are the flag's value, so the flag reached it
      for (const trial of ok) expect(trial.samples_per_step).toBe(trial.knobs.batch_size);
      if (record.winner !== null && record.winner.knobs.batch_size !== given) {
        const applied = brim(["apply", "--store", store]);
        expect(applied.stdout).toContain(`--batch-size ${String(record.winner.knobs.batch_size)} --workers`);
      }
    },
  );
});

describe("brim tune with nothing to vary", () => {
  it("says so and exits 3; it never calls trial 0 a winner", { timeout: scaled(120_000) }, () => {
    const script = join(root, "no_knobs.py");
    writeFileSync(script, ["import time, brim", "for _ in brim.track(range(10**6), samples=8):", "    time.sleep(0.01)"].join("\n"));
    const store = join(root, "store-none");
    const result = brim(["tune", "--store", store, "--quiet", "--max-trials", "4", "--", "/usr/bin/python3", script]);
    expect(result.status).toBe(3);
    expect(result.stderr).toContain("knobs found: none");
    expect(result.stdout).toMatch(/no winner: nothing to tune/);
    expect(result.stdout).not.toMatch(/apply with/);
    const record = onlyTune(store);
    expect(record.winner).toBeNull();
    expect(record.trials).toHaveLength(1);
    expect(record.stop_reason).toBe("nothing_to_tune");
  });
});

describe("brim tune on an accelerate job with accumulation (the built CLI, real accelerate)", () => {
  const python = [process.env.BRIM_TEST_PYTHON, join(REPO, ".venv", "bin", "python")].find(
    (candidate): candidate is string => candidate !== undefined && probeOf(candidate)?.accelerate === true,
  );
  if (python === undefined) console.warn("skipped: no interpreter with accelerate and torch (set BRIM_TEST_PYTHON)");
  const job = join(REPO, "test/jobs/accelerate_accum.py");

  it.skipIf(python === undefined)(
    "holds the effective batch 16 × 4 and trusts the samples per step (micro × accumulation)",
    { timeout: scaled(600_000) },
    () => {
      const store = join(root, "store-accel-held");
      const result = brim([
        "tune",
        "--store",
        store,
        "--quiet",
        // 16 × 4 and 2 × 32: the accumulation follows the micro-batch, the effective batch held
        ...oneSmallerBatch(16, 2),
        "--steps",
        "6",
        "--",
        python as string,
        job,
        "--batch-size",
        "16",
        "--gradient_accumulation_steps",
        "4",
      ]);
      const record = onlyTune(store);
      expect(result.stderr).not.toMatch(/did not follow/);
      expect(record.stop_reason).not.toBe("untrusted");
      const ok = measured(record);
      expect(ok.length, result.stderr).toBeGreaterThanOrEqual(2);
      expect(new Set(ok.map((trial) => trial.knobs.batch_size)).size).toBe(2);
      for (const trial of ok) {
        expect((trial.knobs.batch_size as number) * (trial.knobs.accumulation as number)).toBe(64);
        expect(trial.effective_batch).toBe(64);
        expect(trial.samples_per_step).toBe(64);
      }
      expect(record.effective_batch_policy?.kind).toBe("held");
    },
  );

  it.skipIf(python === undefined)(
    "--free-batch with accumulation in the code: the effective batch reported is micro × the accumulation that ran",
    { timeout: scaled(600_000) },
    () => {
      const store = join(root, "store-accel-free");
      const result = brim([
        "tune",
        "--store",
        store,
        "--quiet",
        "--free-batch",
        ...oneSmallerBatch(16, 2),
        "--steps",
        "6",
        "--",
        python as string,
        job,
        "--batch-size",
        "16",
      ]);
      const record = onlyTune(store);
      expect(record.stop_reason).not.toBe("untrusted");
      const ok = measured(record);
      expect(new Set(ok.map((trial) => trial.knobs.batch_size)).size, result.stderr).toBe(2);
      for (const trial of ok) {
        expect(trial.accumulation).toBe(4);
        expect(trial.samples_per_step).toBe((trial.knobs.batch_size as number) * 4);
      }
      const policy = record.effective_batch_policy;
      expect(policy?.before).toBe(64);
      if (record.winner !== null) expect(policy?.after).toBe((record.winner.knobs.batch_size as number) * 4);
    },
  );
});

describe("brim tune with the knobs written in the code", () => {
  const python = PYTHONS.find((p) => torchOf(p) !== null);
  it.skipIf(python === undefined)(
    "varies DataLoader(batch_size=16, num_workers=0) in memory, leaves the file as it was, and apply says the line to change",
    { timeout: scaled(600_000) },
    () => {
      const script = join(root, "literal_loop.py");
      writeFileSync(script, readFileSync(join(REPO, "test/jobs/literal_loop.py"), "utf8"));
      const before = readFileSync(script, "utf8");
      const store = join(root, "store-code");
      // the batch written in the code is the subject: the least tune that varies it. The search, not a
      // grid of given values (a knob found in the code is bound by trial 0's attach, and --knob values
      // would not reach it); no batch above the code's 16, so the trial after the baseline goes down to a
      // slower one (no winner to confirm: 2 trials, not 8), and PyTorch's threads (tried first beside
      // busy cores) and the workers stay as they are
      const result = brim([
        "tune",
        "--store",
        store,
        "--max-batch",
        "16",
        "--fix",
        "cpu_threads",
        "--max-trials",
        "2",
        "--steps",
        "6",
        "--fix",
        "num_workers",
        "--",
        python as string,
        script,
      ]);
      expect(result.stderr).toContain(
        "batch_size=16 is written in the code at literal_loop.py:10: trials vary it there, in memory (the file is not touched); apply says the line to change",
      );
      const record = onlyTune(store);
      expect(record.bindings.map((binding) => `${binding.knob}:${binding.via}:${binding.line ?? ""}`)).toEqual(["batch_size:code:10", "num_workers:code:10"]);
      const ok = measured(record);
      expect(new Set(ok.map((trial) => trial.knobs.batch_size)).size, result.stderr).toBeGreaterThanOrEqual(2);
      // the job counts x.shape[0]: each trial ran the batch it was given, so the edit reached the DataLoader
      for (const trial of ok) expect(trial.samples_per_step).toBe(trial.knobs.batch_size);
      expect(readFileSync(script, "utf8")).toBe(before);
      if (record.winner !== null && record.winner.knobs.batch_size !== 16) {
        const applied = brim(["apply", "--store", store]);
        expect(applied.stdout).toContain(
          `brim: change your code at ${script}:10: batch_size=16 → batch_size=${String(record.winner.knobs.batch_size)} (brim does not edit source files)`,
        );
      }
    },
  );

  it.skipIf(python === undefined)(
    "a DataLoader whose workers come from a variable, its loop waiting on slow reads: workers are tried for the wait it measured, the attach gives each trial's loader its workers and persistent_workers, the file stays as it was, the verdict is its interleaved measurements', apply says what to pass",
    { timeout: scaled(600_000) },
    () => {
      const script = join(root, "loader_args.py");
      writeFileSync(script, readFileSync(join(REPO, "test/jobs/loader_args.py"), "utf8"));
      const before = readFileSync(script, "utf8");
      const store = join(root, "store-loader-args");
      // PyTorch's threads fixed: beside busy cores they are tried first and would take the one trial after the baseline.
      // This is also the I/O-bound loader's case (real DataLoader workers, their wait measured, a winner
      // confirmed A/B): the loader workers given as a command-line flag are varied in the first case above
      const result = brim([
        "tune",
        "--store",
        store,
        "--max-trials",
        "2",
        "--steps",
        "6",
        "--fix",
        "batch_size",
        "--fix",
        "cpu_threads",
        "--",
        python as string,
        script,
      ]);
      expect(result.stderr).toMatch(
        /the DataLoader built at loader_args\.py:26 ran with num_workers=1, persistent_workers=False, prefetch_factor=2: trials may give it other values there, in memory/,
      );
      const record = onlyTune(store);
      // batch_size=16 is a literal on that line (varied by editing it in memory); the workers are a variable
      expect(record.bindings.filter((b) => b.via === "code").map((b) => `${b.knob}:${b.line ?? ""}:${String(b.argument)}`)).toEqual([
        "batch_size:26:undefined",
        "num_workers:26:true",
        "persistent_workers:26:true",
        "prefetch_factor:26:true",
      ]);
      // the loop waits for data with the CPUs idle: the workers are tried first, for the wait trial 0
      // measured; its measured wait and CPU share are the evidence trial 1 names (what they make of the
      // loader, I/O- or CPU-bound, is decided on given readings in knobs.test.ts' loaderBound cases)
      expect(record.trials.find((trial) => trial.index === 1)?.purpose).toMatch(/waits for data \d+ % of step time, its processes busy [\d.]+ of \d+ cores/);
      const ran = measured(record).map((trial) => trial.knobs.num_workers as number);
      expect(new Set(ran).size, result.stderr).toBeGreaterThanOrEqual(2);
      // each trial's loader got its value
      const tried = record.trials.filter((trial) => trial.end === "ok" && trial.knobs.num_workers !== 1);
      expect(tried.length, result.stderr).toBeGreaterThanOrEqual(1);
      for (const trial of tried) {
        const loader = readFileSync(join(store, "runs", trial.run_id ?? "", "timeline.ndjson"), "utf8")
          .split("\n")
          .filter((line) => line.includes('"event":"loader"'))
          .map((line) => JSON.parse(line) as { details: { where: string; num_workers: number; persistent_workers: boolean } })
          .find((event) => event.details.where.endsWith("loader_args.py:26"));
        expect(loader?.details.num_workers).toBe(trial.knobs.num_workers);
        expect(loader?.details.persistent_workers).toBe(trial.knobs.persistent_workers);
      }
      expect(readFileSync(script, "utf8")).toBe(before);
      // the verdict is what its interleaved measurements give, and the closing lines say the same
      expect(result.status, result.stderr).toBe(0);
      expectRecordDecides(record);
      if (record.winner !== null)
        expect(result.stdout).toMatch(/winner: trial \d+: num_workers=\d+ — ×[\d.]+ your configuration's samples\/s, confirmed interleaved A\/B/);
      // (the closing lines wrap at the terminal's width: compared with their line breaks as spaces)
      else expect(result.stdout.replace(/\s+/g, " ")).toContain((record.no_winner?.reason ?? "no winner").replace(/\s+/g, " "));
      const changed = record.winner !== null && record.winner.index !== 0 ? record.winner.knobs : null;
      if (changed !== null && changed.num_workers !== 1) {
        const applied = brim(["apply", "--store", store]);
        expect(applied.stdout).toContain(
          `brim: change your code at ${script}:26: give the DataLoader built there num_workers=${String(changed.num_workers)} (it ran with 1; brim does not edit source files)`,
        );
      }
    },
  );

  it.skipIf(python === undefined)(
    "a loop with no DataLoader that reports no sample count, its batch size written as a default argument: the trials vary it, samples per step counted from the model's input",
    { timeout: scaled(600_000) },
    () => {
      const store = join(root, "store-code-sgd");
      // the search, not a grid of given values: a knob found in the code is found by trial 0's attach;
      // no batch above the code's 32, so the trial after the baseline goes down to a slower one (no
      // winner to confirm: 2 trials, not 6), and PyTorch's threads (tried first beside busy cores) stay as they are
      const result = brim([
        "tune",
        "--store",
        store,
        "--max-batch",
        "32",
        "--fix",
        "cpu_threads",
        "--max-trials",
        "2",
        "--steps",
        "6",
        "--",
        python as string,
        join(REPO, "test/jobs/literal_sgd.py"),
      ]);
      // the attach counts trial 0's samples from the model's input: it need not run again counted by the knob
      expect(result.stderr).not.toContain("trial 0 reported no sample count");
      const record = onlyTune(store);
      expect(record.no_winner?.reason ?? "").not.toMatch(/no trial reported steps with samples/);
      expect(record.bindings.map((binding) => `${binding.knob}:${binding.via}:${binding.line ?? ""}`)).toEqual(["batch_size:code:12"]);
      // measured to the end, or stopped as slower once measured: both drew the batch they were given
      const ok = measured(record).filter((trial) => trial.run_id !== null);
      expect(ok.length, result.stderr).toBeGreaterThanOrEqual(2);
      expect(new Set(ok.map((trial) => trial.knobs.batch_size)).size, result.stderr).toBe(2);
      // the attach counts them from the model's input (the rows of x), so no knob stands in for them
      for (const trial of ok) expect(trial.samples_per_step).toBe(trial.knobs.batch_size);
      expect(result.stderr).not.toContain("samples counted from the batch_size knob");
      // what the job itself drew, in each trial's output: the edited default argument reached it
      for (const trial of ok)
        expect(readFileSync(join(store, "runs", trial.run_id as string, "output.log"), "utf8")).toContain(`drew batch ${String(trial.knobs.batch_size)}`);
    },
  );
});
