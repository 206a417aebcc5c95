import { createECDH, randomUUID } from "node:crypto";
import fc from "fast-check";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createClientOnboardingApp } from "../../../src/client-onboarding/app.js";
import { loadClientOnboardingConfig } from "../../../src/client-onboarding/config.js";
import { NOTIFICATION_TYPES } from "../../../src/domain/priority.js";
import { createHarness, createTemplate, onboard } from "../../support/harness.js";

/**
 * Property-based fuzzing of every endpoint's path, headers and body, in-process against the real
 * database: whatever arrives, the API never answers 5xx, every 4xx is JSON `{ "error": string }`
 * and leaves nothing behind (rows counted before and after, scoped to this file's organization
 * and product). Bounded runs keep the file to seconds; a failure prints fast-check's seed and the
 * shrunk counterexample.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 120);
const h = createHarness();
const encryption = createClientOnboardingApp({
  config: loadClientOnboardingConfig({
    NODE_ENV: "test",
    DATABASE_URL: inject("databaseUrl"),
    ONBOARD_RATE_LIMIT: "1000000",
  }),
  db: h.db,
  logger: pino({ level: "silent" }),
  now: () => new Date(),
  clientIp: () => "fuzz",
});
let org: Awaited<ReturnType<typeof onboard>>;
let messageId = "";

beforeAll(async () => {
  org = await onboard(h);
  const sent = await h.app.request("/api/v1/notifications/sms", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": org.apiKey },
    body: JSON.stringify({ payload: { to: "+14155550100", body: "fuzz seed" } }),
  });
  messageId = ((await sent.json()) as { request_id: string }).request_id;
  await createTemplate(h, org.apiKey, { name: "welcome", code: "<p>Hello *|NAME|*</p>" });
});

afterAll(async () => {
  await h.close();
});

// ---- arbitraries -------------------------------------------------------------------------------

const PRINTABLE = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
/** A header value `fetch` can carry: printable ASCII. */
const headerValue = fc.string({ unit: fc.constantFrom(...PRINTABLE), maxLength: 80 });
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  headerValue,
);
const base64url = fc.constantFrom(
  ..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".split(""),
);
const keyShaped = fc.string({ unit: base64url, minLength: 43, maxLength: 43 }).map((s) => `ntf_${s}`);
const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
/** Mostly absent: a field the endpoint does not know. */
const rarely = <T>(arb: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

const contentType = fc.oneof(
  { weight: 4, arbitrary: fc.constant("application/json") },
  fc.constantFrom(
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/json;",
    "application/jsonx",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "",
  ),
  headerValue,
);
/** This file's key most of the time, otherwise anything a client might send. */
const apiKey = () =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(org.apiKey) }, headerValue, keyShaped, fc.constant(undefined));

/** Any JSON text, any string, or (often) something close to what the endpoint expects. */
function bodyOf(nearValid: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: nearValid.map((value) => JSON.stringify(value)) },
    { weight: 1, arbitrary: fc.jsonValue().map((value) => JSON.stringify(value)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom("", "{", "null", "[]", '{"payload":', "\u0000", "{}".repeat(10)),
    },
  );
}

/** Mostly a valid value, sometimes a wrong one, sometimes anything at all. */
const pick = <T>(valid: fc.Arbitrary<T>, wrong: fc.Arbitrary<unknown> = text) =>
  fc.oneof(
    { weight: 8, arbitrary: valid as fc.Arbitrary<unknown> },
    { weight: 1, arbitrary: wrong },
    { weight: 1, arbitrary: fc.jsonValue() },
  );

const phone = fc.oneof(
  fc.constantFrom("+1", "", "++1", "+999", "0", "+15005550001x", "1".repeat(30), "14155550100"),
  fc.stringMatching(/^\+?[0-9 ()-]{0,20}$/),
  text,
);
const validPhone = fc.constantFrom(
  "+14155550100",
  " +1 (415) 555-0100 ",
  "+44 20 7946 0958",
  "+15005550001",
  "+4915112345678",
);
const smsBody = fc.record(
  {
    payload: pick(
      fc.record(
        {
          to: pick(validPhone, phone),
          body: pick(
            fc.string({ minLength: 1, maxLength: 60 }).map((body) => `fuzz ${body}`),
            fc.constantFrom("", " ", "\n\t", "x".repeat(1601)),
          ),
          sender: pick(optional(fc.constantFrom("ACME", "12345", "+14155550100", "A B", "Notify1"))),
          extra: rarely(fc.jsonValue()),
        },
        { requiredKeys: ["to", "body", "sender", "extra"] },
      ),
    ),
    retry_enabled: pick(optional(fc.boolean())),
    notification_type: pick(optional(fc.constantFrom(...NOTIFICATION_TYPES))),
    unknown_field: rarely(fc.jsonValue()),
  },
  { requiredKeys: ["payload", "retry_enabled", "notification_type", "unknown_field"] },
);
const emailAddress = pick(
  fc.constantFrom("ada@example.com", "ops@acme.test", "transient-once@simulator.notify.test"),
  fc.oneof(fc.emailAddress(), fc.constantFrom("", "a@", "@b.c", "a b@c.d", `${"x".repeat(250)}@e.co`)),
);
const emailBody = fc.record(
  {
    payload: pick(
      fc.record(
        {
          template_name: pick(
            fc.constantFrom("welcome", "missing", "a.b-c_d"),
            fc.constantFrom("", " x", "é", "x".repeat(101)),
          ),
          template_content: pick(
            optional(
              fc.array(fc.record({ name: fc.string({ minLength: 1, maxLength: 10 }), content: text }), {
                maxLength: 3,
              }),
            ),
          ),
          message: pick(
            fc.record(
              {
                from_email: emailAddress,
                from_name: pick(optional(text), fc.constantFrom("a\r\nBcc: x@y.z", "x".repeat(101))),
                subject: pick(
                  fc.string({ minLength: 1, maxLength: 40 }).map((v) => `fuzz ${v}`),
                  fc.constantFrom("", " ", "a\nb", "x".repeat(999)),
                ),
                to: pick(
                  fc.array(
                    fc.record(
                      {
                        email: emailAddress,
                        name: pick(optional(text)),
                        type: pick(optional(fc.constantFrom("to", "cc", "bcc"))),
                      },
                      { requiredKeys: ["email", "name", "type"] },
                    ),
                    { minLength: 1, maxLength: 3 },
                  ),
                  fc.constantFrom([], [{ email: "a@b.co", type: "cc" }]),
                ),
                merge_language: pick(
                  optional(fc.constantFrom("mailchimp", "handlebars")),
                  fc.constantFrom("liquid", ""),
                ),
                global_merge_vars: pick(
                  optional(
                    fc.array(
                      fc.record({
                        name: fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,8}$/),
                        content: fc.jsonValue(),
                      }),
                      { maxLength: 3 },
                    ),
                  ),
                ),
                extra: rarely(fc.jsonValue()),
              },
              {
                requiredKeys: [
                  "from_email",
                  "from_name",
                  "subject",
                  "to",
                  "merge_language",
                  "global_merge_vars",
                  "extra",
                ],
              },
            ),
          ),
        },
        { requiredKeys: ["template_name", "template_content", "message"] },
      ),
    ),
    retry_enabled: pick(optional(fc.boolean())),
    notification_type: pick(optional(fc.constantFrom(...NOTIFICATION_TYPES))),
  },
  { requiredKeys: ["payload", "retry_enabled", "notification_type"] },
);
const pushKey = (() => {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return ecdh.getPublicKey().toString("base64url");
})();
const pushBody = fc.record(
  {
    payload: pick(
      fc.record(
        {
          to: pick(
            fc.record(
              {
                endpoint: pick(
                  fc.constantFrom(
                    "https://push.simulator.notify.test/ok",
                    "https://fcm.googleapis.com/fcm/send/abc",
                    "http://127.0.0.1:1/x",
                  ),
                  fc.oneof(
                    fc.webUrl(),
                    fc.constantFrom("", "ftp://x.y/z", "not a url", `https://x.co/${"y".repeat(2100)}`),
                  ),
                ),
                expirationTime: rarely(fc.oneof(fc.constant(null), fc.integer())),
                keys: pick(
                  fc.record({
                    p256dh: pick(fc.constant(pushKey), fc.string({ unit: base64url, maxLength: 90 })),
                    auth: pick(
                      fc.constant("AAAAAAAAAAAAAAAAAAAAAA"),
                      fc.string({ unit: base64url, maxLength: 30 }),
                    ),
                  }),
                ),
              },
              { requiredKeys: ["endpoint", "keys"] },
            ),
          ),
          title: pick(
            fc.string({ minLength: 1, maxLength: 30 }).map((v) => `t ${v}`),
            fc.constantFrom("", " ", "x".repeat(251)),
          ),
          body: pick(
            fc.string({ minLength: 1, maxLength: 60 }).map((v) => `b ${v}`),
            fc.constantFrom("", "x".repeat(2001)),
          ),
          data: rarely(fc.jsonValue()),
          ttl: rarely(pick(fc.integer({ min: 0, max: 2419200 }), fc.constantFrom(-1, 1.5, 2419201, "60"))),
        },
        { requiredKeys: ["to", "title", "body", "data", "ttl"] },
      ),
    ),
    retry_enabled: pick(optional(fc.boolean())),
  },
  { requiredKeys: ["payload", "retry_enabled"] },
);
const templateBody = fc.record(
  {
    name: pick(
      fc.uuid().map((id) => `t-${id}`),
      fc.constantFrom("", "-x", "a b", "x".repeat(101)),
    ),
    code: pick(
      fc.string({ minLength: 1, maxLength: 200 }).map((v) => `<p mc:edit="a">${v}</p>`),
      fc.constantFrom(""),
    ),
    text: rarely(pick(fc.oneof(fc.constant(null), fc.string({ minLength: 1, maxLength: 40 })))),
    other: rarely(fc.jsonValue()),
  },
  { requiredKeys: ["name", "code", "text", "other"] },
);
const onboardingBody = fc.record(
  {
    organizations: pick(
      fc.array(
        pick(
          fc.record(
            {
              name: pick(
                fc.uuid().map((id) => `Fuzz ${id}`),
                fc.constantFrom("", " ", "x".repeat(101)),
              ),
              active: pick(optional(fc.boolean())),
            },
            { requiredKeys: ["name", "active"] },
          ),
        ),
        { minLength: 1, maxLength: 3 },
      ),
      fc.constantFrom(
        [],
        Array.from({ length: 101 }, (_, i) => ({ name: `n${i}` })),
      ),
    ),
    other: rarely(fc.jsonValue()),
  },
  { requiredKeys: ["organizations", "other"] },
);
const encryptionBody = fc.record(
  {
    appName: pick(
      fc.uuid().map((id) => `fuzz-app-${id}`),
      fc.constantFrom("", " ", "x".repeat(101)),
    ),
    contactEmail: pick(
      fc.uuid().map((id) => `ops-${id.slice(0, 8)}@example.com`),
      fc.oneof(fc.emailAddress(), fc.constantFrom("", "a@", "@b.c", "a b@c.d")),
    ),
    other: rarely(fc.jsonValue()),
  },
  { requiredKeys: ["appName", "contactEmail", "other"] },
);

/** A path segment: usually any string, percent-encoded; sometimes raw bytes that are not. */
const segment = fc.oneof(
  { weight: 4, arbitrary: text.map(encodeURIComponent) },
  {
    weight: 1,
    arbitrary: fc.constantFrom("%", "%zz", "%E0%A4%A", "..", ".", "%00", "a%2Fb", "x".repeat(300)),
  },
  { weight: 1, arbitrary: fc.uuid().map(String) },
);

// ---- the contract ------------------------------------------------------------------------------

async function expectContract(response: Response, what: string): Promise<void> {
  const body = await response.text();
  const context = `${what} → ${response.status} ${body.slice(0, 300)}`;
  expect(response.status, context).toBeLessThan(500);
  if (response.status < 400) return;
  expect(response.headers.get("content-type") ?? "", context).toMatch(/^application\/json/);
  const parsed = JSON.parse(body) as Record<string, unknown>;
  expect(Object.keys(parsed), context).toEqual(["error"]);
  expect(typeof parsed.error, context).toBe("string");
  expect(String(parsed.error).length, context).toBeGreaterThan(0);
  expect(String(parsed.error), context).not.toMatch(/\n\s+at /);
}

/** Everything a request could have stored for this file's organization and product. */
async function stored(productId: string): Promise<string> {
  const [counts] = await h.sql`
    select
      (select count(*) from organizations where product_id = ${productId})::int as organizations,
      (select count(*) from api_keys k join organizations o on o.id = k.organization_id
        where o.product_id = ${productId})::int as keys,
      (select count(*) from message_events where organization_id = ${org.id})::int as events,
      (select count(*) from messages where organization_id = ${org.id})::int as messages,
      (select count(*) from idempotency_keys where organization_id = ${org.id})::int as idempotency,
      (select md5(coalesce(string_agg(name || code || coalesce(text, ''), ',' order by name), ''))
        from templates where organization_id = ${org.id}) as templates`;
  const jobs = await h.queue.getJobCountByTypes("waiting", "prioritized", "delayed", "active");
  return JSON.stringify({ ...counts, jobs });
}

function request(
  path: string,
  init: { method: string; headers: Record<string, string | undefined>; body?: string },
) {
  const headers = Object.fromEntries(
    Object.entries(init.headers).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  return new Request(`http://localhost${path}`, { method: init.method, headers, body: init.body });
}

const describeInput = (input: unknown) => JSON.stringify(input).slice(0, 400);

/** The statuses a property produced: the runs must reach the happy path too, not only errors. */
function expectSomeSuccess(statuses: number[]) {
  expect(
    statuses.some((status) => status < 300),
    `statuses: ${[...new Set(statuses)].sort().join(", ")}`,
  ).toBe(true);
  expect(statuses.some((status) => status >= 400)).toBe(true);
}

// ---- the properties ----------------------------------------------------------------------------

describe("fuzzing every endpoint", () => {
  // E-mail and push nest many fields, each sometimes wrong: a known-good body keeps the happy
  // path in every run.
  const validEmail = {
    payload: {
      template_name: "welcome",
      message: { from_email: "a@acme.test", subject: "Hi", to: [{ email: "ada@example.com" }] },
    },
  };
  const validPush = {
    payload: {
      to: {
        endpoint: "https://push.simulator.notify.test/ok",
        keys: { p256dh: pushKey, auth: "AAAAAAAAAAAAAAAAAAAAAA" },
      },
      title: "t",
      body: "b",
    },
  };
  it.each([
    ["sms", smsBody],
    ["email", fc.oneof(fc.constant(validEmail), emailBody)],
    ["push", fc.oneof(fc.constant(validPush), pushBody)],
  ] as const)("POST /api/v1/notifications/%s", async (channel, sendBody) => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        bodyOf(sendBody as fc.Arbitrary<unknown>),
        contentType,
        apiKey(),
        rarely(fc.oneof(headerValue, fc.constantFrom("", "x".repeat(256)))),
        rarely(
          fc.oneof(fc.constantFrom("true", "false", "1", "", "yes"), headerValue.map(encodeURIComponent)),
        ),
        async (body, type, key, idempotencyKey, dryRun) => {
          const before = await stored(org.productId);
          const query = dryRun === undefined ? "" : `?dry_run=${dryRun}`;
          const response = await h.app.request(
            request(`/api/v1/notifications/${channel}${query}`, {
              method: "POST",
              headers: { "content-type": type, "x-api-key": key, "idempotency-key": idempotencyKey },
              body,
            }),
          );
          const input = describeInput({ body, type, key, idempotencyKey, dryRun });
          const status = response.status;
          statuses.push(status);
          await expectContract(response, input);
          if (status >= 400 || status === 200) expect(await stored(org.productId), input).toBe(before);
        },
      ),
      { numRuns: RUNS },
    );
    expectSomeSuccess(statuses);
  });

  it("POST /api/v1/templates and PUT /api/v1/templates/{name}", async () => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("POST", "PUT"),
        bodyOf(templateBody),
        contentType,
        apiKey(),
        fc.oneof(fc.constant("welcome"), segment),
        async (method, body, type, key, name) => {
          const before = await stored(org.productId);
          const path = method === "POST" ? "/api/v1/templates" : `/api/v1/templates/${name}`;
          const response = await h.app.request(
            request(path, { method, headers: { "content-type": type, "x-api-key": key }, body }),
          );
          const input = describeInput({ method, path, body, type, key });
          statuses.push(response.status);
          await expectContract(response, input);
          if (response.status >= 400) expect(await stored(org.productId), input).toBe(before);
        },
      ),
      { numRuns: RUNS },
    );
    expectSomeSuccess(statuses);
  });

  it("POST /api/v1/onboarding/organizations/{productId}", async () => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 3, arbitrary: fc.uuid().map((id) => `fuzz-${id.slice(0, 8)}`) },
          { weight: 1, arbitrary: text },
        ),
        bodyOf(onboardingBody),
        contentType,
        rarely(headerValue),
        async (productId, body, type, authorization) => {
          const before = await stored(productId);
          const response = await h.app.request(
            request(`/api/v1/onboarding/organizations/${encodeURIComponent(productId)}`, {
              method: "POST",
              headers: { "content-type": type, authorization },
              body,
            }),
          );
          const input = describeInput({ productId, body, type, authorization });
          const status = response.status;
          statuses.push(status);
          await expectContract(response, input);
          if (status >= 400) expect(await stored(productId), input).toBe(before);
        },
      ),
      { numRuns: RUNS },
    );
    expectSomeSuccess(statuses);
  });

  it("POST /api/v1/onboarding/organizations/{productId} with malformed paths", async () => {
    await fc.assert(
      fc.asyncProperty(segment, async (productId) => {
        const response = await h.app.request(
          request(`/api/v1/onboarding/organizations/${productId}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ organizations: [{ name: `Fuzz ${randomUUID()}` }] }),
          }),
        );
        await expectContract(response, productId);
      }),
      { numRuns: Math.ceil(RUNS / 2) },
    );
  });

  it("GET /api/v1/onboarding/product/{product_id}/organization/{organization_id}", async () => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ weight: 2, arbitrary: fc.constant(encodeURIComponent(org.productId)) }, segment),
        fc.oneof({ weight: 2, arbitrary: fc.constant(org.id) }, segment),
        apiKey(),
        async (product, organization, key) => {
          const before = await stored(org.productId);
          const response = await h.app.request(
            request(`/api/v1/onboarding/product/${product}/organization/${organization}`, {
              method: "GET",
              headers: { "x-api-key": key },
            }),
          );
          const input = describeInput({ product, organization, key });
          statuses.push(response.status);
          await expectContract(response, input);
          expect(await stored(org.productId), input).toBe(before);
        },
      ),
      { numRuns: RUNS },
    );
    expectSomeSuccess(statuses);
  });

  it("GET /api/v1/messages/{message_id}", async () => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ weight: 2, arbitrary: fc.constant(messageId) }, segment),
        apiKey(),
        async (id, key) => {
          const before = await stored(org.productId);
          const response = await h.app.request(
            request(`/api/v1/messages/${id}`, { method: "GET", headers: { "x-api-key": key } }),
          );
          const input = describeInput({ id, key });
          statuses.push(response.status);
          await expectContract(response, input);
          expect(await stored(org.productId), input).toBe(before);
        },
      ),
      { numRuns: RUNS },
    );
    expectSomeSuccess(statuses);
  });

  it("POST /encryption-service/api/v1/onboard", async () => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(bodyOf(encryptionBody), contentType, async (body, type) => {
        let appName: string | undefined;
        try {
          const parsed = JSON.parse(body) as { appName?: unknown };
          if (typeof parsed?.appName === "string") appName = parsed.appName;
        } catch {
          // not JSON: it cannot name an app
        }
        const count = async () =>
          appName === undefined
            ? 0
            : ((
                await h.sql<{ n: number }[]>`
                  select count(*)::int as n from encryption.clients where lower(app_name) = lower(${appName})`
              )[0]?.n ?? 0);
        const before = await count();
        const response = await encryption.request(
          request("/encryption-service/api/v1/onboard", {
            method: "POST",
            headers: { "content-type": type },
            body,
          }),
        );
        const input = describeInput({ body, type });
        const status = response.status;
        statuses.push(status);
        await expectContract(response, input);
        if (status >= 400) expect(await count(), input).toBe(before);
      }),
      { numRuns: RUNS },
    );
    expectSomeSuccess(statuses);
  });
});
