// Config copies a killed `brim plan -- <command>` left beside the user's config (`.brim-plan-`) are
// swept as a killed tune's are: removed once the measuring run that used them has ended or gone quiet,
// left while it runs, and left for a day when the store knows no run of theirs (another store).
import { existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { brimCopiesOf, copyPathOf, planCopyState, removeStaleTrialCopies } from "../../src/configs/trial-copies.ts";
import { newRecordId, RunStore } from "../../src/record/store.ts";
import { TUNE_ID, writeSyntheticRun } from "../analyze/synthetic.ts";

const root = mkdtempSync(join(tmpdir(), "brim-plan-copies-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("a plan's config copies", () => {
  it("are found with a tune's, and removed once their measuring run has ended or is quiet, not while it runs", async () => {
    const store = new RunStore(join(root, "store"));
    const config = join(root, "conf.yaml");
    writeFileSync(config, "batch_size: 32\n");
    const now = Date.now();
    const session = newRecordId(new Date(now - 2000));
    const ended = copyPathOf(config, "plan", session, 0);
    const running = copyPathOf(config, "plan", session, 1);
    const trial = copyPathOf(config, "trial", TUNE_ID, 4);
    for (const copy of [ended, running, trial]) writeFileSync(copy, "batch_size: 16\n");
    await writeSyntheticRun(store, { command: ["python", "train.py", "--config", ended] }, new Date(now - 1000));
    const live = await writeSyntheticRun(store, { command: ["python", "train.py", "--config", running], running: true }, new Date(now));
    expect((await brimCopiesOf(config)).map((c) => `${c.kind} ${c.owner} ${c.index}`).sort()).toEqual([
      `plan ${session} 0`,
      `plan ${session} 1`,
      `trial ${TUNE_ID} 4`,
    ]);

    expect(await planCopyState(store, { path: ended, owner: session })).toBe("ended");
    expect(await planCopyState(store, { path: running, owner: session })).toBe("running");
    // the tune store knows no such tune: its trial copy stays (it is new)
    expect(await removeStaleTrialCopies(config, store)).toEqual([ended]);
    expect(existsSync(running)).toBe(true);
    expect(existsSync(trial)).toBe(true);

    // the plan was killed: its run never ended and went quiet
    const later = now + 10 * 60_000;
    expect(await planCopyState(store, { path: running, owner: session }, later)).toBe("interrupted");
    expect(await removeStaleTrialCopies(config, store, later)).toEqual([running]);
    expect(existsSync(config)).toBe(true);
    live.writer.flush();
  });

  it("a copy no run in this store names stays until a day old", async () => {
    const store = new RunStore(join(root, "store2"));
    const config = join(root, "b.toml");
    writeFileSync(config, "batch_size = 1\n");
    const copy = copyPathOf(config, "plan", newRecordId(), 0);
    writeFileSync(copy, "batch_size = 2\n");
    expect(await planCopyState(store, { path: copy, owner: "20200101-000000-0000" })).toBe("missing");
    expect(await removeStaleTrialCopies(config, store)).toEqual([]);
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    utimesSync(copy, twoDaysAgo, twoDaysAgo);
    expect(await removeStaleTrialCopies(config, store)).toEqual([copy]);
  });
});
