import { describe, expect, it } from "vitest";
import { orFromPrimary, ReplicaPause } from "../../../src/store/read-replica.js";

/** A clock the test moves. */
function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

const unavailable = () => Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });

describe("reads on a replica, with the primary behind it", () => {
  it("given the replica has it, when read, then the replica answers and the primary is not asked", async () => {
    const asked: string[] = [];
    const answer = (where: string, value: string) => async (id: string) => {
      asked.push(`${where} ${id}`);
      return value;
    };
    const read = orFromPrimary(
      { read: answer("replica", "r"), pause: new ReplicaPause() },
      answer("primary", "p"),
      (found) => found !== undefined,
    );
    expect(await read("a")).toBe("r");
    expect(asked).toEqual(["replica a"]);
  });

  it("given the replica has it not (yet), when read, then the primary answers", async () => {
    const read = orFromPrimary(
      { read: async () => undefined, pause: new ReplicaPause() },
      async () => "p",
      (found) => found !== undefined,
    );
    expect(await read()).toBe("p");
  });

  it("given the replica cannot answer, then the primary does, and the replica is left alone for the pause", async () => {
    const time = clock();
    const pause = new ReplicaPause(5000, time.now);
    let replicaReads = 0;
    const read = orFromPrimary(
      {
        read: async () => {
          replicaReads++;
          throw unavailable();
        },
        pause,
      },
      async () => "p",
      () => true,
    );
    expect(await read()).toBe("p");
    expect(await read()).toBe("p");
    expect(replicaReads).toBe(1);
    time.advance(4999);
    expect(await read()).toBe("p");
    expect(replicaReads).toBe(1);
    time.advance(1);
    expect(await read()).toBe("p");
    expect(replicaReads).toBe(2);
  });

  it("given a standby cancels the read for a conflict with recovery (40001), then the primary answers", async () => {
    const read = orFromPrimary(
      {
        read: async () => {
          throw Object.assign(new Error("canceling statement due to conflict with recovery"), {
            code: "40001",
          });
        },
        pause: new ReplicaPause(),
      },
      async () => "p",
      () => true,
    );
    expect(await read()).toBe("p");
  });

  it("given the statement itself fails on the replica, then the error is the caller's, not hidden by the primary", async () => {
    const read = orFromPrimary(
      {
        read: async () => {
          throw Object.assign(new Error("syntax error"), { code: "42601" });
        },
        pause: new ReplicaPause(),
      },
      async () => "p",
      () => true,
    );
    await expect(read()).rejects.toThrow("syntax error");
  });

  it("given no replica, then every read is the primary's", async () => {
    const read = orFromPrimary(
      undefined,
      async () => "p",
      () => false,
    );
    expect(await read()).toBe("p");
  });
});
