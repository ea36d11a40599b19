/** What the doctor's tests share: a synthetic run diagnosed, a finding by id, the ids that fired, a healthy GPU run. */
import { diagnose, type CheckId, type DoctorReport, type Finding } from "../../../src/analyze/doctor/index.ts";
import { GIB, syntheticRun, type SyntheticOptions } from "../synthetic.ts";

export function doctor(o: SyntheticOptions): DoctorReport {
  const { meta, timeline } = syntheticRun(o);
  return diagnose(meta, timeline);
}

export function get(report: DoctorReport, id: CheckId): Finding {
  const f = report.findings.find((x) => x.id === id);
  if (f === undefined)
    throw new Error(
      `expected finding ${id}; got ${report.findings.map((x) => x.id).join(", ")}; passed ${JSON.stringify(report.passed)}; not evaluated ${JSON.stringify(report.not_evaluated)}`,
    );
  return f;
}

export function fired(report: DoctorReport): CheckId[] {
  return report.findings.map((f) => f.id);
}

/** A well-fed GPU run: bf16 on an A100, short waits, 60 of 80 GiB used, no throttling. */
export const HEALTHY: SyntheticOptions = { treeGpuBytes: 60 * GIB, reserved: 55 * GIB, allocated: 50 * GIB, utilWait: 97, utilCompute: 99, sm: 85 };
