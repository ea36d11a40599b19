/**
 * Streaming statistics over a timeline in bounded memory: the median of a stream, even thinning of
 * a list, and the sums behind the GPU and CPU means.
 *
 * @module
 */
import type { SampleEntry, TimelineMeasures } from "./types.ts";

/**
 * The median of a stream of numbers in bounded memory: exact up to 2^18 values, then from a
 * histogram with bins 0.5 % wide (so within 0.25 % of the exact median).
 */
export class StreamingMedian {
  static readonly EXACT = 1 << 18;
  #values: Float64Array = new Float64Array(1024);
  #n = 0;
  #bins: Map<number, number> | null = null;
  #zeros = 0;

  add(value: number): void {
    if (this.#bins === null) {
      if (this.#n === this.#values.length) {
        if (this.#n >= StreamingMedian.EXACT) {
          this.#bins = new Map();
          for (let i = 0; i < this.#n; i++) this.#bin(this.#values[i] as number);
          this.#values = new Float64Array(0);
        } else {
          const grown = new Float64Array(this.#values.length * 2);
          grown.set(this.#values);
          this.#values = grown;
        }
      }
      if (this.#bins === null) {
        this.#values[this.#n] = value;
        this.#n++;
        return;
      }
    }
    this.#n++;
    this.#bin(value);
  }

  #bin(value: number): void {
    if (value <= 0) {
      this.#zeros++;
      return;
    }
    const bin = Math.floor(Math.log(value) / Math.log1p(0.005));
    this.#bins?.set(bin, (this.#bins.get(bin) ?? 0) + 1);
  }

  get count(): number {
    return this.#n;
  }

  median(): number | null {
    if (this.#n === 0) return null;
    if (this.#bins === null) {
      const sorted = this.#values.slice(0, this.#n).sort();
      const mid = Math.floor(this.#n / 2);
      return this.#n % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
    }
    let seen = this.#zeros;
    if (seen > this.#n / 2) return 0;
    for (const [bin, n] of [...this.#bins.entries()].sort((a, b) => a[0] - b[0])) {
      seen += n;
      if (seen >= this.#n / 2) return Math.exp((bin + 0.5) * Math.log1p(0.005));
    }
    return null;
  }
}

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
