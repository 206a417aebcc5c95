import { sql } from "drizzle-orm";
import {
  bigserial,
  boolean,
  check,
  customType,
  index,
  integer,
  jsonb,
  pgSchema,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import {
  CHANNELS,
  EVENT_TYPES as DOMAIN_EVENT_TYPES,
  type MessageEvent,
  STATUSES,
} from "../src/domain/events.js";
import { PRIORITY_TIERS } from "../src/domain/priority.js";
import { DELIVERY_STATES } from "../src/domain/receipts.js";
import { SENDER_KINDS, SENDER_STATUSES } from "../src/domain/senders.js";
import { SUPPRESSION_REASONS } from "../src/domain/suppression.js";

const timestamptz = <N extends string>(name: N) => timestamp(name, { withTimezone: true, mode: "date" });
/** xid8: a transaction id, so cross-message readers can avoid skipping late commits. */
const xid8 = customType<{ data: string }>({ dataType: () => "xid8" });
const bytea = customType<{ data: Buffer }>({ dataType: () => "bytea" });

export const organizations = pgTable(
  "organizations",
  {
    id: uuid("id").primaryKey(),
    productId: text("product_id").notNull(),
    name: text("name").notNull(),
    active: boolean("active").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (t) => [uniqueIndex("organizations_product_name_unique").on(t.productId, sql`lower(${t.name})`)],
);

export const apiKeys = pgTable(
  "api_keys",
  {
    id: uuid("id").primaryKey(),
    organizationId: uuid("organization_id")
      .notNull()
      .references(() => organizations.id),
    /** SHA-256 of the raw key, hex. The raw key is shown once and never stored. */
    keyHash: text("key_hash").notNull(),
    /** The first characters of the key, to recognise it in a list without revealing it. */
    keyPrefix: text("key_prefix").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    revokedAt: timestamptz("revoked_at"),
  },
  (t) => [
    uniqueIndex("api_keys_key_hash_unique").on(t.keyHash),
    index("api_keys_organization_idx").on(t.organizationId),
  ],
);

/** An event's type: the status it moves its message to, or `receipt` (src/domain/receipts.ts). */
const EVENT_TYPES = DOMAIN_EVENT_TYPES satisfies readonly MessageEvent["type"][];
/** `'a','b'`: a list of the domain's, as the SQL of a check constraint. */
const sqlList = (values: readonly string[]) => sql.raw(values.map((value) => `'${value}'`).join(","));

/**
 * The source of truth: append-only (a trigger refuses UPDATE, DELETE and TRUNCATE). Partitioned by
 * day on `message_id` (a UUIDv7: its first 48 bits are its time), like `messages`: the migration
 * 0018 and the functions it defines (`create_message_partition`, `drop_message_partitions`) make
 * the partitions, which drizzle-kit does not model (docs/decisions/0042). Its primary key is
 * `(message_id, seq)`, as a key of a partitioned table has to include the partition key.
 */
export const messageEvents = pgTable(
  "message_events",
  {
    /** The order of appends, across messages (a sequence): not unique by constraint, and not a key. */
    position: bigserial("position", { mode: "number" }).notNull(),
    messageId: uuid("message_id").notNull(),
    seq: integer("seq").notNull(),
    type: text("type", { enum: EVENT_TYPES }).notNull(),
    retryCount: integer("retry_count").notNull(),
    data: jsonb("data").notNull(),
    occurredAt: timestamptz("occurred_at").notNull(),
    organizationId: uuid("organization_id").notNull(),
    transactionId: xid8("transaction_id").notNull().default(sql`pg_current_xact_id()`),
    /**
     * An `accepted` event's content (recipient, body, template fields, push keys) sealed with its
     * organization's data key (src/store/content.ts); `data` then holds the rest. Null for the
     * other events, for events written before encryption (their `data` holds everything) and once
     * the content was erased. The one column an UPDATE may change, to null (migration 0005).
     */
    contentEnc: bytea("content_enc"),
    /** Blind indexes (keyed digests) of the recipients, to erase a recipient's messages. */
    recipientKeys: text("recipient_keys").array(),
  },
  (t) => [
    primaryKey({ name: "message_events_pkey", columns: [t.messageId, t.seq] }),
    check("message_events_seq_positive", sql`${t.seq} >= 1`),
    check("message_events_type_valid", sql`${t.type} in (${sqlList(EVENT_TYPES)})`),
  ],
);

/**
 * The queryable record: a projection of `message_events`, rebuilt from them on demand. Partitioned
 * by day on `message_id` like `message_events` (docs/decisions/0042).
 */
export const messages = pgTable(
  "messages",
  {
    messageId: uuid("message_id").primaryKey(),
    organizationId: uuid("organization_id").notNull(),
    productId: text("product_id").notNull(),
    channel: text("channel", { enum: CHANNELS }).notNull(),
    status: text("status", { enum: STATUSES }).notNull(),
    /** Why a `failed` or `rejected` message ended so (`FAILED_REASONS`, `REJECTED_REASONS`); else null. */
    statusReason: text("status_reason"),
    priority: text("priority", { enum: PRIORITY_TIERS }).notNull(),
    notificationType: text("notification_type"),
    /** Null when the content is sealed in `content_enc` (or erased). */
    recipient: text("recipient"),
    sender: text("sender").notNull(),
    /** SMS text, push body; null for e-mail (its content is the template, rendered at delivery). */
    body: text("body"),
    /** E-mail subject, push title; null for SMS. */
    subject: text("subject"),
    templateFields: jsonb("template_fields"),
    /**
     * What acceptance measured of an SMS body, in clear (docs/decisions/0043): how many segments
     * it is sent as, and in which alphabet (src/channels/sms/content.ts's SMS_ENCODINGS). Null for
     * e-mail and push, and for an SMS accepted before they were counted.
     */
    segments: smallint("segments"),
    encoding: text("encoding").$type<"GSM-7" | "UCS-2">(),
    retryEnabled: boolean("retry_enabled").notNull(),
    retryCount: integer("retry_count").notNull(),
    /** Sequence number of the last event folded in. */
    version: integer("version").notNull(),
    /** When the next attempt is due, while a retry is scheduled. */
    nextAttemptAt: timestamptz("next_attempt_at"),
    deliveryTime: timestamptz("delivery_time"),
    /** What the providers' receipts said (src/domain/receipts.ts): `unknown` until one comes. */
    deliveryState: text("delivery_state", { enum: DELIVERY_STATES }).notNull().default("unknown"),
    /** When the receipt that set `delivery_state` was recorded; null while `unknown`. */
    deliveryUpdatedAt: timestamptz("delivery_updated_at"),
    /** That receipt's error code (Twilio's `ErrorCode`), if it had one. */
    deliveryErrorCode: text("delivery_error_code"),
    /** A scheduled send's `send_at`: no attempt before it (docs/decisions/0044); null when sent at once. */
    sendAt: timestamptz("send_at"),
    createdAt: timestamptz("created_at").notNull(),
    updatedAt: timestamptz("updated_at").notNull(),
    /** The `accepted` event's sealed content, copied: recipient, body, subject, template fields are then null. */
    contentEnc: bytea("content_enc"),
    recipientKeys: text("recipient_keys").array(),
  },
  (t) => [
    index("messages_organization_created_idx").on(t.organizationId, t.createdAt.desc(), t.messageId.desc()),
    /**
     * The sweeper's unfinished messages, by when they last moved; a scheduled send's counts from
     * its `send_at` (`greatest` ignores a null), so the thousands waiting days ahead are never read.
     */
    index("messages_unfinished_idx")
      .on(sql`greatest(${t.updatedAt}, ${t.sendAt})`)
      .where(sql`${t.status} in ('accepted','pending')`),
    /** The erasure by recipient finds the messages by `recipient_keys && …` (docs/decisions/0034). */
    index("messages_recipient_keys_idx").using("gin", t.recipientKeys),
    /** The listing's `scheduled` filter: an organization's scheduled messages, newest first. */
    index("messages_scheduled_idx")
      .on(t.organizationId, t.createdAt.desc(), t.messageId.desc())
      .where(sql`${t.sendAt} is not null`),
    check("messages_delivery_state_valid", sql`${t.deliveryState} in (${sqlList(DELIVERY_STATES)})`),
  ],
);

/**
 * Each organization's data keys, wrapped by a master key (src/runtime/content-crypto.ts). Created
 * on the organization's first send; erasing the organization's data destroys them (the wrapped
 * key is set to null), which makes every message sealed with them unreadable: crypto-shredding.
 */
export const organizationDataKeys = pgTable(
  "organization_data_keys",
  {
    id: uuid("id").primaryKey(),
    organizationId: uuid("organization_id")
      .notNull()
      .references(() => organizations.id),
    /** Which master key wrapped it (`CONTENT_MASTER_KEY_ID`), so master keys can be rotated. */
    masterKeyId: text("master_key_id").notNull(),
    /** Null once destroyed. */
    wrappedKey: bytea("wrapped_key"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    destroyedAt: timestamptz("destroyed_at"),
  },
  (t) => [
    // One live key per organization: two processes sealing its first messages agree on it.
    uniqueIndex("organization_data_keys_live_unique")
      .on(t.organizationId)
      .where(sql`${t.wrappedKey} is not null`),
    index("organization_data_keys_organization_idx").on(t.organizationId),
  ],
);

/**
 * Transactional outbox of delivery jobs. The accept path writes a message's row in the statement
 * that commits its `accepted` event; the worker's relay moves rows into BullMQ in bulk and deletes
 * them in one transaction, most urgent first. So the API never talks to Redis, and a message whose
 * row is still here is on its way to the queue (the sweeper leaves it to the relay).
 */
export const deliveryOutbox = pgTable(
  "delivery_outbox",
  {
    messageId: uuid("message_id").primaryKey(),
    /** The BullMQ prefix (`QUEUE_PREFIX`) of the queue the job goes to. */
    queuePrefix: text("queue_prefix").notNull(),
    /** The BullMQ job priority: 1 (critical) to 4 (low). */
    priority: smallint("priority").notNull(),
    /**
     * The message's organization: the relay takes the rows of a tier in turn by organization
     * (docs/decisions/0047). Null on rows written by a release before it (one group of their own).
     */
    organizationId: uuid("organization_id"),
  },
  (t) => [
    index("delivery_outbox_relay_idx").on(t.queuePrefix, t.priority, t.messageId),
    /** The relay's turns: the organizations with rows of a tier, then each one's oldest rows. */
    index("delivery_outbox_turns_idx").on(t.queuePrefix, t.priority, t.organizationId, t.messageId),
  ],
);

/**
 * One-off work a release leaves to its workers rather than to its migration (which would hold its
 * tables' locks all along): one row per piece done, so it runs once.
 */
export const maintenanceDone = pgTable("maintenance_done", {
  name: text("name").primaryKey(),
  doneAt: timestamptz("done_at").notNull(),
});

/**
 * Scheduled sends waiting for their `send_at` (docs/decisions/0044): the accept writes a message's
 * row here instead of its outbox row, and a worker loop moves each row into `delivery_outbox` once
 * it is due (one statement: a message is always in one of the two, or its job in Redis). So a
 * message scheduled 35 days ahead waits in Postgres, not as a delayed job that a Redis flush or a
 * failover would lose.
 */
export const scheduledDeliveries = pgTable(
  "scheduled_deliveries",
  {
    messageId: uuid("message_id").primaryKey(),
    /** The BullMQ prefix (`QUEUE_PREFIX`) of the queue the job goes to. */
    queuePrefix: text("queue_prefix").notNull(),
    /** The BullMQ job priority: 1 (critical) to 4 (low). */
    priority: smallint("priority").notNull(),
    /** The message's `send_at`. */
    dueAt: timestamptz("due_at").notNull(),
    /** The message's organization, carried into its outbox row. */
    organizationId: uuid("organization_id"),
  },
  (t) => [index("scheduled_deliveries_due_idx").on(t.queuePrefix, t.dueAt)],
);

/**
 * An organization's e-mail templates, Mandrill style: HTML with editable regions (`mc:edit`) and
 * merge tags, rendered when a message is delivered (so an edit applies to messages not yet sent).
 */
export const templates = pgTable(
  "templates",
  {
    organizationId: uuid("organization_id")
      .notNull()
      .references(() => organizations.id),
    /** Immutable, unique within the organization; `template_name` of an e-mail refers to it. */
    name: text("name").notNull(),
    /** The HTML. */
    code: text("code").notNull(),
    /** The plain-text part; when null it is derived from the rendered HTML. */
    text: text("text"),
    createdAt: timestamptz("created_at").notNull(),
    updatedAt: timestamptz("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.name] })],
);

/**
 * The addresses an organization may send as (docs/decisions/0033): its e-mail domains, verified
 * by a DNS TXT record it publishes, and its SMS sender ids, approved by an operator. The token is
 * not a secret: it is meant to be published in the organization's DNS.
 */
export const organizationSenders = pgTable(
  "organization_senders",
  {
    id: uuid("id").primaryKey(),
    organizationId: uuid("organization_id")
      .notNull()
      .references(() => organizations.id),
    kind: text("kind", { enum: SENDER_KINDS }).notNull(),
    /** A lower-case domain; an SMS alphanumeric sender id, short code or E.164 number. */
    value: text("value").notNull(),
    /** `ntf-verify=…`, the TXT record's content, for an e-mail domain; null for an SMS sender. */
    verificationToken: text("verification_token"),
    status: text("status", { enum: SENDER_STATUSES }).notNull(),
    createdAt: timestamptz("created_at").notNull(),
    verifiedAt: timestamptz("verified_at"),
  },
  (t) => [
    unique("organization_senders_unique").on(t.organizationId, t.kind, t.value),
    check("organization_senders_kind_valid", sql`${t.kind} in (${sqlList(SENDER_KINDS)})`),
    check("organization_senders_status_valid", sql`${t.status} in (${sqlList(SENDER_STATUSES)})`),
    index("organization_senders_pending_idx").on(t.createdAt).where(sql`${t.status} = 'pending'`),
  ],
);

/** One row per `Idempotency-Key` an organization used in the last 24 hours. */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    organizationId: uuid("organization_id").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    messageId: uuid("message_id").notNull(),
    createdAt: timestamptz("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.key] }),
    index("idempotency_keys_created_idx").on(t.createdAt),
  ],
);

/** The client-onboarding (encryption) service owns this schema; nothing else reads it. */
export const encryption = pgSchema("encryption");

export const encryptionClients = encryption.table(
  "clients",
  {
    /** Random (see src/client-onboarding/client-id.ts), so the answer does not count registrations. */
    id: integer("id").primaryKey(),
    appName: text("app_name").notNull(),
    contactEmail: text("contact_email").notNull(),
    apiKeyHash: text("api_key_hash").notNull(),
    apiKeyPrefix: text("api_key_prefix").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("clients_app_name_unique").on(sql`lower(${t.appName})`),
    uniqueIndex("clients_api_key_hash_unique").on(t.apiKeyHash),
  ],
);

/**
 * An organization's status webhook endpoint (issue 16, docs/decisions/0035). Its signing secret is
 * stored sealed (AES-256-GCM under WEBHOOK_SECRET_KEY, bound to the endpoint's id); after a
 * rotation the previous one, sealed too, keeps signing beside it until `previous_secret_expires_at`.
 */
export const webhookEndpoints = pgTable(
  "webhook_endpoints",
  {
    id: uuid("id").primaryKey(),
    organizationId: uuid("organization_id")
      .notNull()
      .references(() => organizations.id),
    url: text("url").notNull(),
    /** The event types it receives; null: all of them. */
    eventTypes: text("event_types").array(),
    description: text("description"),
    enabled: boolean("enabled").notNull(),
    /** Why the service disabled it (null when enabled, or disabled by its organization). */
    disabledReason: text("disabled_reason"),
    secretSealed: bytea("secret_sealed").notNull(),
    previousSecretSealed: bytea("previous_secret_sealed"),
    previousSecretExpiresAt: timestamptz("previous_secret_expires_at"),
    /** Since when every attempt failed (null after a success): 5 days of it disable the endpoint. */
    failingSince: timestamptz("failing_since"),
    createdAt: timestamptz("created_at").notNull(),
    updatedAt: timestamptz("updated_at").notNull(),
  },
  (t) => [index("webhook_endpoints_organization_idx").on(t.organizationId, t.id)],
);

/**
 * The webhook deliveries still to be made: one row per (message event, endpoint subscribed to it
 * when the event was committed), written by a trigger on `message_events` in the event's own
 * transaction (migration 0011, docs/decisions/0036), so no committed event is lost on its way
 * out. A row leaves the table when its event reached the endpoint or was given up; its attempts
 * stay in `webhook_attempts`.
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    /**
     * The endpoint; no foreign key: deleting an endpoint deletes its row only (a cascade through
     * these rows blocked every event write), and the worker's purge deletes what it left.
     */
    endpointId: uuid("endpoint_id").notNull(),
    organizationId: uuid("organization_id").notNull(),
    /** The event: `message_events (message_id, seq)`. */
    messageId: uuid("message_id").notNull(),
    seq: integer("seq").notNull(),
    /** `message.accepted`, `message.succeeded`, … (src/domain/webhooks.ts). */
    eventType: text("event_type").notNull(),
    /** The event's `occurred_at`: the lag to the endpoint's 2xx is measured from it. */
    eventAt: timestamptz("event_at").notNull(),
    /** Attempts made so far. */
    attempts: integer("attempts").notNull().default(0),
    /** When it may be tried next (a retry's time, once it has failed). */
    nextAttemptAt: timestamptz("next_attempt_at").notNull().defaultNow(),
    /**
     * While an attempt is under way, when the worker's lease on it ends: set by a claim, cleared
     * when a retry is settled (a delivered one is deleted). No index holds it, so a claim's lease is
     * a HOT update of the row alone (the table's fillfactor leaves room for it). Not claimable, and
     * not brought forward by a recovery, until it is over (a dead worker's row is claimed again then).
     */
    leasedUntil: timestamptz("leased_until"),
  },
  (t) => [
    unique("webhook_deliveries_event_unique").on(t.endpointId, t.messageId, t.seq),
    index("webhook_deliveries_due_idx").on(t.endpointId, t.nextAttemptAt, t.id),
  ],
);

/** Each POST to an endpoint: what was sent (the event's id and type) and what came of it. */
export const webhookAttempts = pgTable(
  "webhook_attempts",
  {
    id: uuid("id").primaryKey(),
    /**
     * The endpoint; no foreign key: deleting an endpoint deletes its row only (a cascade through
     * these rows blocked every event write), and the worker's purge deletes what it left.
     */
    endpointId: uuid("endpoint_id").notNull(),
    organizationId: uuid("organization_id").notNull(),
    /** The `webhook-id`: the same for every attempt of one event. */
    eventId: text("event_id").notNull(),
    eventType: text("event_type").notNull(),
    attemptedAt: timestamptz("attempted_at").notNull(),
    /** The endpoint's HTTP status; null when no answer came (time-out, connection refused). */
    statusCode: smallint("status_code"),
    durationMs: integer("duration_ms").notNull(),
    /** null on a 2xx; else `http`, `redirect`, `timeout`, `connection` or `address_refused`. */
    errorClass: text("error_class"),
    errorCode: text("error_code"),
    nextRetryAt: timestamptz("next_retry_at"),
    /** True on the last attempt of an event that was given up (retries spent, or the endpoint gone). */
    gaveUp: boolean("gave_up").notNull().default(false),
  },
  (t) => [index("webhook_attempts_endpoint_idx").on(t.endpointId, t.id)],
);

/**
 * Recipients an organization's messages must not reach (docs/decisions/0039): per channel, by the
 * recipient's blind index under the organization's index key (the one `recipient_keys` of its
 * messages use, so the worker matches a message without opening anything), with the recipient
 * sealed beside it for the listing (null once the recipient's content was erased, or when it was
 * added from a blind index alone).
 */
export const suppressions = pgTable(
  "suppressions",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    organizationId: uuid("organization_id")
      .notNull()
      .references(() => organizations.id),
    channel: text("channel", { enum: CHANNELS }).notNull(),
    recipientKey: text("recipient_key").notNull(),
    recipientSealed: bytea("recipient_sealed"),
    reason: text("reason", { enum: SUPPRESSION_REASONS }).notNull(),
    /** The message whose outcome or receipt added it; null for a manual entry. */
    messageId: uuid("message_id"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("suppressions_recipient_unique").on(t.organizationId, t.channel, t.recipientKey),
    index("suppressions_organization_idx").on(t.organizationId, t.id),
    check("suppressions_channel_valid", sql`${t.channel} in (${sqlList(CHANNELS)})`),
    check("suppressions_reason_valid", sql`${t.reason} in (${sqlList(SUPPRESSION_REASONS)})`),
  ],
);
