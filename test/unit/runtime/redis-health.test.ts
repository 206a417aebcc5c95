import pino from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loggableError } from "../../../src/runtime/logger.js";
import { persistentRedisError, RedisHealth } from "../../../src/runtime/redis-health.js";

describe("persistentRedisError", () => {
  it.each([
    ["READONLY You can't write against a read only replica.", "readonly"],
    ["OOM command not allowed when used memory > 'maxmemory'.", "oom"],
    ["CROSSSLOT Keys in request don't hash to the same slot", "cluster"],
    ["MOVED 3999 127.0.0.1:6381", "cluster"],
    ["NOAUTH Authentication required.", "auth"],
    ["WRONGPASS invalid username-password pair or user is disabled.", "auth"],
    [
      "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
      "misconf",
    ],
    // Redis 7: the code first, the script after.
    ["READONLY You can't write against a read only replica. script: 1a2b, on @user_script:12.", "readonly"],
    // Redis 6: the script's error wrapped, its code after a dash.
    [
      "ERR Error running script (call to f_1a2b): @user_script:4: @user_script: 4: -READONLY You can't write against a read only replica.",
      "readonly",
    ],
  ])("given %s, then it is %s", (message, kind) => {
    expect(persistentRedisError(new Error(message))).toBe(kind);
  });

  it.each([
    "connect ECONNREFUSED 127.0.0.1:6379",
    "Connection is closed.",
    "ERR unknown command 'FOO'",
    // A cluster failing over: over in seconds, the job is retried (no worker paused for it).
    "CLUSTERDOWN The cluster is down",
    "CLUSTERDOWN Hash slot not served",
    "TRYAGAIN Multiple keys request during rehashing of slot",
  ])("given %s, then it is not persistent", (message) => {
    expect(persistentRedisError(new Error(message))).toBeUndefined();
  });
});

describe("RedisHealth", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function health(probe: () => Promise<unknown>) {
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(line) });
    const events: string[] = [];
    const h = new RedisHealth({
      logger,
      probe,
      onStalled: (stall) => events.push(`stalled:${stall.kind}`),
      onRecovered: () => events.push("recovered"),
      firstProbeMs: 1000,
      maxProbeMs: 8000,
      reportEveryMs: 60_000,
    });
    return { h, lines, events };
  }

  it("given a dropped connection, then it is not its business", () => {
    const { h, events } = health(async () => undefined);
    expect(h.report(new Error("connect ECONNREFUSED 127.0.0.1:6379"))).toBe(false);
    expect(h.stall).toBeUndefined();
    expect(events).toEqual([]);
  });

  it("given a storm of OOM errors, then it stalls once, logs once, and counts the rest", () => {
    const { h, lines, events } = health(() => Promise.reject(new Error("OOM")));
    for (let i = 0; i < 1000; i++) expect(h.report(new Error("OOM command not allowed"))).toBe(true);
    expect(events).toEqual(["stalled:oom"]);
    expect(lines).toHaveLength(1);
    expect(h.stall).toMatchObject({ kind: "oom", errors: 1000 });
    h.close();
  });

  it("while the stall lasts, then it says so once a minute with the count", async () => {
    // Probes that fail without a Redis error (the connection dropped) add nothing to the count.
    const { h, lines } = health(() => Promise.reject(new Error("Connection is closed.")));
    h.report(new Error("READONLY You can't write against a read only replica."));
    for (let i = 0; i < 50; i++) h.report(new Error("READONLY"));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(lines).toHaveLength(2);
    expect(JSON.parse(lines[1] as string)).toMatchObject({ redisError: "readonly", errors: 50 });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(lines).toHaveLength(2); // nothing new to report
    h.close();
  });

  it("given it is closed while a probe is under way, then the probe's success resumes nothing", async () => {
    let answer: () => void = () => undefined;
    const { h, events } = health(() => new Promise<void>((resolve) => (answer = resolve)));
    h.report(new Error("OOM command not allowed"));
    await vi.advanceTimersByTimeAsync(1000); // the probe starts
    h.close();
    answer();
    await vi.advanceTimersByTimeAsync(0);
    expect(events).toEqual(["stalled:oom"]);
  });

  it("probes with a doubling delay, capped, and recovers once a probe passes", async () => {
    const probes: number[] = [];
    let failing = true;
    const { h, events } = health(async () => {
      probes.push(Date.now());
      if (failing) throw new Error("OOM command not allowed");
    });
    const start = Date.now();
    h.report(new Error("OOM command not allowed"));
    await vi.advanceTimersByTimeAsync(1000 + 2000 + 4000 + 8000 + 8000);
    expect(probes.map((at) => at - start)).toEqual([1000, 3000, 7000, 15000, 23000]);
    failing = false;
    await vi.advanceTimersByTimeAsync(8000);
    expect(events).toEqual(["stalled:oom", "recovered"]);
    expect(h.stall).toBeUndefined();
    h.close();
  });
});

describe("logging a Redis reply error", () => {
  it("keeps the command's name and the first line, never the script or the arguments", () => {
    const error = Object.assign(
      new Error("ERR Error running script (call to f_1a2b): @user_script:42: OOM command not allowed"),
      {
        name: "ReplyError",
        command: { name: "evalsha", args: ["1a2b", "local rcall = redis.call", "+14155550100"] },
      },
    );
    const logged = JSON.stringify(loggableError(error));
    const safe = loggableError(error) as Error & { command?: string };
    expect(safe.message).toContain("OOM command not allowed");
    expect(safe.command).toBe("evalsha");
    expect(logged).not.toContain("redis.call");
    expect(logged).not.toContain("+14155550100");
  });
});
