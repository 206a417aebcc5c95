import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RENDER_DEADLINE_MS } from "../../src/channels/email/templates/sandbox.js";
import { eventually } from "../support/harness.js";
import { type ProcfileStack, startProcfileStack, storeTemplateIn } from "../support/processes.js";

/**
 * The template sandbox as the Procfile runs it: the compiled build (dist/), the web process with
 * its 128 MB heap, and the worker. A template that would run for days must cost each of them
 * one render's deadline, and nothing else.
 */
let stack: ProcfileStack;
let apiKey = "";

/** `{{#each}}` over 200 items nested six deep: 200^6 iterations, days of CPU. */
const ENDLESS = `${"{{#each @root.x}}".repeat(6)}${"{{/each}}".repeat(6)}`;
const ZEROS = [{ name: "x", content: Array.from({ length: 200 }, () => 0) }];

beforeAll(async () => {
  stack = await startProcfileStack(inject("databaseUrl"));
  const onboarded = await fetch(`${stack.base}/api/v1/onboarding/organizations/e2e-sandbox`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ organizations: [{ name: "Sandbox", active: true }] }),
  });
  const { organizations } = (await onboarded.json()) as {
    organizations: Array<{ apiKey: string; id: string }>;
  };
  apiKey = organizations[0]?.apiKey ?? "";
  // The API refuses to save it (its sample takes too long): stored as one saved before that check.
  await storeTemplateIn(stack, organizations[0]?.id ?? "", { name: "endless", code: ENDLESS });
  const created = await call("POST", "/api/v1/templates", { name: "welcome", code: "<p>Hello {{name}}</p>" });
  expect(created.status).toBe(201);
}, 60_000);
afterAll(() => stack?.close());

function call(method: string, path: string, body?: unknown) {
  return fetch(`${stack.base}${path}`, {
    method,
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

describe("the template sandbox in the Procfile's processes", () => {
  it("web: an endless template answers 422 at the deadline while the API keeps answering; the next preview renders", async () => {
    const started = Date.now();
    const endless = call("POST", "/api/v1/templates/endless/render", {
      merge_language: "handlebars",
      global_merge_vars: ZEROS,
    });
    // Until the endless render has its answer, every other request is answered quickly.
    let answered = false;
    void endless.then(() => {
      answered = true;
    });
    let served = 0;
    while (!answered) {
      const askedAt = Date.now();
      expect((await call("GET", "/api/v1/templates")).status).toBe(200);
      expect(Date.now() - askedAt).toBeLessThan(500);
      served++;
    }
    expect(served).toBeGreaterThan(5);
    const response = await endless;
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({
      error: `Template "endless": rendering took longer than the limit of ${RENDER_DEADLINE_MS} ms`,
    });
    expect(Date.now() - started).toBeLessThan(RENDER_DEADLINE_MS + 3000);

    const preview = await call("POST", "/api/v1/templates/welcome/render", {
      merge_language: "handlebars",
      global_merge_vars: [{ name: "name", content: "Ada" }],
    });
    expect(await preview.json()).toEqual({ subject: "", html: "<p>Hello Ada</p>", text: "Hello Ada" });
  });

  it("worker: an e-mail with an endless template is rejected once; the next e-mail is delivered", async () => {
    const message = {
      from_email: "hello@e2e.test",
      subject: "Hi",
      to: [{ email: "ada@example.com" }],
      merge_language: "handlebars",
      global_merge_vars: [...ZEROS, { name: "name", content: "Ada" }],
    };
    const send = async (template_name: string) => {
      const response = await call("POST", "/api/v1/notifications/email", {
        payload: { template_name, message },
      });
      expect(response.status).toBe(202);
      return ((await response.json()) as { request_id: string }).request_id;
    };
    const final = (id: string) =>
      eventually(
        async () => {
          const record = (await (await call("GET", `/api/v1/messages/${id}`)).json()) as { status: string };
          return ["success", "failed", "rejected"].includes(record.status) ? record : undefined;
        },
        15_000,
        `message ${id} to finish`,
      );
    const endless = await send("endless");
    const welcome = await send("welcome");
    expect(await final(endless)).toMatchObject({ status: "rejected", retry_count: 0 });
    expect(await final(welcome)).toMatchObject({ status: "success" });
    const history = (await (await call("GET", `/api/v1/messages/${endless}/events`)).json()) as {
      events: Array<{ type: string; reason?: string }>;
    };
    expect(history.events.map((e) => e.type)).toEqual(["accepted", "rejected"]);
    expect(history.events.at(-1)).toMatchObject({
      reason: "template_render_failed",
      error: {
        message: `The template: rendering took longer than the limit of ${RENDER_DEADLINE_MS} ms`,
      },
    });
  });

  it("web and worker, each with a sandbox thread, exit cleanly on SIGTERM", async () => {
    const codes = await Promise.all([stack.web.stop("SIGTERM"), stack.worker.stop("SIGTERM")]);
    expect(codes).toEqual([0, 0]);
    expect(stack.web.output() + stack.worker.output()).not.toMatch(/error/i);
  });
});
