// --name and --tag through the built CLI: kept in run.json, listed and picked by `brim runs`, a name
// picks a run for the other commands; a tune's record and its trials carry them (through the store).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-runs-"));
const store = join(root, "store");
afterAll(() => rmSync(root, { recursive: true, force: true }));

function brim(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), ...args], { cwd: root, encoding: "utf8", timeout: scaled(60_000) });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("brim run --name --tag, brim runs", () => {
  it(
    "keeps them in run.json, lists and picks by them",
    () => {
      const a = brim("run", "--store", store, "--quiet", "--json", "--name", "base line", "--tag", "model=mlp", "--tag", "stage=a", "--", PYTHON, "-c", "pass");
      expect(a.status, a.stderr).toBe(0);
      const b = brim("run", "--store", store, "--quiet", "--json", "--name", "wide", "--tag", "model=mlp", "--", PYTHON, "-c", "pass");
      expect(b.status, b.stderr).toBe(0);
      const c = brim("run", "--store", store, "--quiet", "--json", "--", PYTHON, "-c", "pass");
      expect(c.status, c.stderr).toBe(0);
      const idA = (JSON.parse(a.stdout) as { id: string }).id;
      const meta = JSON.parse(readFileSync(join(store, "runs", idA, "run.json"), "utf8")) as Record<string, unknown>;
      expect(meta).toMatchObject({ name: "base line", tags: { model: "mlp", stage: "a" } });
      expect(JSON.parse(c.stdout)).not.toHaveProperty("name");

      const all = brim("runs", "--store", store);
      expect(all.status, all.stderr).toBe(0);
      expect(all.stdout.split("\n")[0]).toMatch(/^run\s+name\s+tags\s+status/);
      expect(all.stdout).toMatch(/base line\s+model=mlp stage=a\s+ok/);
      const mlp = JSON.parse(brim("runs", "--store", store, "--tag", "model=mlp", "--json").stdout) as { name: string }[];
      expect(mlp.map((r) => r.name).sort()).toEqual(["base line", "wide"]);
      const staged = JSON.parse(brim("runs", "--store", store, "--tag", "model=mlp", "--tag", "stage=a", "--json").stdout) as { id: string }[];
      expect(staged.map((r) => r.id)).toEqual([idA]);
      expect(brim("runs", "--store", store, "--name", "nope").stdout).toMatch(/^no runs with that name and tags/);

      const doctor = brim("doctor", "base line", "--store", store, "--json");
      expect(doctor.status, doctor.stderr).toBe(0);
      expect(doctor.stdout).toContain(idA);
    },
    scaled(120_000),
  );

  it("refuses a bad tag or name with one line and exit 2", () => {
    const r = brim("run", "--store", store, "--tag", "no-equals", "--", PYTHON, "-c", "pass");
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/--tag 'no-equals': give key=value/);
    expect(brim("run", "--store", store, "--name", "a/b", "--", PYTHON, "-c", "pass").status).toBe(2);
  });

  it("a tune's record and its trial runs carry the tune's name and tags", async () => {
    const labelled = new RunStore(join(root, "labelled"), undefined, { name: "sweep", tags: { lr: "1e-3" } });
    const run = await labelled.createRun({
      kind: "trial",
      tune_id: "20261122-101000-aa01",
      command: ["python"],
      cwd: root,
      knobs: {},
      cap_bytes: null,
      cap_scope: "ram",
      step_budget: null,
      device: { backend: "cpu", driver: null, gpus: [], host: { cpus: 2, mem_total_bytes: 2 ** 33 } },
      versions: {},
    });
    expect(await labelled.readRunMeta(run.id)).toMatchObject({ name: "sweep", tags: { lr: "1e-3" } });
    expect(await labelled.resolveRun("sweep")).toBe(run.id);
  });
});
