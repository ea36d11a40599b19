// The job/node/rank labels from the environment each launcher gives (torchrun, Lightning, SLURM).
import { describe, expect, it } from "vitest";
import { clusterLabels, withRanksNode } from "../../src/metrics/index.ts";

describe("cluster labels", () => {
  it("take torchrun's GROUP_RANK, RANK and LOCAL_RANK and the run's --name", () => {
    expect(clusterLabels({ GROUP_RANK: "1", RANK: "9", LOCAL_RANK: "1" }, "sweep-a")).toEqual({ job: "sweep-a", node: "1", rank: "9", local_rank: "1" });
  });

  it("under srun with one brim per node: node from SLURM_NODEID, the job from SLURM_JOB_NAME, no rank", () => {
    const env = { SLURM_NODEID: "3", SLURM_PROCID: "3", SLURM_LOCALID: "0", SLURM_NTASKS: "4", SLURM_JOB_NUM_NODES: "4", SLURM_JOB_NAME: "llama" };
    expect(clusterLabels(env, undefined)).toEqual({ job: "llama", node: "3" });
    expect(clusterLabels(env, "mine").job).toBe("mine");
  });

  it("under srun with one brim per GPU: SLURM_PROCID and SLURM_LOCALID are the ranks", () => {
    const env = { SLURM_NODEID: "1", SLURM_PROCID: "13", SLURM_LOCALID: "5", SLURM_NTASKS: "16", SLURM_JOB_NUM_NODES: "2" };
    expect(clusterLabels(env, undefined)).toEqual({ node: "1", rank: "13", local_rank: "5" });
  });

  it("say nothing where the environment says nothing", () => {
    expect(clusterLabels({ RANK: " ", PATH: "/usr/bin" }, undefined)).toEqual({});
  });

  it("one brim per torchrun agent (c10d rendezvous): the node and the launch come from its ranks, when they agree", () => {
    const ranks = [
      { node: 1, launchId: "rdzv-7" },
      { node: 1, launchId: "rdzv-7" },
    ];
    expect(withRanksNode({}, ranks)).toEqual({ job: "rdzv-7", node: "1" });
    expect(withRanksNode({ job: "mine" }, ranks)).toEqual({ job: "mine", node: "1" });
    // the environment's own node wins; ranks of two nodes (one brim over a whole job) give no node
    expect(withRanksNode({ node: "3" }, ranks)).toEqual({ job: "rdzv-7", node: "3" });
    expect(
      withRanksNode({}, [
        { node: 0, launchId: "a" },
        { node: 1, launchId: "a" },
      ]),
    ).toEqual({ job: "a" });
    expect(withRanksNode({}, [{ node: null, launchId: null }])).toEqual({});
    expect(withRanksNode({}, [{ node: 0, launchId: "none" }])).toEqual({ node: "0" });
    expect(withRanksNode({ job: "x" }, [])).toEqual({ job: "x" });
  });
});
