// Damaged records named as damaged: by doctor (the CLI), and by the dashboard (real HTTP) — a clear
// one-line answer, no stack trace, damaged runs listed with a mark instead of vanishing.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { startDashboard, type Dashboard } from "../../src/dashboard/server.ts";
import type { RunListItem, TuneListItem } from "../../src/dashboard/data.ts";
import { timelineDamage } from "../../src/record/damage.ts";
import { RunStore } from "../../src/record/store.ts";
import { writeSyntheticRun, writeSyntheticTune } from "../analyze/synthetic.ts";
import { noteOutcome } from "../helpers/outcomes.ts";

const root = mkdtempSync(join(tmpdir(), "brim-damaged-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(args, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

describe("a timeline overwritten with garbage", () => {
  let store: RunStore;
  let id: string;
  beforeAll(async () => {
    store = new RunStore(join(root, "garbage"));
    id = (await writeSyntheticRun(store, { wait: () => 0.3, compute: () => 0.2, workers: 0 }, new Date(Date.now() - 3600_000))).id;
  });

  it("is sound before; damaged after, and doctor says so in one line instead of advising", async () => {
    const path = join(store.runDir(id), "timeline.ndjson");
    expect(await timelineDamage(path)).toBeNull();
    expect((await cli(["doctor", id, "--store", store.root])).code).toBe(0);
    writeFileSync(path, Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919 + 13) % 256)));
    const damage = await timelineDamage(path);
    expect(damage?.bad).toBeGreaterThan(0);
    const r = await cli(["doctor", id, "--store", store.root]);
    noteOutcome(
      "brim doctor on a timeline overwritten with garbage: advice given or stack trace",
      1,
      r.code === 0 || r.code === 70 ? 1 : 0,
      "test/reliability/damaged.test.ts",
    );
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBe(70);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(new RegExp(`^brim: the timeline of run ${id} is damaged: \\d+ of the \\d+ lines looked at are not timeline entries`));
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("zero-filled, or JSON that is not timeline entries, is damaged too; one torn line is not", async () => {
    const path = join(root, "t.ndjson");
    writeFileSync(path, Buffer.alloc(100_000));
    expect(await timelineDamage(path)).not.toBeNull();
    writeFileSync(path, '{"a":1}\n'.repeat(50));
    expect(await timelineDamage(path)).not.toBeNull();
    writeFileSync(path, `${'{"t":1,"kind":"sample"}\n'.repeat(50)}{"t":2,"ki\n${'{"t":3,"kind":"sample"}\n'.repeat(50)}`);
    expect(await timelineDamage(path)).toBeNull();
  });
});

describe("the dashboard on damaged records", () => {
  let store: RunStore;
  let dash: Dashboard;
  let good: string;
  let badMeta: string;
  let badTimeline: string;
  const errors: unknown[] = [];

  beforeAll(async () => {
    store = new RunStore(join(root, "dash"));
    good = (await writeSyntheticRun(store, { wait: () => 0.3, compute: () => 0.2, workers: 0 }, new Date(Date.now() - 3 * 3600_000))).id;
    badMeta = (await writeSyntheticRun(store, { wait: () => 0.3, compute: () => 0.2, workers: 0 }, new Date(Date.now() - 2 * 3600_000))).id;
    badTimeline = (await writeSyntheticRun(store, { wait: () => 0.3, compute: () => 0.2, workers: 0 }, new Date(Date.now() - 3600_000))).id;
    await writeSyntheticTune(store);
    writeFileSync(join(store.runDir(badMeta), "run.json"), '{"schema": "brim.run/v1", "id": tru');
    writeFileSync(join(store.runDir(badTimeline), "timeline.ndjson"), "garbage\n".repeat(5000));
    const [tuneId] = await store.tuneIds();
    writeFileSync(join(store.tuneDir(tuneId as string), "tune.json"), "\0\0\0");
    dash = await startDashboard({ store, port: 0, token: null, onError: (e) => errors.push(e) });
  });
  afterAll(async () => {
    await dash?.close();
  });

  it("lists damaged runs and tunes with a mark and the cause", async () => {
    const runs = (await (await fetch(`${dash.url}api/runs`)).json()) as RunListItem[];
    expect(runs.find((r) => r.id === good)?.status).toBe("ok");
    const marked = runs.find((r) => r.id === badMeta);
    expect(marked).toMatchObject({ status: "damaged", live: false });
    expect(marked?.damaged).toMatch(/run\.json is not valid JSON/);
    const tunes = (await (await fetch(`${dash.url}api/tunes`)).json()) as TuneListItem[];
    expect(tunes[0]?.damaged).toMatch(/tune\.json is not valid JSON/);
    const home = await (await fetch(dash.url)).text();
    expect(home).toContain(`<a href="/runs/${badMeta}">${badMeta}</a>`);
    expect(home).toMatch(/class="status-damaged">damaged</);
  });

  it("answers a damaged record with 422 and one line, never a stack trace or a 500", async () => {
    const paths = [`runs/${badMeta}`, `api/runs/${badMeta}`, `api/runs/${badMeta}/doctor`, `runs/${badTimeline}`, `api/runs/${badTimeline}/doctor`];
    let bad = 0;
    for (const path of paths) {
      const r = await fetch(`${dash.url}${path}`);
      if (r.status !== 422 || /\n\s+at /.test(await r.clone().text())) bad++;
    }
    noteOutcome(
      "dashboard requests for damaged run.json / timeline: 500 or stack trace",
      paths.length,
      bad + errors.length,
      "test/reliability/damaged.test.ts",
    );
    for (const path of paths) {
      const r = await fetch(`${dash.url}${path}`);
      const body = await r.text();
      expect(r.status, path).toBe(422);
      expect(body, path).toMatch(/is not valid JSON|is damaged/);
      expect(body, path).not.toMatch(/\n\s+at /);
    }
    expect(errors).toEqual([]);
  });
});
