import type { Socket } from "node:net";
import { Cluster, type Redis } from "ioredis";

const patched = Symbol("coalesceWrites");

/**
 * Makes a Redis client send everything it writes during one turn of the event loop in a single
 * socket write. ioredis writes each command as it is issued, and concurrent requests issue theirs
 * from separate I/O callbacks, so its own auto-pipelining (one tick) never groups them; on this
 * kind of machine each write to a local socket is a costly system call. The socket is corked at
 * the first write of a turn and uncorked right after the turn's I/O callbacks (setImmediate), so
 * a command waits at most until then. The socket is re-patched after every reconnect.
 */
export function coalesceWrites(redis: Redis | Cluster): void {
  if (redis instanceof Cluster) {
    // A cluster client holds one connection per node, made as it discovers them.
    redis.on("+node", (node: Redis) => coalesceWrites(node));
    for (const node of redis.nodes()) coalesceWrites(node);
    return;
  }
  const patch = () => {
    const stream = redis.stream as (Socket & { [patched]?: true }) | undefined;
    if (!stream || stream[patched]) return;
    stream[patched] = true;
    const write = stream.write;
    let corked = false;
    stream.write = function coalescedWrite(this: Socket, ...args: Parameters<Socket["write"]>) {
      if (!corked) {
        corked = true;
        this.cork();
        setImmediate(() => {
          corked = false;
          this.uncork();
        });
      }
      return write.apply(this, args);
    } as Socket["write"];
  };
  redis.on("connect", patch);
  patch();
}
