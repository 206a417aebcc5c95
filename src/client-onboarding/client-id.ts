import { randomInt } from "node:crypto";

/**
 * The largest id: the column is a Postgres `integer`, as it was when ids came from a sequence, so
 * a client that kept them in a 32-bit integer still can.
 */
export const MAX_CLIENT_ID = 2 ** 31 - 1;

/**
 * A new client's id: uniform in 1…{@link MAX_CLIENT_ID}, from the system's CSPRNG. A sequence
 * would tell each client how many registered before it (and, between two registrations, how many
 * others did); a random id tells nothing. Collisions are rare (one in 2^31 per existing client)
 * and the primary key catches them: the caller draws again.
 */
export function newClientId(): number {
  return randomInt(1, MAX_CLIENT_ID + 1);
}
