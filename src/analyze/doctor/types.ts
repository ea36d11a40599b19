/**
 * What `brim doctor` says about a run: findings, passes, checks not evaluated, and the report.
 *
 * @module
 */
import type { RunMeasures } from "../measure.ts";
import type { RunMeta } from "../../record/types.ts";
import type { KnobTrial } from "../tune-hint.ts";

/**
 * Every check the doctor runs, in the order it runs them.
 *
 * @example
 * ```ts
 * CHECKS.includes("data_starved"); // true
 * ```
 */
export const CHECKS = [
  "data_starved",
  "launch_bound",
  "memory_unused",
  "fp32_on_tensor_cores",
  "nonfinite_loss",
  "oom_recovered",
  "pcie_traffic",
  "clocks_held_back",
  "gpu_contexts",
  "utilization_gap",
  "slow_steps",
  "ranks",
  "cpu_run",
] as const;

/**
 * One of {@link CHECKS}.
 *
 * @example
 * ```ts
 * const id: CheckId = "memory_unused";
 * ```
 */
export type CheckId = (typeof CHECKS)[number];

/**
 * How much a finding costs the run. `info` explains without asking for a change.
 *
 * @example
 * ```ts
 * const s: Severity = "high";
 * ```
 */
export type Severity = "high" | "medium" | "low" | "info";

/**
 * How sure a finding is.
 *
 * @example
 * ```ts
 * const c: Certainty = "medium";
 * ```
 */
export type Certainty = "high" | "medium" | "low";

/**
 * One number that shows a finding.
 *
 * @example
 * ```ts
 * const e: Evidence = { label: "data wait share", value: 0.31, unit: "share", text: "31.0 % of step time ..." };
 * ```
 */
export interface Evidence {
  /** short name of the quantity, e.g. "data wait share" */
  label: string;
  /** the raw value in the unit named (shares 0–1, bytes, seconds, percent 0–100) */
  value: number | string | boolean | null;
  unit: "share" | "bytes" | "s" | "percent" | "count" | "bytes/s" | "samples/s" | "MHz" | "text";
  /** the value as a person reads it, with its context */
  text: string;
}

/**
 * A finding about a run.
 *
 * @example
 * ```ts
 * report.findings.map((f: Finding) => `${f.title}: ${f.verify ?? "no knob"}`);
 * ```
 */
export interface Finding {
  id: CheckId;
  title: string;
  severity: Severity;
  confidence: { level: Certainty; reason: string };
  /** what is happening, in plain words */
  summary: string;
  evidence: Evidence[];
  fix: { summary: string; steps: string[] };
  /** knobs a tune should try to verify the fix */
  knobs: KnobTrial[];
  /** the `brim tune` command line that verifies the fix, where a knob can */
  verify: string | null;
}

/**
 * A check that could not run on this run, and why.
 *
 * @example
 * ```ts
 * report.not_evaluated.map((n: NotEvaluated) => `${n.check}: ${n.reason}`);
 * ```
 */
export interface NotEvaluated {
  check: CheckId;
  reason: string;
}

/**
 * A check that ran and found nothing to report.
 *
 * @example
 * ```ts
 * report.passed.map((p: Passed) => `${p.check}: ${p.why}`);
 * ```
 */
export interface Passed {
  check: CheckId;
  why: string;
}

/**
 * What `brim doctor` says about a run.
 *
 * @example
 * ```ts
 * const report: DoctorReport = diagnose(meta, timeline);
 * report.findings[0]?.id; // "data_starved"
 * ```
 */
export interface DoctorReport {
  schema: "brim.doctor/v1";
  run: {
    id: string;
    kind: "run" | "trial";
    command: string[];
    device: string;
    backend: RunMeta["device"]["backend"];
    /** a GPU run (src/record/timeline/index.ts `isGpuRun`) */
    gpu: boolean;
    started_at: string;
    ended_at: string | null;
    end: string | null;
    running: boolean;
  };
  measures: RunMeasures;
  findings: Finding[];
  passed: Passed[];
  not_evaluated: NotEvaluated[];
  notes: string[];
}
