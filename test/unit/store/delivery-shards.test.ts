import calculateSlot from "cluster-key-slot";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/runtime/config.js";
import { DELIVERY_QUEUE, deliveryQueueName, shardOf } from "../../../src/store/delivery-queue.js";

const SLOTS = 16384;
const tagOf = (name: string) => /\{([^}]+)\}/.exec(name)?.[1] ?? name;

describe("shardOf: a message's delivery queue shard", () => {
  it("is the same for the same id, whatever process or version asks (FNV-1a of the id)", () => {
    const id = "01a210a0-acad-7279-9f03-f713ac136b62";
    expect(shardOf(id, 3)).toBe(shardOf(id, 3));
    // Fixed values: a change here would move queued messages between shards on upgrade.
    expect([1, 2, 3, 4, 7].map((n) => shardOf(id, n))).toMatchInlineSnapshot(`
      [
        0,
        0,
        2,
        2,
        3,
      ]
    `);
  });

  it("spreads time-ordered ids evenly over the shards", () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 3000; i++) {
      const shard = shardOf(uuidv7(), 3);
      counts[shard] = (counts[shard] ?? 0) + 1;
    }
    for (const count of counts) expect(count).toBeGreaterThan(850);
  });
});

describe("deliveryQueueName: one hash tag per shard", () => {
  it("keeps {deliveries} as shard 0 for every shard count (one shard is the queue of before)", () => {
    for (const shards of [1, 2, 3, 8]) expect(deliveryQueueName(0, shards)).toBe(DELIVERY_QUEUE);
  });

  it("puts shard k's slot in the k-th of equal slot ranges, so an evenly split cluster spreads them", () => {
    for (const shards of [2, 3, 4, 6, 16]) {
      const names = Array.from({ length: shards }, (_, k) => deliveryQueueName(k, shards));
      expect(new Set(names).size).toBe(shards);
      names.forEach((name, k) => {
        if (k === 0) return;
        const slot = calculateSlot(tagOf(name));
        expect(slot).toBeGreaterThanOrEqual(Math.floor((k * SLOTS) / shards));
        expect(slot).toBeLessThan(Math.floor(((k + 1) * SLOTS) / shards));
      });
    }
    expect(deliveryQueueName(2, 3)).toBe("{deliveries-2-3}");
  });
});

describe("QUEUE_SHARDS and QUEUE_SHARDS_CONSUMED", () => {
  it("consumes every shard unless told which", () => {
    expect(loadConfig({ NODE_ENV: "test" }).QUEUE_SHARDS_CONSUMED).toEqual([0]);
    expect(loadConfig({ NODE_ENV: "test", QUEUE_SHARDS: "3" }).QUEUE_SHARDS_CONSUMED).toEqual([0, 1, 2]);
    expect(
      loadConfig({ NODE_ENV: "test", QUEUE_SHARDS: "3", QUEUE_SHARDS_CONSUMED: "2, 0,2" })
        .QUEUE_SHARDS_CONSUMED,
    ).toEqual([0, 2]);
  });

  it("refuses a shard that does not exist, naming the variable", () => {
    expect(() => loadConfig({ NODE_ENV: "test", QUEUE_SHARDS: "2", QUEUE_SHARDS_CONSUMED: "0,2" })).toThrow(
      /QUEUE_SHARDS_CONSUMED: there is no shard 2 \(QUEUE_SHARDS=2: shards 0 to 1\)/,
    );
    expect(() => loadConfig({ NODE_ENV: "test", QUEUE_SHARDS_CONSUMED: "one" })).toThrow(
      /QUEUE_SHARDS_CONSUMED: must be shard numbers/,
    );
    expect(() => loadConfig({ NODE_ENV: "test", QUEUE_SHARDS: "0" })).toThrow(/QUEUE_SHARDS:/);
  });
});
