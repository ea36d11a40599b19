/**
 * The `pcie_traffic` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { formatRate, formatShare } from "../../format.ts";
import { maxOf, mean } from "../../stats.ts";
import * as T from "../thresholds.ts";
import { ev, finding, jobGpus, knobSeen, type CheckResult, type Ctx } from "./context.ts";

export function pcieTraffic(ctx: Ctx): CheckResult {
  if (!ctx.gpu) return { check: "pcie_traffic", reason: "CPU run: there is no host-to-device link" };
  const rx = ctx.samples.flatMap((s) => jobGpus(ctx, s).map((g) => g.pcie_rx_bytes_per_s)).filter((v): v is number => v !== null);
  if (rx.length === 0) return { check: "pcie_traffic", reason: "the sampler did not record PCIe throughput (pcie_rx_bytes_per_s) for this run" };
  const avg = mean(rx) as number;
  const share = avg / T.PCIE_ASSUMED_LINK_BYTES_PER_S;
  if (share < T.PCIE_H2D_LINK_SHARE)
    return { check: "pcie_traffic", why: `host-to-device traffic ${formatRate(avg / 1e9)} GB/s, ${formatShare(share)} of a PCIe 3.0 x16 link` };
  const perSample = ctx.m.samples_per_s !== null && ctx.m.samples_per_s > 0 ? avg / ctx.m.samples_per_s : null;
  const evidence = [
    ev(
      "host-to-device traffic",
      avg,
      "bytes/s",
      `${formatRate(avg / 1e9)} GB/s host-to-device on average (peak ${formatRate((maxOf(rx) ?? 0) / 1e9)} GB/s), ${formatShare(share)} of a PCIe 3.0 x16 link (${formatRate(T.PCIE_ASSUMED_LINK_BYTES_PER_S / 1e9)} GB/s assumed)`,
    ),
  ];
  if (perSample !== null) evidence.push(ev("bytes per sample", perSample, "bytes", `${formatBytes(perSample)} cross the bus per training sample`));
  const pinned = knobSeen(ctx, "pin_memory");
  return finding(ctx, {
    id: "pcie_traffic",
    title: "Heavy host-to-device traffic",
    severity: (ctx.m.gpu_util_mean ?? 100) < T.UTIL_BUSY ? "medium" : "low",
    confidence: {
      level: rx.length >= T.SAMPLES_FOR_CONFIDENCE ? "medium" : "low",
      reason: `PCIe counters over ${rx.length} readings; the link's real width and generation were not recorded`,
    },
    summary: `The job moves ${formatRate(avg / 1e9)} GB/s from host to GPU; copies on the default stream stall the GPU while they run.`,
    evidence,
    fix: {
      summary: "copy less, and copy asynchronously",
      steps: [
        "Pin host memory (DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True), so copies overlap compute.",
        "Send compact data and convert on the GPU: uint8 images or int16 sensor values instead of float32, decoding/augmentation on the device.",
        "Keep a dataset that fits in GPU memory on the GPU once, and index it there.",
        "Avoid moving model outputs or state to the host every step (.cpu(), .numpy(), .item()).",
      ],
    },
    knobs: pinned || ctx.gpu ? [{ name: "pin_memory", values: [false, true] }] : [],
  });
}
