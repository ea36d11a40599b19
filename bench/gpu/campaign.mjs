#!/usr/bin/env node
// brim's GPU measurement campaign (issue 7). Start it through bench/gpu/run.sh, which finds a Node
// first; `bash bench/gpu/run.sh --help` lists the parts and options, bench/gpu/README.md explains them.
import { Campaign, PARTS, parseArgs } from "./lib/common.mjs";
import { campaignPlan } from "./lib/jobs.mjs";
import { guard } from "./lib/guard.mjs";
import { overhead } from "./lib/overhead.mjs";
import { planAccuracy } from "./lib/plan-accuracy.mjs";
import { snapshots } from "./lib/snapshots.mjs";
import { tunePart } from "./lib/tune.mjs";
import { utilization } from "./lib/utilization.mjs";

const RUNNERS = { "plan-accuracy": planAccuracy, guard, tune: tunePart, utilization, overhead, snapshots };

const opts = parseArgs(process.argv.slice(2));
const campaign = new Campaign(opts);
await campaign.init();
const plan = campaignPlan(opts);
const parts = opts.part === "all" ? PARTS : [opts.part];
for (const part of parts) {
  // parts run in order (utilization needs the tune's winners): once one stops at the budget, stop
  if (campaign.remainingS() <= 0 || campaign.stoppedByBudget) break;
  campaign.log(`part ${part}: jobs ${plan.jobs.map((j) => j.name).join(", ")}`);
  await RUNNERS[part](campaign, plan);
}
const left = campaign.stoppedByBudget ? " (budget reached: run the same command again to go on)" : "";
campaign.log(`done in ${((Date.now() - campaign.startedMs) / 1000).toFixed(0)}s${left}; results in ${campaign.outDir}`);
