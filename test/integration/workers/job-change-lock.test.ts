import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { MAX_LOCKS, withJobChangeLocks } from "../../../workers/job-change-lock.js";

/** The job-change locks (docs/decisions/0041) on the machine's Redis. */
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
afterAll(() => redis.quit());

const prefix = () => `lock-${randomUUID().slice(0, 8)}`;

describe("job-change locks", () => {
  it("given a message another process holds, then it is left out and its lock is left alone", async () => {
    const p = prefix();
    const [mine, theirs] = [randomUUID(), randomUUID()];
    await redis.set(`${p}:job-change:${theirs}`, "another process", "PX", 10_000);
    const held = await withJobChangeLocks(redis, p, [mine, theirs], async (ids) => {
      // Held while the change runs, for no one else to take.
      expect(await redis.get(`${p}:job-change:${mine}`)).not.toBeNull();
      expect(await withJobChangeLocks(redis, p, [mine], async (again) => again)).toEqual([]);
      return ids;
    });
    expect(held).toEqual([mine]);
    expect(await redis.exists(`${p}:job-change:${mine}`)).toBe(0);
    expect(await redis.get(`${p}:job-change:${theirs}`)).toBe("another process");
  });

  it("given a change that throws, then its locks are released and its error comes out", async () => {
    const p = prefix();
    const id = randomUUID();
    await expect(
      withJobChangeLocks(redis, p, [id], async () => {
        throw new Error("the change failed");
      }),
    ).rejects.toThrow("the change failed");
    expect(await redis.exists(`${p}:job-change:${id}`)).toBe(0);
  });

  it("given a lock that ran out and was taken by another, then the release leaves the other's", async () => {
    const p = prefix();
    const id = randomUUID();
    await withJobChangeLocks(redis, p, [id], async () => {
      await redis.set(`${p}:job-change:${id}`, "the next holder", "PX", 10_000);
    });
    expect(await redis.get(`${p}:job-change:${id}`)).toBe("the next holder");
  });

  it("given a Redis that refuses a lock, then those taken are released and its error comes out", async () => {
    const p = prefix();
    const [first, refused] = [randomUUID(), randomUUID()];
    // The second lock refused (as a Redis out of memory refuses writes); every other command real.
    const refusing = new Proxy(redis, {
      get(target, property) {
        if (property === "set")
          return (key: string, ...rest: unknown[]) =>
            key.endsWith(refused)
              ? Promise.reject(new Error("OOM command not allowed"))
              : (target.set as (...args: unknown[]) => Promise<unknown>)(key, ...rest);
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    let ran = false;
    await expect(
      withJobChangeLocks(refusing, p, [first, refused], async () => {
        ran = true;
      }),
    ).rejects.toThrow("OOM");
    expect(ran).toBe(false);
    expect(await redis.exists(`${p}:job-change:${first}`)).toBe(0);
  });

  it("refuses more than MAX_LOCKS messages at once", async () => {
    const ids = Array.from({ length: MAX_LOCKS + 1 }, () => randomUUID());
    await expect(withJobChangeLocks(redis, prefix(), ids, async () => 0)).rejects.toThrow(String(MAX_LOCKS));
  });
});
