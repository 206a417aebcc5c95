import calculateSlot from "cluster-key-slot";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/runtime/config.js";
import {
  DELIVERY_QUEUE,
  deliveryQueueName,
  LEGACY_DELIVERY_QUEUE,
  MAX_QUEUE_SHARDS,
  shardOf,
} from "../../../src/store/delivery-queue.js";

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

describe("deliveryQueueName: one fixed hash tag per shard", () => {
  it("names shard k the same whatever the count: a change of QUEUE_SHARDS only adds or drops shards", () => {
    expect(deliveryQueueName(0)).toBe(DELIVERY_QUEUE);
    expect(deliveryQueueName(1)).toBe("{deliveries-1-155}");
    expect(deliveryQueueName(2)).toBe("{deliveries-2-138}");
    const all = Array.from({ length: MAX_QUEUE_SHARDS }, (_, k) => deliveryQueueName(k));
    expect(new Set(all).size).toBe(MAX_QUEUE_SHARDS);
    expect(all).not.toContain(LEGACY_DELIVERY_QUEUE);
    expect(() => deliveryQueueName(MAX_QUEUE_SHARDS)).toThrow(RangeError);
  });

  it("puts the first N shards, shard 0 included, in N different equal slot ranges for every N up to 12", () => {
    for (let shards = 1; shards <= 12; shards++) {
      const ranges = Array.from({ length: shards }, (_, k) => {
        const slot = calculateSlot(tagOf(deliveryQueueName(k)));
        return Array.from({ length: shards }, (_, r) => r).find(
          (r) => slot >= Math.floor((r * SLOTS) / shards) && slot < Math.floor(((r + 1) * SLOTS) / shards),
        );
      });
      expect(new Set(ranges).size, `QUEUE_SHARDS=${shards}: ranges ${ranges}`).toBe(shards);
    }
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
