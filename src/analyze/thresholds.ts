/**
 * The thresholds `brim doctor` judges a run by. Each is documented, with the reason for its value,
 * in docs/doctor.md; change both together.
 *
 * @example
 * ```ts
 * import { DATA_WAIT_SHARE } from "./thresholds.ts";
 * if (share >= DATA_WAIT_SHARE) findings.push(starved);
 * ```
 * @module
 */

/**
 * Share of step time spent waiting for the next batch at which the job counts as starved by data.
 *
 * @example
 * ```ts
 * if (measures.data_wait_share !== null && measures.data_wait_share >= DATA_WAIT_SHARE) findings.push(starved);
 * ```
 */
export const DATA_WAIT_SHARE = 0.1;
/**
 * Share of step time waiting for data at which starvation is the main problem (severity high).
 *
 * @example
 * ```ts
 * const severity = share >= DATA_WAIT_SHARE_SEVERE ? "high" : "medium";
 * ```
 */
export const DATA_WAIT_SHARE_SEVERE = 0.3;
/**
 * CPU use per loader process (100 = one core) at which the loading processes count as saturated.
 *
 * @example
 * ```ts
 * const saturated = treeCpuPercent / (workers + 1) >= LOADER_CPU_SATURATED_PERCENT;
 * ```
 */
export const LOADER_CPU_SATURATED_PERCENT = 85;
/**
 * Share of the host's cores (0–100) the job itself keeps busy at which more loader workers cannot help; also the host CPU use at which the host counts as busy with other work.
 *
 * @example
 * ```ts
 * const noCoreToSpare = (100 * treeCpuPercent) / (100 * cpus) >= HOST_CPU_SATURATED_PERCENT;
 * ```
 */
export const HOST_CPU_SATURATED_PERCENT = 90;

/**
 * GPU utilization (NVML, 0–100) above which the card looks busy.
 *
 * @example
 * ```ts
 * const looksBusy = utilMean >= UTIL_BUSY;
 * ```
 */
export const UTIL_BUSY = 80;
/**
 * GPM SM activity (0–100) below which a "busy" card is running kernels too small to fill it.
 *
 * @example
 * ```ts
 * const launchBound = utilMean >= UTIL_BUSY && smMean <= SM_ACTIVITY_LOW;
 * ```
 */
export const SM_ACTIVITY_LOW = 40;
/**
 * Median compute time of a step below which a step is too short for the GPU to fill (launch-bound).
 *
 * @example
 * ```ts
 * const tinySteps = medianComputeS < SHORT_STEP_S;
 * ```
 */
export const SHORT_STEP_S = 0.01;
/**
 * GPU utilization below which a job that does not wait for data is bound by its own host-side work.
 *
 * @example
 * ```ts
 * const hostBound = utilMean < UTIL_LOW && insidePoints >= idlePoints / 2;
 * ```
 */
export const UTIL_LOW = 60;

/**
 * Share of the memory limit the peak must stay under for the unused memory to be worth a finding.
 *
 * @example
 * ```ts
 * const unused = peakBytes / limitBytes < MEMORY_USED_SHARE_LOW;
 * ```
 */
export const MEMORY_USED_SHARE_LOW = 0.5;
/**
 * Share of the limit kept free when suggesting a larger micro-batch (the same margin `brim plan` uses).
 *
 * @example
 * ```ts
 * const fits = Math.floor((microBatch * limitBytes * (1 - MEMORY_MARGIN)) / peakBytes);
 * ```
 */
export const MEMORY_MARGIN = 0.1;

/**
 * Mean host-to-device PCIe traffic, as a share of the link, at which copies count as heavy.
 *
 * @example
 * ```ts
 * const heavy = rxBytesPerS / PCIE_ASSUMED_LINK_BYTES_PER_S >= PCIE_H2D_LINK_SHARE;
 * ```
 */
export const PCIE_H2D_LINK_SHARE = 0.25;
/**
 * The link bandwidth assumed when the sampler does not report one: PCIe 3.0 x16 in practice (~12 GB/s).
 *
 * @example
 * ```ts
 * const linkShare = rxBytesPerS / PCIE_ASSUMED_LINK_BYTES_PER_S;
 * ```
 */
export const PCIE_ASSUMED_LINK_BYTES_PER_S = 12e9;

/**
 * Share of steady-state samples with a power or thermal clock-event reason at which clocks count as held back.
 *
 * @example
 * ```ts
 * const heldBack = throttledReadings / readings >= THROTTLE_SHARE;
 * ```
 */
export const THROTTLE_SHARE = 0.1;
/**
 * Clock-event reasons that mean power or temperature held the clocks back (NVML names, lower case).
 *
 * @example
 * ```ts
 * THROTTLE_REASONS.includes("sw_power_cap"); // true
 * THROTTLE_REASONS.includes("gpu_idle");     // false
 * ```
 */
export const THROTTLE_REASONS: readonly string[] = ["sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"];

/**
 * GPU memory held outside the main process's allocator at which extra GPU contexts are worth a finding.
 *
 * @example
 * ```ts
 * const extraContexts = gpuProcesses >= 2 && treeGpuBytes - reservedBytes >= EXTRA_GPU_MEMORY_BYTES;
 * ```
 */
export const EXTRA_GPU_MEMORY_BYTES = 2 ** 30;
/**
 * Share of the card held right after start at which a framework is preallocating (JAX takes 75 %).
 *
 * @example
 * ```ts
 * const preallocated = earlyGpuBytes >= PREALLOCATION_SHARE * cardBytes;
 * ```
 */
export const PREALLOCATION_SHARE = 0.7;

/**
 * Steady steps needed for a finding to be called highly certain.
 *
 * @example
 * ```ts
 * const level = steadySteps >= STEPS_FOR_HIGH_CONFIDENCE ? "high" : "medium";
 * ```
 */
export const STEPS_FOR_HIGH_CONFIDENCE = 20;
/**
 * Steady steps below which step-based findings are only a hint (confidence low).
 *
 * @example
 * ```ts
 * const hint = steadySteps < STEPS_FOR_MEDIUM_CONFIDENCE;
 * ```
 */
export const STEPS_FOR_MEDIUM_CONFIDENCE = 5;
/**
 * Sampler readings during steady state needed for a sample-based finding to be more than a hint.
 *
 * @example
 * ```ts
 * const enough = readings.length >= SAMPLES_FOR_CONFIDENCE;
 * ```
 */
export const SAMPLES_FOR_CONFIDENCE = 10;
/**
 * A step at least this many times the median steady step is slow (compilation, recompilation, a
 * checkpoint save, a stalled loader).
 *
 * @example
 * ```ts
 * const slow = seconds >= SLOW_STEP_RATIO * medianS && seconds - medianS >= SLOW_STEP_MIN_EXTRA_S;
 * ```
 */
export const SLOW_STEP_RATIO = 10;
/**
 * ...and at least this many seconds longer than the median: a 3 ms step next to 0.2 ms ones is noise.
 *
 * @example
 * ```ts
 * if (seconds - medianS < SLOW_STEP_MIN_EXTRA_S) return;
 * ```
 */
export const SLOW_STEP_MIN_EXTRA_S = 0.05;
/**
 * A rank is a straggler when its own work (the step less data wait and backward, where DDP's
 * all-reduce waits for the slowest rank), or its data wait, exceeds the other ranks' median by this
 * share of the median step time: every rank then waits that long for it at each all-reduce.
 *
 * @example
 * ```ts
 * const straggler = own - othersOwn >= STRAGGLER_STEP_SHARE * stepS;
 * ```
 */
export const STRAGGLER_STEP_SHARE = 0.15;
