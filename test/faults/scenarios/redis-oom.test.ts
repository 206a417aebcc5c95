import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, type RunningProcess } from "../../support/processes.js";
import { FaultScenario } from "../support/scenario.js";

/**
 * Issue 21: Redis refusing every write mid-run (OOM under noeviction) while messages keep coming.
 * The API keeps accepting (the outbox holds the work); the worker says so once, pauses, probes
 * with backoff and is not ready, instead of failing its queue commands thousands of times a
 * second; once Redis takes writes again everything accepted is delivered, once.
 */
const WINDOW_MS = 10_000;
let s: FaultScenario;
let control: Redis;
let worker: RunningProcess;
let metricsPort: number;

beforeAll(async () => {
  s = await FaultScenario.start("redis-oom");
  control = new Redis(s.redis.url);
  metricsPort = await freePort();
  await s.startWeb();
  worker = await s.startWorker({ WORKER_METRICS_PORT: String(metricsPort) });
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await control?.config("SET", "maxmemory", "0").catch(() => undefined);
  control?.disconnect();
  await s?.close();
});

/** CPU seconds (user + system) the process has used so far, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

describe("given Redis refusing every write (OOM) mid-run", () => {
  it("the API accepts, the worker pauses quietly and is not ready, and everything is delivered once Redis recovers", async () => {
    const ids: string[] = [];
    // Retried messages leave jobs waiting in Redis when the writes stop.
    for (let i = 0; i < 10; i++)
      ids.push((await s.send(i % 2 ? "+15005550502" : "+14155550100")).id as string);

    await control.config("SET", "maxmemory", "1");
    const pid = worker.child.pid as number;
    const linesBefore = worker.output().split("\n").length;
    const cpuBefore = cpuSeconds(pid);
    for (let i = 0; i < 30; i++) {
      const sent = await s.send();
      expect(sent.status).toBe(202);
      ids.push(sent.id as string);
    }
    await sleep(WINDOW_MS);
    const lines = worker.output().split("\n").length - linesBefore;
    const cpuShare = (cpuSeconds(pid) - cpuBefore) / (WINDOW_MS / 1000);

    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    const readiness = (await ready.json()) as { checks: { redis: string } };
    expect(ready.status).toBe(503);
    expect(readiness.checks.redis).toContain("refuses writes (oom)");
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^notification_redis_stalled\{[^}]*\} 1$/m);

    // Under 100 lines a minute, and well under a tenth of a core, while stalled.
    expect(lines, worker.output().split("\n").slice(-20).join("\n")).toBeLessThan((100 * WINDOW_MS) / 60_000);
    expect(cpuShare).toBeLessThan(0.1);
    expect(worker.output()).not.toContain("redis.call");

    await control.config("SET", "maxmemory", "0");
    const notFinal = await s.waitForFinal(ids, 60_000);
    expect(notFinal, s.logs()).toEqual([]);
    const audit = await s.audit();
    expect(audit.lost).toEqual([]);
    expect(audit.duplicatedFinal).toEqual([]);
    s.record(
      audit,
      `stalled ${lines} worker log lines in ${WINDOW_MS / 1000} s, ${Math.round(cpuShare * 100)} % CPU`,
    );
  }, 120_000);
});
