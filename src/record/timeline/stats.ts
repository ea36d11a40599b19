/**
 * Streaming statistics over a timeline in bounded memory: even thinning of a list, and the sums
 * behind the GPU and CPU means (the median of a stream is {@link ../../stats.ts}'s).
 *
 * @module
 */
import type { SampleEntry, TimelineMeasures } from "./types.ts";

/** Keeps every k-th item of a stream, k doubling whenever the list reaches its bound. */
export class EvenThinning<T> {
  readonly items: T[] = [];
  #stride = 1;
  #seen = 0;
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  add(item: T): void {
    if (this.#seen++ % this.#stride !== 0) return;
    this.items.push(item);
    if (this.items.length >= this.#max) {
      let kept = 0;
      for (let i = 0; i < this.items.length; i += 2) this.items[kept++] = this.items[i] as T;
      this.items.length = kept;
      this.#stride *= 2;
    }
  }

  get thinned(): boolean {
    return this.#stride > 1;
  }
}

interface GpuSums {
  util: number;
  utilN: number;
  sm: number;
  smN: number;
  power: number;
  powerN: number;
  energyFirst: number | null;
  energyLast: number | null;
}

const newSums = (): GpuSums => ({ util: 0, utilN: 0, sm: 0, smN: 0, power: 0, powerN: 0, energyFirst: null, energyLast: null });

/** Per-GPU and per-host sums over a set of readings. */
export class ReadingSums {
  readonly gpus = new Map<number, GpuSums>();
  treeCpu = 0;
  treeCpuN = 0;
  hostCpu = 0;
  hostCpuN = 0;
  readings = 0;

  add(s: SampleEntry): void {
    this.readings++;
    for (const g of s.gpus) {
      let sums = this.gpus.get(g.index);
      if (sums === undefined) this.gpus.set(g.index, (sums = newSums()));
      if (g.util !== null) {
        sums.util += g.util;
        sums.utilN++;
      }
      if (g.sm_activity !== null) {
        sums.sm += g.sm_activity;
        sums.smN++;
      }
      if (g.power_w !== null) {
        sums.power += g.power_w;
        sums.powerN++;
      }
      if (g.energy_j !== null) {
        sums.energyFirst ??= g.energy_j;
        sums.energyLast = g.energy_j;
      }
    }
    if (s.tree.cpu_percent !== null) {
      this.treeCpu += s.tree.cpu_percent;
      this.treeCpuN++;
    }
    if (s.host.cpu_percent !== null) {
      this.hostCpu += s.host.cpu_percent;
      this.hostCpuN++;
    }
  }

  /** GPU means over the given GPUs: utilization and SM activity over every reading of them; power summed over the GPUs. */
  means(
    indexes: readonly number[],
  ): Pick<TimelineMeasures, "gpu_util_mean" | "sm_activity_mean" | "power_mean_w" | "energy_j" | "tree_cpu_percent_mean" | "host_cpu_percent_mean"> {
    let util = 0;
    let utilN = 0;
    let sm = 0;
    let smN = 0;
    let power: number | null = null;
    let energy: number | null = null;
    let energyMissing = false;
    for (const index of indexes) {
      const g = this.gpus.get(index);
      if (g === undefined) continue;
      util += g.util;
      utilN += g.utilN;
      sm += g.sm;
      smN += g.smN;
      if (g.powerN > 0) power = (power ?? 0) + g.power / g.powerN;
      if (g.energyFirst !== null && g.energyLast !== null && g.energyLast > g.energyFirst) energy = (energy ?? 0) + (g.energyLast - g.energyFirst);
      else energyMissing = true;
    }
    return {
      gpu_util_mean: utilN > 0 ? util / utilN : null,
      sm_activity_mean: smN > 0 ? sm / smN : null,
      power_mean_w: power,
      energy_j: energyMissing ? null : energy,
      tree_cpu_percent_mean: this.treeCpuN > 0 ? this.treeCpu / this.treeCpuN : null,
      host_cpu_percent_mean: this.hostCpuN > 0 ? this.hostCpu / this.hostCpuN : null,
    };
  }
}
