import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderSandbox } from "../../../src/channels/email/templates/sandbox.js";
import {
  createHarness,
  eventually,
  expectError,
  onboard,
  storeTemplateDirectly,
} from "../../support/harness.js";

/**
 * Issue 15, decision 0029: a template must render a sample within the save budget; templates are
 * counted and listed a page at a time; previews take turns by organization, are refused (429)
 * past the organization's queue, and dropped once their request is given up; the merged subject is
 * one header line.
 */
const h = createHarness({
  AUTH_CACHE_TTL_MS: "0",
  TEMPLATE_MAX_PER_ORGANIZATION: "3",
  REQUEST_TIMEOUT_MS: "8000",
});
beforeAll(async () => {
  // The app's sandbox (a module singleton, one per test file): short renders, small queues.
  renderSandbox.configure({ deadlineMs: 400, queuePerOrganization: 2 });
  // Its threads started: their start-up is no part of what the tests measure.
  await renderSandbox.renderSample({ code: "<p>warm</p>", text: null }, "warm");
});
afterAll(async () => {
  await renderSandbox.close();
  await h.close();
});

const TEMPLATES = "/api/v1/templates";
const json = (apiKey: string, method: string, path: string, body?: unknown) =>
  h.app.request(path, {
    method,
    headers: { "x-api-key": apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const create = (apiKey: string, body: unknown) => json(apiKey, "POST", TEMPLATES, body);
const preview = (apiKey: string, name: string, body: unknown = {}) =>
  json(apiKey, "POST", `${TEMPLATES}/${name}/render`, body);
const nested = (depth: number, body = "") =>
  `${"{{#each @root.x}}".repeat(depth)}${body}${"{{/each}}".repeat(depth)}`;
/** {{#each}} over 200 items nested six deep: 200^6 iterations, days of CPU. */
const ENDLESS = nested(6);
const endlessVars = {
  merge_language: "handlebars",
  global_merge_vars: [{ name: "x", content: Array.from({ length: 200 }, () => 0) }],
};

describe("saving a template: it must render a sample within TEMPLATE_SAVE_RENDER_BUDGET_MS", () => {
  it("create: loops nested five deep over the sample lists take too long: 422 naming the reason, nothing stored", async () => {
    const org = await onboard(h);
    const error = await expectError(await create(org.apiKey, { name: "five", code: nested(5) }), 422);
    expect(error).toBe(
      'Template "five": rendering took longer than the limit of 500 ms, with sample data (every {{#each}} over 30 items); the template is not saved',
    );
    expect((await json(org.apiKey, "GET", `${TEMPLATES}/five`)).status).toBe(404);
  });

  it("create: a loop that prints past the rendered e-mail's length is refused too", async () => {
    const org = await onboard(h);
    await expectError(
      await create(org.apiKey, { name: "wide", code: nested(3, "x".repeat(160)) }),
      422,
      /^Template "wide": the rendered e-mail is longer than 4194304 characters .* the template is not saved$/,
    );
  });

  it("update: the new content is checked the same way; the old content stays", async () => {
    const org = await onboard(h);
    expect((await create(org.apiKey, { name: "digest", code: nested(2, "<li>{{title}}</li>") })).status).toBe(
      201,
    );
    await expectError(
      await json(org.apiKey, "PUT", `${TEMPLATES}/digest`, { code: ENDLESS }),
      422,
      /took longer/,
    );
    const stored = (await (await json(org.apiKey, "GET", `${TEMPLATES}/digest`)).json()) as { code: string };
    expect(stored.code).toBe(nested(2, "<li>{{title}}</li>"));
  });

  it("ordinary templates, Mailchimp ones and ones with a Handlebars error are saved", async () => {
    const org = await onboard(h);
    for (const [name, code] of [
      ["hello", "<p>Hello {{name}}</p>"],
      ["mailchimp", '<h1 mc:edit="header">Hi *|FNAME|*</h1><style>a{{color:red}}</style>'],
      ["broken", "<p>{{#each items}}unclosed</p>"],
    ]) {
      expect((await create(org.apiKey, { name, code })).status).toBe(201);
    }
  });
});

describe("template count and listing", () => {
  it("an organization has at most TEMPLATE_MAX_PER_ORGANIZATION templates, even when created at once: 409 beyond", async () => {
    const [org, other] = await Promise.all([onboard(h), onboard(h)]);
    expect((await create(org.apiKey, { name: "a", code: "<p>x</p>" })).status).toBe(201);
    // Three at once for the two places left (three: the save checks' queue here is two long).
    const answers = await Promise.all(
      ["b", "c", "d"].map((name) => create(org.apiKey, { name, code: "<p>x</p>" })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 409]);
    const refused = answers.find((r) => r.status === 409);
    await expectError(
      refused as Response,
      409,
      /^The organization already has 3 templates, the most it may have; delete one first$/,
    );
    // Another organization's count is its own; a deletion makes room.
    expect((await create(other.apiKey, { name: "a", code: "<p>x</p>" })).status).toBe(201);
    const listed = (await (await json(org.apiKey, "GET", TEMPLATES)).json()) as {
      templates: { name: string }[];
    };
    const [first] = listed.templates;
    expect((await json(org.apiKey, "DELETE", `${TEMPLATES}/${first?.name}`)).status).toBe(204);
    expect((await create(org.apiKey, { name: "f", code: "<p>x</p>" })).status).toBe(201);
  });

  it("lists a page at a time: limit and cursor, next_cursor null on the last page", async () => {
    const org = await onboard(h);
    for (const name of ["b", "A", "0"]) await create(org.apiKey, { name, code: "<p>x</p>" });
    const page = async (query: string) => {
      const response = await json(org.apiKey, "GET", `${TEMPLATES}${query}`);
      expect(response.status).toBe(200);
      return (await response.json()) as { templates: { name: string }[]; next_cursor: string | null };
    };
    const first = await page("?limit=2");
    expect(first.templates.map((t) => t.name)).toEqual(["0", "A"]);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await page(`?limit=2&cursor=${first.next_cursor}`);
    expect(second).toMatchObject({ templates: [{ name: "b" }], next_cursor: null });
    expect((await page("")).templates.map((t) => t.name)).toEqual(["0", "A", "b"]);
    await expectError(await json(org.apiKey, "GET", `${TEMPLATES}?limit=0`), 400, /limit/);
    await expectError(await json(org.apiKey, "GET", `${TEMPLATES}?limit=1001`), 400, /limit/);
    await expectError(await json(org.apiKey, "GET", `${TEMPLATES}?cursor=%2F%2F`), 400, /cursor/);
    await expectError(await json(org.apiKey, "GET", `${TEMPLATES}?page=2`), 400, /page/);
  });
});

describe("previews: fair between organizations", () => {
  it("past the organization's queue a preview is refused at once (429, Retry-After); another organization's is not", async () => {
    const [noisy, quiet] = await Promise.all([onboard(h), onboard(h)]);
    await storeTemplateDirectly(h, noisy.id, { name: "endless", code: ENDLESS });
    await create(quiet.apiKey, { name: "hello", code: "<p>Hello {{name}}</p>" });
    // Renders long enough that the queue stays full while the test looks, however loaded the machine.
    renderSandbox.configure({ deadlineMs: 1500 });
    try {
      // One runs, two wait (TEMPLATE_RENDER_QUEUE_PER_ORGANIZATION here: 2).
      const under = [1, 2, 3].map(() => preview(noisy.apiKey, "endless", endlessVars));
      await eventually(async () => (renderSandbox.stats.waiting === 2 ? true : undefined));
      const refused = await preview(noisy.apiKey, "endless", endlessVars);
      await expectError(refused, 429, /^Too many renders of this organization's templates are waiting/);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      const quick = await preview(quiet.apiKey, "hello", {
        merge_language: "handlebars",
        global_merge_vars: [{ name: "name", content: "Bea" }],
      });
      expect(await quick.json()).toMatchObject({ html: "<p>Hello Bea</p>" });
      for (const answer of await Promise.all(under)) expect(answer.status).toBe(422);
    } finally {
      renderSandbox.configure({ deadlineMs: 400 });
    }
  });

  it("a preview whose client went away is dropped from the queue and never rendered", async () => {
    const org = await onboard(h);
    await storeTemplateDirectly(h, org.id, { name: "endless", code: ENDLESS });
    await create(org.apiKey, { name: "hello", code: "<p>Hello</p>" });
    // Renders long enough that the queue holds still while the test looks, however loaded the machine.
    renderSandbox.configure({ deadlineMs: 1500 });
    try {
      const before = renderSandbox.stats;
      // Two slow ones: one runs (this organization gets one thread), one waits; the quick one waits behind.
      const slow = [1, 2].map(() => preview(org.apiKey, "endless", endlessVars));
      await eventually(async () => (renderSandbox.stats.waiting === 1 ? true : undefined));
      const controller = new AbortController();
      const given = h.app.request(`${TEMPLATES}/hello/render`, {
        method: "POST",
        headers: { "x-api-key": org.apiKey, "content-type": "application/json" },
        body: "{}",
        signal: controller.signal,
      });
      await eventually(async () => (renderSandbox.stats.waiting === 2 ? true : undefined));
      controller.abort();
      await Promise.resolve(given).catch(() => undefined);
      await Promise.all(slow);
      const after = renderSandbox.stats;
      expect(after.abandoned - before.abandoned).toBe(1);
      expect(after.renders - before.renders).toBe(2); // the two slow ones, never the abandoned one
    } finally {
      renderSandbox.configure({ deadlineMs: 400 });
    }
  });

  it("line breaks merged into the subject come out as one line", async () => {
    const org = await onboard(h);
    await create(org.apiKey, { name: "hello", code: "<p>Hello</p>" });
    const response = await preview(org.apiKey, "hello", {
      subject: "Hi *|NAME|*",
      global_merge_vars: [{ name: "NAME", content: "Ada\r\nBcc: victim@example.org" }],
    });
    expect(await response.json()).toMatchObject({ subject: "Hi Ada Bcc: victim@example.org" });
  });
});
