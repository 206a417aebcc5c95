import { Cluster } from "ioredis";
import { afterEach, describe, expect, it, onTestFailed } from "vitest";
import { DELIVERY_QUEUE, DeliveryQueues, shardOf } from "../../../src/store/delivery-queue.js";
import { freePort, waitForHttp } from "../../support/processes.js";
import { RedisClusterUnderTest, SentinelGroupUnderTest } from "../../support/redis-topologies.js";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario } from "../support/scenario.js";

/**
 * Issue 18's drill (decision 0041): two web processes and three workers of the Procfile on a
 * Redis Cluster (3 masters, 3 replicas, QUEUE_SHARDS=3) and on a Sentinel-managed primary (a
 * replica, three Sentinels). Messages of every tier and simulator outcome flow in; a third of the
 * way the Redis master holding shard 0 (the primary) is SIGKILLed and its replica takes over; two
 * thirds of the way a worker is SIGKILLed. Every message accepted reaches one final state, none is
 * lost, none has two, and the critical lane keeps delivering through the failover.
 * `REDIS_DRILL_MESSAGES` (default 3000, as the issue asks) sets the flow's size.
 */
const TOTAL = Number(process.env.REDIS_DRILL_MESSAGES ?? 3000);

const cleanups: Array<() => Promise<unknown>> = [];
/** Each test's servers and processes go before the next test starts (a 2-core machine). */
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/** Recipients of every kind of outcome (the SMS simulator), and the tiers, in turn. */
const OUTCOMES = [
  "+14155550100",
  "+15005550501",
  "+15005550001",
  "+14155550101",
  "+15005550500",
  "+15005550502",
];
const TYPES = [
  "OTP",
  "NEWS_UPDATE",
  undefined,
  "NEWS_UPDATE",
  "DEPENDENCY_FAILURE",
  undefined,
  "NEWS_UPDATE",
];

interface Sent {
  id: string;
  critical: boolean;
  at: number;
}

/** Sends from `senders` loops, to the web processes in turn, until `total` are accepted. */
function sendFlow(s: FaultScenario, bases: string[], senders: number, total: number) {
  let next = 0;
  const sent: Sent[] = [];
  const loops = Array.from({ length: senders }, async () => {
    while (next < total) {
      const n = next++;
      const type = TYPES[n % TYPES.length];
      const response = await fetch(`${bases[n % bases.length]}/api/v1/notifications/sms`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": s.apiKey },
        body: JSON.stringify({
          payload: { to: OUTCOMES[n % OUTCOMES.length], body: `drill ${n}` },
          ...(type ? { notification_type: type } : {}),
        }),
        signal: AbortSignal.timeout(15_000),
      });
      const body = (await response.json()) as { request_id?: string };
      expect(response.status, JSON.stringify(body)).toBe(202);
      s.accepted.push(String(body.request_id));
      sent.push({ id: String(body.request_id), critical: type === "OTP", at: Date.now() });
    }
  });
  return { sent, done: Promise.all(loops) };
}

/**
 * Until `count` messages are accepted. A sender's failure (a refused send, its expect) ends the
 * wait at once with that failure, as does a flow that ended short, instead of spinning until the
 * test's timeout.
 */
async function untilSent(flow: { sent: Sent[]; done: Promise<unknown> }, count: number): Promise<void> {
  let ended = false;
  const endedShort = flow.done.then(() => {
    ended = true;
    if (flow.sent.length < count)
      throw new Error(`the flow ended after ${flow.sent.length} sends, before ${count}`);
  });
  const reached = (async () => {
    while (flow.sent.length < count && !ended) await new Promise((resolve) => setTimeout(resolve, 20));
  })();
  await Promise.race([reached, endedShort]);
}

async function runDrill(
  s: FaultScenario,
  what: string,
  failover: () => Promise<void>,
  /** Where the jobs of messages still open are, for a failure's message. */
  inspect?: (ids: string[]) => Promise<string>,
): Promise<void> {
  onTestFailed(() => {
    console.error(s.logs());
    // The tails above may be all routine lines: every warning and error of every process too.
    for (const { name, process } of s.processes) {
      const lines = process
        .output()
        .split("\n")
        .filter((line) => /"level":(40|50|60)/.test(line));
      console.error(`----- ${name}: ${lines.length} warnings and errors\n${lines.slice(-40).join("\n")}`);
    }
  });
  await s.startWeb();
  const secondPort = await freePort();
  await s.startWeb({ PORT: String(secondPort) });
  const bases = [s.base, `http://127.0.0.1:${secondPort}`];
  await waitForHttp(`${bases[1]}/healthz`);
  await s.onboard();
  await Promise.all([s.superviseWorker(), s.superviseWorker()]);
  const doomed = await s.startWorker();

  const started = Date.now();
  const flow = sendFlow(s, bases, 8, TOTAL);
  await untilSent(flow, Math.floor(TOTAL / 3));
  const failoverStarted = Date.now();
  const killedAt = flow.sent.length;
  await failover();
  const failoverEnded = Date.now();
  await untilSent(flow, Math.floor((2 * TOTAL) / 3));
  await doomed.stop("SIGKILL");
  await flow.done;
  const open = await s.waitForFinal(s.accepted, 60_000);
  expect(open, open.length > 0 && inspect ? await inspect(open) : undefined).toEqual([]);

  // The critical lane through the failover: OTPs accepted while it happened, accept to final.
  const finals = await s.sql<{ message_id: string; at: Date | string }[]>`
    select message_id, occurred_at as at from message_events
    where message_id in ${s.sql(flow.sent.filter((m) => m.critical).map((m) => m.id))}
      and type in ('success', 'failed', 'rejected')`;
  const finalAt = new Map(finals.map((row) => [row.message_id, new Date(row.at).getTime()]));
  const during = flow.sent.filter(
    (m) => m.critical && m.at >= failoverStarted && m.at <= failoverEnded + 1000,
  );
  const latencies = during
    .map((m) => (finalAt.get(m.id) ?? Number.POSITIVE_INFINITY) - m.at)
    .sort((a, b) => a - b);
  // No OTP sent during the failover would test nothing.
  expect(during.length, "OTPs sent during the failover").toBeGreaterThan(0);
  const worst = latencies.at(-1) ?? Number.POSITIVE_INFINITY;
  // The backlog those OTPs had to pass: how long the other messages sent in the same window took.
  const backlog = await s.sql<{ message_id: string; at: Date | string }[]>`
    select message_id, occurred_at as at from message_events
    where message_id in ${s.sql(during.length ? windowIds(flow.sent, failoverStarted, failoverEnded) : ["none"])}
      and type in ('success', 'failed', 'rejected')`;
  const sentAt = new Map(flow.sent.map((m) => [m.id, m.at]));
  const backlogWorst = Math.max(
    0,
    ...backlog.map((row) => new Date(row.at).getTime() - (sentAt.get(row.message_id) ?? 0)),
  );

  const audit = await s.audit();
  s.record(
    audit,
    `2 web, 3 workers; ${what} SIGKILLed after ${killedAt} sends, new primary in ${((failoverEnded - failoverStarted) / 1000).toFixed(1)} s; ` +
      `${during.length} OTPs sent meanwhile, final in ≤ ${(worst / 1000).toFixed(1)} s (the other messages of that window: ≤ ${(backlogWorst / 1000).toFixed(1)} s); a worker SIGKILLed at ${Math.floor((2 * TOTAL) / 3)}; ` +
      `flow ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  await expectSoundOutcome(s, audit);
  // The failover's own seconds plus a little (measured: under 1 s more): the critical lane did
  // not wait for the backlog; and, when there was a backlog longer than that, the OTPs beat it.
  const bound = failoverEnded - failoverStarted + 5_000;
  expect(worst).toBeLessThan(bound);
  if (backlogWorst > bound) expect(worst).toBeLessThan(backlogWorst);
}

/** The messages other than OTPs sent while the failover happened (and a second after). */
function windowIds(sent: Sent[], from: number, to: number): string[] {
  const ids = sent.filter((m) => !m.critical && m.at >= from && m.at <= to + 1000).map((m) => m.id);
  return ids.length ? ids : ["none"];
}

const fastWorkers = {
  // A killed worker's jobs come back within seconds, not 30 s.
  WORKER_LOCK_DURATION_MS: "2000",
  WORKER_STALLED_INTERVAL_MS: "1000",
};

describe("given a Redis Cluster whose shard-0 master dies mid-flow, and then a worker", () => {
  it("delivers every accepted message once", async () => {
    const cluster = await RedisClusterUnderTest.start({ masters: 3, replicasPerMaster: 1 });
    cleanups.push(() => cluster.close());
    const s = await FaultScenario.start("redis-cluster-failover", {
      // Three shards: one per master; the one killed holds shard 0.
      env: { ...fastWorkers, REDIS_URL: "", REDIS_CLUSTER_NODES: cluster.seeds, QUEUE_SHARDS: "3" },
    });
    cleanups.push(() => s.close());
    await runDrill(
      s,
      "the master of shard 0",
      async () => {
        const master = await cluster.masterOf(`${s.env.QUEUE_PREFIX}:${DELIVERY_QUEUE}:meta`);
        await cluster.killMaster(master);
      },
      async (ids) => {
        const client = new Cluster(
          cluster.nodes.filter((n) => n.running).map((n) => ({ host: "127.0.0.1", port: n.port })),
        );
        const queues = DeliveryQueues.create(client, s.env.QUEUE_PREFIX as string, 3);
        try {
          const states = await Promise.all(
            ids
              .slice(0, 20)
              .map(async (id) => `${shardOf(id, 3)}:${await queues.forMessage(id).getJobState(id)}`),
          );
          const statuses = await s.statuses(ids);
          const counts = await Promise.all(queues.all.map((q) => q.getJobCounts()));
          return `open ${ids.length}; statuses ${[...statuses.values()].slice(0, 20).join(",")}; first jobs (shard:state) ${states.join(" ")}; shard counts ${JSON.stringify(counts)}`;
        } finally {
          await queues.close();
          client.disconnect();
        }
      },
    );
    // The web processes' limits ran on the cluster too: the daily quota counted the sends (all
    // but those of a failover that hit its key's master: the quota fails open). When the key's
    // master is the one killed, the sends of the failover's seconds go uncounted (a CI run counted
    // 1,466 of 3,000 with a 4.5 s failover), and the replica may miss the last writes before the
    // kill: at least nine in ten of the sends before the kill are counted, whichever master held it.
    const client = new Cluster(
      cluster.nodes.filter((n) => n.running).map((n) => ({ host: "127.0.0.1", port: n.port })),
    );
    try {
      const day = new Date().toISOString().slice(0, 10);
      const counted = Number(
        await client.get(`${s.env.QUEUE_PREFIX}:{limits}:quota:send:${s.organizationId}:${day}`),
      );
      expect(counted).toBeGreaterThan(0.9 * Math.floor(TOTAL / 3));
    } finally {
      client.disconnect();
    }
  }, 180_000);
});

describe("given a Sentinel-managed primary killed mid-flow, and then a worker", () => {
  it("delivers every accepted message once", async () => {
    const group = await SentinelGroupUnderTest.start();
    cleanups.push(() => group.close());
    const s = await FaultScenario.start("redis-sentinel-failover", {
      env: {
        ...fastWorkers,
        REDIS_URL: "",
        REDIS_SENTINELS: group.addresses,
        REDIS_SENTINEL_NAME: group.name,
        QUEUE_SHARDS: "3",
      },
    });
    cleanups.push(() => s.close());
    await runDrill(s, "the primary", () => group.failover("kill"));
  }, 180_000);
});
