import type { Executor } from "../../db/client.js";
import { isUniqueViolation, postgresError } from "../../db/errors.js";
import { encryptionClients } from "../../db/schema.js";
import { generateApiKey, hashApiKey, keyPrefix } from "../runtime/api-keys.js";

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

/**
 * Registers a client and creates its key; only the key's SHA-256 hash and prefix are stored.
 * The unique index on `lower(app_name)` decides between concurrent registrations of one name:
 * the loser gets {@link AppNameTakenError}.
 */
export async function registerClient(
  db: Executor,
  input: { appName: string; contactEmail: string },
): Promise<RegisteredClient> {
  const apiKey = generateApiKey("enc_");
  try {
    const [row] = await db
      .insert(encryptionClients)
      .values({ ...input, apiKeyHash: hashApiKey(apiKey), apiKeyPrefix: keyPrefix(apiKey) })
      .returning({
        id: encryptionClients.id,
        appName: encryptionClients.appName,
        contactEmail: encryptionClients.contactEmail,
        createdAt: encryptionClients.createdAt,
      });
    if (!row) throw new Error("insert into encryption.clients returned no row");
    return { ...row, apiKey };
  } catch (error) {
    // A key-hash collision (2^-256) is not a name conflict: it stays an unexpected error.
    if (isUniqueViolation(error) && postgresError(error)?.constraint_name === APP_NAME_INDEX) {
      throw new AppNameTakenError(input.appName);
    }
    throw error;
  }
}
