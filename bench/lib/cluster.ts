import { RedisClusterUnderTest } from "../../test/support/redis-topologies.js";
import { type EndToEndResult, measureEndToEnd, type Settings, withStack } from "./scenarios.js";

/**
 * Scenario `e2e-cluster` (issue 18): e2e's run on a local Redis Cluster of three masters
 * (`redis-server --cluster-enabled`, on free ports, torn down after) with `QUEUE_SHARDS=3`, so
 * each master holds one delivery queue; its figures are compared with e2e's on the one Redis
 * node, run just before it. Redis's CPU per message is every `redis-server` of the machine's, the
 * cluster's three included.
 */
export interface EndToEndClusterResult extends EndToEndResult {
  redis: { masters: number; shards: number };
}

const MASTERS = 3;

export async function endToEndClusterScenario(settings: Settings): Promise<EndToEndClusterResult> {
  const cluster = await RedisClusterUnderTest.start({ masters: MASTERS });
  try {
    const env = {
      ...settings.env,
      // The cluster instead of the one node (REDIS_URL unset: a start-up refuses both).
      REDIS_URL: "",
      REDIS_CLUSTER_NODES: cluster.seeds,
      QUEUE_SHARDS: String(MASTERS),
    };
    return await withStack("e2ecl", { ...settings, env }, async (stack) => {
      const { endToEnd } = await measureEndToEnd(stack, settings);
      return { ...endToEnd, redis: { masters: MASTERS, shards: MASTERS } };
    });
  } finally {
    await cluster.close();
  }
}
