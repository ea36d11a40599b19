// BENCHMARKS.md is generated from bench/results/ (scripts/benchmarks.mjs): the committed file must be
// what the script makes now, and every figure the README's "Measured" section quotes must be in it.
// The generator runs as a real child process, on this repository and on small git repositories
// made here (staleness from history, records it has no table for, a shallow clone).
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;
const script = join(root, "scripts", "benchmarks.mjs");
const temps: string[] = [];
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});
const temp = (): string => {
  const t = mkdtempSync(join(tmpdir(), "brim-benchmarks-"));
  temps.push(t);
  return t;
};
const generator = (args: string[]) => spawnSync(process.execPath, [script, ...args], { cwd: root, encoding: "utf8" });
const git = (cwd: string, ...args: string[]): string => {
  const r = spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", ...args], { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
  return r.stdout.trim();
};

/** The numbers of a text: "21.7", "0.85", "580.159.04", "076" of "076c849"... */
const numbers = (text: string): string[] => [...new Set(text.match(/\d+(?:\.\d+)*/g) ?? [])];
const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const contains = (doc: string, n: string): boolean => new RegExp(`(?<![\\d.])${escape(n)}(?![\\d]|\\.\\d)`).test(doc);

describe("BENCHMARKS.md in this repository", () => {
  it("is what `npm run benchmarks` makes from the committed records (else run it and commit)", () => {
    const r = generator(["--check"]);
    // the generator's own message says what differs, or that the clone is shallow
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("--check fails with a summary when a generated file differs, and writing makes it pass", () => {
    const out = temp();
    expect(generator(["--out-dir", out]).status).toBe(0);
    const file = join(out, "BENCHMARKS.md");
    const text = readFileSync(file, "utf8");
    writeFileSync(file, text.replace("21.7 %", "12.3 %"));
    const stale = generator(["--check", "--out-dir", out]);
    expect(stale.status).toBe(1);
    expect(stale.stderr).toMatch(/BENCHMARKS\.md: differs from line \d+ \(1 lines new, 1 gone\)/);
    expect(stale.stderr).toContain("12.3 %");
    expect(generator(["--out-dir", out]).status).toBe(0);
    expect(generator(["--check", "--out-dir", out]).status).toBe(0);
  });

  it("every figure in the README's Measured section appears in BENCHMARKS.md", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const doc = readFileSync(join(root, "BENCHMARKS.md"), "utf8");
    const section = /\n## Measured\n([\s\S]*?)(?=\n## )/.exec(readme)?.[1] ?? "";
    expect(section, "README.md has a '## Measured' section").not.toBe("");
    expect(section).toMatch(/H100|GPU/);
    expect(section).toContain("](BENCHMARKS.md)");
    // the link targets and inline code carry no figures
    const prose = section.replace(/\]\([^)]*\)/g, "]").replace(/`[^`]*`/g, "");
    const quoted = numbers(prose);
    expect(quoted.length).toBeGreaterThan(20);
    expect(quoted.filter((n) => !contains(doc, n))).toEqual([]);
  });

  it("the figures are recomputed from the H100 records (21.7 % median plan error, 56 of 60 under)", () => {
    const doc = readFileSync(join(root, "BENCHMARKS.md"), "utf8");
    expect(doc).toContain("| the bundled model spec, as recorded | 60 | 21.7 % | 52.9 % (`cnn-lstm|fp32|2048`) | 56 of 60 (93 %) |");
    expect(doc).toContain("| profile, CUDA context := 758 MiB (post hoc) | 48 | 4.9 % |");
    expect(doc).toMatch(/\| nbeats \| 2 \| 1752\.3 \| 1905\.8 \| 1\.09 \|/);
    expect(doc).toContain("at brim commit 076c849 (from bench/results/gpu/nvidia-h100-80gb-hbm3/README.md)");
  });
});

describe("the generator on a small repository", () => {
  const realOverhead = readFileSync(join(root, "bench/results/gpu/nvidia-h100-80gb-hbm3/overhead.jsonl"), "utf8").split("\n")[0]!;

  function makeRepo(): { dir: string; measured: string } {
    const dir = temp();
    git(dir, "init", "-q", "-b", "main");
    const put = (rel: string, text: string) => {
      mkdirSync(dirname(join(dir, rel)), { recursive: true });
      writeFileSync(join(dir, rel), text);
    };
    put("src/job/runner.ts", "export const a = 1;\n");
    put("src/tune/search.ts", "export const b = 1;\n");
    git(dir, "add", "-A");
    git(dir, "commit", "-qm", "code as measured");
    const measured = git(dir, "rev-parse", "HEAD");
    const gpu = "bench/results/gpu/test-gpu";
    put(`${gpu}/README.md`, "Made by the campaign.\n\n```sh\nbash bench/gpu/run.sh overhead\n```\n");
    // a campaign record names the commit it measured (versions.brim_commit, from the bundle)
    const record = JSON.parse(realOverhead) as { versions: Record<string, unknown> };
    record.versions.brim_commit = measured;
    put(`${gpu}/overhead.jsonl`, JSON.stringify(record) + "\n");
    copyFileSync(join(root, "bench/results/gpu/nvidia-h100-80gb-hbm3/machine.json"), join(dir, gpu, "machine.json"));
    put("bench/results/run-overhead.json", readFileSync(join(root, "bench/results/run-overhead.json"), "utf8"));
    put(
      "bench/results/timeline-scale.json",
      JSON.stringify({
        command: "node bench/timeline-scale.bench.mjs --steps 100000",
        commit: "0123456789abcdef0123456789abcdef01234567",
        steps: 100000,
        summary_ms: 41.5,
        nested: { ignored: true },
      }),
    );
    put(
      `${gpu}/plan-validation.json`,
      JSON.stringify({
        schema: "brim.plan-validation/v1",
        commit: measured,
        command: ["node", "bench/gpu/fit-constants.mjs", gpu, "--validate"],
        source_records: [`${gpu}/plan-accuracy.jsonl`],
        results: [
          { source: "spec", mode: "in-sample", pairs: 60, median_abs_error: 0.0412, worst_abs_error: 0.093, under_3pct_share: 0.2 },
          { source: "spec", mode: "leave-one-job-out", pairs: 60, median_abs_error: 0.0587, worst_abs_error: 0.151, under_3pct_share: 0.3 },
        ],
      }),
    );
    put(`${gpu}/fit.json`, JSON.stringify({ command: ["node", "bench/gpu/fit-constants.mjs"], median_after: 0.049 }));
    git(dir, "add", "-A");
    git(dir, "commit", "-qm", "records");
    return { dir, measured };
  }

  it("marks a part stale with the commits that touched its code since its records, and lists unknown records", () => {
    const { dir, measured } = makeRepo();
    const fresh = spawnSync(process.execPath, [script, "--root", dir], { encoding: "utf8" });
    expect(fresh.stderr).toBe("");
    let doc = readFileSync(join(dir, "BENCHMARKS.md"), "utf8");
    expect(doc).toContain(`at brim commit ${measured.slice(0, 7)} (from the records' \`versions.brim_commit\`)`);
    expect(doc).toContain(`**Current**: no commit after ${measured.slice(0, 7)} touches the code this part measures`);
    expect(doc).toMatch(/\| nbeats \| 2 \| 1896\.2 \| 1603\.8 \| 0\.85 \|/);
    expect(doc).toContain("Not measured on this GPU yet (no `plan-accuracy.jsonl`).");
    expect(doc).toContain("| spec | in-sample | 60 | 4.1 % | 9.3 % | 20 % |");
    expect(doc).toContain("| spec | leave-one-job-out | 60 | 5.9 % | 15.1 % | 30 % |");
    expect(doc).toContain("`node bench/gpu/fit-constants.mjs bench/results/gpu/test-gpu --validate`");
    // records the generator has no table for: listed with their command and top-level figures
    expect(doc).toContain("`node bench/timeline-scale.bench.mjs --steps 100000`");
    expect(doc).toContain("summary_ms 41.5");
    expect(doc).toContain("Staleness unknown: commit 0123456 is not in this repository's history");
    expect(doc).toContain("`node bench/gpu/fit-constants.mjs`");

    writeFileSync(join(dir, "src/job/runner.ts"), "export const a = 2;\n");
    git(dir, "commit", "-qam", "runner: change what overhead measures");
    writeFileSync(join(dir, "src/tune/search.ts"), "export const b = 2;\n");
    git(dir, "commit", "-qam", "search: unrelated to overhead");
    const check = spawnSync(process.execPath, [script, "--root", dir, "--check"], { encoding: "utf8" });
    expect(check.status).toBe(1);
    expect(spawnSync(process.execPath, [script, "--root", dir], { encoding: "utf8" }).status).toBe(0);
    doc = readFileSync(join(dir, "BENCHMARKS.md"), "utf8");
    const overhead = doc.slice(doc.indexOf("### Overhead"), doc.indexOf("## CPU benchmarks"));
    expect(overhead).toContain(`**Stale**: recorded at ${measured.slice(0, 7)}; the code this part measures has changed since, first in`);
    expect(overhead).toContain("runner: change what overhead measures");
    expect(overhead).not.toContain("search: unrelated");

    // A later change names the same first commit: the committed file stays as it was.
    writeFileSync(join(dir, "src/job/runner.ts"), "export const a = 3;\n");
    git(dir, "commit", "-qam", "runner: a second change");
    expect(spawnSync(process.execPath, [script, "--root", dir, "--check"], { encoding: "utf8" }).status).toBe(0);
  });

  it("refuses a shallow clone with a one-line cause", () => {
    const { dir } = makeRepo();
    const shallow = join(temp(), "clone");
    git(dirname(shallow), "clone", "-q", "--depth", "1", `file://${dir}`, shallow);
    const r = spawnSync(process.execPath, [script, "--root", shallow, "--check"], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^benchmarks: this clone is shallow.*fetch --unshallow/);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});
