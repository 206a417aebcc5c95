import { Writable } from "node:stream";
import pino from "pino";
import { v7 as uuidv7 } from "uuid";
import { afterAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { createApp } from "../../../src/api/app.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import { DELIVERY_QUEUE } from "../../../src/store/delivery-queue.js";
import {
  createHarness,
  eventually,
  getMessage,
  onboard,
  sendSms,
  unreachableQueue,
} from "../../support/harness.js";

const h = createHarness();
const withAdmin = createHarness({ ADMIN_USER: "ops", ADMIN_PASSWORD: "board-password" });
const unreachableDb = createDatabase({
  url: "postgres://postgres@127.0.0.1:1/nowhere",
  poolSize: 1,
  connectTimeoutSeconds: 1,
});
afterAll(async () => {
  await h.close();
  await withAdmin.close();
  await unreachableDb.sql.end({ timeout: 1 });
});

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

describe("health", () => {
  it("/healthz says the process is alive", async () => {
    const response = await h.app.request("/healthz");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  });

  it("/readyz is 200 when Postgres and Redis both answer", async () => {
    const response = await h.app.request("/readyz");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ready", checks: { postgres: "ok", redis: "ok" } });
  });

  it("/readyz is 503 naming Postgres when it is unreachable", async () => {
    const app = createApp({ ...h.deps, db: unreachableDb.db });
    const response = await app.request("/readyz");
    expect(response.status).toBe(503);
    const body = (await response.json()) as { status: string; checks: { postgres: string; redis: string } };
    expect(body.status).toBe("unavailable");
    expect(body.checks.redis).toBe("ok");
    // Not the driver's text, which names the internal host and port.
    expect(body.checks.postgres).toBe("unavailable");
  });

  it("/readyz is 503 naming Redis when it is unreachable", async () => {
    const { queue: deadQueue, close: closeDeadQueue } = unreachableQueue(h.config.QUEUE_PREFIX);
    try {
      const response = await createApp({ ...h.deps, queue: deadQueue }).request("/readyz");
      expect(response.status).toBe(503);
      const body = (await response.json()) as { checks: { postgres: string; redis: string } };
      expect(body.checks.postgres).toBe("ok");
      expect(["unavailable", "no answer"]).toContain(body.checks.redis);
      expect(JSON.stringify(body)).not.toContain("127.0.0.1");
    } finally {
      await closeDeadQueue();
    }
  });
});

describe("/metrics", () => {
  async function scrape(app = h.app) {
    const response = await app.request("/metrics");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/text\/plain/);
    return response.text();
  }
  /** The value of the series `name` whose labels include all of `labels`, in any order. */
  const sample = (text: string, name: string, labels: Record<string, string>) => {
    const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
    const line = text.split("\n").find((l) => {
      const match = /^([^{ ]+)\{([^}]*)\} /.exec(l);
      return match?.[1] === name && wanted.every((pair) => match[2]?.split(",").includes(pair));
    });
    return line ? Number(line.split(" ").at(-1)) : 0;
  };

  it("counts accepted messages by channel and tier", async () => {
    const org = await onboard(h);
    const series = [
      "notification_messages_accepted_total",
      { channel: "sms", tier: "critical", process: "web" },
    ] as const;
    const before = sample(await scrape(), ...series);
    for (let i = 0; i < 3; i++) {
      await sendSms(h, org.apiKey, {
        payload: { to: "+14155550100", body: "code" },
        notification_type: "OTP",
      });
    }
    expect(sample(await scrape(), ...series)).toBe(before + 3);
  });

  it("times requests by route pattern and status, never by raw path", async () => {
    const org = await onboard(h);
    await getMessage(h, org.apiKey, "01900000-0000-7000-8000-000000000000");
    const text = await scrape();
    const labels = { method: "GET", route: "/api/v1/messages/:message_id", status: "404", process: "web" };
    expect(sample(text, "http_request_duration_seconds_count", labels)).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain("01900000-0000-7000-8000-000000000000");
  });

  it("reports queue depth by state and the age of the oldest waiting message", async () => {
    const text = await scrape();
    expect(text).toMatch(/^notification_queue_jobs\{.*state="prioritized".*\} \d+$/m);
    expect(text).toMatch(
      /^notification_queue_oldest_waiting_age_seconds\{.*queue="\{deliveries\}".*\} [\d.]+$/m,
    );
  });

  it("reports the age of the oldest outbox row and of the oldest unfinished message, so stalled deliveries show", async () => {
    const org = await onboard(h);
    const tenMinutesAgo = Date.now() - 600_000;
    // No worker runs here: the message stays in the outbox, as while Redis refuses the relay.
    const stalled = createApp({
      ...h.deps,
      now: () => new Date(tenMinutesAgo),
      newId: () => uuidv7({ msecs: tenMinutesAgo }),
    });
    const sent = await stalled.request("/api/v1/notifications/sms", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": org.apiKey },
      body: JSON.stringify({ payload: { to: "+14155550100", body: "stalled" } }),
    });
    expect(sent.status).toBe(202);
    const text = await scrape();
    expect(sample(text, "notification_outbox_oldest_age_seconds", { process: "web" })).toBeGreaterThanOrEqual(
      590,
    );
    expect(
      sample(text, "notification_unfinished_oldest_age_seconds", { process: "web" }),
    ).toBeGreaterThanOrEqual(590);
  });

  it("counts final states, delivery latency and provider errors in the worker", async () => {
    const worker = createHarness();
    try {
      const metrics = createMetrics({ process: "worker", queue: worker.queue, db: worker.db });
      worker.startWorker({ metrics });
      const org = await onboard(worker);
      const sent = await sendSms(worker, org.apiKey, { payload: { to: "+15005550501", body: "retry once" } });
      const { request_id } = (await sent.json()) as { request_id: string };
      await eventually(async () => {
        const record = (await (await getMessage(worker, org.apiKey, request_id)).json()) as {
          status: string;
        };
        return record.status === "success" ? true : undefined;
      });
      const text = await metrics.registry.metrics();
      const final = { channel: "sms", tier: "medium", status: "success", process: "worker" };
      expect(sample(text, "notification_messages_final_total", final)).toBe(1);
      expect(sample(text, "notification_delivery_latency_seconds_count", final)).toBe(1);
      expect(
        sample(text, "notification_provider_errors_total", {
          channel: "sms",
          provider: "simulator",
          class: "transient",
        }),
      ).toBe(1);
    } finally {
      await worker.close();
    }
  });
});

describe("Bull Board at /admin/queues", () => {
  it("is absent (404) when ADMIN_USER and ADMIN_PASSWORD are unset", async () => {
    expect((await h.app.request("/admin/queues")).status).toBe(404);
  });

  it("asks for credentials, and refuses wrong ones", async () => {
    expect((await withAdmin.app.request("/admin/queues")).status).toBe(401);
    const wrong = await withAdmin.app.request("/admin/queues", {
      headers: { authorization: basic("ops", "nope") },
    });
    expect(wrong.status).toBe(401);
  });

  it("shows the delivery queue to the operator", async () => {
    const page = await withAdmin.app.request("/admin/queues", {
      headers: { authorization: basic("ops", "board-password") },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
    const api = await withAdmin.app.request("/admin/queues/api/queues", {
      headers: { authorization: basic("ops", "board-password") },
    });
    expect(api.status).toBe(200);
    const { queues } = (await api.json()) as { queues: Array<{ name: string }> };
    expect(queues.map((q) => q.name)).toEqual([DELIVERY_QUEUE]);
  });
});

describe("request logs", () => {
  it("carry the request id, route and status, and never the API key, the phone number or the body", async () => {
    let output = "";
    const sink = new Writable({
      write(chunk, _encoding, done) {
        output += chunk.toString();
        done();
      },
    });
    const app = createApp({ ...h.deps, logger: pino({ level: "info" }, sink) });
    const org = await onboard(h);
    const response = await app.request("/api/v1/notifications/sms", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": org.apiKey, "x-request-id": "trace-me-42" },
      body: JSON.stringify({ payload: { to: "+14155550123", body: "a very private text" } }),
    });
    expect(response.status).toBe(202);
    const line = output.split("\n").find((l) => l.includes("trace-me-42"));
    expect(line).toBeDefined();
    expect(JSON.parse(line ?? "{}")).toMatchObject({
      requestId: "trace-me-42",
      method: "POST",
      route: "/api/v1/notifications/sms",
      status: 202,
    });
    expect(output).not.toContain(org.apiKey);
    expect(output).not.toContain("4155550123");
    expect(output).not.toContain("very private");
  });
});

describe("Bull Board's login prompt", () => {
  it("answers without credentials with a JSON 401 that carries the Basic challenge", async () => {
    const response = await withAdmin.app.request("/admin/queues");
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toMatch(/^Basic realm="queues"/);
    expect(await response.json()).toEqual({ error: "Authentication required" });
  });
});

describe("response headers", () => {
  it("an answer that carries a key or message content is never cached", async () => {
    const org = await onboard(h);
    const sent = await sendSms(h, org.apiKey, { payload: { to: "+14155550100", body: "private" } });
    expect(sent.headers.get("cache-control")).toBe("no-store");
    const { request_id } = (await sent.json()) as { request_id: string };
    const read = await getMessage(h, org.apiKey, request_id);
    expect(read.headers.get("cache-control")).toBe("no-store");
    const onboarded = await h.app.request("/api/v1/onboarding/organizations/headers-product", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ organizations: [{ name: "Headers" }] }),
    });
    expect(onboarded.status).toBe(201);
    expect(onboarded.headers.get("cache-control")).toBe("no-store");
  });

  it("the HTML pages cannot be framed, sniffed or leak a referrer", async () => {
    const pages = [
      await h.app.request("/docs"),
      await withAdmin.app.request("/admin/queues", {
        headers: { authorization: basic("ops", "board-password") },
      }),
    ];
    for (const page of pages) {
      expect(page.status).toBe(200);
      expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(page.headers.get("x-frame-options")).toBe("DENY");
      expect(page.headers.get("x-content-type-options")).toBe("nosniff");
      expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    }
  });
});
