import { randomUUID } from "node:crypto";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDatabase, type Database } from "../../../db/client.js";
import { createClientOnboardingApp } from "../../../src/client-onboarding/app.js";
import { loadClientOnboardingConfig } from "../../../src/client-onboarding/config.js";
import { fetchDocument, type OpenApiDocument, responseChecker } from "../../support/openapi.js";

const ONBOARD = "/encryption-service/api/v1/onboard";
const databaseUrl = inject("databaseUrl");
const { db, sql } = createDatabase({ url: databaseUrl, poolSize: 4 });
const unreachable = createDatabase({
  url: "postgres://postgres@127.0.0.1:1/nothing",
  poolSize: 1,
  connectTimeoutSeconds: 1,
});
afterAll(async () => {
  await sql.end({ timeout: 5 });
  await unreachable.sql.end({ timeout: 1 });
});

function buildApp(options: { db?: Database; rateLimit?: number } = {}) {
  return createClientOnboardingApp({
    config: loadClientOnboardingConfig({
      NODE_ENV: "test",
      DATABASE_URL: databaseUrl,
      ONBOARD_RATE_LIMIT: String(options.rateLimit ?? 1000),
    }),
    db: options.db ?? db,
    logger: pino({ level: "silent" }),
    now: () => new Date(),
    clientIp: () => "192.0.2.1",
  });
}

const app = buildApp();
let document: OpenApiDocument;
let expectDocumented: ReturnType<typeof responseChecker>;
beforeAll(async () => {
  document = await fetchDocument(app);
  expectDocumented = responseChecker(document);
});

function onboard(
  body: unknown,
  options: { target?: ReturnType<typeof buildApp>; contentType?: string } = {},
) {
  return (options.target ?? app).request(ONBOARD, {
    method: "POST",
    headers: { "content-type": options.contentType ?? "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

describe("the client-onboarding service's OpenAPI document", () => {
  it("is OpenAPI 3.1, its own, with its one route", () => {
    expect(document.openapi).toBe("3.1.0");
    expect(document.info).toMatchObject({ title: "Encryption service", version: "1.0" });
    expect(document.servers?.length).toBeGreaterThan(0);
    expect(Object.keys(document.paths)).toEqual([ONBOARD]);
    expect(Object.keys(document.paths[ONBOARD] ?? {})).toEqual(["post"]);
  });

  it("serves the interactive reference as HTML at /docs", async () => {
    const response = await app.request("/docs");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await response.text()).toContain("/openapi.json");
  });

  it("describes every response of the onboarding route", async () => {
    const appName = `doc-${randomUUID().slice(0, 12)}`;
    const valid = { appName, contactEmail: "dev@example.com" };
    const limited = buildApp({ rateLimit: 1 });
    const cases = [
      () => onboard(valid), // 201
      () => onboard(valid), // 409
      () => onboard({ ...valid, extra: 1 }), // 400
      () => onboard("{ nope"), // 400
      () => onboard(valid, { contentType: "text/plain" }), // 415
      () => onboard({ ...valid, padding: "x".repeat(70_000) }), // 413
      () => onboard({ appName: `${appName}-x`, contactEmail: "dev@example.com" }, { target: limited }), // 201
      () => onboard(valid, { target: limited }), // 429
      () => onboard(valid, { target: buildApp({ db: unreachable.db }) }), // 503
    ];
    const statuses = [];
    for (const call of cases) {
      const response = await call();
      statuses.push(response.status);
      await expectDocumented(response, "post", ONBOARD);
    }
    expect(statuses).toEqual([201, 409, 400, 400, 415, 413, 201, 429, 503]);
  });
});
