/**
 * Where this brim sits in a job of many nodes, from the environment its launcher gave it: the labels
 * that let one Prometheus sum a job across nodes and tell its brims apart.
 *
 * @module
 */

/** The job/node/rank labels of every series; a label with nothing to say is left out. */
export interface ClusterLabels {
  /** `--name`, else the SLURM job's name */
  job?: string;
  /** the node's index in the job: GROUP_RANK (torchrun), NODE_RANK (Lightning), SLURM_NODEID */
  node?: string;
  /** the global rank when brim runs once per rank: RANK, else SLURM_PROCID where SLURM runs more tasks than nodes */
  rank?: string;
  /** the rank on this node: LOCAL_RANK, else SLURM_LOCALID (as for rank) */
  local_rank?: string;
}

const first = (env: NodeJS.ProcessEnv, names: readonly string[]): string | undefined => {
  for (const name of names) {
    const value = env[name]?.trim();
    if (value !== undefined && value !== "") return value;
  }
  return undefined;
};

/**
 * The cluster labels from the run's environment (torchrun's, Lightning's or SLURM's variables) and
 * the run's `--name`. One brim per node under `srun` gets `node` from SLURM_NODEID; brim started once
 * per rank also gets `rank` and `local_rank`.
 *
 * @example
 * ```ts
 * clusterLabels({ SLURM_NODEID: "3", SLURM_JOB_NAME: "llama" }, null); // { job: "llama", node: "3" }
 * clusterLabels({ GROUP_RANK: "1", RANK: "9", LOCAL_RANK: "1" }, "sweep-a"); // { job: "sweep-a", node: "1", rank: "9", local_rank: "1" }
 * ```
 */
export function clusterLabels(env: NodeJS.ProcessEnv, name: string | null | undefined): ClusterLabels {
  const labels: ClusterLabels = {};
  const job = name ?? first(env, ["SLURM_JOB_NAME"]);
  const node = first(env, ["GROUP_RANK", "NODE_RANK", "SLURM_NODEID"]);
  // srun with one task per node: SLURM_PROCID is the node's index, not a rank
  const slurmPerRank = Number(env.SLURM_NTASKS) > Number(env.SLURM_JOB_NUM_NODES ?? env.SLURM_NNODES ?? 1);
  const rank = first(env, slurmPerRank ? ["RANK", "SLURM_PROCID"] : ["RANK"]);
  const localRank = first(env, slurmPerRank ? ["LOCAL_RANK", "SLURM_LOCALID"] : ["LOCAL_RANK"]);
  if (job !== undefined && job !== "") labels.job = job;
  if (node !== undefined) labels.node = node;
  if (rank !== undefined) labels.rank = rank;
  if (localRank !== undefined) labels.local_rank = localRank;
  return labels;
}

/**
 * The labels with `node` (and, without `--name` or a SLURM job name, `job`) taken from the ranks
 * brim found when its own environment has no node: one brim per node wrapping a torchrun agent
 * whose c10d rendezvous gives the node index (GROUP_RANK) to the ranks only. Every rank of this brim
 * must agree; otherwise the labels stay as they are.
 *
 * @example
 * ```ts
 * withRanksNode({ job: "a" }, [{ node: 1, launchId: "r7" }, { node: 1, launchId: "r7" }]); // { job: "a", node: "1" }
 * withRanksNode({}, [{ node: 0, launchId: "r7" }, { node: 0, launchId: "r7" }]); // { job: "r7", node: "0" }
 * ```
 */
export function withRanksNode(labels: ClusterLabels, ranks: readonly { node: number | null; launchId: string | null }[]): ClusterLabels {
  if (ranks.length === 0) return labels;
  const nodes = new Set(ranks.map((r) => r.node));
  const launches = new Set(ranks.map((r) => r.launchId));
  const [node] = nodes;
  const [launch] = launches;
  // torchrun's rendezvous id defaults to "none": not a name to sum a job by
  const named = launch !== null && launch !== undefined && launch !== "" && launch !== "none";
  return {
    ...(labels.job === undefined && launches.size === 1 && named ? { job: launch } : {}),
    ...labels,
    ...(labels.node === undefined && nodes.size === 1 && node !== null && node !== undefined ? { node: String(node) } : {}),
  };
}
