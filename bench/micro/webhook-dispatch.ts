/**
 * What one webhook delivery costs the dispatcher (docs/decisions/0036), apart from the rest of the
 * service: a throw-away database gets `messages` messages over 100 organizations, each with one
 * endpoint on the bench's lean receiver (bench/lib/webhook-receiver.ts) subscribed to final
 * events, and each message's `success` event (the fan-out trigger writes the deliveries); then the
 * worker's dispatcher, in this process, drains them. Reported per delivery: this process's CPU
 * (the dispatcher: claims, POSTs, signing, settles), the database's own backends' CPU, the
 * receiver's, and the drain's wall time; `rounds` drains, each on fresh deliveries.
 *
 * `--floor` replaces the dispatcher by the least any design of one POST per event must do: the
 * same events (read in one statement), each signed as the dispatcher signs and POSTed through
 * the outbound guard at the same concurrency, and its attempt row written (40 to an insert), with
 * no delivery rows: what no claim, lease or settle can go below (issue 16's bound, bench notes).
 * `--handoff` leases the success events' deliveries to this process as the delivery worker's appends
 * write them (born leased, docs/decisions/0036, "The handoff"), with what those appends return of
 * them, and, in the timed window, hands them to the dispatcher 25 at a time (about a worker's
 * append batch), a batch every 5 ms at most and only while it has slots for them: no claim, no
 * read (its wall time is the pace's).
 * Usage: `npx tsx bench/micro/webhook-dispatch.ts [messages=20000] [rounds=3] [--floor | --handoff]`
 */
import { randomUUID } from "node:crypto";
import type postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { createDatabase } from "../../db/client.js";
import { dropDatabase, ensureDatabase, runMigrations } from "../../db/migrate.js";
import type { MessageEvent } from "../../src/domain/events.js";
import { messageWebhookBody, webhookEventId } from "../../src/domain/webhooks.js";
import { openEndpointSecrets, sendWebhook } from "../../src/messages/webhooks.js";
import { createLogger } from "../../src/runtime/logger.js";
import {
  createOutboundAgent,
  type OutboundPost,
  outboundPost,
} from "../../src/runtime/outbound/outbound-fetch.js";
import { newWebhookSecret, type WebhookSecrets, webhookSecrets } from "../../src/runtime/webhook-secrets.js";
import {
  type HandedDelivery,
  type HandedEvent,
  type HandedRow,
  handedDelivery,
  selectHandedDeliveries,
} from "../../src/store/webhook-deliveries.js";
import { startWebhookDispatcher } from "../../workers/webhook-dispatcher.js";
import { postgresBackendsCpuMs } from "../lib/system.js";
import { startWebhookReceiver } from "../lib/webhook-receiver.js";

const positional = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));
const MESSAGES = Number(positional[0] ?? 20_000);
const ROUNDS = Number(positional[1] ?? 3);
const FLOOR = process.argv.includes("--floor");
const HANDOFF = process.argv.includes("--handoff");
/** Events handed to the dispatcher at once in `--handoff` (about one append batch of the worker). */
const HANDOFF_BATCH = 25;
const CONCURRENCY = Number(process.env.WEBHOOK_CONCURRENCY ?? 128);
type SuccessEvent = Extract<MessageEvent, { type: "success" }>;
const ORGANIZATIONS = 100;

const base = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const url = new URL(base);
const databaseName = `ntf_micro_webhooks_${randomUUID().slice(0, 8)}`;
url.pathname = `/${databaseName}`;
const databaseUrl = url.toString();

async function main(): Promise<void> {
  await ensureDatabase(databaseUrl);
  await runMigrations(databaseUrl);
  // The service's own client (its JSON and dates left to the caller, as the store expects).
  const { sql } = createDatabase({ url: databaseUrl, poolSize: 10 });
  const receiver = await startWebhookReceiver();
  const secrets = webhookSecrets({});
  try {
    const organizations = Array.from({ length: ORGANIZATIONS }, () => uuidv7());
    await sql`insert into organizations ${sql(
      organizations.map((id, i) => ({ id, product_id: "micro", name: `Org ${i}`, active: true })),
    )}`;
    const plain: Record<string, string> = {};
    const endpoints = organizations.map((organizationId) => {
      const id = uuidv7();
      const secret = newWebhookSecret();
      plain[`/${organizationId}`] = secret;
      return {
        id,
        organization_id: organizationId,
        url: `http://127.0.0.1:${receiver.port}/${organizationId}`,
        event_types: ["message.succeeded", "message.failed", "message.rejected"],
        enabled: true,
        secret_sealed: secrets.seal(id, secret),
        created_at: new Date().toISOString(),
        updated_at: new Date().toISOString(),
      };
    });
    await sql`insert into webhook_endpoints ${sql(endpoints)}`;
    await receiver.setSecrets(plain);

    const post = outboundPost(createOutboundAgent({ allowedNetworks: ["127.0.0.0/8"] }));
    const dispatcher = FLOOR
      ? undefined
      : startWebhookDispatcher({
          sql,
          logger: createLogger({ level: "warn", name: "micro" }),
          secrets,
          post,
          newId: uuidv7,
          now: () => new Date(),
          random: Math.random,
          concurrency: CONCURRENCY,
          endpointConcurrency: Number(process.env.WEBHOOK_ENDPOINT_CONCURRENCY ?? 4),
        });
    const results: string[] = [];
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        const { keys, handed } = await writeMessages(
          sql,
          organizations,
          MESSAGES,
          HANDOFF ? dispatcher?.handoff.leaseMs : undefined,
        );
        await receiver.expect(keys);
        // The floor writes no deliveries of its own: the trigger's are dropped before the clock starts.
        if (FLOOR) await sql`truncate webhook_deliveries`;
        await sql`vacuum analyze webhook_deliveries`;
        const self0 = process.cpuUsage();
        const pg0 = postgresBackendsCpuMs(databaseName);
        const receiver0 = receiver.cpuMs();
        const started = performance.now();
        if (FLOOR) await floorDrain(sql, post, secrets, endpoints, keys);
        if (dispatcher && HANDOFF) {
          // 25 every 5 ms at most (5,000 a second, below what the dispatcher drains), while it has slots.
          for (let next = 0; next < handed.length; next += HANDOFF_BATCH) {
            while (dispatcher.inFlight > CONCURRENCY - HANDOFF_BATCH)
              await new Promise((r) => setTimeout(r, 1));
            dispatcher.handoff.handOff(handed.slice(next, next + HANDOFF_BATCH));
            await new Promise((r) => setTimeout(r, 5));
          }
        }
        while ((await receiver.received()) < keys.length) await new Promise((r) => setTimeout(r, 20));
        // The settles trail the last POST by a few milliseconds: wait for the table to empty.
        while (!FLOOR && (await sql`select 1 from webhook_deliveries limit 1`).length > 0)
          await new Promise((r) => setTimeout(r, 5));
        const wallMs = performance.now() - started;
        const self = process.cpuUsage(self0);
        const per = (ms: number) => Math.round((ms * 1000) / keys.length);
        const line =
          `round ${round}: ${keys.length} deliveries in ${Math.round(wallMs)} ms ` +
          `(${Math.round(keys.length / (wallMs / 1000))}/s); CPU µs per delivery: ` +
          `dispatcher ${per((self.user + self.system) / 1000)}, ` +
          `postgres (this database's backends) ${per(postgresBackendsCpuMs(databaseName) - pg0)}, ` +
          `receiver ${per(receiver.cpuMs() - receiver0)}`;
        results.push(line);
        console.log(line);
      }
    } finally {
      await dispatcher?.stop();
    }
    const summary = await receiver.summary();
    console.log(
      `receipts ${summary.received}/${summary.expected} of the last round, duplicates ${summary.duplicates}, ` +
        `signatures checked ${summary.signatures.checked} (failed ${summary.signatures.failed}), ` +
        `wrong organization ${summary.wrongOrganization}`,
    );
  } finally {
    await receiver.close();
    await sql.end();
    await dropDatabase(databaseUrl);
  }
}

/**
 * The floor (`--floor`): the round's success events (`keys`), read at once, POSTed signed at
 * CONCURRENCY, each attempt's row inserted 40 at a time. A POST that is not a 2xx stops the run.
 */
async function floorDrain(
  sql: postgres.Sql,
  post: OutboundPost,
  secrets: WebhookSecrets,
  endpoints: Array<{ id: string; organization_id: string; url: string; secret_sealed: Buffer }>,
  keys: string[],
): Promise<void> {
  const byOrganization = new Map(
    endpoints.map((e) => [
      e.organization_id,
      {
        ...e,
        signers: [
          openEndpointSecrets(secrets, {
            id: e.id,
            secretSealed: e.secret_sealed,
            previousSecretSealed: null,
            previousSecretExpiresAt: null,
          }).current,
        ],
      },
    ]),
  );
  // The timestamp as the service's details read writes it (ISO 8601, UTC, milliseconds).
  const events = await sql<
    {
      message_id: string;
      organization_id: string;
      seq: number;
      retry_count: number;
      occurred_at: string;
      data: unknown;
    }[]
  >`select message_id, organization_id, seq, retry_count, data,
      to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as occurred_at
    from message_events where message_id = any(${keys.map((key) => key.split(":")[0] as string)}::uuid[]) and seq = 2`;
  const pending: Record<string, unknown>[] = [];
  const flush = async () => {
    const rows = pending.splice(0, pending.length);
    // One JSON parameter, as the dispatcher's settle sends its attempts (cheaper for the client
    // than a parameter per column).
    if (rows.length > 0)
      await sql`insert into webhook_attempts (id, endpoint_id, organization_id, event_id, event_type,
        attempted_at, status_code, duration_ms, error_class, error_code)
        select id, endpoint_id, organization_id, event_id, event_type, attempted_at, status_code,
          duration_ms, error_class, error_code
        from json_populate_recordset(null::webhook_attempts, ${JSON.stringify(rows)})`;
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < events.length) {
        const event = events[next++] as (typeof events)[number];
        const endpoint = byOrganization.get(event.organization_id);
        if (!endpoint) throw new Error(`no endpoint for organization ${event.organization_id}`);
        const eventId = webhookEventId(event.message_id, event.seq);
        const at = new Date();
        const body = messageWebhookBody(
          {
            messageId: event.message_id,
            organizationId: event.organization_id,
            channel: "sms",
            priority: "medium",
            notificationType: null,
          },
          {
            type: "success",
            seq: event.seq,
            retryCount: event.retry_count,
            occurredAt: event.occurred_at,
            data: event.data as SuccessEvent["data"],
          },
        );
        const sent = await sendWebhook(
          post,
          endpoint.url,
          endpoint.signers,
          { id: eventId, body: JSON.stringify(body) },
          at,
          10_000,
        );
        if (sent.outcome.errorClass !== null)
          throw new Error(`the floor's POST of ${eventId} failed: ${JSON.stringify(sent.outcome)}`);
        pending.push({
          id: uuidv7(),
          endpoint_id: endpoint.id,
          organization_id: event.organization_id,
          event_id: eventId,
          event_type: "message.succeeded",
          attempted_at: at.toISOString(),
          status_code: sent.outcome.statusCode,
          duration_ms: sent.durationMs,
          error_class: sent.outcome.errorClass,
          error_code: sent.outcome.errorCode,
        });
        if (pending.length >= 40) await flush();
      }
    }),
  );
  await flush();
}

/**
 * `count` SMS messages (records and their `accepted` and `success` events, as the worker writes
 * them, in statements of 500 events): the fan-out trigger writes one delivery per success, leased
 * as an append that hands off writes it for `handoffLeaseMs` when given. Returns the receiver's
 * keys of the success events, and those deliveries as the worker would hand them to its dispatcher.
 */
async function writeMessages(
  sql: postgres.Sql,
  organizations: string[],
  count: number,
  handoffLeaseMs: number | undefined,
): Promise<{ keys: string[]; handed: HandedDelivery[] }> {
  const keys: string[] = [];
  const handed: HandedDelivery[] = [];
  for (let start = 0; start < count; start += 500) {
    const batch = Array.from({ length: Math.min(500, count - start) }, (_, i) => ({
      id: uuidv7(),
      organizationId: organizations[(start + i) % organizations.length] as string,
    }));
    const now = new Date().toISOString();
    await sql`insert into messages ${sql(
      batch.map(({ id, organizationId }) => ({
        message_id: id,
        organization_id: organizationId,
        product_id: "micro",
        channel: "sms",
        status: "success",
        priority: "medium",
        recipient: "+14155550100",
        sender: "MICRO",
        body: "Your code is 123456",
        retry_enabled: true,
        retry_count: 0,
        version: 2,
        created_at: now,
        updated_at: now,
      })),
    )}`;
    for (const [seq, type, data] of [
      [1, "accepted", {}],
      [2, "success", { provider: "simulator", providerMessageId: "SM0" }],
    ] as const) {
      await sql.begin(async (tx) => {
        await tx`insert into message_events ${tx(
          batch.map(({ id, organizationId }) => ({
            message_id: id,
            organization_id: organizationId,
            seq,
            type,
            retry_count: 0,
            data: JSON.stringify(data),
            occurred_at: now,
          })),
        )}`;
      });
    }
    for (const { id } of batch) keys.push(`${id}:2`);
    if (handoffLeaseMs === undefined) continue;
    // Born leased, and returned with their endpoints, as `writeAppendsHandingOff` writes them.
    const rows = await sql.unsafe<HandedRow[]>(
      `with handed as (
        update webhook_deliveries d set leased_until = d.next_attempt_at + $2::integer * interval '1 millisecond'
        where d.message_id = any($1::uuid[]) and d.seq = 2
        returning d.id, d.endpoint_id, d.message_id, d.seq, d.event_type, d.leased_until)
      ${selectHandedDeliveries("handed")}`,
      [batch.map(({ id }) => id), handoffLeaseMs],
    );
    const organizationOf = new Map(batch.map(({ id, organizationId }) => [id, organizationId]));
    for (const row of rows) {
      const event: HandedEvent = {
        message: {
          messageId: row.message_id,
          organizationId: organizationOf.get(row.message_id) as string,
          channel: "sms",
          priority: "medium",
          notificationType: null,
        },
        event: {
          type: "success",
          retryCount: 0,
          occurredAt: now,
          data: { attempt: 1, provider: "simulator", providerMessageId: "SM0" },
          seq: 2,
        },
      };
      handed.push(handedDelivery(row, event));
    }
  }
  return { keys, handed };
}

await main();
