/**
 * The `clocks_held_back` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatShare } from "../../format.ts";
import { mean } from "../../stats.ts";
import * as T from "../thresholds.ts";
import { ev, finding, jobGpus, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";

export function clocksHeldBack(ctx: Ctx): CheckResult {
  if (!ctx.gpu) return { check: "clocks_held_back", reason: "CPU run: no GPU clocks" };
  const readings = ctx.samples.flatMap((s) => jobGpus(ctx, s)).filter((g) => g.throttle !== null);
  if (readings.length === 0) return { check: "clocks_held_back", reason: "the sampler did not record clock-event reasons (NVML CurrentClocksEventReasons)" };
  const held = readings.filter((g) => (g.throttle ?? []).some((r) => T.THROTTLE_REASONS.includes(r.toLowerCase())));
  const share = held.length / readings.length;
  if (share < T.THROTTLE_SHARE) return { check: "clocks_held_back", why: `power or temperature held the clocks back in ${formatShare(share)} of readings` };
  const byReason = new Map<string, number>();
  for (const g of held) for (const r of g.throttle ?? []) if (T.THROTTLE_REASONS.includes(r.toLowerCase())) byReason.set(r, (byReason.get(r) ?? 0) + 1);
  const clockHeld = mean(held.map((g) => g.sm_clock_mhz).filter((v): v is number => v !== null));
  const free = readings.filter((g) => !held.includes(g));
  const clockFree = mean(free.map((g) => g.sm_clock_mhz).filter((v): v is number => v !== null));
  const evidence: Evidence[] = [
    ev("time held back", share, "share", `power or temperature limited the clocks in ${formatShare(share)} of ${readings.length} readings during steady state`),
  ];
  for (const [reason, n] of [...byReason.entries()].sort((a, b) => b[1] - a[1]))
    evidence.push(ev(`reason ${reason}`, n / readings.length, "share", `${reason}: ${formatShare(n / readings.length)} of readings`));
  let cost: number | null = null;
  if (clockHeld !== null && clockFree !== null && clockFree > 0) {
    const drop = Math.max(0, 1 - clockHeld / clockFree);
    cost = share * drop;
    evidence.push(
      ev(
        "SM clock",
        clockHeld,
        "MHz",
        `SM clock ${clockHeld.toFixed(0)} MHz while held back against ${clockFree.toFixed(0)} MHz otherwise (${formatShare(drop)} lower)`,
      ),
    );
    evidence.push(
      ev(
        "estimated cost",
        cost,
        "share",
        `about ${formatShare(cost)} of compute speed lost over the run (time held back × clock drop; memory-bound work loses less)`,
      ),
    );
  }
  const thermal = [...byReason.keys()].some((r) => r.includes("thermal"));
  const power = [...byReason.keys()].some((r) => r.includes("power") || r === "hw_slowdown");
  const steps: string[] = [];
  if (power)
    steps.push(
      "Power: check the limit in force (nvidia-smi -q -d POWER); if it was lowered, restore the default (nvidia-smi -pl <default W>, needs root). On a laptop, run on mains power in the performance profile.",
    );
  if (thermal) steps.push("Temperature: improve airflow or the fan curve, clean dust filters, leave a slot free beside the card.");
  steps.push("Nothing in the job's config changes this: it is the card's environment. Compare runs with brim report --vs after a change.");
  return finding(ctx, {
    id: "clocks_held_back",
    title: "Clocks held back by power or temperature",
    severity: cost !== null && cost >= 0.05 ? "medium" : "low",
    confidence: {
      level: readings.length >= T.SAMPLES_FOR_CONFIDENCE ? "high" : "low",
      reason: `clock-event reasons read by NVML in ${readings.length} readings`,
    },
    summary: `Power or temperature held the GPU's clocks back ${formatShare(share)} of the time${cost !== null ? `, costing about ${formatShare(cost)} of its speed` : ""}.`,
    evidence,
    fix: { summary: thermal && !power ? "cool the card" : "give the card its full power budget", steps },
    knobs: [],
  });
}
