import { describe, expect, it } from "vitest";
import { noDataWaitReason, noStepsNote } from "../../../src/analyze/doctor/no-steps.ts";
import type { Ctx } from "../../../src/analyze/doctor/context.ts";

/** The parts of a diagnosis these read, as a recorded run would give them. */
function seen(o: { loaders?: number; hello?: boolean; cpu?: number | null; steps?: number; steady?: number; cause?: string | null }): Ctx {
  const tl = {
    eventCounts: o.loaders ? { loader: o.loaders } : {},
    hellos: o.hello ? [{ t: 0, pid: 1, role: "main", rank: null, local_rank: null, framework: "torch", versions: {} }] : [],
  };
  const m = { duration_s: 41.2, tree_cpu_percent_mean: o.cpu === undefined ? 97 : o.cpu, steps: o.steps ?? 0 };
  const meta = { end: o.cause === null ? null : { cause: o.cause ?? "interrupted" } };
  return { tl, m, meta, steady: Array.from({ length: o.steady ?? 0 }), samples: [], gpu: false } as unknown as Ctx;
}

describe("why doctor has no step to judge", () => {
  it("a busy job with no loader whose first step never finished: a longer run, not brim.track(loader)", () => {
    const note = noStepsNote(seen({}));
    expect(note).toMatch(
      /^No step was counted in the job's 41\.2 s before it was interrupted: no optimizer step finished, no DataLoader was built, no output line read as progress \(the job's Python sent brim nothing/,
    );
    expect(note).toMatch(/used 97 % of a core: it was computing, so its first step had likely not finished/);
    expect(note).toMatch(/closure optimizer \(LBFGS\)/);
    expect(note).toMatch(/--progress-pattern/);
    expect(note).not.toMatch(/brim\.track/);
  });
  it("a job that built a loader: brim.track(loader) only for a loop with neither backward() nor an optimizer", () => {
    const note = noStepsNote(seen({ loaders: 1, hello: true }));
    expect(note).toMatch(/1 DataLoader was built but gave no counted step/);
    expect(note).not.toMatch(/sent brim nothing/);
    expect(note).toMatch(/wrap its batches in brim\.track\(loader\)/);
  });
  it("an idle job was waiting, not training", () => {
    expect(noStepsNote(seen({ cpu: 3, cause: "hung" }))).toMatch(/before it ended \(hung\): .* used 3\.0 % of a core: it was waiting, not training/);
  });
  it("data wait: no step, only warm-up, no loader, or a loader with no wait reported", () => {
    expect(noDataWaitReason(seen({}))).toBe("no step was counted (see the note above)");
    expect(noDataWaitReason(seen({ steps: 3 }))).toMatch(/^every counted step \(3\) was warm-up/);
    expect(noDataWaitReason(seen({ steps: 30, steady: 27 }))).toMatch(/^no DataLoader was seen: data wait is timed on a DataLoader's batches/);
    expect(noDataWaitReason(seen({ steps: 30, steady: 27, loaders: 1 }))).toMatch(/brim\.track/);
  });
});
