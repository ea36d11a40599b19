import type { ChannelMessage } from "../job/channel.ts";

/** What the live view, the Prometheus endpoint and the tuner's progress show about a running job. */
export interface LiveState {
  elapsedS: number;
  steps: number;
  /** Steps the budget allows (per process), when known. */
  totalSteps: number | null;
  /** Samples per second over the recent steady steps of the main process. */
  samplesPerS: number | null;
  /** Share of recent step time spent waiting for data. */
  waitShare: number | null;
  etaS: number | null;
  memUsedBytes: number | null;
  memPeakBytes: number | null;
  capBytes: number | null;
  capScope: "gpu" | "ram";
  gpuUtil: number | null;
  smActivity: number | null;
  powerW: number | null;
  cpuPercent: number | null;
  processes: number | null;
  microBatch: number | null;
  accumulation: number | null;
  loss: number | null;
  oomRecoveries: number;
  shrinkRequests: number;
  lastEvent: string | null;
}

/** The part of a sampler reading the live state uses. */
export interface LiveReading {
  t: number;
  usedBytes: number | null;
  gpuUtil: number | null;
  smActivity: number | null;
  powerW: number | null;
  cpuPercent: number | null;
  processes: number | null;
}

const RECENT_STEPS = 20;
const finite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value);

/**
 * Folds SDK messages and sampler readings into the {@link LiveState} of a running job.
 *
 * @example
 * ```ts
 * const live = new LiveTracker({ startedAt: Date.now() / 1000, capBytes: null, capScope: "ram", totalSteps: 100 });
 * live.message(stepMessage);
 * live.snapshot(Date.now() / 1000).samplesPerS;
 * ```
 */
export class LiveTracker {
  #startedAt: number;
  #state: LiveState;
  #mainPid: number | null = null;
  #recent: { samples: number; wait: number; busy: number }[] = [];

  constructor(init: { startedAt: number; capBytes: number | null; capScope: "gpu" | "ram"; totalSteps: number | null }) {
    this.#startedAt = init.startedAt;
    this.#state = {
      elapsedS: 0,
      steps: 0,
      totalSteps: init.totalSteps,
      samplesPerS: null,
      waitShare: null,
      etaS: null,
      memUsedBytes: null,
      memPeakBytes: null,
      capBytes: init.capBytes,
      capScope: init.capScope,
      gpuUtil: null,
      smActivity: null,
      powerW: null,
      cpuPercent: null,
      processes: null,
      microBatch: null,
      accumulation: null,
      loss: null,
      oomRecoveries: 0,
      shrinkRequests: 0,
      lastEvent: null,
    };
  }

  /** Takes one SDK message. */
  message(message: ChannelMessage): void {
    if (message.type === "hello" && message.role === "main" && (message.rank == null || message.rank === 0)) {
      this.#mainPid ??= message.pid;
      return;
    }
    if (message.type === "event") {
      if (message.kind === "oom_recovered") this.#state.oomRecoveries++;
      if (message.kind !== "knob_read") this.#state.lastEvent = typeof message.message === "string" ? message.message : String(message.kind);
      return;
    }
    if (message.type !== "step") return;
    if (this.#mainPid !== null && message.pid !== this.#mainPid) return;
    const state = this.#state;
    state.steps++;
    if (finite(message.micro_batch)) state.microBatch = message.micro_batch;
    if (finite(message.accumulation)) state.accumulation = message.accumulation;
    if (finite(message.loss)) state.loss = message.loss;
    if (message.warmup === true) return;
    const wait = finite(message.wait_s) ? message.wait_s : 0;
    const busy = wait + (finite(message.compute_s) ? message.compute_s : 0);
    this.#recent.push({ samples: finite(message.samples) ? message.samples : 0, wait, busy });
    if (this.#recent.length > RECENT_STEPS) this.#recent.shift();
    const totals = this.#recent.reduce((sum, step) => ({ samples: sum.samples + step.samples, wait: sum.wait + step.wait, busy: sum.busy + step.busy }), { samples: 0, wait: 0, busy: 0 });
    state.samplesPerS = totals.busy > 0 && totals.samples > 0 ? totals.samples / totals.busy : null;
    state.waitShare = totals.busy > 0 ? totals.wait / totals.busy : null;
    if (state.totalSteps !== null && totals.busy > 0) state.etaS = Math.max(0, state.totalSteps - state.steps) * (totals.busy / this.#recent.length);
  }

  /** Takes one sampler reading. */
  reading(reading: LiveReading): void {
    const state = this.#state;
    state.memUsedBytes = reading.usedBytes;
    if (reading.usedBytes !== null) state.memPeakBytes = Math.max(state.memPeakBytes ?? 0, reading.usedBytes);
    state.gpuUtil = reading.gpuUtil;
    state.smActivity = reading.smActivity;
    state.powerW = reading.powerW;
    state.cpuPercent = reading.cpuPercent;
    state.processes = reading.processes;
  }

  /** Notes a shrink request brim sent. */
  shrinkRequested(): void {
    this.#state.shrinkRequests++;
    this.#state.lastEvent = "brim asked the job to shrink its micro-batch (near the cap)";
  }

  /** The state now. */
  snapshot(now: number): LiveState {
    return { ...this.#state, elapsedS: now - this.#startedAt };
  }
}
