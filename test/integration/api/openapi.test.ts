import { createECDH, randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { createApp } from "../../../src/api/app.js";
import { operationsRoutes } from "../../../src/observability/operations.js";
import { createHarness, eventually, getMessage, onboard, sendSms } from "../../support/harness.js";
import { fetchDocument, type OpenApiDocument, responseChecker } from "../../support/openapi.js";

const ONBOARDING_TOKEN = "s3cret-onboarding-token";
const h = createHarness({ AUTH_CACHE_TTL_MS: "0", RETRY_BASE_DELAY_MS: "10" });
const guarded = createApp({ ...h.deps, config: { ...h.config, ONBOARDING_TOKEN } });
const unreachable = createDatabase({
  url: "postgres://postgres@127.0.0.1:1/nowhere",
  poolSize: 1,
  connectTimeoutSeconds: 1,
});
const failingIds = createApp({
  ...h.deps,
  newId: () => {
    throw new Error("secret internal detail");
  },
});
const offline = createApp(h.depsOn(unreachable));

let document: OpenApiDocument;
let expectDocumented: ReturnType<typeof responseChecker>;
let org: Awaited<ReturnType<typeof onboard>>;
beforeAll(async () => {
  document = await fetchDocument(h.app);
  expectDocumented = responseChecker(document);
  org = await onboard(h);
  h.startWorker();
});
afterAll(async () => {
  await h.close();
  await unreachable.sql.end({ timeout: 1 });
});

const ONBOARD = "/api/v1/onboarding/organizations/{productId}";
const ORGANIZATION = "/api/v1/onboarding/product/{product_id}/organization/{organization_id}";
const SMS = "/api/v1/notifications/sms";
const MESSAGES = "/api/v1/messages";
const MESSAGE = "/api/v1/messages/{message_id}";
const EVENTS = "/api/v1/messages/{message_id}/events";
const UNKNOWN_ID = "01900000-0000-7000-8000-000000000000";
const EMAIL = "/api/v1/notifications/email";
const PUSH = "/api/v1/notifications/push";
const sms = { payload: { to: "+14155550100", body: "hello", sender: "ACME" } };
const email = {
  payload: {
    template_name: "welcome",
    message: { from_email: "a@acme.test", subject: "Hi", to: [{ email: "b@example.com" }] },
  },
};
const pushKey = createECDH("prime256v1");
pushKey.generateKeys();
const push = {
  payload: {
    to: {
      endpoint: "https://push.example.test/x",
      keys: {
        p256dh: pushKey.getPublicKey().toString("base64url"),
        auth: randomBytes(16).toString("base64url"),
      },
    },
    title: "Hi",
    body: "there",
  },
};

function get(path: string, apiKey: string | undefined, app = h.app) {
  return app.request(path, { headers: apiKey ? { "x-api-key": apiKey } : {} });
}

function postJson(path: string, body: unknown, headers: Record<string, string> = {}, app = h.app) {
  return app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function acceptedId(to = "+14155550100", extra: object = {}) {
  const response = await sendSms(h, org.apiKey, { payload: { to, body: "hello" }, ...extra });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function finished(id: string) {
  return eventually(
    async () => {
      const record = (await (await getMessage(h, org.apiKey, id)).json()) as { status: string };
      return ["success", "failed", "rejected"].includes(record.status) ? record : undefined;
    },
    10_000,
    `message ${id} to finish`,
  );
}

describe("GET /openapi.json", () => {
  it("is an OpenAPI 3.1 document with its title, version, servers and both security schemes", () => {
    expect(document.openapi).toBe("3.1.0");
    expect(document.info).toMatchObject({ title: "Notification API", version: "1.0" });
    expect(document.servers?.length).toBeGreaterThan(0);
    expect(document.components?.securitySchemes).toEqual({
      ApiKeyAuth: expect.objectContaining({ type: "apiKey", in: "header", name: "x-api-key" }),
      OnboardingBearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
    });
  });

  it("documents every route the app serves, and nothing it does not", () => {
    const operatorRoutes = operationsRoutes(h.deps).routes.map((r) => `${r.method} ${r.path}`);
    const notTheApi = new Set([
      ...operatorRoutes,
      "GET /openapi.json",
      "GET /docs",
      "GET /docs/assets/:file",
      // Providers' receipts: Twilio calls it, signed (docs/decisions/0038); not a client's API.
      "POST /callbacks/twilio/sms/:messageId",
    ]);
    // One entry per handler (auth, validators, the route's own), so a set.
    const served = new Set(
      h.app.routes
        .filter((r) => r.method !== "ALL" && !notTheApi.has(`${r.method} ${r.path}`))
        .map((r) => `${r.method} ${r.path.replaceAll(/:([^/]+)/g, "{$1}")}`),
    );
    const documented = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(served).toEqual(new Set(documented));
    expect(documented).toHaveLength(37);
  });

  it("names the security scheme of each route's authentication", () => {
    const security = (path: string, method: string) =>
      (document.paths[path]?.[method] as { security?: unknown } | undefined)?.security;
    expect(security(ONBOARD, "post")).toEqual([{ OnboardingBearer: [] }]);
    for (const [path, method] of [
      [ORGANIZATION, "get"],
      [SMS, "post"],
      [MESSAGES, "get"],
      [MESSAGE, "get"],
      [EVENTS, "get"],
    ] as const) {
      expect(security(path, method), `${method} ${path}`).toEqual([{ ApiKeyAuth: [] }]);
    }
  });
});

describe("GET /docs", () => {
  it("serves the interactive reference as HTML, reading /openapi.json", async () => {
    const response = await h.app.request("/docs");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await response.text()).toContain("/openapi.json");
  });
});

describe("every response matches the document", () => {
  it(`POST ${ONBOARD}`, async () => {
    const product = `prod-${Date.now()}`;
    const one = { organizations: [{ name: "Documented" }] };
    await expectDocumented(
      await postJson(`/api/v1/onboarding/organizations/${product}`, one),
      "post",
      ONBOARD,
    );
    const cases = [
      postJson(`/api/v1/onboarding/organizations/${product}`, one), // 409
      postJson(`/api/v1/onboarding/organizations/${product}`, { organizations: [] }), // 400
      postJson(`/api/v1/onboarding/organizations/${product}`, "{ not json"), // 400
      postJson("/api/v1/onboarding/organizations/bad product!", one), // 400
      postJson(`/api/v1/onboarding/organizations/${product}`, one, { "content-type": "text/plain" }), // 415
      postJson(`/api/v1/onboarding/organizations/${product}`, { padding: "x".repeat(70_000) }), // 413
      postJson(`/api/v1/onboarding/organizations/${product}`, one, {}, guarded), // 401
      postJson(`/api/v1/onboarding/organizations/${product}`, one, {}, offline), // 503
    ];
    const statuses = [];
    for (const response of await Promise.all(cases)) {
      statuses.push(response.status);
      await expectDocumented(response, "post", ONBOARD);
    }
    expect(statuses).toEqual([409, 400, 400, 400, 415, 413, 401, 503]);
  });

  it(`GET ${ORGANIZATION}`, async () => {
    const inactive = await onboard(h, { active: false });
    const cases = [
      get(`/api/v1/onboarding/product/${org.productId}/organization/${org.id}`, org.apiKey), // 200
      get(`/api/v1/onboarding/product/${org.productId}/organization/12345`, org.apiKey), // 400
      get(`/api/v1/onboarding/product/${org.productId}/organization/${UNKNOWN_ID}`, org.apiKey), // 404
      get(`/api/v1/onboarding/product/${org.productId}/organization/${org.id}`, undefined), // 401
      get(`/api/v1/onboarding/product/${inactive.productId}/organization/${inactive.id}`, inactive.apiKey), // 403
      get(`/api/v1/onboarding/product/${org.productId}/organization/${org.id}`, org.apiKey, offline), // 503
    ];
    const statuses = [];
    for (const response of await Promise.all(cases)) {
      statuses.push(response.status);
      await expectDocumented(response, "get", ORGANIZATION);
    }
    expect(statuses).toEqual([200, 400, 404, 401, 403, 503]);
  });

  it.each([
    [SMS, sms],
    [EMAIL, email],
    [PUSH, push],
  ])("POST %s", async (path, body) => {
    const key = { "x-api-key": org.apiKey };
    const idempotent = { ...key, "idempotency-key": `doc-${path}-${Date.now()}` };
    const cases = [
      () => postJson(path, body, key), // 202
      () => postJson(path, body, idempotent), // 202
      () => postJson(path, body, idempotent), // 202, replayed
      () => postJson(path, { ...body, retry_enabled: false }, idempotent), // 422
      () => postJson(`${path}?dry_run=true`, body, key), // 200
      () => postJson(path, { ...body, extra: 1 }, key), // 400
      () => postJson(`${path}?dry_run=maybe`, body, key), // 400
      () => postJson(path, body, { ...key, "idempotency-key": "k".repeat(256) }), // 400
      () => postJson(path, body, { ...key, "content-type": "text/plain" }), // 415
      () => postJson(path, { ...body, padding: "x".repeat(70_000) }, key), // 413
      () => postJson(path, body), // 401
      () => postJson(path, body, key, failingIds), // 500
      () => postJson(path, body, key, offline), // 503
    ];
    const statuses = [];
    for (const call of cases) {
      const response = await call();
      statuses.push(response.status);
      await expectDocumented(response, "post", path);
    }
    expect(statuses).toEqual([202, 202, 202, 422, 200, 400, 400, 400, 415, 413, 401, 500, 503]);
  });

  it(`POST ${SMS}: 403 for an inactive organization, 429 over the send rate`, async () => {
    const inactive = await onboard(h, { active: false });
    const forbidden = await postJson(SMS, sms, { "x-api-key": inactive.apiKey });
    expect(forbidden.status).toBe(403);
    await expectDocumented(forbidden, "post", SMS);

    const slow = createApp({ ...h.deps, config: { ...h.config, SEND_RATE_LIMIT: 1, SEND_RATE_BURST: 1 } });
    const sender = await onboard(h);
    const statuses = [];
    for (let i = 0; i < 2; i++) {
      const response = await postJson(SMS, sms, { "x-api-key": sender.apiKey }, slow);
      statuses.push(response.status);
      await expectDocumented(response, "post", SMS);
    }
    expect(statuses).toEqual([202, 429]);
  });

  it(`GET ${MESSAGES}`, async () => {
    await acceptedId();
    await acceptedId();
    const first = await get(`${MESSAGES}?limit=1`, org.apiKey);
    const { next_cursor } = (await first.clone().json()) as { next_cursor: string };
    const cases = [
      first, // 200, with a cursor
      await get(`${MESSAGES}?limit=1&cursor=${next_cursor}`, org.apiKey), // 200
      await get(`${MESSAGES}?status=failed&channel=email`, org.apiKey), // 200, empty
      await get(`${MESSAGES}?status=lost`, org.apiKey), // 400
      await get(`${MESSAGES}?cursor=nonsense`, org.apiKey), // 400
      await get(MESSAGES, undefined), // 401
      await get(MESSAGES, org.apiKey, offline), // 503
    ];
    for (const response of cases) await expectDocumented(response, "get", MESSAGES);
    expect(cases.map((r) => r.status)).toEqual([200, 200, 200, 400, 400, 401, 503]);
  });

  it(`GET ${MESSAGE} and GET ${EVENTS}, for every kind of event`, async () => {
    const ids = await Promise.all([
      acceptedId("+14155550100"), // success
      acceptedId("+15005550501"), // retry_scheduled, then success
      acceptedId("+15005550001"), // rejected by the provider
      acceptedId("+15005550500", { retry_enabled: false }), // failed
    ]);
    const histories = [];
    for (const id of ids) {
      await finished(id);
      const record = await get(`${MESSAGES}/${id}`, org.apiKey);
      const events = await get(`${MESSAGES}/${id}/events`, org.apiKey);
      histories.push((await events.clone().json()) as { events: { type: string; kind?: string }[] });
      await expectDocumented(record, "get", MESSAGE);
      await expectDocumented(events, "get", EVENTS);
    }
    const kinds = histories.flatMap((h) => h.events.map((e) => (e.kind ? `${e.type}:${e.kind}` : e.type)));
    expect(new Set(kinds)).toEqual(
      new Set([
        "accepted",
        "pending:attempt_started",
        "pending:retry_scheduled",
        "success",
        "rejected",
        "failed",
      ]),
    );
  });

  for (const [name, path] of [
    ["GET /api/v1/messages/{message_id}", MESSAGE],
    ["GET /api/v1/messages/{message_id}/events", EVENTS],
  ] as const) {
    it(`${name}: errors`, async () => {
      const inactive = await onboard(h, { active: false });
      const url = (id: string) => path.replace("{message_id}", id);
      const cases = [
        await get(url("12345"), org.apiKey), // 400
        await get(url(UNKNOWN_ID), org.apiKey), // 404
        await get(url(UNKNOWN_ID), undefined), // 401
        await get(url(UNKNOWN_ID), inactive.apiKey), // 403
        await get(url(UNKNOWN_ID), org.apiKey, offline), // 503
      ];
      for (const response of cases) await expectDocumented(response, "get", path);
      expect(cases.map((r) => r.status)).toEqual([400, 404, 401, 403, 503]);
    });
  }
});

const TEMPLATES = "/api/v1/templates";
describe("every erasure response matches the document", () => {
  const ERASURES = "/api/v1/erasures";
  const ORGANIZATION_DATA = "/api/v1/organizations/{organization_id}/data";

  it(`POST ${ERASURES}`, async () => {
    const key = { "x-api-key": org.apiKey };
    const cases = [
      postJson(ERASURES, { recipient: "+14155550100" }, key), // 200
      postJson(ERASURES, { recipient: "" }, key), // 400
      postJson(ERASURES, "{ nope", key), // 400
      postJson(ERASURES, { recipient: "+14155550100" }), // 401
      postJson(ERASURES, { recipient: "+14155550100" }, { ...key, "content-type": "text/plain" }), // 415
      postJson(ERASURES, { recipient: "+14155550100" }, key, offline), // 503
    ];
    const statuses = [];
    for (const response of await Promise.all(cases)) {
      statuses.push(response.status);
      await expectDocumented(response, "post", ERASURES);
    }
    expect(statuses).toEqual([200, 400, 400, 401, 415, 503]);
  });

  it(`DELETE ${ORGANIZATION_DATA}`, async () => {
    const erased = await onboard(h);
    const remove = (id: string, app = h.app) =>
      app.request(`/api/v1/organizations/${id}/data`, { method: "DELETE" });
    const cases = [
      remove(erased.id), // 200
      remove("not-a-uuid"), // 400
      remove(erased.id, guarded), // 401
      remove(randomUUID()), // 404
      remove(erased.id, offline), // 503
    ];
    const statuses = [];
    for (const response of await Promise.all(cases)) {
      statuses.push(response.status);
      await expectDocumented(response, "delete", ORGANIZATION_DATA);
    }
    expect(statuses).toEqual([200, 400, 401, 404, 503]);
  });
});

const TEMPLATE = "/api/v1/templates/{name}";
const RENDER = "/api/v1/templates/{name}/render";
const template = { name: "documented", code: '<div mc:edit="main">*|FNAME|*</div>' };
// An Invalid Date passes authentication (this harness caches no keys) and fails the handler's write.
const brokenClock = createApp({ ...h.deps, now: () => new Date(Number.NaN) });

describe("every template response matches the document", () => {
  // A fresh unreachable pool per call: postgres.js backs off longer after each failed connect, so
  // reusing `offline` would turn later 503s into request timeouts.
  const offlinePools: ReturnType<typeof createDatabase>[] = [];
  afterAll(() => Promise.all(offlinePools.map((pool) => pool.sql.end({ timeout: 1 }))));
  function offlineApp() {
    const pool = createDatabase({
      url: "postgres://postgres@127.0.0.1:1/nowhere",
      poolSize: 1,
      connectTimeoutSeconds: 1,
    });
    offlinePools.push(pool);
    return createApp(h.depsOn(pool));
  }

  function send(method: "POST" | "PUT" | "DELETE", path: string, body: unknown, headers = {}, app = h.app) {
    return app.request(path, {
      method,
      headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
  }

  it("documents the five template operations under Templates, behind ApiKeyAuth", () => {
    for (const [path, method] of [
      [TEMPLATES, "post"],
      [TEMPLATES, "get"],
      [TEMPLATE, "get"],
      [TEMPLATE, "put"],
      [TEMPLATE, "delete"],
    ] as const) {
      const operation = document.paths[path]?.[method] as { tags?: string[]; security?: unknown } | undefined;
      expect(operation?.tags, `${method} ${path}`).toEqual(["Templates"]);
      expect(operation?.security, `${method} ${path}`).toEqual([{ ApiKeyAuth: [] }]);
    }
  });

  it(`POST ${TEMPLATES}`, async () => {
    const owner = await onboard(h);
    const inactive = await onboard(h, { active: false });
    const key = { "x-api-key": owner.apiKey };
    const cases = [
      () => send("POST", TEMPLATES, { ...template, text: "plain" }, key), // 201
      () => send("POST", TEMPLATES, template, key), // 409
      () => send("POST", TEMPLATES, { ...template, name: "other", subject: "x" }, key), // 400
      () => send("POST", TEMPLATES, { ...template, name: ".bad" }, key), // 400
      () => send("POST", TEMPLATES, "{ not json", key), // 400
      () => send("POST", TEMPLATES, template, { ...key, "content-type": "text/html" }), // 415
      () => send("POST", TEMPLATES, { ...template, code: "x".repeat(2_200_000) }, key), // 413
      () => send("POST", TEMPLATES, template), // 401
      () => send("POST", TEMPLATES, template, { "x-api-key": inactive.apiKey }), // 403
      () => send("POST", TEMPLATES, { ...template, name: "broken" }, key, brokenClock), // 500
      () => send("POST", TEMPLATES, template, key, offlineApp()), // 503
    ];
    const statuses = [];
    for (const request of cases) {
      const response = await request();
      statuses.push(response.status);
      await expectDocumentedAny(response, "post", TEMPLATES);
    }
    expect(statuses).toEqual([201, 409, 400, 400, 400, 415, 413, 401, 403, 500, 503]);
  });

  it(`GET ${TEMPLATES}`, async () => {
    const owner = await onboard(h);
    const empty = await onboard(h);
    const inactive = await onboard(h, { active: false });
    await send("POST", TEMPLATES, template, { "x-api-key": owner.apiKey });
    const cases = [
      await get(TEMPLATES, owner.apiKey), // 200
      await get(TEMPLATES, empty.apiKey), // 200, empty
      await get(TEMPLATES, undefined), // 401
      await get(TEMPLATES, inactive.apiKey), // 403
      await get(TEMPLATES, owner.apiKey, offlineApp()), // 503
    ];
    for (const response of cases) await expectDocumentedAny(response, "get", TEMPLATES);
    expect(cases.map((r) => r.status)).toEqual([200, 200, 401, 403, 503]);
  });

  it(`GET ${TEMPLATE}`, async () => {
    const owner = await onboard(h);
    const inactive = await onboard(h, { active: false });
    const key = { "x-api-key": owner.apiKey };
    await send("POST", TEMPLATES, template, key);
    await send("POST", TEMPLATES, { ...template, name: "with-text", text: "plain" }, key);
    const cases = [
      await get(`${TEMPLATES}/documented`, owner.apiKey), // 200, text null
      await get(`${TEMPLATES}/with-text`, owner.apiKey), // 200
      await get(`${TEMPLATES}/-bad`, owner.apiKey), // 400
      await get(`${TEMPLATES}/missing`, owner.apiKey), // 404
      await get(`${TEMPLATES}/documented`, undefined), // 401
      await get(`${TEMPLATES}/documented`, inactive.apiKey), // 403
      await get(`${TEMPLATES}/documented`, owner.apiKey, offlineApp()), // 503
    ];
    for (const response of cases) await expectDocumentedAny(response, "get", TEMPLATE);
    expect(cases.map((r) => r.status)).toEqual([200, 200, 400, 404, 401, 403, 503]);
  });

  it(`PUT ${TEMPLATE}`, async () => {
    const owner = await onboard(h);
    const inactive = await onboard(h, { active: false });
    const key = { "x-api-key": owner.apiKey };
    await send("POST", TEMPLATES, template, key);
    const url = `${TEMPLATES}/documented`;
    const content = { code: "<p>v2</p>", text: "v2" };
    const cases = [
      () => send("PUT", url, content, key), // 200
      () => send("PUT", url, { code: "<p>v3</p>" }, key), // 200, text null
      () => send("PUT", url, { ...content, name: "renamed" }, key), // 400
      () => send("PUT", `${TEMPLATES}/-bad`, content, key), // 400
      () => send("PUT", `${TEMPLATES}/missing`, content, key), // 404
      () => send("PUT", url, content, { ...key, "content-type": "text/plain" }), // 415
      () => send("PUT", url, { code: "x".repeat(2_200_000) }, key), // 413
      () => send("PUT", url, content), // 401
      () => send("PUT", url, content, { "x-api-key": inactive.apiKey }), // 403
      () => send("PUT", url, content, key, brokenClock), // 500
      () => send("PUT", url, content, key, offlineApp()), // 503
    ];
    const statuses = [];
    for (const request of cases) {
      const response = await request();
      statuses.push(response.status);
      await expectDocumentedAny(response, "put", TEMPLATE);
    }
    expect(statuses).toEqual([200, 200, 400, 400, 404, 415, 413, 401, 403, 500, 503]);
  });

  it(`DELETE ${TEMPLATE}`, async () => {
    const owner = await onboard(h);
    const inactive = await onboard(h, { active: false });
    const key = { "x-api-key": owner.apiKey };
    await send("POST", TEMPLATES, template, key);
    const url = `${TEMPLATES}/documented`;

    const deleted = await send("DELETE", url, undefined, key);
    expect(deleted.status).toBe(204);
    expect(await deleted.text()).toBe("");
    const declared = document.paths[TEMPLATE]?.delete?.responses["204"];
    expect(declared, "DELETE declares 204").toBeDefined();
    expect(declared?.content, "DELETE 204 has no body").toBeUndefined();

    const cases = [
      await send("DELETE", `${TEMPLATES}/-bad`, undefined, key), // 400
      await send("DELETE", url, undefined, key), // 404, already deleted
      await send("DELETE", url, undefined), // 401
      await send("DELETE", url, undefined, { "x-api-key": inactive.apiKey }), // 403
      await send("DELETE", url, undefined, key, offlineApp()), // 503
    ];
    for (const response of cases) await expectDocumentedAny(response, "delete", TEMPLATE);
    expect(cases.map((r) => r.status)).toEqual([400, 404, 401, 403, 503]);
  });

  it(`POST ${RENDER}`, async () => {
    const owner = await onboard(h);
    const key = { "x-api-key": owner.apiKey };
    await send("POST", TEMPLATES, { name: "preview", code: "<p>Hi *|NAME|*</p>" }, key);
    await send("POST", TEMPLATES, { name: "broken", code: "<p>{{#each x}}</p>" }, key);
    const vars = { global_merge_vars: [{ name: "NAME", content: "Ada" }] };
    const cases = [
      await send("POST", `${TEMPLATES}/preview/render`, vars, key), // 200
      await send("POST", `${TEMPLATES}/preview/render`, { ...vars, extra: 1 }, key), // 400
      await send("POST", `${TEMPLATES}/missing/render`, vars, key), // 404
      await send("POST", `${TEMPLATES}/preview/render`, vars, { ...key, "content-type": "text/plain" }), // 415
      await send("POST", `${TEMPLATES}/broken/render`, { merge_language: "handlebars" }, key), // 422
      await send("POST", `${TEMPLATES}/preview/render`, vars), // 401
      await send("POST", `${TEMPLATES}/preview/render`, vars, key, offlineApp()), // 503
    ];
    for (const response of cases) await expectDocumentedAny(response, "post", RENDER);
    expect(cases.map((r) => r.status)).toEqual([200, 400, 404, 415, 422, 401, 503]);
  });
});

/** `expectDocumented` is typed for GET and POST; it looks up whichever operation it is given. */
function expectDocumentedAny(response: Response, method: "get" | "post" | "put" | "delete", path: string) {
  return (expectDocumented as (response: Response, method: string, path: string) => Promise<void>)(
    response,
    method,
    path,
  );
}
