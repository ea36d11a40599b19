#!/usr/bin/env node
// A long run's timeline, read the way brim reads it: the end-of-run summary, `brim doctor`, and the
// dashboard's run page, each in a child process of its own (wall time and peak RSS of that process).
// The timeline is generated: 20 steps/s of the main process, 1 step/s of a second process, 2 sampler
// readings/s over 2 GPUs (the job uses one), an event now and then — the mix `brim run` records.
// Run `npm run build` first.
// Usage: node bench/timeline-scale.bench.mjs [--mib 512] [--page-lines 0] [--out bench/results/timeline-scale.json]
//   --mib         size of the timeline to summarize and doctor
//   --page-lines  also time the dashboard run page on a timeline of this many lines (0: the one above)
//   --write PATH  only write a timeline of --mib MiB to PATH
import { execFileSync, spawnSync } from "node:child_process";
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, platform, release, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1] : fallback;
};

const T0 = 1763780000;
const MAIN = 4242;
const WORKER = 4243;

function meta(id, summary) {
  return {
    schema: "brim.run/v1",
    id,
    kind: "run",
    tune_id: null,
    command: ["python", "train.py"],
    cwd: "/tmp",
    knobs: { num_workers: 2, precision: "bf16-mixed" },
    cap_bytes: null,
    cap_scope: "gpu",
    step_budget: null,
    device: {
      backend: "nvml",
      driver: "550.54",
      gpus: [0, 1].map((index) => ({ index, name: "NVIDIA H100 80GB HBM3", uuid: null, total_bytes: 85520809984 })),
      host: { cpus: 16, mem_total_bytes: 137438953472 },
    },
    versions: {},
    started_at: new Date(T0 * 1000).toISOString(),
    ended_at: summary === null ? null : new Date((T0 + summary.duration_s) * 1000).toISOString(),
    end: summary === null ? null : { cause: "ok", exit_code: 0, signal: null, message: "finished normally" },
    summary,
  };
}

/** Writes a timeline of about `bytes` (or exactly `lines` lines); returns lines and seconds of run it covers. */
async function generate(path, { bytes = Infinity, lines = Infinity }) {
  const out = createWriteStream(path);
  const write = (s) => (out.write(s) ? Promise.resolve() : new Promise((r) => out.once("drain", r)));
  let written = 0;
  let count = 0;
  let chunk = [];
  let chunkBytes = 0;
  const push = async (line) => {
    chunk.push(line);
    chunkBytes += line.length + 1;
    count++;
    if (chunkBytes > 1 << 20) {
      await write(chunk.join("\n") + "\n");
      written += chunkBytes;
      chunk = [];
      chunkBytes = 0;
    }
  };
  await push(JSON.stringify({ t: T0, kind: "start", pid: MAIN }));
  await push(JSON.stringify({ t: T0 + 0.1, kind: "hello", pid: MAIN, role: "main", rank: null, framework: "torch", versions: { torch: "2.11" } }));
  await push(
    JSON.stringify({
      t: T0 + 0.2,
      kind: "event",
      pid: MAIN,
      event: "knob_read",
      step: null,
      message: null,
      details: { name: "precision", value: "bf16-mixed" },
    }),
  );
  let step = 0;
  let t = T0 + 1;
  while (written + chunkBytes < bytes && count < lines) {
    for (let k = 0; k < 20; k++) {
      const wait = 0.004 + ((step * 7) % 11) / 1000;
      const compute = 0.04 - wait / 2;
      const at = t + (k + 1) / 20;
      await push(
        `{"t":${at.toFixed(4)},"kind":"step","pid":${MAIN},"step":${step},"samples":64,"wait_s":${wait.toFixed(5)},"compute_s":${compute.toFixed(5)},"warmup":${step < 5},"micro_batch":64,"accumulation":1,"loss":${(2 / (1 + step / 1e4)).toFixed(5)},"mem":{"device":"cuda:0","allocated":${30e9 + (step % 97) * 1e6},"reserved":34000000000,"peak":${31e9 + (step % 89) * 1e6},"peak_reserved":34000000000}}`,
      );
      step++;
    }
    await push(`{"t":${(t + 0.5).toFixed(4)},"kind":"step","pid":${WORKER},"step":${step},"samples":4,"wait_s":0.001,"compute_s":0.01,"warmup":false}`);
    for (const half of [0.25, 0.75]) {
      const util = 80 + ((step * 13) % 20);
      await push(
        `{"t":${(t + half).toFixed(4)},"kind":"sample","tree":{"pids":4,"rss_bytes":${6e9 + (step % 50) * 1e6},"cpu_percent":310.5,"gpu_bytes":${36e9 + (step % 40) * 1e6},"gpu_pids":1},"gpus":[{"index":0,"used_bytes":${36.5e9 + (step % 40) * 1e6},"total_bytes":85520809984,"util":${util},"mem_util":40,"sm_activity":${util - 30},"tensor_activity":20,"power_w":${500 + (step % 100)},"energy_j":${(step * 30).toFixed(1)},"sm_clock_mhz":1980,"throttle":null,"pcie_tx_kbs":1200,"pcie_rx_kbs":800000,"processes":1},{"index":1,"used_bytes":600000000,"total_bytes":85520809984,"util":0,"mem_util":0,"sm_activity":0,"tensor_activity":0,"power_w":70,"energy_j":${(step * 3.5).toFixed(1)},"sm_clock_mhz":345,"throttle":null,"pcie_tx_kbs":0,"pcie_rx_kbs":0,"processes":0}],"host":{"mem_available_bytes":90000000000,"cpu_percent":25.1}}`,
      );
    }
    if (step % 20000 === 0) await push(JSON.stringify({ t: t + 0.9, kind: "event", pid: MAIN, event: "checkpoint", step, message: "saved", details: {} }));
    t += 1;
  }
  await push(JSON.stringify({ t: t + 1, kind: "end", cause: "ok", exit_code: 0, signal: null }));
  await write(chunk.join("\n") + "\n");
  await new Promise((r) => out.end(r));
  return { lines: count, run_seconds: t + 1 - T0 };
}

/** One phase in a child process of its own: its wall time and peak RSS. */
function phase(name, store, id) {
  const started = performance.now();
  const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--phase", name, "--store", store, "--id", id], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  const wall = (performance.now() - started) / 1000;
  if (child.status !== 0) throw new Error(`phase ${name} failed: ${child.stderr}`);
  return { ...JSON.parse(child.stdout.trim().split("\n").at(-1)), process_wall_s: Number(wall.toFixed(2)) };
}

async function runPhase(name, store, id) {
  const { RunStore } = await import("../dist/record/store.js");
  const s = new RunStore(store);
  const path = join(s.runDir(id), "timeline.ndjson");
  const started = performance.now();
  let result;
  if (name === "summary") {
    const { summarizeTimelineFile } = await import("../dist/record/summary.js");
    const summary = await summarizeTimelineFile(path, { treeGpuBytes: null, treeRssBytes: null }, 0);
    result = { samples_per_s: summary.samples_per_s, steady_steps: summary.steady_steps, gpu_util_mean: summary.gpu_util_mean };
  } else if (name === "doctor") {
    const { loadRun } = await import("../dist/record/load.js");
    const { diagnose } = await import("../dist/analyze/doctor/index.js");
    const run = await loadRun(s, id);
    const report = diagnose(run.meta, run.timeline);
    result = {
      findings: report.findings.map((f) => f.id),
      samples_per_s: report.measures.samples_per_s,
      kept_steps: run.timeline.steps.length,
      kept_samples: run.timeline.samples.length,
    };
  } else {
    const { runView } = await import("../dist/dashboard/data.js");
    const { runPage } = await import("../dist/dashboard/pages.js");
    const view = await runView(s, id);
    const html = runPage(view, store, "bench");
    result = { html_bytes: html.length, charts: view.model.charts.length, findings: view.model.doctor.findings.length };
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify({ seconds: Number(seconds.toFixed(2)), max_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024), ...result }));
}

async function makeRun(root, id, size) {
  const dir = join(root, "runs", id);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "timeline.ndjson");
  const started = performance.now();
  const made = await generate(path, size);
  const generateS = (performance.now() - started) / 1000;
  writeFileSync(join(dir, "run.json"), JSON.stringify(meta(id, null)));
  return { path, bytes: statSync(path).size, generate_s: Number(generateS.toFixed(1)), ...made };
}

if (arg("phase", null) !== null) {
  await runPhase(arg("phase"), arg("store"), arg("id"));
} else if (arg("write", null) !== null) {
  // only write a timeline (to profile a reader by hand)
  console.log(JSON.stringify(await generate(arg("write"), { bytes: Number(arg("mib", "512")) * 2 ** 20 })));
} else {
  const mib = Number(arg("mib", "512"));
  const pageLines = Number(arg("page-lines", "0"));
  const outFile = arg("out", join(here, "results", "timeline-scale.json"));
  const root = mkdtempSync(join(tmpdir(), "brim-timeline-scale-"));
  try {
    const id = "20261122-000000-aaaa";
    const big = await makeRun(root, id, { bytes: mib * 2 ** 20 });
    console.error(`timeline: ${(big.bytes / 2 ** 20).toFixed(0)} MiB, ${big.lines} lines (generated in ${big.generate_s} s)`);
    const summary = phase("summary", root, id);
    console.error(`summary: ${summary.seconds} s, ${summary.max_rss_mb} MB RSS`);
    // a finished run: run.json carries its summary, as `brim run` writes it
    const { RunStore } = await import("../dist/record/store.js");
    const { summarizeTimelineFile } = await import("../dist/record/summary.js");
    const fullSummary = await summarizeTimelineFile(big.path, { treeGpuBytes: null, treeRssBytes: null }, big.run_seconds);
    writeFileSync(join(new RunStore(root).runDir(id), "run.json"), JSON.stringify(meta(id, fullSummary)));
    const doctor = phase("doctor", root, id);
    console.error(`doctor: ${doctor.seconds} s, ${doctor.max_rss_mb} MB RSS`);
    let pageRun = { id, lines: big.lines, bytes: big.bytes };
    if (pageLines > 0) {
      const pid = "20261122-000000-bbbb";
      rmSync(big.path);
      const made = await makeRun(root, pid, { lines: pageLines });
      writeFileSync(join(new RunStore(root).runDir(pid), "run.json"), JSON.stringify(meta(pid, fullSummary)));
      console.error(`page timeline: ${(made.bytes / 2 ** 20).toFixed(0)} MiB, ${made.lines} lines (generated in ${made.generate_s} s)`);
      pageRun = { id: pid, lines: made.lines, bytes: made.bytes };
    }
    const page = phase("page", root, pageRun.id);
    console.error(`dashboard run page: ${page.seconds} s, ${page.max_rss_mb} MB RSS`);
    const commit = (() => {
      try {
        return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
      } catch {
        return null;
      }
    })();
    const result = {
      bench: "timeline-scale",
      command: `node bench/timeline-scale.bench.mjs --mib ${mib}${pageLines > 0 ? ` --page-lines ${pageLines}` : ""}`,
      commit,
      date: new Date().toISOString(),
      machine: {
        cpu: cpus()[0]?.model ?? null,
        cores: cpus().length,
        platform: `${platform()} ${release()}`,
        node: process.version,
        mem_total_gib: Number((totalmem() / 2 ** 30).toFixed(1)),
        load_average: loadavg().map((l) => Number(l.toFixed(2))),
      },
      gpus: 0,
      targets: { summary_and_doctor_2gib_s: 60, rss_mb: 300, page_10m_lines_s: 2 },
      timeline: { bytes: big.bytes, mib: Number((big.bytes / 2 ** 20).toFixed(1)), lines: big.lines, run_hours: Number((big.run_seconds / 3600).toFixed(1)) },
      summary,
      doctor,
      page: { timeline_lines: pageRun.lines, timeline_mib: Number((pageRun.bytes / 2 ** 20).toFixed(1)), ...page },
      throughput_mib_per_s: {
        summary: Number((big.bytes / 2 ** 20 / summary.seconds).toFixed(1)),
        doctor: Number((big.bytes / 2 ** 20 / doctor.seconds).toFixed(1)),
      },
    };
    mkdirSync(dirname(outFile), { recursive: true });
    writeFileSync(outFile, `${JSON.stringify(result, null, 2)}\n`);
    console.log(JSON.stringify(result, null, 2));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
