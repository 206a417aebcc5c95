import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsPlugin from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MessageEvent } from "../../../src/domain/events.js";
import {
  type MessageFacts,
  messageWebhookBody,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_TEST_EVENT,
  webhookEventId,
} from "../../../src/domain/webhooks.js";
import { deliverWebhookEvent } from "../../../src/messages/webhooks.js";
import { findWebhookEndpoint } from "../../../src/store/webhooks.js";
import { createHarness, eventually, onboard } from "../../support/harness.js";
import { fetchDocument, type OpenApiDocument } from "../../support/openapi.js";

/**
 * What docs/webhooks.md and the OpenAPI document's `webhooks` promise receivers: the document
 * describes every event body as the service builds it, the guide's example bodies match the
 * document, and the guide's Node receiver, run as it is written with the `standardwebhooks`
 * package, verifies real deliveries, skips duplicates and stale events, and refuses a forged one.
 */

const addFormats = addFormatsPlugin as unknown as typeof addFormatsPlugin.default;
const ROOT = join(import.meta.dirname, "../../..");
const GUIDE = readFileSync(join(ROOT, "docs/webhooks.md"), "utf8");

const h = createHarness({ WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1/32", WEBHOOK_ALLOWED_HOSTS: "127.0.0.1" });
let document: OpenApiDocument & { webhooks?: Record<string, Record<string, WebhookOperation>> };

interface WebhookOperation {
  requestBody?: { content?: Record<string, { schema?: object }> };
  parameters?: Array<{ name: string; in: string }>;
}

beforeAll(async () => {
  document = await fetchDocument(h.app);
});

let receiver: ChildProcess | undefined;
const receiverDir = join(ROOT, "node_modules/.cache/webhooks-docs-test");
afterAll(async () => {
  receiver?.kill();
  rmSync(receiverDir, { recursive: true, force: true });
  await h.close();
});

/** A validator of a webhook's body as the document describes it, objects closed to other fields. */
function bodyValidator(type: string) {
  const schema = document.webhooks?.[type]?.post?.requestBody?.content?.["application/json"]?.schema;
  expect(schema, `webhooks.${type} has a JSON body`).toBeDefined();
  const ajv = new Ajv2020({ allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addKeyword("example");
  const text = JSON.stringify({ ...schema, $defs: document.components?.schemas ?? {} }).replaceAll(
    '"#/components/schemas/',
    '"#/$defs/',
  );
  return ajv.compile(closed(JSON.parse(text)));
}

function closed<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(closed) as T;
  if (typeof schema !== "object" || schema === null) return schema;
  const copy: Record<string, unknown> = Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [key, closed(value)]),
  );
  if ("properties" in copy && !("additionalProperties" in copy)) copy.additionalProperties = false;
  return copy as T;
}

function expectValid(body: unknown) {
  const type = (body as { type: string }).type;
  const validate = bodyValidator(type);
  expect(validate(body) ? [] : validate.errors, JSON.stringify(body)).toEqual([]);
}

const facts: MessageFacts = {
  messageId: randomUUID(),
  organizationId: randomUUID(),
  channel: "sms",
  priority: "critical",
  notificationType: "OTP",
};
const at = "2026-11-25T08:00:00.000Z";

/** One event of each kind a webhook is sent for, with its seq. */
const EVENTS: Array<MessageEvent & { seq: number }> = [
  {
    seq: 1,
    type: "accepted",
    retryCount: 0,
    occurredAt: at,
    data: {
      id: facts.messageId,
      organizationId: facts.organizationId,
      productId: "p",
      channel: "sms",
      priority: "critical",
      notificationType: "OTP",
      retryEnabled: true,
      recipient: "+14155550100",
      sender: "ACME",
      expiresAt: at,
      body: "123456",
    },
  },
  {
    seq: 3,
    type: "pending",
    retryCount: 1,
    occurredAt: at,
    data: {
      kind: "retry_scheduled",
      attempt: 1,
      error: { class: "transient", code: "timeout", message: "no answer" },
      retryAt: at,
    },
  },
  {
    seq: 5,
    type: "success",
    retryCount: 1,
    occurredAt: at,
    data: { attempt: 2, provider: "twilio", providerMessageId: "SM1" },
  },
  {
    seq: 5,
    type: "failed",
    retryCount: 3,
    occurredAt: at,
    data: {
      reason: "retries_exhausted",
      attempt: 4,
      error: { class: "transient", code: "timeout", message: "x" },
    },
  },
  {
    seq: 3,
    type: "rejected",
    retryCount: 0,
    occurredAt: at,
    data: { reason: "recipient_refused", attempt: 1 },
  },
  // Receipts (docs/decisions/0038): one per state sent as a webhook.
  ...(["delivered", "undelivered", "bounced", "complained"] as const).map((state, index) => ({
    seq: 6 + index,
    type: "receipt" as const,
    retryCount: 0,
    occurredAt: at,
    data: {
      state,
      errorCode: state === "undelivered" ? "30003" : null,
      provider: "twilio",
      providerStatus: state,
      providerMessageId: "SM1",
      status: "success" as const,
    },
  })),
];

describe("the OpenAPI document's webhooks", () => {
  it("describe every event type, the test event included, with the Standard Webhooks headers", () => {
    expect(Object.keys(document.webhooks ?? {}).sort()).toEqual(
      [...WEBHOOK_EVENT_TYPES, WEBHOOK_TEST_EVENT].sort(),
    );
    for (const type of WEBHOOK_EVENT_TYPES) {
      const operation = document.webhooks?.[type]?.post;
      expect(operation?.requestBody?.content?.["application/json"]?.schema).toEqual({
        $ref: "#/components/schemas/MessageWebhookEvent",
      });
      expect(operation?.parameters?.map((p) => `${p.in} ${p.name}`)).toEqual([
        "header webhook-id",
        "header webhook-timestamp",
        "header webhook-signature",
      ]);
    }
    expect(
      document.webhooks?.[WEBHOOK_TEST_EVENT]?.post?.requestBody?.content?.["application/json"]?.schema,
    ).toEqual({
      $ref: "#/components/schemas/WebhookTestEvent",
    });
  });

  it("match the bodies the service builds for every kind of message event", () => {
    const bodies = EVENTS.map((event) => messageWebhookBody(facts, event));
    expect(bodies.map((body) => body?.type)).toEqual([...WEBHOOK_EVENT_TYPES]);
    for (const body of bodies) expectValid(JSON.parse(JSON.stringify(body)));
  });

  it("refuse a body that breaks them (so the checks above can fail)", () => {
    const body = JSON.parse(
      JSON.stringify(messageWebhookBody(facts, EVENTS[0] as MessageEvent & { seq: number })),
    );
    expect(bodyValidator("message.accepted")({ ...body, type: "message.exploded" })).toBe(false);
    expect(bodyValidator("message.accepted")({ ...body, data: { ...body.data, recipient: "+1415" } })).toBe(
      false,
    );
  });
});

describe("docs/webhooks.md", () => {
  it("gives an example body for every event type, each as the document describes it", () => {
    const examples = [...GUIDE.matchAll(/```json\n([\s\S]*?)```/g)].map((match) =>
      JSON.parse(match[1] ?? ""),
    );
    expect(examples.map((example) => example.type).sort()).toEqual(
      [...WEBHOOK_EVENT_TYPES, WEBHOOK_TEST_EVENT].sort(),
    );
    for (const example of examples) expectValid(example);
  });

  it("has a Node receiver that, run as written, verifies real deliveries, skips duplicates and stale events, and refuses forgeries", async () => {
    const code = /```js\n(\/\/ receiver\.mjs[\s\S]*?)```/.exec(GUIDE)?.[1];
    if (!code) throw new Error("no receiver.mjs block in docs/webhooks.md");
    const port = await freePort();
    const org = await onboard(h);
    const created = await h.app.request("/api/v1/webhooks/endpoints", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": org.apiKey },
      body: JSON.stringify({ url: `http://127.0.0.1:${port}/notifications` }),
    });
    expect(created.status).toBe(201);
    const { id, secret } = (await created.json()) as { id: string; secret: string };

    // Beside node_modules, so that its `import "standardwebhooks"` resolves as in a project.
    mkdirSync(receiverDir, { recursive: true });
    const file = join(receiverDir, "receiver.mjs");
    writeFileSync(file, code);
    const lines: string[] = [];
    let errors = "";
    receiver = spawn(process.execPath, [file], {
      env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    receiver.stdout?.on("data", (chunk: Buffer) =>
      lines.push(...chunk.toString().split("\n").filter(Boolean)),
    );
    receiver.stderr?.on("data", (chunk: Buffer) => {
      errors += chunk.toString();
    });
    const forged = () =>
      fetch(`http://127.0.0.1:${port}/notifications`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": "evt_forged",
          "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
          "webhook-signature": `v1,${Buffer.alloc(32).toString("base64")}`,
        },
        body: JSON.stringify({ type: "message.succeeded" }),
      }).then(
        (response) => response.status,
        () => undefined,
      );
    expect(await eventually(forged, 10_000, `the receiver to listen (${errors})`)).toBe(400);

    // The test event, as the API sends it.
    const tested = await h.app.request(`/api/v1/webhooks/endpoints/${id}/test`, {
      method: "POST",
      headers: { "x-api-key": org.apiKey },
    });
    expect(await tested.json()).toMatchObject({ succeeded: true, status_code: 204 });

    // Message events as the dispatcher sends them: one, the same again, an older one, a newer one.
    const endpoint = await findWebhookEndpoint(h.db, org.id, id);
    if (!endpoint) throw new Error("endpoint not stored");
    const deps = { ...h.deps.webhooks, db: h.db, now: h.deps.now, newId: h.deps.newId };
    const mine = { ...facts, organizationId: org.id };
    for (const event of [EVENTS[1], EVENTS[1], EVENTS[0], EVENTS[2]]) {
      if (!event) throw new Error("no such event");
      const body = messageWebhookBody(mine, event);
      if (!body) throw new Error("an event that is not sent");
      const attempt = await deliverWebhookEvent(
        deps,
        endpoint,
        { id: webhookEventId(mine.messageId, event.seq), type: body.type, body: JSON.stringify(body) },
        5_000,
      );
      expect(attempt).toMatchObject({ statusCode: 204, errorClass: null });
    }
    const handled = await eventually(
      async () => (lines.length >= 3 ? lines.map((line) => JSON.parse(line)) : undefined),
      10_000,
      "the receiver's output",
    );
    expect(handled.map((event) => [event.type, event.data.seq])).toEqual([
      [WEBHOOK_TEST_EVENT, undefined],
      ["message.retry_scheduled", 3],
      ["message.succeeded", 5],
    ]);
    for (const event of handled) expectValid(event);
    expect(handled[0].data).toEqual({ endpoint_id: id, organization_id: org.id });
    expect(errors).toBe("");
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
