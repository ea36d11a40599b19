// Trial copies a killed `brim tune` left beside the user's config: found, removed once their tune no
// longer runs (real files, a real store), and the tune named as interrupted rather than "no winner".
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { interruptedMessage, removeStaleTrialCopies, trialCopiesOf, tuneState } from "../../src/configs/trial-copies.ts";
import { RunStore } from "../../src/record/store.ts";
import { TUNE_ID, writeSyntheticTune } from "../analyze/synthetic.ts";

const root = mkdtempSync(join(tmpdir(), "brim-trial-copies-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("trial copies of an interrupted tune", () => {
  it("are left while the tune runs, removed once it is quiet; the tune reads as interrupted", async () => {
    const store = new RunStore(join(root, "store"));
    const { tune } = await writeSyntheticTune(store);
    await store.writeTune({ ...tune, ended_at: null, winner: null, stop_reason: null });
    const config = join(root, "conf.yaml");
    writeFileSync(config, "batch_size: 32\n");
    const copy = join(root, `.conf.yaml.brim-trial-${TUNE_ID}-3.yaml`);
    writeFileSync(copy, "batch_size: 128\n");
    const unrelated = join(root, ".other.yaml.brim-trial-20261122-101000-aa01-1.yaml");
    writeFileSync(unrelated, "x: 1\n");
    expect(await trialCopiesOf(config)).toEqual([{ path: copy, tuneId: TUNE_ID, index: 3 }]);

    // Just written: the tune (or its newest trial) wrote a moment ago, so it may be running.
    expect(await tuneState(store, TUNE_ID)).toBe("running");
    expect(await removeStaleTrialCopies(config, store)).toEqual([]);
    expect(existsSync(copy)).toBe(true);

    const later = Date.now() + 10 * 60_000;
    expect(await tuneState(store, TUNE_ID, later)).toBe("interrupted");
    expect(await removeStaleTrialCopies(config, store, later)).toEqual([copy]);
    expect(existsSync(copy)).toBe(false);
    expect(existsSync(unrelated)).toBe(true);
    expect(readFileSync(config, "utf8")).toBe("batch_size: 32\n");
    expect(interruptedMessage(await store.readTune(TUNE_ID))).toMatch(
      new RegExp(
        `^tune ${TUNE_ID} was interrupted \\(brim tune ended without finishing it, after 6 trials, 5 finished\\): nothing to apply; run brim tune again$`,
      ),
    );
  });

  it("an ended tune's copies go at once; a copy of a tune this store does not know only once a day old", async () => {
    const store = new RunStore(join(root, "store2"));
    await writeSyntheticTune(store);
    expect(await tuneState(store, TUNE_ID)).toBe("ended");
    const config = join(root, "b.yaml");
    writeFileSync(config, "a: 1\n");
    const ended = join(root, `.b.yaml.brim-trial-${TUNE_ID}-0.yaml`);
    const foreign = join(root, ".b.yaml.brim-trial-20260101-000000-beef-2.yaml");
    writeFileSync(ended, "a: 2\n");
    writeFileSync(foreign, "a: 3\n");
    expect(await removeStaleTrialCopies(config, store)).toEqual([ended]);
    expect(existsSync(foreign)).toBe(true);
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    utimesSync(foreign, twoDaysAgo, twoDaysAgo);
    expect(await removeStaleTrialCopies(config, store)).toEqual([foreign]);
  });
});
