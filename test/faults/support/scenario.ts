import { randomUUID } from "node:crypto";
import type postgres from "postgres";
import { inject } from "vitest";
import { createDatabase, type Database } from "../../../db/client.js";
import { dropDatabase, ensureDatabase, runMigrations } from "../../../db/migrate.js";
import { testContentVault } from "../../support/content-keys.js";
import { freePort, procfile, type RunningProcess, runProcess, waitForHttp } from "../../support/processes.js";
import { FakeProvider } from "./fake-provider.js";
import { RedisServer } from "./redis-server.js";
import { type FaultResult, recordResult } from "./report.js";
import { TcpProxy } from "./tcp-proxy.js";

const TERMINAL = new Set(["success", "failed", "rejected"]);

export interface ScenarioOptions {
  /** Environment for every web and worker process of the scenario (on top of the defaults). */
  env?: Record<string, string>;
  /** Deliver through a fake Twilio answering after this many ms (otherwise: the simulator). */
  providerLatencyMs?: number;
  redis?: { maxmemoryPolicy?: string };
}

export interface SendResult {
  status: number;
  id: string | undefined;
  elapsedMs: number;
  body: Record<string, unknown>;
  headers: Headers;
}

/** A process the scenario restarts when it crashes. */
export interface Supervised {
  readonly crashes: string[];
  /** The output of every incarnation so far. */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** One message's events, as the audit sees them. */
export interface MessageAudit {
  id: string;
  seqs: number[];
  types: string[];
  terminal: number;
  attemptsStarted: number;
  /** Attempts whose provider answer was recorded (retry scheduled for a real failure, or the final outcome). */
  answered: number;
  interrupted: number;
  /** Outcomes that may or may not follow a provider call (`ttl_expired`). */
  unsure: number;
  retryCount: number;
  status: string;
}

/** A final event that records the provider's answer to the last attempt. */
function answeredEnd(type: string, reason: string | undefined): boolean {
  if (type === "success") return true;
  if (type === "rejected") return reason === "recipient_refused";
  if (type === "failed") return reason !== "ttl_expired" && reason !== "outcome_unknown";
  return false;
}

export interface Audit {
  messages: Map<string, MessageAudit>;
  /** Accepted (202) ids with no final state. */
  lost: string[];
  duplicatedFinal: string[];
  seqGaps: string[];
  interrupted: number;
  /** With the fake provider: messages sent more often than their events can explain. */
  unexplainedSends: string[];
}

/**
 * One fault scenario's world: a fresh database (created, migrated, dropped at the end) reached
 * through a TCP proxy the test can cut, a redis-server of its own, optionally a fake provider,
 * and the Procfile's web and worker processes started on demand against those.
 */
export class FaultScenario {
  readonly name: string;
  readonly started = Date.now();
  readonly databaseName: string;
  readonly directUrl: string;
  readonly proxy: TcpProxy;
  readonly redis: RedisServer;
  readonly provider: FakeProvider | undefined;
  readonly sql: postgres.Sql;
  readonly db: Database;
  readonly #dbClose: () => Promise<void>;
  readonly env: Record<string, string>;
  readonly base: string;
  readonly processes: Array<{ name: string; process: RunningProcess }> = [];
  /** Ids of messages the API accepted (202), in order. */
  readonly accepted: string[] = [];
  apiKey = "";
  organizationId = "";
  #closing = false;

  private constructor(init: {
    name: string;
    databaseName: string;
    directUrl: string;
    proxy: TcpProxy;
    redis: RedisServer;
    provider: FakeProvider | undefined;
    webPort: number;
    env: Record<string, string>;
  }) {
    this.name = init.name;
    this.databaseName = init.databaseName;
    this.directUrl = init.directUrl;
    this.proxy = init.proxy;
    this.redis = init.redis;
    this.provider = init.provider;
    this.base = `http://127.0.0.1:${init.webPort}`;
    const { db, sql } = createDatabase({ url: init.directUrl, poolSize: 4 });
    this.db = db;
    this.sql = sql;
    this.#dbClose = () => sql.end({ timeout: 5 });
    const proxied = new URL(init.directUrl);
    proxied.host = `127.0.0.1:${init.proxy.port}`;
    this.env = {
      NODE_ENV: "test",
      DATABASE_URL: proxied.toString(),
      REDIS_URL: init.redis.url,
      PORT: String(init.webPort),
      QUEUE_PREFIX: `fault-${randomUUID().slice(0, 8)}`,
      LOG_LEVEL: "info",
      WORKER_METRICS_PORT: "0",
      RETRY_BASE_DELAY_MS: "20",
      SWEEP_INTERVAL_MS: "200",
      SWEEP_GRACE_MS: "500",
      DATABASE_PROBE_INTERVAL_MS: "200",
      ...init.provider?.env,
      ...init.env,
    };
  }

  static async start(name: string, options: ScenarioOptions = {}): Promise<FaultScenario> {
    const databaseName = `ntf_fault_${name.replace(/[^a-z0-9]/gi, "_").toLowerCase()}_${randomUUID().slice(0, 8)}`;
    const direct = new URL(inject("databaseUrl"));
    direct.pathname = `/${databaseName}`;
    await ensureDatabase(direct.toString());
    await runMigrations(direct.toString());
    const proxy = await TcpProxy.start({ host: direct.hostname, port: Number(direct.port || 5432) });
    const redis = await RedisServer.start(options.redis);
    const provider =
      options.providerLatencyMs !== undefined
        ? await FakeProvider.start(options.providerLatencyMs)
        : undefined;
    return new FaultScenario({
      name,
      databaseName,
      directUrl: direct.toString(),
      proxy,
      redis,
      provider,
      webPort: await freePort(),
      env: options.env ?? {},
    });
  }

  /** Starts the Procfile's web process and waits until it answers /healthz. */
  async startWeb(env: Record<string, string> = {}): Promise<RunningProcess> {
    const web = this.#spawn("web", { LOG_LEVEL: "warn", ...env });
    await waitForHttp(`${this.base}/healthz`, 15_000).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${web.output()}`);
    });
    return web;
  }

  /** Starts the Procfile's worker process and waits for its start-up line. */
  async startWorker(env: Record<string, string> = {}): Promise<RunningProcess> {
    const worker = this.#spawn("worker", env);
    await waitFor(
      () => worker.output().includes("delivery worker started") || undefined,
      15_000,
      "worker start",
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${worker.output()}`);
    });
    return worker;
  }

  /**
   * A worker restarted whenever it dies unasked, as a platform restarts a crashed process; every
   * crash is kept (exit code and the end of its output) for the test to report.
   */
  async superviseWorker(env: Record<string, string> = {}): Promise<Supervised> {
    let current = await this.startWorker(env);
    let stopping = false;
    let earlier = "";
    const crashes: string[] = [];
    const watch = (child: RunningProcess) => {
      void child.exited.then(async (code) => {
        if (stopping || this.#closing) return;
        const tail = child.output().split("\n").filter(Boolean).slice(-8).join("\n");
        crashes.push(`exit ${code}: ${tail}`);
        earlier += child.output();
        current = await this.startWorker(env);
        watch(current);
      });
    };
    watch(current);
    return {
      crashes,
      output: () => earlier + current.output(),
      stop: async (signal = "SIGTERM") => {
        stopping = true;
        return current.stop(signal);
      },
    };
  }

  #spawn(type: "web" | "worker", env: Record<string, string>): RunningProcess {
    const command = procfile()[type];
    if (!command) throw new Error(`no ${type} line in the Procfile`);
    const process = runProcess(command, { ...this.env, ...env });
    this.processes.push({ name: `${type}#${this.processes.length + 1}`, process });
    return process;
  }

  /** Onboards one organization through the API; its key is used by {@link send}. */
  async onboard(): Promise<void> {
    const response = await fetch(`${this.base}/api/v1/onboarding/organizations/fault-${this.name}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ organizations: [{ name: `Faults ${randomUUID().slice(0, 8)}`, active: true }] }),
      signal: AbortSignal.timeout(10_000),
    });
    if (response.status !== 201) throw new Error(`onboarding: ${response.status} ${await response.text()}`);
    const { organizations } = (await response.json()) as {
      organizations: Array<{ id: string; apiKey: string }>;
    };
    this.apiKey = organizations[0]?.apiKey ?? "";
    this.organizationId = organizations[0]?.id ?? "";
  }

  /**
   * POSTs one SMS; a 202's id joins {@link accepted}. The body is unique per message unless given;
   * `fields` go beside `payload` (`send_at`).
   */
  async send(
    to = "+14155550100",
    body = `fault ${randomUUID()}`,
    apiKey = this.apiKey,
    fields: Record<string, unknown> = {},
  ): Promise<SendResult> {
    const started = performance.now();
    const response = await fetch(`${this.base}/api/v1/notifications/sms`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: JSON.stringify({ payload: { to, body }, ...fields }),
      signal: AbortSignal.timeout(15_000),
    });
    const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    const elapsedMs = performance.now() - started;
    const id = response.status === 202 ? String(json.request_id) : undefined;
    if (id) this.accepted.push(id);
    return { status: response.status, id, elapsedMs, body: json, headers: response.headers };
  }

  async get(path: string): Promise<{ status: number; elapsedMs: number; body: unknown; headers: Headers }> {
    const started = performance.now();
    const response = await fetch(`${this.base}${path}`, {
      headers: { "x-api-key": this.apiKey },
      signal: AbortSignal.timeout(15_000),
    });
    const body: unknown = await response.json().catch(() => undefined);
    return {
      status: response.status,
      elapsedMs: performance.now() - started,
      body,
      headers: response.headers,
    };
  }

  /** Statuses of the given messages, straight from the database (not through the proxy). */
  async statuses(ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.sql<{ message_id: string; status: string }[]>`
      select message_id, status from messages where message_id in ${this.sql(ids)}`;
    return new Map(rows.map((row) => [row.message_id, row.status]));
  }

  /** Polls until every given message is final; returns the ids still unfinished at the deadline. */
  async waitForFinal(ids: readonly string[], timeoutMs: number): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const statuses = await this.statuses(ids);
      const open = ids.filter((id) => !TERMINAL.has(statuses.get(id) ?? ""));
      if (open.length === 0 || Date.now() > deadline) return open;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Everything the fault tests assert about the events of this scenario's organization. */
  async audit(): Promise<Audit> {
    const rows = await this.sql<
      { message_id: string; seq: number; type: string; retry_count: number; data: Record<string, unknown> }[]
    >`select message_id, seq, type, retry_count, data from message_events
      where organization_id = ${this.organizationId || null} order by message_id, seq`;
    const messages = new Map<string, MessageAudit>();
    for (const row of rows) {
      let audit = messages.get(row.message_id);
      if (!audit) {
        audit = {
          id: row.message_id,
          seqs: [],
          types: [],
          terminal: 0,
          attemptsStarted: 0,
          answered: 0,
          interrupted: 0,
          unsure: 0,
          retryCount: 0,
          status: "",
        };
        messages.set(row.message_id, audit);
      }
      const data = row.data as { kind?: string; reason?: string; error?: { code?: string } };
      audit.seqs.push(row.seq);
      audit.types.push(row.type === "pending" ? `pending:${data.kind}` : row.type);
      audit.retryCount = row.retry_count;
      audit.status = row.type;
      if (TERMINAL.has(row.type)) audit.terminal++;
      if (data.kind === "attempt_started") audit.attemptsStarted++;
      if (data.error?.code === "attempt_interrupted") audit.interrupted++;
      else if (data.reason === "ttl_expired") audit.unsure++;
      else if (data.kind === "retry_scheduled" || answeredEnd(row.type, data.reason)) audit.answered++;
    }
    const all = [...messages.values()];
    const statuses = await this.statuses(this.accepted);
    const result: Audit = {
      messages,
      // Of every message accepted (whichever organization sent it), those not final.
      lost: this.accepted.filter((id) => !TERMINAL.has(statuses.get(id) ?? "")),
      duplicatedFinal: all.filter((m) => m.terminal > 1).map((m) => m.id),
      seqGaps: all.filter((m) => m.seqs.some((seq, index) => seq !== index + 1)).map((m) => m.id),
      interrupted: all.reduce((sum, m) => sum + m.interrupted, 0),
      unexplainedSends: [],
    };
    if (this.provider) {
      const rows = await this.sql<{ message_id: string; content_enc: Buffer | null }[]>`
        select message_id, content_enc from messages where organization_id = ${this.organizationId || null}`;
      // The bodies are sealed at rest; the test processes' master key opens them.
      const opener = await testContentVault(this.sql, 0).opener(rows.map((row) => row.content_enc));
      for (const { message_id, content_enc } of rows) {
        const audit = messages.get(message_id);
        const body = opener.open(content_enc, this.organizationId, message_id)?.body;
        const sends = typeof body === "string" ? this.provider.sendsOf(body) : 0;
        // Every provider call is an attempt in the events; only an interrupted one may hide a send.
        if (!audit || sends < audit.answered || sends > audit.answered + audit.interrupted + audit.unsure) {
          result.unexplainedSends.push(`${message_id}: ${sends} sends, events ${audit?.types.join(" → ")}`);
        }
      }
    }
    return result;
  }

  /** The report row from an audit. */
  record(audit: Audit, note?: string): FaultResult {
    const final = this.accepted.length - audit.lost.length;
    const result: FaultResult = {
      scenario: this.name,
      accepted: this.accepted.length,
      final,
      lost: audit.lost.length,
      duplicatedFinal: audit.duplicatedFinal.length,
      interrupted: audit.interrupted,
      durationMs: Date.now() - this.started,
      ...(note ? { note } : {}),
    };
    recordResult(result);
    return result;
  }

  /** Every process's output, for a failing test's message. */
  logs(): string {
    return this.processes
      .map(({ name, process }) => `----- ${name}\n${process.output().split("\n").slice(-60).join("\n")}`)
      .join("\n");
  }

  /** Kills whatever is still running, removes the servers and drops the database. */
  async close(): Promise<void> {
    this.#closing = true;
    await Promise.all(this.processes.map(({ process }) => process.stop("SIGKILL")));
    await this.proxy.close();
    await this.redis.kill();
    await this.provider?.close();
    await this.#dbClose();
    await dropDatabase(this.directUrl);
  }
}

/** Polls `check` until it returns a value; fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  what: string,
  intervalMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
