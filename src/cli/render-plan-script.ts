/**
 * `brim plan -- <command>` as text: one column per GPU, then where each figure comes from.
 * @module
 */
import { formatBytes } from "../bytes.ts";
import { table } from "../format.ts";
import { SCRIPT_PRECISIONS, type ScriptGpuPlan, type ScriptPlan } from "../plan/script.ts";

const pct = (x: number): string => `${(100 * x).toFixed(x < 0.1 ? 1 : 0)} %`;
const num = (n: number): string => n.toLocaleString("en-US");

/** the planner searches micro-batches up to 2^24: at that bound, more would fit */
const SEARCH_LIMIT = 2 ** 24;

function largestText(n: number | null | undefined): string {
  if (n === null || n === undefined) return "—";
  return n >= SEARCH_LIMIT ? `≥ ${num(n)}` : num(n);
}

function shortName(g: ScriptGpuPlan): string {
  return `${g.gpu.id} ${Math.round(g.gpu.memory_bytes / 2 ** 30)} GiB`;
}

function sentence(p: ScriptPlan, g: ScriptGpuPlan): string {
  const y = g.yours;
  const name = `${g.gpu.name.replace(/^NVIDIA /, "")} (${formatBytes(g.gpu.memory_bytes)})`;
  const prec = y.precision !== p.yours.precision ? ` in ${y.precision} (no fast ${p.yours.precision} there)` : "";
  const head = `${name}: your config${prec} uses ${pct(y.share_of_gpu)}`;
  if (!y.fits) {
    if (g.better !== null && g.better.micro_batch < y.micro_batch)
      return `${head}: it does NOT fit; batch_size ${g.better.micro_batch} × accumulation ${g.better.accumulation} keeps the effective batch ${p.yours.effective_batch} and uses ${pct(g.better.share_of_gpu)}`;
    return `${head}: it does NOT fit, and no micro-batch that divides the effective batch ${p.yours.effective_batch} does; use 16-bit precision or a smaller model`;
  }
  if (g.better !== null)
    return `${head}; batch_size ${g.better.micro_batch} × accumulation ${g.better.accumulation} keeps the effective batch ${p.yours.effective_batch} and uses ${pct(g.better.share_of_gpu)}`;
  const largest = g.largest[y.precision] ?? g.report.max_micro_batch;
  return `${head}; the whole effective batch ${p.yours.effective_batch} is already one micro-batch: memory is not the limit here (up to ${num(largest)} per micro-batch fits)`;
}

/**
 * The plan as text.
 *
 * @example
 * ```ts
 * process.stdout.write(renderScriptPlan(plan));
 * ```
 */
export function renderScriptPlan(p: ScriptPlan): string {
  const fit = p.fit;
  const runs = fit.points.map((pt) => `${pt.run_id} at micro-batch ${pt.micro_batch}`).join(", ");
  const lines = [
    `brim plan · ${p.profile.name ?? "the job"} · measured on this machine (${runs})`,
    `model     ${num(p.params.total)} parameters, ${num(p.params.trainable)} trainable · optimizer ${optimizerLine(p)}`,
    `per step  saved for backward ${formatBytes(fit.saved_per_sample_bytes)} per sample + ${formatBytes(fit.saved_fixed_bytes)} fixed (fp32) · input ${formatBytes(fit.input_per_sample_bytes)} per sample`,
    `yours     micro-batch ${p.yours.micro_batch} × accumulation ${p.yours.accumulation} = ${p.yours.effective_batch} per optimizer step, ${p.yours.precision} (${p.yours.precision_from})`,
    "",
  ];
  const rows: string[][] = [["", ...p.gpus.map(shortName)]];
  rows.push(["largest micro-batch", ...p.gpus.map(() => "")]);
  for (const precision of SCRIPT_PRECISIONS) {
    rows.push([`  ${precision}`, ...p.gpus.map((g) => largestText(g.largest[precision]))]);
  }
  rows.push(["your config uses", ...p.gpus.map((g) => `${pct(g.yours.share_of_gpu)}${g.yours.fits ? "" : " (NO)"}`)]);
  rows.push([
    `same effective ${p.yours.effective_batch}`,
    ...p.gpus.map((g) => (g.better === null ? "as is" : `${g.better.micro_batch} × ${g.better.accumulation}: ${pct(g.better.share_of_gpu)}`)),
  ]);
  rows.push(["GPU-only terms", ...p.gpus.map((g) => (g.calibration !== null ? "calibrated" : "default"))]);
  lines.push(
    ...table(
      rows,
      rows[0]?.map((_, i) => (i === 0 ? "l" : "r")),
    ),
    "",
  );
  for (const g of p.gpus) lines.push(`- ${sentence(p, g)}`);
  lines.push("", "Where the figures come from:");
  const groups = new Map<string, string[]>();
  for (const [component, v] of Object.entries(p.provenance)) {
    if (v.provenance === "calibrated") continue;
    groups.set(v.provenance, [...(groups.get(v.provenance) ?? []), component.replace(/_/g, " ")]);
  }
  groups.set("modelled", [...(groups.get("modelled") ?? []), "bf16/fp16 activations (half of the fp32 measurement)"]);
  for (const [kind, components] of groups) lines.push(`  ${kind.padEnd(10)} ${components.join(", ")}`);
  const calibrated = p.gpus.filter((g) => g.calibration !== null);
  const defaults = p.gpus.filter((g) => g.calibration === null);
  const terms = (g: ScriptGpuPlan): string =>
    g.gpu_terms.map((t) => `${t.name.replace(/_bytes$|_fraction$/, "").replace(/_/g, " ")} ${formatBytes(t.bytes)}`).join(", ");
  const example = calibrated[0] ?? defaults[0];
  if (example !== undefined)
    lines.push(`  GPU-only   added to every column, none seen by a CPU run: ${terms(example)} (${example.gpu.name.replace(/^NVIDIA /, "")}, your config)`);
  if (calibrated.length > 0) lines.push(`             calibrated for ${calibrated.map((g) => g.gpu.id).join(", ")} by ${calibrated[0]?.calibration ?? ""}`);
  if (defaults.length > 0)
    lines.push(
      `             defaults, not measured, for ${defaults.map((g) => g.gpu.id).join(", ")}: no calibration for their architecture yet (brim plan --json: assumptions)`,
    );
  const a = p.accuracy;
  const share = (x: number, digits = 0): string => `${(100 * Math.abs(x)).toFixed(digits)} %`;
  lines.push(
    `  accuracy   this path (a job's fp32 run measured on a CPU) planned the ${a.no_own_term.pairs} recorded H100 peaks of ${a.for_this_model === "convolution" ? "models without convolutions" : "models like yours (no convolution)"} within ${share(a.no_own_term.median_abs_error, 1)} median, ${share(a.no_own_term.worst_abs_error)} worst (leave-one-job-out; ${a.record})`,
  );
  if (a.for_this_model === "convolution")
    lines.push(
      `             yours has convolutions: the one recorded model with them (${a.convolution.job}) was planned ${share(-a.convolution.median_error)} under in the median, up to ${share(-a.convolution.worst_error)}, with its cuDNN workspace fitted from nothing (no other job has one): leave room`,
    );
  lines.push(
    `  margin     each column keeps ${Math.round(100 * (1 - (p.gpus[0]?.gpu.budget_bytes ?? 0) / (p.gpus[0]?.gpu.memory_bytes ?? 1)))} % of the card free`,
  );
  if (p.notes.length > 0) lines.push("", ...p.notes.map((n) => `note: ${n}`));
  return `${lines.join("\n")}\n`;
}

/** The optimizer seen and the one planned, saying when brim could not see it. */
function optimizerLine(p: ScriptPlan): string {
  const seen = p.optimizer_classes.join(", ");
  if (p.optimizer_from === "--optimizer") return `${seen || "none seen"} (planned as ${p.optimizer}, --optimizer)`;
  if (p.optimizer_from === "unseen")
    return `none brim can see (no torch.optim optimizer: Keras's own, optax or a hand-written update) · planned as ${p.optimizer}, 2 states per parameter; --optimizer to plan yours`;
  return `${seen} (planned as ${p.optimizer})`;
}
