/**
 * Curve shapes the search is scored on (bench/search-sim.bench.mjs ports the same table).
 *
 * @example
 * ```ts
 * const { spec, capBytes, space } = SHAPES.knee;
 * ```
 * @module
 */
import type { TuneSpace } from "../../src/tune/search.ts";
import { DEFAULT_ORACLE, type OracleSpec } from "./oracle.ts";

const MiB = 2 ** 20;

/** One scored case: the job's curves, the cap, and the space a tuner searches. */
export interface Shape {
  spec: OracleSpec;
  capBytes: number;
  space: TuneSpace;
  /** what the shape tests */
  about: string;
}

const microOnly: TuneSpace = { baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [] };

/** The shapes, by name. */
export const SHAPES = {
  plateau: {
    about: "throughput rises and levels off; memory allows ~312",
    spec: { ...DEFAULT_ORACLE, knee: Infinity, overheadS: 0.01, perSampleS: 0.0003 },
    capBytes: 96 * MiB,
    space: microOnly,
  },
  knee: {
    about: "throughput peaks at 48 and drops beyond; memory allows ~440",
    spec: { ...DEFAULT_ORACLE, knee: 48, penalty: 1, overheadS: 0.01, perSampleS: 0.0003 },
    capBytes: 128 * MiB,
    space: microOnly,
  },
  intercept: {
    about: "60 % of the cap is fixed (weights, optimizer state); 2.5 MiB per sample",
    spec: { ...DEFAULT_ORACLE, knee: Infinity, baseBytes: 600 * MiB, perSampleBytes: 2.5 * MiB, overheadS: 0.02, perSampleS: 0.0005 },
    capBytes: 1000 * MiB,
    space: microOnly,
  },
  effective: {
    about: "effective batch 240 fixed: micro-batch takes divisors, accumulation = 240 / micro",
    spec: { ...DEFAULT_ORACLE, knee: Infinity },
    capBytes: 64 * MiB,
    space: {
      baseline: { batch_size: 8, accumulation: 30 },
      microBatch: { knob: "batch_size" },
      accumulation: { knob: "accumulation" },
      effectiveBatch: 240,
      others: [],
    },
  },
  precision: {
    about: "bf16-mixed halves the memory per sample and is 30 % faster; num_workers 2 is 15 % faster",
    spec: { ...DEFAULT_ORACLE, knee: Infinity },
    capBytes: 64 * MiB,
    space: {
      baseline: { batch_size: 8, precision: "fp32", num_workers: 0 },
      microBatch: { knob: "batch_size" },
      others: [
        { knob: "precision", values: ["fp32", "bf16-mixed"] },
        { knob: "num_workers", values: [0, 1, 2, 4, 8] },
      ],
    },
  },
} satisfies Record<string, Shape>;
