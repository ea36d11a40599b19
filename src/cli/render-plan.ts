import { formatBytes } from "../bytes.ts";
import { table } from "../format.ts";
import { GPU_CATALOG } from "../plan/catalog.ts";
import type { MeasuredJobPlan } from "../plan/plan-types.ts";
import type { PlanReport, PlanSection } from "../plan/planner.ts";
import type { StrategyRow } from "../plan/strategies.ts";

const LABELS: Record<string, string> = {
  weights: "weights",
  gradients: "gradients",
  optimizer_state: "optimizer state",
  communication: "communication buffers",
  activations: "activations",
  input_batch: "input batch",
  temporaries: "temporaries",
  workspace: "workspace",
  cuda_context: "CUDA context",
  allocator_slack: "allocator slack",
};

function count(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

function percent(x: number): string {
  return `${(100 * x).toFixed(1)}%`;
}

function setupLine(s: PlanSection): string {
  const st = s.setup;
  const offload = st.offload !== "none" ? `, offload ${st.offload}` : "";
  const gpus = st.nodes > 1 ? `${st.gpus} GPUs on ${st.nodes} nodes` : `${st.gpus} GPU${st.gpus > 1 ? "s" : ""}`;
  const parallel = st.gpus > 1 || offload !== "" ? ` × ${gpus} (${st.sharding}${offload})` : "";
  return `${st.precision} · ${st.optimizer} · micro-batch ${st.micro_batch} (${st.micro_batch_from}) × accumulation ${st.accumulation}${parallel} = effective ${st.effective_batch} · checkpointing ${st.checkpointing ? "on" : "off"}`;
}

/** The components a plan shows: communication buffers only where the engine keeps some (never on one GPU). */
function shownComponents(s: PlanSection): [string, number][] {
  return Object.entries(s.memory.components).filter(([name, bytes]) => name !== "communication" || bytes > 0);
}

function hostLine(s: PlanSection): string | undefined {
  const host = s.memory.host_bytes_per_node;
  if (host <= 0) return undefined;
  const ranks = s.setup.gpus / s.setup.nodes;
  return `host RAM   ${formatBytes(host)} per node for the offloaded states of its ${ranks} rank${ranks > 1 ? "s" : ""} (offload ${s.setup.offload})`;
}

function rate(x: number): string {
  return x >= 100 ? x.toFixed(0) : x.toPrecision(3);
}

function largestLine(s: PlanSection): string {
  if (s.max_micro_batch === 0) return "largest micro-batch that fits: none — not even one sample fits with these settings";
  if (!s.memory_limited) {
    return `memory is not the limit: the effective batch (${s.setup.effective_batch}${s.setup.gpus > 1 ? ` over ${s.setup.gpus} GPUs` : ""}) fits in one micro-batch (memory alone would allow up to ${s.max_micro_batch.toLocaleString("en-US")})`;
  }
  return `largest micro-batch that fits: ${s.max_micro_batch.toLocaleString("en-US")}`;
}

function sectionLines(s: PlanSection, budget: number): string[] {
  const lines: string[] = [];
  lines.push(
    `params     ${count(s.params.total)} total, ${count(s.params.trainable)} trainable${s.params.frozen > 0 ? `, ${count(s.params.frozen)} frozen` : ""}`,
  );
  lines.push(`setup      ${setupLine(s)}`);
  lines.push("");
  const rows = shownComponents(s).map(([name, bytes]) => [
    `  ${LABELS[name] ?? name}`,
    formatBytes(bytes),
    percent(s.memory.shares[name as keyof typeof s.memory.shares]),
  ]);
  rows.unshift([`memory at micro-batch ${s.setup.micro_batch}`, "bytes", "share"]);
  rows.push(["  predicted peak", formatBytes(s.memory.peak_bytes), s.memory.fits ? `fits ${formatBytes(budget)}` : `OVER ${formatBytes(budget)}`]);
  lines.push(...table(rows, ["l", "r", "r"]));
  const host = hostLine(s);
  if (host !== undefined) lines.push(host);
  lines.push("");
  lines.push(largestLine(s));
  const y = s.your_config;
  lines.push("");
  lines.push(`ways to reach effective batch ${s.setup.effective_batch}, fastest first (predicted), against your config:`);
  const rows2 = [["  #", "precision", "checkpointing", "micro × accum", "peak", "samples/s", "vs yours"]];
  rows2.push([
    "  yours",
    y.precision,
    y.checkpointing ? "on" : "off",
    `${y.micro_batch} × ${y.accumulation}`,
    formatBytes(y.peak_bytes),
    rate(y.samples_per_s),
    "1.00×",
  ]);
  // the user's own row is already the first line
  s.suggestions
    .filter((x) => !x.is_yours)
    .forEach((x, i) => {
      rows2.push([
        `  ${i + 1}`,
        x.precision,
        x.checkpointing ? "on" : "off",
        `${x.micro_batch} × ${x.accumulation}`,
        formatBytes(x.peak_bytes),
        rate(x.samples_per_s),
        `${x.speedup_vs_yours.toFixed(2)}×`,
      ]);
    });
  if (s.suggestions.length > 0) {
    lines.push(...table(rows2, ["l", "l", "l", "r", "r", "r", "r"]));
  } else {
    lines.push(`no way to reach effective batch ${s.setup.effective_batch} fits this budget`);
  }
  for (const note of s.notes) lines.push(`note: ${note}`);
  return lines;
}

function calibrationLines(report: PlanReport): string[] {
  const c = report.calibration;
  if (c === null) return [`calibration: none measured for ${report.gpu.name}: every constant is a default estimate (sources: --json, field assumptions)`];
  const on = c.measured_on;
  return [
    `calibrated on ${on.gpu} (driver ${on.driver}, CUDA ${on.cuda}, torch ${on.torch}, cuDNN ${on.cudnn}; used for ${c.framework}): ${c.calibrated.join(", ")}`,
    `defaults (not measured): ${c.defaults.join(", ")} (sources: --json, field assumptions)`,
  ];
}

/**
 * Renders a plan for the terminal.
 *
 * @example
 * ```ts
 * process.stdout.write(renderPlanText(report));
 * ```
 */
export function renderPlanText(report: PlanReport): string {
  const g = report.gpu;
  const lines: string[] = [];
  lines.push(`brim plan · ${report.model.name} (${report.model.family}, from ${report.model.source})`);
  lines.push(
    `gpu        ${g.name}: ${formatBytes(g.memory_bytes)}, cap ${formatBytes(g.cap_bytes)}, margin ${percent(g.margin)} → budget ${formatBytes(g.budget_bytes)}${g.gpus > 1 ? ` per GPU × ${g.gpus}${g.nodes > 1 ? ` (${g.nodes} nodes)` : ""}` : ""}`,
  );
  if (report.seq_len !== undefined) lines.push(`sequence   ${report.seq_len}`);
  lines.push(...sectionLines(report, g.budget_bytes));
  for (const stage of report.stages) {
    lines.push("", `── stage ${stage.name ?? "?"}${stage.seq_len !== undefined ? ` (seq_len ${stage.seq_len})` : ""} ──`);
    lines.push(...sectionLines(stage, g.budget_bytes));
  }
  lines.push("");
  lines.push(`speed model: ${report.speed_model}`);
  lines.push(...calibrationLines(report));
  return lines.join("\n") + "\n";
}

/**
 * Renders a plan as Markdown (for a README, an issue or a PR).
 *
 * @example
 * ```ts
 * writeFileSync("PLAN.md", renderPlanMarkdown(report));
 * ```
 */
export function renderPlanMarkdown(report: PlanReport): string {
  const g = report.gpu;
  const out: string[] = [];
  out.push(`# Memory plan: ${report.model.name} on ${g.name}`, "");
  out.push(`Cap ${formatBytes(g.cap_bytes)} of ${formatBytes(g.memory_bytes)}, margin ${percent(g.margin)}, budget ${formatBytes(g.budget_bytes)}.`, "");
  const sections: PlanSection[] = [report, ...report.stages];
  for (const s of sections) {
    if (s !== report) out.push(`## Stage ${s.name ?? ""}${s.seq_len !== undefined ? ` (seq_len ${s.seq_len})` : ""}`, "");
    out.push(`${count(s.params.total)} parameters (${count(s.params.trainable)} trainable). ${setupLine(s)}.`, "");
    out.push("| component | bytes | share |", "|---|---:|---:|");
    for (const [name, bytes] of shownComponents(s)) {
      out.push(`| ${LABELS[name] ?? name} | ${formatBytes(bytes)} | ${percent(s.memory.shares[name as keyof typeof s.memory.shares])} |`);
    }
    out.push(`| **predicted peak** | **${formatBytes(s.memory.peak_bytes)}** | ${s.memory.fits ? "fits" : "over budget"} |`, "");
    const host = hostLine(s);
    if (host !== undefined) out.push(`${host.replace(/^host RAM\s+/, "Host RAM: ")}.`, "");
    out.push(`${largestLine(s).replace(/^./, (c) => c.toUpperCase())}.`, "");
    if (s.suggestions.length > 0) {
      const y = s.your_config;
      out.push("| # | precision | checkpointing | micro × accumulation | peak | predicted samples/s | vs yours |", "|---|---|---|---|---:|---:|---:|");
      out.push(
        `| yours | ${y.precision} | ${y.checkpointing ? "on" : "off"} | ${y.micro_batch} × ${y.accumulation} | ${formatBytes(y.peak_bytes)} | ${rate(y.samples_per_s)} | 1.00× |`,
      );
      s.suggestions
        .filter((x) => !x.is_yours)
        .forEach((x, i) =>
          out.push(
            `| ${i + 1} | ${x.precision} | ${x.checkpointing ? "on" : "off"} | ${x.micro_batch} × ${x.accumulation} | ${formatBytes(x.peak_bytes)} | ${rate(x.samples_per_s)} | ${x.speedup_vs_yours.toFixed(2)}× |`,
          ),
        );
      out.push("");
    }
    for (const note of s.notes) out.push(`> ${note}`, "");
  }
  out.push("## Assumptions", "", ...calibrationLines(report).map((l) => `${l}  `), "", "| name | value | source | calibrated |", "|---|---|---|---|");
  for (const a of report.assumptions)
    out.push(
      `| ${a.name} | ${typeof a.value === "number" && a.value > 1e5 ? formatBytes(a.value) : String(a.value)} | ${a.source} | ${a.calibrated ? "yes" : "no"} |`,
    );
  out.push("", `Speed model: ${report.speed_model}`, "");
  return out.join("\n");
}

/**
 * Renders plans of one job on several GPUs side by side: memory, your config, the largest
 * micro-batch (or that memory is not the limit) and the fastest predicted way to the effective batch.
 *
 * @example
 * ```ts
 * process.stdout.write(renderPlanComparison([t4Plan, p100Plan], "text"));
 * ```
 */
export function renderPlanComparison(reports: PlanReport[], format: "text" | "markdown"): string {
  const first = reports[0];
  if (first === undefined) return "";
  const y = first.your_config;
  const head = [
    "gpu",
    "memory",
    "budget",
    `your config (${y.precision}, ${y.micro_batch} × ${y.accumulation})`,
    "largest micro-batch",
    "fastest way",
    "samples/s",
    "vs yours",
  ];
  const rows = reports.map((r) => {
    const mine = r.your_config;
    const best = r.suggestions[0];
    return [
      r.gpu.name.replace(/^NVIDIA /, ""),
      formatBytes(r.gpu.memory_bytes),
      formatBytes(r.gpu.budget_bytes),
      `${formatBytes(mine.peak_bytes)} ${r.memory.fits ? "fits" : "OVER"}, ${rate(mine.samples_per_s)}/s`,
      r.max_micro_batch === 0 ? "none" : r.memory_limited ? r.max_micro_batch.toLocaleString("en-US") : "not the limit",
      best === undefined ? "none fits" : `${best.precision}${best.checkpointing ? " + ckpt" : ""} ${best.micro_batch} × ${best.accumulation}`,
      best === undefined ? "" : rate(best.samples_per_s),
      best === undefined ? "" : `${best.speedup_vs_yours.toFixed(2)}×`,
    ];
  });
  const title = `${first.model.name} (${first.model.family}, from ${first.model.source}) on ${reports.length} GPUs: effective batch ${first.setup.effective_batch}, ${first.setup.optimizer}`;
  if (format === "markdown") {
    return [
      `# Memory plans: ${title}`,
      "",
      `| ${head.join(" | ")} |`,
      `|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
      ...rows.map((r) => `| ${r.join(" | ")} |`),
      "",
    ].join("\n");
  }
  const notes = reports.flatMap((r) => r.notes.map((n) => `note (${r.gpu.id}): ${n}`));
  const calibrated = reports.map(
    (r) => `${r.gpu.id}: ${r.calibration === null ? "defaults (no calibration for this GPU)" : `calibrated on ${r.calibration.measured_on.gpu}`}`,
  );
  return [
    `brim plan · ${title}`,
    "",
    ...table([head, ...rows], ["l", "r", "r", "r", "r", "l", "r", "r"]),
    "",
    ...notes,
    `constants: ${calibrated.join("; ")}`,
    "each GPU's full plan: brim plan <model> --gpu <id>",
    "",
  ].join("\n");
}

/**
 * A {@link MeasuredJobPlan} as text.
 *
 * @example
 * ```ts
 * process.stdout.write(renderMeasuredJobPlan(measured));
 * ```
 */
export function renderMeasuredJobPlan(p: MeasuredJobPlan): string {
  const limitText = { "--cap": "the --cap", "--gpu-memory": "--gpu-memory", gpu_total: "the GPU's memory", host_total: "the host's RAM" }[p.limit_source];
  const lines = [
    `brim plan (measured) · run ${p.run_id} · ${p.device}`,
    `measured  peak ${formatBytes(p.peak_bytes)} ${p.memory === "gpu" ? "GPU memory" : "RAM"} of the process tree at micro-batch ${p.micro_batch ?? "? (the job did not show it)"}${p.precision !== null ? ` (${p.precision})` : ""} over ${p.steps} steps`,
    `limit     ${formatBytes(p.limit_bytes)} (${limitText}) less the ${(p.margin * 100).toFixed(0)} % margin: ${formatBytes(p.usable_bytes)} usable`,
    `fits      ${p.fits ? "yes" : "NO"}: the peak is ${((p.peak_bytes / p.usable_bytes) * 100).toFixed(1)} % of the usable memory`,
  ];
  if (p.largest_micro_batch_at_least !== null)
    lines.push(
      `largest   micro-batch ${p.largest_micro_batch_at_least} at least (the whole peak scaled with the micro-batch; its fixed part does not grow, so more fits)`,
    );
  lines.push(
    "For the memory by component and any GPU: brim plan <model spec> --gpu <id> --measure -- <command>; brim tune finds the fastest setting that fits.",
  );
  return `${lines.join("\n")}\n`;
}

/**
 * Renders "which strategy fits": one row per strategy with its per-GPU peak, the largest
 * micro-batch that fits, the host RAM its offload needs and a one-line verdict.
 *
 * @example
 * ```ts
 * process.stdout.write(renderStrategyComparison(rows, "text"));
 * ```
 */
export function renderStrategyComparison(rows: StrategyRow[], format: "text" | "markdown"): string {
  const first = rows.find((r) => r.plan !== null)?.plan;
  if (first === undefined || first === null) return "";
  const st = first.setup;
  const where = `${st.gpus} × ${first.gpu.name.replace(/^NVIDIA /, "")}${st.nodes > 1 ? ` on ${st.nodes} nodes` : ""}`;
  const title = `${first.model.name} (${first.model.family}, from ${first.model.source}) on ${where}: ${st.precision}, ${st.optimizer}, budget ${formatBytes(first.gpu.budget_bytes)} per GPU`;
  const head = ["strategy", "per-GPU peak", "micro-batch", "largest that fits", "host RAM / node", "verdict"];
  const body = rows.map((r) => [
    `${r.sharding}${r.offload !== "none" && r.plan !== null ? ` + offload ${r.offload}` : ""}`,
    r.peak_bytes === null ? "—" : formatBytes(r.peak_bytes),
    r.micro_batch === null ? "—" : String(r.micro_batch),
    r.max_micro_batch === null ? "—" : r.max_micro_batch === 0 ? "none" : r.max_micro_batch.toLocaleString("en-US"),
    r.host_bytes_per_node === null || r.host_bytes_per_node === 0 ? "—" : formatBytes(r.host_bytes_per_node),
    r.verdict,
  ]);
  if (format === "markdown") {
    return [
      `# Which strategy fits: ${title}`,
      "",
      `| ${head.join(" | ")} |`,
      "|---|---:|---:|---:|---:|---|",
      ...body.map((r) => `| ${r.join(" | ")} |`),
      "",
    ].join("\n");
  }
  return [
    `brim plan · ${title}`,
    "",
    ...table([head, ...body], ["l", "r", "r", "r", "l", "l"]),
    "",
    "the peak is at the micro-batch in force (--batch, the spec's, else the largest that fits); each strategy's full plan: brim plan <model> --sharding <one>",
    "",
  ].join("\n");
}

/**
 * The GPU catalog as a table for `--list-gpus`.
 *
 * @example
 * ```ts
 * process.stdout.write(renderGpuList());
 * ```
 */
export function renderGpuList(): string {
  const rows = GPU_CATALOG.map((g) => `${g.id.padEnd(18)} ${String(g.memoryGiB).padStart(4)} GiB  ${g.architecture.padEnd(9)} ${g.name}`);
  return ["id                 memory  arch      name", ...rows].join("\n") + "\n";
}
