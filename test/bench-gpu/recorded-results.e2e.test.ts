// The GPU measurements recorded in the repository (bench/results/gpu/<gpu>/, made by bench/gpu/run.sh
// on a GPU host): every record must say which command made it, on which machine, with which
// versions and when; the guard's claims must hold in the records themselves; and a committed fit of
// the planner's constants must be what bench/gpu/fit-constants.mjs makes from the committed pairs.
// Skipped while no results are recorded.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;
const resultsDir = process.env.BRIM_GPU_RESULTS ?? join(root, "bench", "results", "gpu");
const gpus = existsSync(resultsDir)
  ? readdirSync(resultsDir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
  : [];
const PARTS = ["plan-accuracy", "guard", "tune", "utilization", "overhead"];

interface Rec {
  schema: string;
  part: string;
  key: string;
  ok: boolean;
  quick: boolean;
  command: string[];
  command_line: string;
  started_at: string;
  ended_at: string;
  machine: { backend: string; gpus: { name: string }[] };
  versions: Record<string, unknown>;
  [k: string]: unknown;
}

function read(gpu: string, part: string): Rec[] {
  const file = join(resultsDir, gpu, `${part}.jsonl`);
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Rec);
}

it("bench/results/gpu holds only the campaign's files, one folder per GPU", () => {
  // besides the campaign's output: the provenance README, `brim detect` on the same host, and the
  // planner's calibration and validation (bench/gpu/fit-constants.mjs)
  const allowed = new Set([
    ...PARTS.map((p) => `${p}.jsonl`),
    "machine.json",
    "campaign.log",
    "fit.json",
    "fit-profile.json",
    "README.md",
    "detect.json",
    "detect.txt",
    "plan-validation.json",
    "calibration.json",
  ]);
  for (const gpu of gpus) for (const name of readdirSync(join(resultsDir, gpu))) expect(allowed.has(name), `${gpu}/${name}`).toBe(true);
});

describe.skipIf(gpus.length === 0)("recorded GPU results (bench/results/gpu)", () => {
  for (const gpu of gpus) {
    describe(gpu, () => {
      it("every record carries its command, machine, versions and timestamps", () => {
        const all = PARTS.flatMap((part) => read(gpu, part));
        expect(all.length).toBeGreaterThan(0);
        for (const r of all) {
          expect(r.schema).toBe("brim.gpu-campaign/v1");
          expect(PARTS).toContain(r.part);
          expect(r.quick).toBe(false);
          expect(r.command.length).toBeGreaterThan(2);
          expect(r.command_line.length).toBeGreaterThan(0);
          expect(Number.isNaN(Date.parse(r.started_at))).toBe(false);
          expect(Date.parse(r.ended_at)).toBeGreaterThanOrEqual(Date.parse(r.started_at));
          expect(r.machine.gpus[0]?.name).toBeTruthy();
          expect(typeof r.versions.brim).toBe("string");
          expect(typeof r.versions.torch).toBe("string");
        }
      });

      it("the guard's records show the cap held and out-of-memory recovered with no step lost", () => {
        const latest = new Map(read(gpu, "guard").map((r) => [r.key, r]));
        for (const r of latest.values()) {
          const checks = r.checks as Record<string, boolean | null>;
          expect(checks.ended_ok, `${r.key}`).toBe(true);
          expect(checks.peak_under_cap, `${r.key}`).not.toBe(false);
          expect(checks.steps_equal_budget, `${r.key}`).toBe(true);
          if (r.case === "oom-injected") expect(checks.oom_recovered_event).toBe(true);
        }
      });

      it.skipIf(!existsSync(join(resultsDir, gpu, "calibration.json")))(
        "the committed calibration is what the fit script makes from the committed pairs",
        () => {
          const committed = JSON.parse(readFileSync(join(resultsDir, gpu, "calibration.json"), "utf8")) as {
            source: string;
            fit: { constants: Record<string, number> };
          };
          const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), join(resultsDir, gpu), "--json", "--source", committed.source], {
            encoding: "utf8",
          });
          expect(res.status).toBe(0);
          const again = JSON.parse(res.stdout) as { fit: { constants: Record<string, number> } };
          for (const [k, v] of Object.entries(committed.fit.constants)) expect(again.fit.constants[k]).toBeCloseTo(v, 6);
        },
      );
    });
  }
});
