import type postgres from "postgres";
import type { Database } from "../../db/client.js";
import { isDatabaseUnavailable, postgresError } from "../../db/errors.js";

/**
 * A read replica of the primary (DATABASE_READ_URL): its clients, and the pause that keeps reads
 * off it for a while once it could not answer.
 */
export interface ReadReplica {
  db: Database;
  sql: postgres.Sql;
  pause: ReplicaPause;
}

/** How long reads leave a replica alone after it could not answer. */
export const REPLICA_PAUSE_MS = 5000;

/**
 * Reads skip the replica for `pauseMs` after it failed to answer: while it is down, its client
 * keeps reconnecting with growing delays (postgres.js's backoff), and reads queued behind those
 * would wait past the request's deadline instead of going to the primary at once.
 */
export class ReplicaPause {
  private until = 0;

  constructor(
    private readonly pauseMs = REPLICA_PAUSE_MS,
    private readonly now: () => number = Date.now,
  ) {}

  get paused(): boolean {
    return this.now() < this.until;
  }

  /** The replica could not answer: leave it alone for a while. */
  trip(): void {
    this.until = this.now() + this.pauseMs;
  }
}

const SERIALIZATION_FAILURE = "40001";

/**
 * Whether the replica could not answer now, for a reason that is not the statement's: down,
 * restarting, refusing connections ({@link isDatabaseUnavailable}), or cancelling the read for a
 * conflict with the changes it replays (40001, as a standby does).
 */
export function replicaUnavailable(error: unknown): boolean {
  return isDatabaseUnavailable(error) || postgresError(error)?.code === SERIALIZATION_FAILURE;
}

/**
 * A read from the replica (when there is one and it is not paused), made again on the primary
 * when the replica's answer is not `found` (it may not have the message yet: it lags) or the
 * replica cannot answer now (then it is paused). So a message the API accepted is never a 404
 * because of the replica; an unknown one costs a read on each.
 */
export function orFromPrimary<A extends unknown[], R>(
  replica: { read: (...args: A) => Promise<R>; pause: ReplicaPause } | undefined,
  primary: (...args: A) => Promise<R>,
  found: (result: R) => boolean,
): (...args: A) => Promise<R> {
  if (!replica) return primary;
  return async (...args) => {
    if (replica.pause.paused) return primary(...args);
    try {
      const result = await replica.read(...args);
      if (found(result)) return result;
    } catch (error) {
      if (!replicaUnavailable(error)) throw error;
      replica.pause.trip();
    }
    return primary(...args);
  };
}
