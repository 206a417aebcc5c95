import type { Queue } from "bullmq";
import { sql } from "drizzle-orm";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { Database } from "../../db/client.js";
import type { BreakerState } from "../channels/providers/breaker.js";
import type { FailureClass } from "../domain/delivery-outcome.js";
import type { Channel } from "../domain/events.js";
import type { MessageState } from "../domain/state.js";
import type { PersistentRedisError } from "../runtime/redis-health.js";

/**
 * How the API processes' values of a gauge read from Redis or Postgres on each scrape add up
 * under one supervisor (src/observability/cluster-metrics.ts): each read the same thing, so
 * one value, not their sum; the highest, so one process's stale reading never hides a backlog.
 */
const READ_ON_SCRAPE = "max";

/** One provider account's breaker, for `notification_provider_breaker_state`. */
export interface BreakerGaugeReading {
  channel: string;
  provider: string;
  state: BreakerState;
}

/** The gauge's value of each breaker state: the higher, the less traffic the account gets. */
const BREAKER_GAUGE_VALUES: Readonly<Record<BreakerState, number>> = { closed: 0, half_open: 1, open: 2 };

/**
 * The Prometheus metrics of one process. Counters count what this process did (the web process
 * accepts, the worker finishes and delivers); the queue gauges are read from Redis and Postgres
 * on each scrape, so every process reports the same cluster-wide values for them.
 */
export function createMetrics(options: {
  process: "web" | "worker";
  /** The delivery queue, or its shards (`queue` label: each shard's name). */
  queue?: Queue | { readonly all: readonly Queue[] };
  db?: Database;
}) {
  const registry = new Registry();
  registry.setDefaultLabels({ process: options.process });
  collectDefaultMetrics({ register: registry });

  const httpDuration = new Histogram({
    name: "http_request_duration_seconds",
    help: "HTTP request duration by route pattern and status",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const accepted = new Counter({
    name: "notification_messages_accepted_total",
    help: "Messages accepted (202) by channel and priority tier",
    labelNames: ["channel", "tier"] as const,
    registers: [registry],
  });
  const finished = new Counter({
    name: "notification_messages_final_total",
    help: "Messages that reached a final state, by channel, tier and status",
    labelNames: ["channel", "tier", "status"] as const,
    registers: [registry],
  });
  const deliveryLatency = new Histogram({
    name: "notification_delivery_latency_seconds",
    help: "Time from acceptance to final state, by channel, tier and status",
    labelNames: ["channel", "tier", "status"] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [registry],
  });
  const providerErrors = new Counter({
    name: "notification_provider_errors_total",
    help: "Failed provider calls by channel, provider and error class (transient, rejected, permanent)",
    labelNames: ["channel", "provider", "class"] as const,
    registers: [registry],
  });

  // Provider lists (docs/decisions/0046): the worker's breakers and the attempts moved between providers.
  const failovers = new Counter({
    name: "notification_provider_failovers_total",
    help: "Attempts moved from one provider of a provider list to the next (the first provably did not take the message), by channel and provider",
    labelNames: ["channel", "from", "to"] as const,
    registers: options.process === "worker" ? [registry] : [],
  });
  let readBreakers: () => Iterable<BreakerGaugeReading> = () => [];
  new Gauge({
    name: "notification_provider_breaker_state",
    help: "Each provider account's circuit breaker in this worker: 0 closed, 1 half-open (its cool-down over: one probe goes through), 2 open (skipped)",
    labelNames: ["channel", "provider"] as const,
    registers: options.process === "worker" ? [registry] : [],
    collect() {
      for (const { channel, provider, state } of readBreakers())
        this.set({ channel, provider }, BREAKER_GAUGE_VALUES[state]);
    },
  });

  const throughputWaits = new Counter({
    name: "notification_throughput_waits_total",
    help: "Delivery jobs handed back by a throughput limit (no attempt counted), by channel, limit (sms_sender, provider_account, or unavailable: the limiter's Redis did not answer), SMS sender kind (alphanumeric, short_code, number; none for other channels) and provider account",
    labelNames: ["channel", "limit", "sender_kind", "provider"] as const,
    registers: options.process === "worker" ? [registry] : [],
  });

  const throughputRetakes = new Counter({
    name: "notification_throughput_retakes_total",
    help: "Throughput tokens taken again because they were older than one interval of their limit (at least 100 ms) at the provider call (a slow append of the attempt, or a wait for the other limit): each is a token spent twice, the limit running below its rate rather than releasing a burst; by the same labels as notification_throughput_waits_total",
    labelNames: ["channel", "limit", "sender_kind", "provider"] as const,
    registers: options.process === "worker" ? [registry] : [],
  });

  // Delivery receipts (docs/decisions/0038): the web process takes the providers' callbacks.
  const receipts = new Counter({
    name: "notification_receipts_total",
    help: "Provider delivery receipts (status callbacks) by provider and outcome: recorded, duplicate, not_a_receipt, unknown_message, other_provider, provider_id_mismatch, malformed, bad_signature",
    labelNames: ["provider", "outcome"] as const,
    registers: options.process === "web" ? [registry] : [],
  });

  // The worker's: only it writes to Redis (queue jobs, the relay), so only it can be refused.
  const worker = options.process === "worker";
  const redisErrors = new Counter({
    name: "notification_redis_errors_total",
    help: "Persistent Redis errors (readonly, oom, cluster, auth, misconf) the worker met, by kind",
    labelNames: ["kind"] as const,
    registers: worker ? [registry] : [],
  });
  const redisStalled = new Gauge({
    name: "notification_redis_stalled",
    help: "1 while Redis persistently refuses the worker's writes and deliveries are paused, else 0",
    registers: worker ? [registry] : [],
  });
  redisStalled.set(0);

  const { db } = options;
  const shards = options.queue ? ("all" in options.queue ? options.queue.all : [options.queue]) : [];
  const queue = shards[0];
  if (queue) {
    new Gauge({
      name: "notification_queue_jobs",
      help: "Jobs in the delivery queue by state",
      labelNames: ["queue", "state"] as const,
      registers: [registry],
      aggregator: READ_ON_SCRAPE,
      async collect() {
        for (const shard of shards) {
          try {
            const counts = await shard.getJobCounts("wait", "prioritized", "active", "delayed", "failed");
            for (const [state, count] of Object.entries(counts))
              this.set({ queue: shard.name, state }, count);
          } catch {
            // This shard's master unavailable: leave its last values (the others' are read);
            // /readyz says what is wrong.
          }
        }
      },
    });
    new Gauge({
      name: "notification_queue_workers",
      help: "BullMQ Workers connected to each delivery queue shard: 0 with jobs waiting means nobody delivers them",
      labelNames: ["queue"] as const,
      registers: [registry],
      aggregator: READ_ON_SCRAPE,
      async collect() {
        for (const shard of shards) {
          try {
            this.set({ queue: shard.name }, await shard.getWorkersCount());
          } catch {
            // Leave the last value.
          }
        }
      },
    });
  }
  if (queue && db) {
    new Gauge({
      name: "notification_queue_oldest_waiting_age_seconds",
      help: "Age of the oldest message still waiting for its first delivery attempt",
      labelNames: ["queue"] as const,
      registers: [registry],
      aggregator: READ_ON_SCRAPE,
      async collect() {
        try {
          const rows = await db.execute<{ oldest: Date | null }>(
            sql`select min(updated_at) as oldest from messages where status = 'accepted'`,
          );
          const oldest = rows[0]?.oldest;
          this.set(
            { queue: queue.name },
            oldest ? Math.max(0, (Date.now() - new Date(oldest).getTime()) / 1000) : 0,
          );
        } catch {
          // Postgres unavailable: leave the last value.
        }
      },
    });
  }

  const queuePrefix = queue?.opts.prefix ?? "bull";
  if (db) {
    const ageGauge = (name: string, help: string, oldestMs: () => Promise<number | undefined>) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        aggregator: READ_ON_SCRAPE,
        async collect() {
          try {
            const oldest = await oldestMs();
            this.set(oldest === undefined ? 0 : Math.max(0, (Date.now() - oldest) / 1000));
          } catch {
            // Postgres unavailable: leave the last value.
          }
        },
      });
    ageGauge(
      "notification_outbox_oldest_age_seconds",
      "Age of the oldest accepted message not yet handed to the delivery queue (the delivery outbox): it grows while Redis refuses the relay or no worker runs",
      async () => {
        // (Postgres 15 has no min() of uuid; the primary key's index gives the first.)
        const rows = await db.execute<{ oldest: string | null }>(
          sql`select message_id::text as oldest from delivery_outbox order by message_id limit 1`,
        );
        const oldest = rows[0]?.oldest;
        // Message ids are UUID v7: their first 48 bits are the creation time in milliseconds.
        return oldest ? Number.parseInt(oldest.replaceAll("-", "").slice(0, 12), 16) : undefined;
      },
    );
    ageGauge(
      "notification_scheduled_overdue_seconds",
      "How late the most overdue scheduled send is in leaving for the delivery queue (its send_at has come and it still waits in scheduled_deliveries): it grows while no worker runs or Postgres fails them; normally below 1",
      async () => {
        // This installation's rows (its queue prefix): the first of `scheduled_deliveries_due_idx`.
        const rows = await db.execute<{ oldest: Date | null }>(
          sql`select min(due_at) as oldest from scheduled_deliveries
            where queue_prefix = ${queuePrefix} and due_at <= now()`,
        );
        const oldest = rows[0]?.oldest;
        return oldest ? new Date(oldest).getTime() : undefined;
      },
    );
    ageGauge(
      "notification_unfinished_oldest_age_seconds",
      "Age of the oldest message accepted and not final yet (accepted, or pending with its retries); a scheduled send counts from its send_at, and not while it waits for it",
      async () => {
        const rows = await db.execute<{ oldest: Date | null }>(
          // `greatest(updated_at, send_at)`: the index of unfinished messages, which a scheduled send
          // waiting for its send_at is beyond (it is not read).
          sql`select min(coalesce(send_at, created_at)) as oldest from messages
            where status in ('accepted','pending') and greatest(updated_at, send_at) <= now()`,
        );
        const oldest = rows[0]?.oldest;
        return oldest ? new Date(oldest).getTime() : undefined;
      },
    );
  }

  if (db) {
    // The day partitions of messages and message_events (docs/decisions/0042): how many days from
    // today on have theirs (normally 8: the workers make a week ahead), and whether the default
    // partitions hold rows (ids no day covers, which retention never drops).
    new Gauge({
      name: "notification_message_partitions",
      help: "Message partitions: days from today on with their partitions (`ahead`, normally 8; below 2, the workers are not making them), past days kept (`kept`, at most MESSAGE_RETENTION_DAYS once retention runs), and 1 while the default partitions hold rows (`default_used`)",
      labelNames: ["state"] as const,
      registers: [registry],
      aggregator: READ_ON_SCRAPE,
      async collect() {
        try {
          const [row] = await db.execute<{ ahead: number; kept: number; default_used: boolean }>(
            sql`with days as (
                  select to_date(right(c.relname, 8), 'YYYYMMDD') as day from pg_inherits i
                  join pg_class c on c.oid = i.inhrelid
                  where i.inhparent = to_regclass('messages') and c.relname ~ '^messages_p[0-9]{8}$')
                select
                  (select count(*) from days where day >= (now() at time zone 'UTC')::date)::integer as ahead,
                  (select count(*) from days where day < (now() at time zone 'UTC')::date)::integer as kept,
                  (exists (select 1 from messages_default) or exists (select 1 from message_events_default))
                    as default_used`,
          );
          if (!row) return;
          this.set({ state: "ahead" }, row.ahead);
          this.set({ state: "kept" }, row.kept);
          this.set({ state: "default_used" }, row.default_used ? 1 : 0);
        } catch {
          // Postgres unavailable: leave the last values.
        }
      },
    });
  }

  // Status webhooks (docs/decisions/0036): the worker's dispatcher makes the attempts.
  const webhookAttempts = new Counter({
    name: "notification_webhook_attempts_total",
    help: "Webhook POSTs by outcome: success (2xx), or http, redirect, timeout, connection, address_refused, secret_unreadable",
    labelNames: ["outcome"] as const,
    registers: worker ? [registry] : [],
  });
  const webhookLag = new Histogram({
    name: "notification_webhook_delivery_lag_seconds",
    help: "Time from a message event to its endpoint's 2xx",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 36000, 86400],
    registers: worker ? [registry] : [],
  });
  if (db) {
    // One query for both gauges: a scrape collects them at once and shares the answer.
    let reading:
      | Promise<{ deliveries: number; due: number; gone: number; failing: number } | undefined>
      | undefined;
    const webhookState = () => {
      reading ??= readWebhookState().finally(() => {
        reading = undefined;
      });
      return reading;
    };
    const readWebhookState = async () => {
      const rows = await db.execute<{ deliveries: number; due: number; gone: number; failing: number }>(
        // Deliveries of enabled endpoints only: a disabled or deleted endpoint's are never sent.
        sql`select (select count(*) from webhook_deliveries d join webhook_endpoints w
                      on w.id = d.endpoint_id and w.enabled)::integer as deliveries,
              (select count(*) from webhook_deliveries d join webhook_endpoints w
                      on w.id = d.endpoint_id and w.enabled
                where d.next_attempt_at <= now()
                  and (d.leased_until is null or d.leased_until <= now()))::integer as due,
              (select count(*) from webhook_endpoints where not enabled and disabled_reason = 'gone')::integer as gone,
              (select count(*) from webhook_endpoints where not enabled and disabled_reason = 'failing')::integer as failing`,
      );
      return rows[0];
    };
    new Gauge({
      name: "notification_webhook_deliveries_backlog",
      help: "Webhook deliveries not yet made: all of them (retries included), and those due now",
      labelNames: ["state"] as const,
      registers: [registry],
      aggregator: READ_ON_SCRAPE,
      async collect() {
        try {
          const state = await webhookState();
          this.set({ state: "waiting" }, state?.deliveries ?? 0);
          this.set({ state: "due" }, state?.due ?? 0);
        } catch {
          // Postgres unavailable: leave the last values.
        }
      },
    });
    new Gauge({
      name: "notification_webhook_endpoints_disabled",
      help: "Webhook endpoints the service disabled, by reason: gone (a 410) or failing (5 days without a success)",
      labelNames: ["reason"] as const,
      registers: [registry],
      aggregator: READ_ON_SCRAPE,
      async collect() {
        try {
          const state = await webhookState();
          this.set({ reason: "gone" }, state?.gone ?? 0);
          this.set({ reason: "failing" }, state?.failing ?? 0);
        } catch {
          // Postgres unavailable: leave the last values.
        }
      },
    });
  }

  return {
    registry,
    /** The text `/metrics` answers: this process's (a cluster's API process asks its supervisor). */
    scrape: (): Promise<string> => registry.metrics(),
    observeRequest(method: string, route: string, status: number, seconds: number) {
      httpDuration.observe({ method, route, status: String(status) }, seconds);
    },
    messageAccepted(channel: string, tier: string) {
      accepted.inc({ channel, tier });
    },
    /** Records a final state the worker just wrote. */
    messageFinished(state: MessageState) {
      if (state.status === "initial" || state.status === "accepted" || state.status === "pending") return;
      const labels = { channel: state.message.channel, tier: state.message.priority, status: state.status };
      finished.inc(labels);
      deliveryLatency.observe(labels, (Date.parse(state.updatedAt) - Date.parse(state.acceptedAt)) / 1000);
    },
    providerError(channel: Channel, provider: string, errorClass: FailureClass) {
      providerErrors.inc({ channel, provider, class: errorClass });
    },
    /** A delivery held back by a throughput limit (docs/decisions/0048): its job handed back. */
    throughputWait(channel: Channel, limit: string, senderKind: string, provider: string) {
      throughputWaits.inc({ channel, limit, sender_kind: senderKind, provider });
    },
    throughputRetake(channel: Channel, limit: string, senderKind: string, provider: string) {
      throughputRetakes.inc({ channel, limit, sender_kind: senderKind, provider });
    },
    redisError(kind: PersistentRedisError) {
      redisErrors.inc({ kind });
    },
    redisStalled(stalled: boolean) {
      redisStalled.set(stalled ? 1 : 0);
    },
    /** An attempt moved from provider `from` of a list to `to`. */
    providerFailover(channel: string, from: string, to: string) {
      failovers.inc({ channel, from, to });
    },
    /** Where the breakers of the worker's provider lists are read, on each scrape. */
    watchProviderBreakers(read: () => Iterable<BreakerGaugeReading>) {
      readBreakers = read;
    },
    /** One provider's receipt (status callback), by what came of it. */
    receipt(provider: string, outcome: string) {
      receipts.inc({ provider, outcome });
    },
    /** One webhook POST: `success` or its error class. */
    webhookAttempt(outcome: string) {
      webhookAttempts.inc({ outcome });
    },
    /** A webhook's 2xx, `lagSeconds` after its event. */
    webhookDelivered(lagSeconds: number) {
      webhookLag.observe(lagSeconds);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
