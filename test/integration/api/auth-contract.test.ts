import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiKeys } from "../../../db/schema.js";
import { routes } from "../../../src/api/routes/index.js";
import type { Route } from "../../../src/api/types.js";
import { createHarness, createTemplate, onboard, sendSms } from "../../support/harness.js";

/**
 * The contract every `x-api-key` route honours: missing, malformed, unknown and revoked keys all
 * get the very same 401. It runs for every route of `routes` whose auth is the API key, so a new
 * route is covered by being listed; each call names things that exist for the key's organization
 * (a message, a template, a sender, a webhook endpoint) and sends a JSON body where the route takes one, so nothing but the
 * key can be the reason for the answer.
 */

const h = createHarness({ AUTH_CACHE_TTL_MS: "0" });
afterAll(() => h.close());

const apiKeyRoutes = routes.filter((route) => route.auth === "api-key");

/** How many routes sit behind `x-api-key` today; a route that stops being one must be seen. */
const KNOWN_API_KEY_ROUTES = 35;

const UNKNOWN_KEY = `ntf_${"A".repeat(43)}`;
const TEMPLATE_NAME = "contract";

/** A valid value for each path parameter a route may have, once the organization below exists. */
let pathValues: Record<string, string> = {};
/** The `{id}` of the webhook endpoint routes (the others' `{id}` is a sender's). */
let webhookEndpointId = "";
/** The organization's key, revoked before the contract runs. */
let revokedKey = "";

beforeAll(async () => {
  const org = await onboard(h);
  const sent = await sendSms(h, org.apiKey, { payload: { to: "+14155550100", body: "hello" } });
  expect(sent.status).toBe(202);
  const { request_id } = (await sent.json()) as { request_id: string };
  await createTemplate(h, org.apiKey, { name: TEMPLATE_NAME, code: "<p>Hello *|FNAME|*</p>" });
  const registered = await h.app.request("/api/v1/senders/domains", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": org.apiKey },
    body: JSON.stringify({ domain: "contract.example" }),
  });
  expect(registered.status).toBe(201);
  const sender = (await registered.json()) as { id: string };
  const endpoint = await h.app.request("/api/v1/webhooks/endpoints", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": org.apiKey },
    body: JSON.stringify({ url: "https://hooks.contract.example/in" }),
  });
  expect(endpoint.status).toBe(201);
  webhookEndpointId = ((await endpoint.json()) as { id: string }).id;
  await h.db.update(apiKeys).set({ revokedAt: new Date() }).where(eq(apiKeys.organizationId, org.id));
  revokedKey = org.apiKey;
  pathValues = {
    message_id: request_id,
    name: TEMPLATE_NAME,
    product_id: org.productId,
    organization_id: org.id,
    id: sender.id,
    channel: "sms",
    recipient: "+14155550100",
  };
});

/** The route's path with each `{parameter}` filled in; an unknown parameter name fails loudly. */
function pathOf(route: Route): string {
  const { path, request } = route.definition;
  const values: Record<string, string> = {};
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value =
      name === "id" && path.startsWith("/api/v1/webhooks/") ? webhookEndpointId : pathValues[name];
    if (value === undefined)
      throw new Error(`${path}: no value for the path parameter "${name}"; add one to pathValues`);
    values[name] = value;
    return encodeURIComponent(value);
  });
  if (request?.params)
    expect(request.params.safeParse(values).success, `${path}: ${JSON.stringify(values)}`).toBe(true);
  return filled;
}

function call(route: Route, apiKey: string | undefined): Promise<Response> {
  const takesBody = route.definition.request?.body !== undefined;
  return Promise.resolve(
    h.app.request(pathOf(route), {
      method: route.definition.method.toUpperCase(),
      headers: {
        ...(takesBody ? { "content-type": "application/json" } : {}),
        ...(apiKey === undefined ? {} : { "x-api-key": apiKey }),
      },
      body: takesBody ? "{}" : undefined,
    }),
  );
}

describe("API key contract", () => {
  it("covers every route behind x-api-key", () => {
    expect(apiKeyRoutes).not.toHaveLength(0);
    expect(apiKeyRoutes).toHaveLength(KNOWN_API_KEY_ROUTES);
    for (const route of routes) expect(["api-key", "onboarding"]).toContain(route.auth);
  });

  it.each(
    apiKeyRoutes.map((route) => [`${route.definition.method.toUpperCase()} ${route.definition.path}`, route]),
  )("%s: identical 401s for missing, malformed, unknown and revoked keys", async (_, route) => {
    const responses = await Promise.all([
      call(route, undefined),
      call(route, "not-a-key"),
      call(route, UNKNOWN_KEY),
      call(route, revokedKey),
    ]);
    const bodies = await Promise.all(responses.map((r) => r.json()));
    expect(responses.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    for (const body of bodies) expect(body).toEqual({ error: "Missing or invalid API key" });
  });
});
