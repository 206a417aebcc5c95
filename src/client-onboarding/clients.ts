import type { Executor } from "../../db/client.js";
import { isUniqueViolation, postgresError } from "../../db/errors.js";
import { encryptionClients } from "../../db/schema.js";
import { generateApiKey, hashApiKey, keyPrefix } from "../runtime/api-keys.js";
import { newClientId } from "./client-id.js";

export interface RegisteredClient {
  id: number;
  appName: string;
  contactEmail: string;
  createdAt: Date;
  /** The raw key: returned once to the caller, never stored. */
  apiKey: string;
}

export class AppNameTakenError extends Error {
  constructor(readonly appName: string) {
    super(`an app named "${appName}" is already registered`);
  }
}

const APP_NAME_INDEX = "clients_app_name_unique";
const ID_INDEX = "clients_pkey";
/** Draws of a random id before giving up: while under a tenth of the ids are taken, all eight collide less than once in 10^8 registrations. */
const ID_ATTEMPTS = 8;

/**
 * Registers a client and creates its key; only the key's SHA-256 hash and prefix are stored.
 * The id is random ({@link newClientId}); one already taken is drawn again. The unique index on
 * `lower(app_name)` decides between concurrent registrations of one name: the loser gets
 * {@link AppNameTakenError}.
 */
export async function registerClient(
  db: Executor,
  input: { appName: string; contactEmail: string },
  newId: () => number = newClientId,
): Promise<RegisteredClient> {
  const apiKey = generateApiKey("enc_");
  for (let attempt = 1; ; attempt++) {
    try {
      const [row] = await db
        .insert(encryptionClients)
        .values({ ...input, id: newId(), apiKeyHash: hashApiKey(apiKey), apiKeyPrefix: keyPrefix(apiKey) })
        .returning({
          id: encryptionClients.id,
          appName: encryptionClients.appName,
          contactEmail: encryptionClients.contactEmail,
          createdAt: encryptionClients.createdAt,
        });
      if (!row) throw new Error("insert into encryption.clients returned no row");
      return { ...row, apiKey };
    } catch (error) {
      const constraint = isUniqueViolation(error) ? postgresError(error)?.constraint_name : undefined;
      if (constraint === APP_NAME_INDEX) throw new AppNameTakenError(input.appName);
      if (constraint === ID_INDEX && attempt < ID_ATTEMPTS) continue;
      // A key-hash collision (2^-256) is not a name conflict: it stays an unexpected error.
      throw error;
    }
  }
}
