import { createHash, randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabase, type Database } from "../../../db/client.js";
import { createClientOnboardingApp } from "../../../src/client-onboarding/app.js";
import { MAX_CLIENT_ID, newClientId } from "../../../src/client-onboarding/client-id.js";
import { registerClient } from "../../../src/client-onboarding/clients.js";
import { loadClientOnboardingConfig } from "../../../src/client-onboarding/config.js";
import type { ClientOnboardingDeps } from "../../../src/client-onboarding/types.js";

const ONBOARD = "/encryption-service/api/v1/onboard";
const TEST_IP_HEADER = "x-test-client-ip";

const databaseUrl = inject("databaseUrl");
const { db, sql } = createDatabase({ url: databaseUrl, poolSize: 10 });
const unreachable = createDatabase({
  url: "postgres://postgres@127.0.0.1:1/nothing",
  poolSize: 1,
  connectTimeoutSeconds: 1,
});
afterAll(async () => {
  await sql.end({ timeout: 5 });
  await unreachable.sql.end({ timeout: 1 });
});

/** The app against this run's database; each request's client IP comes from a test header. */
function buildApp(
  options: { env?: Record<string, string>; db?: Database; now?: () => Date; logger?: pino.Logger } = {},
) {
  const deps: ClientOnboardingDeps = {
    config: loadClientOnboardingConfig({
      NODE_ENV: "test",
      DATABASE_URL: databaseUrl,
      ONBOARD_RATE_LIMIT: "1000",
      ...options.env,
    }),
    db: options.db ?? db,
    logger: options.logger ?? pino({ level: "silent" }),
    now: options.now ?? (() => new Date()),
    clientIp: (c) => c.req.header(TEST_IP_HEADER) ?? "unknown",
  };
  return createClientOnboardingApp(deps);
}

const app = buildApp();

/** An app name no other test uses. */
function uniqueAppName(label = "app"): string {
  return `${label}-${randomUUID().slice(0, 12)}`;
}

/** An address of the IPv6 documentation range no other test uses. */
function uniqueIp(): string {
  const hex = randomUUID().replaceAll("-", "");
  return `2001:db8:${hex.slice(0, 4)}:${hex.slice(4, 8)}::${hex.slice(8, 12)}`;
}

function onboard(
  target: ReturnType<typeof buildApp>,
  body: unknown,
  options: { ip?: string; contentType?: string | null } = {},
) {
  const headers: Record<string, string> = { [TEST_IP_HEADER]: options.ip ?? uniqueIp() };
  if (options.contentType !== null) headers["content-type"] = options.contentType ?? "application/json";
  return target.request(ONBOARD, {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function storedRows(appName: string) {
  return sql`select * from encryption.clients where lower(app_name) = lower(${appName})`;
}

interface Registration {
  id: number;
  apiKey: string;
  appName: string;
  contactEmail: string;
  createdAt: string;
}

describe("POST /encryption-service/api/v1/onboard", () => {
  describe("a new app", () => {
    it("gets 201 with an integer id, a one-time enc_ key, its trimmed name, its e-mail and an ISO UTC createdAt", async () => {
      const appName = uniqueAppName("Billing");
      const before = Date.now();
      const res = await onboard(app, { appName: `  ${appName}  `, contactEmail: "ops@example.com" });

      expect(res.status).toBe(201);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(res.headers.get("cache-control")).toBe("no-store");
      const body = (await res.json()) as Registration;
      expect(Object.keys(body).sort()).toEqual(["apiKey", "appName", "contactEmail", "createdAt", "id"]);
      expect(Number.isInteger(body.id)).toBe(true);
      expect(body.id).toBeGreaterThan(0);
      expect(body.apiKey).toMatch(/^enc_[A-Za-z0-9_-]{43}$/);
      expect(body.appName).toBe(appName);
      expect(body.contactEmail).toBe("ops@example.com");
      expect(body.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      const createdAt = Date.parse(body.createdAt);
      expect(createdAt).toBeGreaterThanOrEqual(before - 5_000);
      expect(createdAt).toBeLessThanOrEqual(Date.now() + 5_000);
    });

    it("is stored with the SHA-256 hash and prefix of its key, and no column holds the raw key", async () => {
      const appName = uniqueAppName();
      const res = await onboard(app, { appName, contactEmail: "dev@example.com" });
      expect(res.status).toBe(201);
      const { id, apiKey } = (await res.json()) as Registration;

      const rows = await storedRows(appName);
      expect(rows).toHaveLength(1);
      const row = rows[0] ?? {};
      expect(row.id).toBe(id);
      expect(row.app_name).toBe(appName);
      expect(row.contact_email).toBe("dev@example.com");
      expect(row.api_key_hash).toBe(createHash("sha256").update(apiKey).digest("hex"));
      expect(row.api_key_prefix).toBe(apiKey.slice(0, 12));
      const secretPart = apiKey.slice("enc_".length);
      for (const [column, value] of Object.entries(row)) {
        const text = value instanceof Date ? value.toISOString() : String(value);
        expect(text.includes(secretPart), `column ${column} contains the raw key`).toBe(false);
      }
    });

    it("gets a different key from every other app", async () => {
      const first = (await (
        await onboard(app, { appName: uniqueAppName(), contactEmail: "a@example.com" })
      ).json()) as Registration;
      const second = (await (
        await onboard(app, { appName: uniqueAppName(), contactEmail: "a@example.com" })
      ).json()) as Registration;
      expect(first.apiKey).not.toBe(second.apiKey);
      expect(second.id).not.toBe(first.id);
    });

    it("gets an id that tells nothing of how many registered: consecutive registrations get scattered, unordered ids", async () => {
      const ids: number[] = [];
      for (let i = 0; i < 12; i++) {
        const res = await onboard(app, { appName: uniqueAppName("count"), contactEmail: "a@example.com" });
        ids.push(((await res.json()) as Registration).id);
      }
      for (const id of ids) {
        expect(Number.isInteger(id)).toBe(true);
        expect(id).toBeGreaterThan(0);
        expect(id).toBeLessThanOrEqual(MAX_CLIENT_ID);
      }
      const gaps = ids.slice(1).map((id, i) => id - (ids[i] ?? 0));
      // A sequence gives gaps of 1 (or a few, with other tests registering meanwhile), all positive.
      expect(gaps.filter((gap) => Math.abs(gap) < 1000)).toHaveLength(0);
      expect(gaps.some((gap) => gap < 0)).toBe(true);
    });

    it("draws its id again when the one drawn is taken, and keeps the app's name, e-mail and key", async () => {
      const takenName = uniqueAppName("taken");
      const taken = (await (
        await onboard(app, { appName: takenName, contactEmail: "a@example.com" })
      ).json()) as Registration;
      const draws = [taken.id, taken.id, newClientId()];
      const appName = uniqueAppName("redrawn");
      const client = await registerClient(
        db,
        { appName, contactEmail: "b@example.com" },
        () => draws.shift() ?? 0,
      );

      expect(draws).toHaveLength(0);
      expect(client.id).not.toBe(taken.id);
      const [row] = await storedRows(appName);
      expect(row?.id).toBe(client.id);
      expect(row?.api_key_hash).toBe(createHash("sha256").update(client.apiKey).digest("hex"));
      expect((await storedRows(takenName))[0]?.id).toBe(taken.id);
    });

    it("may use a name of exactly 100 characters and an e-mail address of exactly 254", async () => {
      const appName = uniqueAppName().padEnd(100, "x");
      const contactEmail = `${"m".repeat(254 - "@example.com".length)}@example.com`;
      const res = await onboard(app, { appName, contactEmail });
      expect(res.status).toBe(201);
      expect(((await res.json()) as Registration).contactEmail).toBe(contactEmail);
    });
  });

  describe("a body that breaks the schema gets 400 naming the problem, and nothing is stored", () => {
    const name = "__NAME__";
    it.each([
      ["appName is missing", { contactEmail: "a@example.com" }, /appName: is required/],
      ["contactEmail is missing", { appName: name }, /contactEmail: is required/],
      ["the body is an empty object", {}, /appName: is required.*contactEmail: is required/],
      [
        "contactEmail is not an e-mail address",
        { appName: name, contactEmail: "not-an-email" },
        /contactEmail: must be a valid e-mail address/,
      ],
      [
        "an unknown field is sent",
        { appName: name, contactEmail: "a@example.com", plan: "gold" },
        /Unrecognized key.*"plan"/,
      ],
      [
        "appName is only spaces",
        { appName: "   ", contactEmail: "a@example.com" },
        /appName: must not be empty/,
      ],
      [
        "appName is 101 characters",
        { appName: "x".repeat(101), contactEmail: "a@example.com" },
        /appName: must be at most 100 characters/,
      ],
      [
        "contactEmail is 255 characters",
        { appName: name, contactEmail: `${"m".repeat(255 - "@example.com".length)}@example.com` },
        /contactEmail: must be at most 254 characters/,
      ],
      ["appName is a number", { appName: 42, contactEmail: "a@example.com" }, /appName: must be a string/],
      ["the body is a JSON array", [{ appName: name, contactEmail: "a@example.com" }], /expected object/],
    ])("when %s", async (_situation, template, expected) => {
      const appName = uniqueAppName("bad");
      const body = JSON.parse(JSON.stringify(template).replaceAll(name, appName));
      const res = await onboard(app, body);

      expect(res.status).toBe(400);
      const { error } = (await res.json()) as { error: string };
      expect(error).toMatch(expected);
      expect(await storedRows(appName)).toHaveLength(0);
    });
  });

  it("answers malformed JSON with 400", async () => {
    const res = await onboard(app, '{"appName": "x", ');
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "Malformed JSON body" });
  });

  it.each([
    ["text/plain", "text/plain"],
    ["form data", "application/x-www-form-urlencoded"],
    ["no content type", null],
  ])("answers a body sent as %s with 415", async (_situation, contentType) => {
    const appName = uniqueAppName();
    const res = await onboard(app, { appName, contactEmail: "a@example.com" }, { contentType });
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({ error: "Content-Type must be application/json" });
    expect(await storedRows(appName)).toHaveLength(0);
  });

  it("answers a body over 64 KiB with 413", async () => {
    const appName = uniqueAppName();
    const res = await onboard(app, {
      appName,
      contactEmail: "a@example.com",
      padding: "x".repeat(70 * 1024),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ error: "Request body must be at most 64 KiB" });
    expect(await storedRows(appName)).toHaveLength(0);
  });

  it("answers 409 when the name is already registered in another case, and keeps the first registration", async () => {
    const appName = uniqueAppName("Acme");
    const first = await onboard(app, { appName, contactEmail: "first@example.com" });
    expect(first.status).toBe(201);

    const second = await onboard(app, { appName: appName.toUpperCase(), contactEmail: "second@example.com" });
    expect(second.status).toBe(409);
    expect(await second.json()).toEqual({
      error: `An app named "${appName.toUpperCase()}" is already registered`,
    });
    const rows = await storedRows(appName);
    expect(rows.map((r) => r.contact_email)).toEqual(["first@example.com"]);
  });

  it("registers exactly one of 20 concurrent requests for one name and answers the other 19 with 409", async () => {
    const appName = uniqueAppName("Race");
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        onboard(app, {
          appName: i % 2 === 0 ? appName : appName.toLowerCase(),
          contactEmail: `racer${i}@example.com`,
        }),
      ),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(19);
    expect(await storedRows(appName)).toHaveLength(1);
  });

  describe("rate limit per client IP", () => {
    it("answers 429 with Retry-After once an IP used its allowance, while another IP still registers", async () => {
      const limited = buildApp({ env: { ONBOARD_RATE_LIMIT: "2", ONBOARD_RATE_WINDOW_MS: "60000" } });
      const noisy = uniqueIp();

      expect(
        (await onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip: noisy }))
          .status,
      ).toBe(201);
      expect((await onboard(limited, { appName: 42 }, { ip: noisy })).status).toBe(400);

      const blockedName = uniqueAppName();
      const blocked = await onboard(
        limited,
        { appName: blockedName, contactEmail: "a@example.com" },
        { ip: noisy },
      );
      expect(blocked.status).toBe(429);
      const retryAfter = Number(blocked.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(59);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(await blocked.json()).toEqual({ error: `Too many requests; retry in ${retryAfter} s` });
      expect(await storedRows(blockedName)).toHaveLength(0);

      const other = await onboard(
        limited,
        { appName: uniqueAppName(), contactEmail: "b@example.com" },
        { ip: uniqueIp() },
      );
      expect(other.status).toBe(201);
    });

    it("counts every address of one IPv6 /64 as one client, and another /64 as another", async () => {
      const limited = buildApp({ env: { ONBOARD_RATE_LIMIT: "2", ONBOARD_RATE_WINDOW_MS: "60000" } });
      const network = uniqueIp().split("::")[0] ?? "";
      const register = (ip: string) =>
        onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip });

      expect((await register(`${network}::1`)).status).toBe(201);
      expect((await register(`${network}:ffff:ffff:ffff:fffe`)).status).toBe(201);
      const rotated = await register(`${network}:1234:5678:9abc:def0`);
      expect(rotated.status).toBe(429);
      expect(Number(rotated.headers.get("retry-after"))).toBeGreaterThan(0);

      expect((await register(uniqueIp())).status).toBe(201);
    });

    it("counts an IPv4 client the same whether the socket writes it as IPv4 or IPv4-mapped IPv6", async () => {
      const limited = buildApp({ env: { ONBOARD_RATE_LIMIT: "1", ONBOARD_RATE_WINDOW_MS: "60000" } });
      const octet = () => Math.floor(Math.random() * 254) + 1;
      const ip = `198.51.${octet()}.${octet()}`;
      const register = (address: string) =>
        onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip: address });

      expect((await register(ip)).status).toBe(201);
      expect((await register(`::ffff:${ip}`)).status).toBe(429);
    });

    it("lets a limited IP in again once its window has passed", async () => {
      const limited = buildApp({ env: { ONBOARD_RATE_LIMIT: "1", ONBOARD_RATE_WINDOW_MS: "1000" } });
      const ip = uniqueIp();
      expect(
        (await onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip })).status,
      ).toBe(201);
      expect(
        (await onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip })).status,
      ).toBe(429);
      const deadline = Date.now() + 5_000;
      let status = 429;
      while (status === 429 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        status = (await onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip }))
          .status;
      }
      expect(status).toBe(201);
    });

    it("does not count requests to other routes", async () => {
      const limited = buildApp({ env: { ONBOARD_RATE_LIMIT: "1" } });
      const ip = uniqueIp();
      for (let i = 0; i < 3; i++) {
        expect((await limited.request("/healthz", { headers: { [TEST_IP_HEADER]: ip } })).status).toBe(200);
      }
      expect(
        (await onboard(limited, { appName: uniqueAppName(), contactEmail: "a@example.com" }, { ip })).status,
      ).toBe(201);
    });
  });

  describe("when the database fails", () => {
    it("answers an unexpected error with a generic 500, and logs it with the request id", async () => {
      const lines: string[] = [];
      const logger = pino(
        { level: "error" },
        new Writable({
          write(chunk, _encoding, done) {
            lines.push(String(chunk));
            done();
          },
        }),
      );
      const failingDb = {
        insert() {
          throw new Error("disk on fire at /var/lib/postgresql");
        },
      } as unknown as Database;
      const broken = buildApp({ db: failingDb, logger });

      const res = await onboard(broken, { appName: uniqueAppName(), contactEmail: "a@example.com" });
      expect(res.status).toBe(500);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ error: "Internal server error" });
      expect(text).not.toContain("disk on fire");
      const logged = lines.map(
        (line) => JSON.parse(line) as { msg: string; requestId?: string; err?: { message: string } },
      );
      expect(logged).toHaveLength(1);
      expect(logged[0]?.msg).toBe("unexpected error");
      expect(logged[0]?.err?.message).toBe("disk on fire at /var/lib/postgresql");
      expect(logged[0]?.requestId).toBe(res.headers.get("x-request-id"));
    });

    it("answers 503 with Retry-After when Postgres cannot be reached", async () => {
      const offline = buildApp({ db: unreachable.db });
      const res = await onboard(offline, { appName: uniqueAppName(), contactEmail: "a@example.com" });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("5");
      expect(await res.json()).toEqual({ error: "Service temporarily unavailable; retry shortly" });
    });
  });
});

describe("other routes", () => {
  it("reports health on /healthz", async () => {
    const res = await app.request("/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it.each([
    ["GET", "/encryption-service/api/v1/nothing-here"],
    ["GET", ONBOARD],
    ["POST", "/api/v1/onboarding/organizations/prod-1"],
  ])("answers %s %s with a JSON 404", async (method, path) => {
    const res = await app.request(path, {
      method,
      headers: { "content-type": "application/json" },
      body: method === "GET" ? null : "{}",
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: `No route for ${method} ${path}` });
  });
});
