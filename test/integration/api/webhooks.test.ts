import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { eq, sql } from "drizzle-orm";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webhookEndpoints } from "../../../db/schema.js";
import { webhookDepsFor } from "../../../src/api/api-process.js";
import { createApp } from "../../../src/api/app.js";
import { rotateWebhookSecret } from "../../../src/messages/webhooks.js";
import { createHarness, expectError, type Harness, onboard } from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";

/**
 * Status webhook endpoints, step 1 (docs/decisions/0035): their routes, their sealed secrets,
 * and the test event, POSTed to a real HTTP server on 127.0.0.1 (allowed by
 * WEBHOOK_ALLOWED_NETWORKS, and over http:// by WEBHOOK_ALLOWED_HOSTS) and verified with the
 * Standard Webhooks library and svix's, never with the service's own code.
 */

const h = createHarness({
  WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1/32",
  WEBHOOK_ALLOWED_HOSTS: "127.0.0.1",
  // A test POST waits at most REQUEST_TIMEOUT_MS - 1 s: 1 s here.
  REQUEST_TIMEOUT_MS: "2000",
});

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** A receiver: records every request; `/redirect` answers 302, `/hang` never answers, the rest 200. */
const received: Received[] = [];
const hanging: IncomingMessage[] = [];
const receiver: Server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const headers = Object.fromEntries(
      Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
    );
    received.push({ path: request.url ?? "", headers, body: Buffer.concat(chunks).toString() });
    if (request.url === "/hang") return void hanging.push(request);
    if (request.url === "/redirect") {
      response.writeHead(302, { location: `${base}/elsewhere` }).end();
      return;
    }
    response.writeHead(200).end("ok");
  });
});
let base = "";
/** A port nothing listens on (a server opened, then closed). */
let closedPort = 0;

beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  closedPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
});
afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  await h.close();
});

interface EndpointRecord {
  id: string;
  url: string;
  events: string[] | null;
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
  secret?: string;
}

interface AttemptRecord {
  id: string;
  event_id: string;
  event_type: string;
  succeeded: boolean;
  status_code: number | null;
  duration_ms: number;
  error: { class: string; code: string } | null;
  next_retry_at: string | null;
}

function call(
  apiKey: string,
  method: string,
  path: string,
  body?: unknown,
  harness: { app: Harness["app"] } = h,
) {
  return Promise.resolve(
    harness.app.request(path, {
      method,
      headers: { "x-api-key": apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
}

async function createEndpoint(apiKey: string, body: Record<string, unknown>): Promise<EndpointRecord> {
  const response = await call(apiKey, "POST", "/api/v1/webhooks/endpoints", body);
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as EndpointRecord;
}

async function sendTest(
  apiKey: string,
  id: string,
  harness: { app: Harness["app"] } = h,
): Promise<AttemptRecord> {
  const response = await call(apiKey, "POST", `/api/v1/webhooks/endpoints/${id}/test`, undefined, harness);
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as AttemptRecord;
}

function deliveriesTo(path: string): Received[] {
  return received.filter((request) => request.path === path);
}

/** Verifies a delivery with both libraries; returns the parsed body (throws if either refuses). */
function verifyWith(secret: string, delivery: Received): unknown {
  const headers = {
    "webhook-id": delivery.headers["webhook-id"] ?? "",
    "webhook-timestamp": delivery.headers["webhook-timestamp"] ?? "",
    "webhook-signature": delivery.headers["webhook-signature"] ?? "",
  };
  const standard = new StandardWebhook(secret).verify(delivery.body, headers);
  expect(new SvixWebhook(secret).verify(delivery.body, headers)).toEqual(standard);
  return standard;
}

describe("webhook endpoints", () => {
  it("are created with a whsec_ secret shown once, read, listed a page at a time, changed and deleted", async () => {
    const org = await onboard(h);
    const created = await createEndpoint(org.apiKey, {
      url: "https://hooks.example.com/in",
      events: ["message.succeeded", "message.failed"],
      description: "ours",
    });
    expect(created).toMatchObject({
      url: "https://hooks.example.com/in",
      events: ["message.succeeded", "message.failed"],
      description: "ours",
      enabled: true,
      disabled_reason: null,
      previous_secret_expires_at: null,
    });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    const keyBytes = Buffer.from(created.secret?.slice("whsec_".length) ?? "", "base64").length;
    expect(keyBytes).toBeGreaterThanOrEqual(24);
    expect(keyBytes).toBeLessThanOrEqual(64);

    const read = await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${created.id}`);
    expect(read.status).toBe(200);
    const { secret, ...withoutSecret } = created;
    expect(await read.json()).toEqual(withoutSecret);

    const second = await createEndpoint(org.apiKey, { url: "https://two.example.com/", enabled: false });
    expect(second).toMatchObject({ events: null, description: null, enabled: false });
    const third = await createEndpoint(org.apiKey, { url: "https://three.example.com/" });
    const first = await call(org.apiKey, "GET", "/api/v1/webhooks/endpoints?limit=2");
    const page1 = (await first.json()) as { endpoints: EndpointRecord[]; next_cursor: string | null };
    expect(page1.endpoints.map((e) => e.id)).toEqual([created.id, second.id]);
    expect(JSON.stringify(page1)).not.toContain("whsec_");
    const next = await call(
      org.apiKey,
      "GET",
      `/api/v1/webhooks/endpoints?limit=2&cursor=${page1.next_cursor}`,
    );
    const page2 = (await next.json()) as { endpoints: EndpointRecord[]; next_cursor: string | null };
    expect(page2).toEqual({ endpoints: [expect.objectContaining({ id: third.id })], next_cursor: null });

    const patched = await call(org.apiKey, "PATCH", `/api/v1/webhooks/endpoints/${second.id}`, {
      events: null,
      description: "changed",
      enabled: true,
    });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({
      id: second.id,
      events: null,
      description: "changed",
      enabled: true,
    });

    const deleted = await call(org.apiKey, "DELETE", `/api/v1/webhooks/endpoints/${second.id}`);
    expect(deleted.status).toBe(204);
    await expectError(await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${second.id}`), 404);
    await expectError(await call(org.apiKey, "DELETE", `/api/v1/webhooks/endpoints/${second.id}`), 404);
  });

  it("refuse bad input with 400, 415 and 422", async () => {
    const org = await onboard(h);
    const post = (body: unknown) => call(org.apiKey, "POST", "/api/v1/webhooks/endpoints", body);
    await expectError(await post({}), 400, /url/);
    await expectError(await post({ url: "not a url" }), 400, /url/);
    await expectError(await post({ url: "https://a.example/", colour: "red" }), 400, /colour/);
    await expectError(await post({ url: "https://a.example/", events: ["message.exploded"] }), 400, /events/);
    await expectError(await post({ url: "https://a.example/", events: [] }), 400, /events/);
    await expectError(await post({ url: "https://a.example/", enabled: "yes" }), 400, /enabled/);
    await expectError(await post({ url: "ftp://a.example/" }), 422, /https/);
    await expectError(await post({ url: "http://a.example/" }), 422, /WEBHOOK_ALLOWED_HOSTS/);
    await expectError(await post({ url: "https://user:pw@a.example/" }), 422, /password/);
    const noType = await h.app.request("/api/v1/webhooks/endpoints", {
      method: "POST",
      headers: { "x-api-key": org.apiKey },
      body: JSON.stringify({ url: "https://a.example/" }),
    });
    await expectError(noType, 415);
    await expectError(await call(org.apiKey, "GET", "/api/v1/webhooks/endpoints/not-a-uuid"), 400);
    await expectError(await call(org.apiKey, "GET", "/api/v1/webhooks/endpoints?cursor=nope"), 400, /cursor/);
    const endpoint = await createEndpoint(org.apiKey, { url: "https://a.example/" });
    await expectError(
      await call(org.apiKey, "PATCH", `/api/v1/webhooks/endpoints/${endpoint.id}`, {
        url: "http://b.example/",
      }),
      422,
    );
  });

  it("of another organization are a 404 identical to an unknown id, on every route", async () => {
    const owner = await onboard(h);
    const other = await onboard(h);
    const endpoint = await createEndpoint(owner.apiKey, { url: `${base}/tenancy` });
    const unknown = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    const routes: Array<[string, string, unknown?]> = [
      ["GET", ""],
      ["PATCH", "", { description: "mine now" }],
      ["DELETE", ""],
      ["POST", "/rotate-secret"],
      ["POST", "/test"],
      ["GET", "/attempts"],
    ];
    for (const [method, suffix, body] of routes) {
      const theirs = await call(
        other.apiKey,
        method,
        `/api/v1/webhooks/endpoints/${endpoint.id}${suffix}`,
        body,
      );
      const none = await call(other.apiKey, method, `/api/v1/webhooks/endpoints/${unknown}${suffix}`, body);
      expect(theirs.status, `${method} ${suffix}`).toBe(404);
      expect(await theirs.json()).toEqual(await none.json());
    }
    const list = await call(other.apiKey, "GET", "/api/v1/webhooks/endpoints");
    expect(await list.json()).toEqual({ endpoints: [], next_cursor: null });
    // Nothing was sent, changed or deleted.
    expect(deliveriesTo("/tenancy")).toHaveLength(0);
    const still = await call(owner.apiKey, "GET", `/api/v1/webhooks/endpoints/${endpoint.id}`);
    expect(await still.json()).toMatchObject({ description: null, previous_secret_expires_at: null });
  });

  it("are at most 10 per organization: the 11th is a 409", async () => {
    const org = await onboard(h);
    for (let i = 0; i < 10; i++) await createEndpoint(org.apiKey, { url: `https://hooks.example.com/${i}` });
    await expectError(
      await call(org.apiKey, "POST", "/api/v1/webhooks/endpoints", { url: "https://hooks.example.com/10" }),
      409,
      /10 webhook endpoints/,
    );
    // Another organization is not affected.
    await createEndpoint((await onboard(h)).apiKey, { url: "https://hooks.example.com/other" });
  });

  it("keep their secrets sealed: neither the secret nor its key bytes are in the database", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: "https://sealed.example.com/" });
    const rotated = await call(org.apiKey, "POST", `/api/v1/webhooks/endpoints/${endpoint.id}/rotate-secret`);
    const { secret: newSecret } = (await rotated.json()) as { secret: string };
    const rows = await h.db.execute(sql`select * from webhook_endpoints where id = ${endpoint.id}`);
    const text = await h.db.execute(
      sql`select t::text as row, encode(secret_sealed, 'escape') as a, encode(previous_secret_sealed, 'escape') as b
          from webhook_endpoints t where id = ${endpoint.id}`,
    );
    const dump = JSON.stringify([rows, text]);
    for (const secret of [endpoint.secret ?? "", newSecret]) {
      const keyBase64 = secret.slice("whsec_".length);
      expect(dump).not.toContain(keyBase64);
      expect(dump).not.toContain(Buffer.from(keyBase64, "base64").toString("hex"));
    }
    const [row] = await h.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id));
    expect(row?.secretSealed.includes(Buffer.from(newSecret))).toBe(false);
    expect(row?.secretSealed.includes(Buffer.from(newSecret.slice(6), "base64"))).toBe(false);
  });
});

describe("the test event", () => {
  it("is POSTed signed per Standard Webhooks, verified by the standard's library and svix's, and recorded", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/ok`, events: ["message.failed"] });
    const attempt = await sendTest(org.apiKey, endpoint.id);
    expect(attempt).toMatchObject({
      event_type: "webhook.test",
      succeeded: true,
      status_code: 200,
      error: null,
      next_retry_at: null,
      gave_up: false,
    });
    const [delivery, ...more] = deliveriesTo("/ok");
    expect(more).toHaveLength(0);
    if (!delivery) throw new Error("nothing delivered");
    expect(delivery.headers["webhook-id"]).toBe(attempt.event_id);
    expect(delivery.headers["content-type"]).toBe("application/json");
    const event = verifyWith(endpoint.secret ?? "", delivery);
    expect(event).toMatchObject({
      type: "webhook.test",
      data: { endpoint_id: endpoint.id, organization_id: org.id },
    });
    // A forged body or another secret does not verify.
    expect(() => verifyWith(endpoint.secret ?? "", { ...delivery, body: `${delivery.body} ` })).toThrow();
    const otherSecret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    expect(() => new StandardWebhook(otherSecret).verify(delivery.body, delivery.headers)).toThrow();

    const attempts = await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${endpoint.id}/attempts`);
    expect(await attempts.json()).toEqual({ attempts: [attempt], next_cursor: null });
  });

  it("after a rotation is signed by the new secret and, for 24 h, the old one too", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/rotation` });
    const rotated = await call(org.apiKey, "POST", `/api/v1/webhooks/endpoints/${endpoint.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const after = (await rotated.json()) as EndpointRecord;
    expect(after.secret).toMatch(/^whsec_/);
    expect(after.secret).not.toBe(endpoint.secret);
    const expires = Date.parse(after.previous_secret_expires_at ?? "");
    expect(Math.abs(expires - Date.now() - 24 * 3600_000)).toBeLessThan(60_000);

    await sendTest(org.apiKey, endpoint.id);
    const [during] = deliveriesTo("/rotation");
    if (!during) throw new Error("nothing delivered");
    expect(during.headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    verifyWith(after.secret ?? "", during);
    verifyWith(endpoint.secret ?? "", during);

    // Once the 24 hours are over, only the new secret signs.
    await h.db
      .update(webhookEndpoints)
      .set({ previousSecretExpiresAt: new Date(Date.now() - 1000) })
      .where(eq(webhookEndpoints.id, endpoint.id));
    await sendTest(org.apiKey, endpoint.id);
    const [, later] = deliveriesTo("/rotation");
    if (!later) throw new Error("nothing delivered");
    expect(later.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    verifyWith(after.secret ?? "", later);
    expect(() => verifyWith(endpoint.secret ?? "", later)).toThrow();
  });

  it("given two rotations at once, keeps both new secrets: the later signs, the earlier beside it", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/concurrent` });
    // Both requests read the endpoint before either writes.
    const [stored] = await h.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id));
    if (!stored) throw new Error("no endpoint");
    const deps = { db: h.db, now: h.deps.now, newId: h.deps.newId, ...h.deps.webhooks };
    const secrets: string[] = [];
    for (const rotation of [rotateWebhookSecret(deps, stored), rotateWebhookSecret(deps, stored)]) {
      secrets.push((await rotation)?.secret ?? "");
    }
    await sendTest(org.apiKey, endpoint.id);
    const [delivery] = deliveriesTo("/concurrent");
    if (!delivery) throw new Error("nothing delivered");
    for (const secret of secrets) verifyWith(secret, delivery);
    expect(() => verifyWith(endpoint.secret ?? "", delivery)).toThrow();
  });

  it("after WEBHOOK_SECRET_KEY changed, rotates and signs with the new secret, leaving out the one that no longer opens", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/rekeyed` });
    const rekeyed = {
      app: createApp({
        ...h.deps,
        webhooks: webhookDepsFor({ ...h.config, WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString("base64") }),
      }),
    };
    const rotated = await call(
      org.apiKey,
      "POST",
      `/api/v1/webhooks/endpoints/${endpoint.id}/rotate-secret`,
      undefined,
      rekeyed,
    );
    expect(rotated.status).toBe(200);
    const { secret } = (await rotated.json()) as EndpointRecord;
    expect(await sendTest(org.apiKey, endpoint.id, rekeyed)).toMatchObject({ succeeded: true });
    const [delivery] = deliveriesTo("/rekeyed");
    if (!delivery) throw new Error("nothing delivered");
    expect(delivery.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    verifyWith(secret ?? "", delivery);
  });

  it("records a 3xx (not followed), a time-out and a refused connection as failed attempts", async () => {
    const org = await onboard(h);
    const redirect = await createEndpoint(org.apiKey, { url: `${base}/redirect` });
    expect(await sendTest(org.apiKey, redirect.id)).toMatchObject({
      succeeded: false,
      status_code: 302,
      error: { class: "redirect", code: "http_302" },
    });
    expect(deliveriesTo("/redirect")).toHaveLength(1);
    expect(deliveriesTo("/elsewhere")).toHaveLength(0);

    const hang = await createEndpoint(org.apiKey, { url: `${base}/hang` });
    const timedOut = await sendTest(org.apiKey, hang.id);
    expect(timedOut).toMatchObject({
      succeeded: false,
      status_code: null,
      error: { class: "timeout", code: "ETIMEDOUT" },
    });
    expect(timedOut.duration_ms).toBeGreaterThanOrEqual(900);

    const dead = await createEndpoint(org.apiKey, { url: `http://127.0.0.1:${closedPort}/` });
    expect(await sendTest(org.apiKey, dead.id)).toMatchObject({
      succeeded: false,
      status_code: null,
      error: { class: "connection", code: "ECONNREFUSED" },
    });

    const listed = await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${hang.id}/attempts`);
    expect(await listed.json()).toEqual({ attempts: [timedOut], next_cursor: null });
  });

  it("is refused at connect time to a private address WEBHOOK_ALLOWED_NETWORKS does not allow, whatever push's OUTBOUND_ALLOWED_NETWORKS allows", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/private` });
    // The same stack, but its webhooks allow no private network (the default), while push allows 127.0.0.1.
    const config = {
      ...h.config,
      OUTBOUND_ALLOWED_NETWORKS: h.config.WEBHOOK_ALLOWED_NETWORKS,
      WEBHOOK_ALLOWED_NETWORKS: [],
    };
    const guarded = createApp({ ...h.deps, webhooks: webhookDepsFor(config) });
    const attempt = await sendTest(org.apiKey, endpoint.id, { app: guarded });
    expect(attempt).toMatchObject({
      succeeded: false,
      status_code: null,
      error: { class: "address_refused", code: "ERR_OUTBOUND_ADDRESS_REFUSED" },
    });
    expect(deliveriesTo("/private")).toHaveLength(0);
  });

  it("sends at most 5 test events at once per organization, then 429 with Retry-After; another organization is not held", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/limited` });
    const path = `/api/v1/webhooks/endpoints/${endpoint.id}/test`;
    const answers = await Promise.all(Array.from({ length: 6 }, () => call(org.apiKey, "POST", path)));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 200, 200, 200, 429]);
    const refused = answers.find((answer) => answer.status === 429);
    if (!refused) throw new Error("none refused");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    await expectError(refused, 429, /webhook test event/);
    expect(deliveriesTo("/limited")).toHaveLength(5);
    const other = await onboard(h);
    const theirs = await createEndpoint(other.apiKey, { url: `${base}/limited-other` });
    expect(await sendTest(other.apiKey, theirs.id)).toMatchObject({ succeeded: true });
  });

  it("pages attempts newest first", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, { url: `${base}/paged` });
    const sent = [];
    for (let i = 0; i < 3; i++) sent.push(await sendTest(org.apiKey, endpoint.id));
    const path = `/api/v1/webhooks/endpoints/${endpoint.id}/attempts`;
    const first = (await (await call(org.apiKey, "GET", `${path}?limit=2`)).json()) as {
      attempts: AttemptRecord[];
      next_cursor: string;
    };
    expect(first.attempts.map((a) => a.id)).toEqual([sent[2]?.id, sent[1]?.id]);
    const second = await (
      await call(org.apiKey, "GET", `${path}?limit=2&cursor=${first.next_cursor}`)
    ).json();
    expect(second).toEqual({ attempts: [sent[0]], next_cursor: null });
  });
});

describe("the OpenAPI document", () => {
  it("documents the webhook operations under Webhooks, behind ApiKeyAuth, and their answers as given", async () => {
    const document = await fetchDocument(h.app);
    const expectDocumented = responseChecker(document) as (
      r: Response,
      m: string,
      p: string,
    ) => Promise<void>;
    const LIST = "/api/v1/webhooks/endpoints";
    const ONE = "/api/v1/webhooks/endpoints/{id}";
    const operations: Array<[string, string]> = [
      [LIST, "post"],
      [LIST, "get"],
      [ONE, "get"],
      [ONE, "patch"],
      [ONE, "delete"],
      [`${ONE}/rotate-secret`, "post"],
      [`${ONE}/test`, "post"],
      [`${ONE}/attempts`, "get"],
    ];
    for (const [path, method] of operations) {
      const operation = document.paths[path]?.[method] as { tags?: string[]; security?: unknown } | undefined;
      expect(operation?.tags, `${method} ${path}`).toEqual(["Webhooks"]);
      expect(operation?.security, `${method} ${path}`).toEqual([{ ApiKeyAuth: [] }]);
    }

    const org = await onboard(h);
    const created = await call(org.apiKey, "POST", LIST, { url: `${base}/documented` });
    await expectDocumented(created.clone(), "post", LIST);
    const { id } = (await created.json()) as EndpointRecord;
    const at = (suffix = "") => `${LIST}/${id}${suffix}`;
    const answers: Array<[Promise<Response>, string, string]> = [
      [call(org.apiKey, "GET", LIST), "get", LIST],
      [call(org.apiKey, "GET", at()), "get", ONE],
      [call(org.apiKey, "PATCH", at(), { description: "documented" }), "patch", ONE],
      [call(org.apiKey, "POST", at("/rotate-secret")), "post", `${ONE}/rotate-secret`],
      [call(org.apiKey, "POST", at("/test")), "post", `${ONE}/test`],
      [call(org.apiKey, "POST", LIST, { url: "http://documented.example/" }), "post", LIST],
    ];
    for (const [response, method, path] of answers) await expectDocumented(await response, method, path);
    await expectDocumented(await call(org.apiKey, "GET", at("/attempts")), "get", `${ONE}/attempts`);
  });
});
