import { RedisClusterUnderTest } from "../../test/support/redis-topologies.js";
import { endToEndRun, type Interleaved, interleaved } from "./interleaved.js";
import type { EndToEndResult, Settings } from "./scenarios.js";

/**
 * Scenario `e2e-cluster` (issue 18): e2e's run on a local Redis Cluster of three masters
 * (`redis-server --cluster-enabled`, on free ports, torn down after) with `QUEUE_SHARDS=3`, so
 * each master holds one delivery queue, beside e2e's run on the one Redis node: twice each,
 * interleaved (interleaved.ts), the targets' ratios of their sums. Redis's CPU per message is
 * every `redis-server` of the machine's, the cluster's three included.
 */
export interface EndToEndClusterResult extends Interleaved<EndToEndResult> {
  redis: { masters: number; shards: number };
}

const MASTERS = 3;

export async function endToEndClusterScenario(settings: Settings): Promise<EndToEndClusterResult> {
  const compared = await interleaved(
    (round) => endToEndRun(settings, `e2enode${round}`),
    (round) => clusterRun(settings, round),
  );
  return { ...compared, redis: { masters: MASTERS, shards: MASTERS } };
}

/** One run on a cluster of its own (started before the stack, stopped after it). */
async function clusterRun(settings: Settings, round: number): Promise<EndToEndResult> {
  const cluster = await RedisClusterUnderTest.start({ masters: MASTERS });
  try {
    const env = {
      ...settings.env,
      // The cluster instead of the one node (REDIS_URL unset: a start-up refuses both).
      REDIS_URL: "",
      REDIS_CLUSTER_NODES: cluster.seeds,
      QUEUE_SHARDS: String(MASTERS),
    };
    return await endToEndRun({ ...settings, env }, `e2ecl${round}`);
  } finally {
    await cluster.close();
  }
}
