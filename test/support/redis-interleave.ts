import type { Queue } from "bullmq";
import type { Redis } from "ioredis";

/**
 * `client`, every command real, but each of its pipelines first awaits `before` with the keys its
 * `EXISTS` commands name: a test runs something of its own in the middle of a look-up (another
 * process's write landing between two of the code's steps) without a sleep.
 */
export function beforeEachPipeline(client: Redis, before: (existsKeys: string[]) => Promise<unknown>): Redis {
  return new Proxy(client, {
    get(target, property) {
      if (property === "pipeline")
        return () => {
          const pipeline = target.pipeline();
          const exec = pipeline.exec.bind(pipeline);
          const exists = pipeline.exists.bind(pipeline);
          const keys: string[] = [];
          pipeline.exists = ((key: string) => {
            keys.push(key);
            return exists(key);
          }) as typeof pipeline.exists;
          pipeline.exec = async () => {
            await before(keys);
            return exec();
          };
          return pipeline;
        };
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** `queue` talking through `client` instead of its own connection (everything else its own). */
export function throughClient<T extends Queue>(queue: T, client: Redis, own: PropertyDescriptorMap = {}): T {
  return Object.create(queue, { client: { get: () => Promise.resolve(client) }, ...own });
}
