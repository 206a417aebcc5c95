import { and, eq, sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { templates } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import { RENDER_DEADLINE_MS, renderSandbox } from "../../../src/channels/email/templates/sandbox.js";
import {
  MAX_TEMPLATE_PART_BYTES,
  templateCode,
  templateText,
} from "../../../src/channels/email/templates/schemas.js";
import {
  createHarness,
  eventually,
  expectError,
  type Harness,
  onboard,
  storeTemplateDirectly,
} from "../../support/harness.js";

const h = createHarness({ AUTH_CACHE_TTL_MS: "0" });
afterAll(() => h.close());

const TEMPLATES = "/api/v1/templates";
const HTML =
  '<h1 mc:edit="header">Hello *|FNAME|*</h1>\n<div mc:edit="main">Caf\u00e9 \u2014 \u{1F600}</div>';

interface TemplateBody {
  name: string;
  code: string;
  text: string | null;
  created_at: string;
  updated_at: string;
}

type Method = "GET" | "POST" | "PUT" | "DELETE";

function call(
  apiKey: string | undefined,
  method: Method,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  app: Pick<Harness["app"], "request"> = h.app,
) {
  return app.request(path, {
    method,
    headers: {
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...(apiKey ? { "x-api-key": apiKey } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
}

const at = (name: string) => `${TEMPLATES}/${name}`;
const create = (apiKey: string, body: unknown, headers?: Record<string, string>) =>
  call(apiKey, "POST", TEMPLATES, body, headers);
const read = (apiKey: string, name: string) => call(apiKey, "GET", at(name));
const update = (apiKey: string, name: string, body: unknown, headers?: Record<string, string>) =>
  call(apiKey, "PUT", at(name), body, headers);
const remove = (apiKey: string, name: string) => call(apiKey, "DELETE", at(name));

async function created(apiKey: string, body: { name: string; code?: string; text?: string | null }) {
  const response = await create(apiKey, { code: HTML, ...body });
  expect(response.status).toBe(201);
  return (await response.json()) as TemplateBody;
}

async function countTemplates(organizationId: string, name?: string) {
  const [row] = await h.db
    .select({ n: sql<number>`count(*)::int` })
    .from(templates)
    .where(and(eq(templates.organizationId, organizationId), name ? eq(templates.name, name) : undefined));
  return row?.n ?? 0;
}

function expectIsoUtc(value: string) {
  expect(new Date(value).toISOString()).toBe(value);
}

describe("POST /api/v1/templates", () => {
  it("stores the template and answers 201 with it; text is null when absent", async () => {
    const org = await onboard(h);
    const response = await create(org.apiKey, { name: "welcome", code: HTML });
    expect(response.status).toBe(201);
    const template = (await response.json()) as TemplateBody;
    expect(Object.keys(template).sort()).toEqual(["code", "created_at", "name", "text", "updated_at"]);
    expect(template).toMatchObject({ name: "welcome", code: HTML, text: null });
    expectIsoUtc(template.created_at);
    expect(template.updated_at).toBe(template.created_at);
    expect(await (await read(org.apiKey, "welcome")).json()).toEqual(template);
  });

  it("keeps the HTML and the text byte for byte", async () => {
    const org = await onboard(h);
    const text = "Hello *|FNAME|*\r\n\tCaf\u00e9 \u{1F600}  ";
    const template = await created(org.apiKey, { name: "exact", text });
    expect(template).toMatchObject({ code: HTML, text });
    expect(await (await read(org.apiKey, "exact")).json()).toMatchObject({ code: HTML, text });
  });

  it("treats text: null as no text", async () => {
    const org = await onboard(h);
    expect((await created(org.apiKey, { name: "nulled", text: null })).text).toBeNull();
  });

  it.each(["a", "7", "Order.Confirmation_v2-final", "a".repeat(100)])("accepts the name %j", async (name) => {
    const org = await onboard(h);
    expect((await created(org.apiKey, { name })).name).toBe(name);
  });

  it("gives every organization its own names", async () => {
    const [one, two] = await Promise.all([onboard(h), onboard(h)]);
    await created(one.apiKey, { name: "shared", code: "<p>one</p>" });
    await created(two.apiKey, { name: "shared", code: "<p>two</p>" });
    expect(await (await read(one.apiKey, "shared")).json()).toMatchObject({ code: "<p>one</p>" });
    expect(await (await read(two.apiKey, "shared")).json()).toMatchObject({ code: "<p>two</p>" });
  });

  it("treats names as case-sensitive", async () => {
    const org = await onboard(h);
    await created(org.apiKey, { name: "Welcome" });
    await created(org.apiKey, { name: "welcome" });
    await expectError(await read(org.apiKey, "WELCOME"), 404);
  });

  describe("refuses bad input with 400, storing nothing", () => {
    it.each([
      ["a missing name", { code: HTML }, /^name: is required$/],
      ["an empty name", { name: "", code: HTML }, /^name: must be 1-100 letters/],
      ["a name starting with a dot", { name: ".hidden", code: HTML }, /^name: /],
      ["a name starting with a dash", { name: "-draft", code: HTML }, /^name: /],
      ["a name with a space", { name: "my template", code: HTML }, /^name: /],
      ["a name with a slash", { name: "a/b", code: HTML }, /^name: /],
      ["a name with a non-ASCII letter", { name: "caf\u00e9", code: HTML }, /^name: /],
      ["a name over 100 characters", { name: "a".repeat(101), code: HTML }, /^name: /],
      ["a numeric name", { name: 42, code: HTML }, /^name: must be a string$/],
      ["a missing code", { name: "t" }, /^code: is required$/],
      ["an empty code", { name: "t", code: "" }, /^code: must not be empty$/],
      ["a code that is not a string", { name: "t", code: { html: HTML } }, /^code: must be a string$/],
      ["an empty text", { name: "t", code: HTML, text: "" }, /^text: must not be empty/],
      ["a text that is not a string", { name: "t", code: HTML, text: 1 }, /^text: must be a string or null$/],
      [
        "unknown fields, named",
        { name: "t", code: HTML, subject: "Hi", labels: [] },
        /Unrecognized keys: "subject", "labels"/,
      ],
      ["an array", [{ name: "t", code: HTML }], /object/],
      ["malformed JSON", '{"name": "t", ', /^Malformed JSON body$/],
      ["a NUL character", JSON.stringify({ name: "t", code: "a\u0000b" }), /NUL character/],
    ])("%s", async (_, body, pattern) => {
      const org = await onboard(h);
      await expectError(await create(org.apiKey, body), 400, pattern);
      expect(await countTemplates(org.id)).toBe(0);
    });
  });

  it("answers 415 for a body that is not JSON", async () => {
    const org = await onboard(h);
    await expectError(
      await create(org.apiKey, { name: "t", code: HTML }, { "content-type": "text/html" }),
      415,
    );
    expect(await countTemplates(org.id)).toBe(0);
  });

  it("stores a template as large as the request body limit allows", async () => {
    const org = await onboard(h);
    const code = `<p>${"x".repeat(60 * 1024)}</p>`;
    expect((await created(org.apiKey, { name: "big", code })).code).toBe(code);
  });

  it("answers 400 for code one byte over 512 KiB, storing nothing", async () => {
    const org = await onboard(h);
    await expectError(
      await create(org.apiKey, { name: "huge", code: "x".repeat(MAX_TEMPLATE_PART_BYTES + 1) }),
      400,
      /code: must be at most 512 KiB/,
    );
    expect(await countTemplates(org.id)).toBe(0);
  });

  it("accepts a maximal template: 512 KiB of code and 512 KiB of text (template routes take 2 MiB bodies)", async () => {
    const org = await onboard(h);
    const part = "x".repeat(MAX_TEMPLATE_PART_BYTES);
    const template = await created(org.apiKey, { name: "maximal", code: part, text: part });
    expect(template).toMatchObject({ name: "maximal" });
  });

  it("refuses a body over the template routes' 2 MiB with 413", async () => {
    const org = await onboard(h);
    const response = await create(org.apiKey, { name: "huge", code: "x".repeat(2 * 1024 * 1024) });
    await expectError(response, 413, /at most 2048 KiB/);
  });

  it("limits code and text to 512 KiB of UTF-8, counting bytes, not characters", () => {
    const maximal = "x".repeat(MAX_TEMPLATE_PART_BYTES);
    expect(templateCode.safeParse(maximal).success).toBe(true);
    expect(templateText.safeParse(maximal).success).toBe(true);
    const over = templateCode.safeParse(`${maximal}x`);
    expect(over.error?.issues.map((i) => i.message)).toEqual(["must be at most 512 KiB (UTF-8)"]);
    expect(templateText.safeParse(`${maximal}x`).success).toBe(false);
    // 262,145 two-byte characters: within 512 Ki characters, over 512 KiB.
    expect(templateCode.safeParse("\u00e9".repeat(MAX_TEMPLATE_PART_BYTES / 2 + 1)).success).toBe(false);
  });

  it("answers 409 for a name the organization already uses, leaving the template as it was", async () => {
    const org = await onboard(h);
    const original = await created(org.apiKey, { name: "dup", code: "<p>first</p>" });
    await expectError(
      await create(org.apiKey, { name: "dup", code: "<p>second</p>" }),
      409,
      /^A template named "dup" already exists$/,
    );
    expect(await (await read(org.apiKey, "dup")).json()).toEqual(original);
  });

  it("lets exactly one of 10 concurrent creates of one name succeed", async () => {
    const org = await onboard(h);
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => create(org.apiKey, { name: "race", code: `<p>${i}</p>` })),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([201, ...Array(9).fill(409)]);
    const winner = (await responses.find((r) => r.status === 201)?.json()) as TemplateBody;
    expect(await (await read(org.apiKey, "race")).json()).toEqual(winner);
    expect(await countTemplates(org.id, "race")).toBe(1);
  });
});

describe("GET /api/v1/templates", () => {
  it("answers an empty list for an organization without templates", async () => {
    const org = await onboard(h);
    const response = await call(org.apiKey, "GET", TEMPLATES);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ templates: [], next_cursor: null });
  });

  it("lists the organization's templates by name in byte order, without their content", async () => {
    const [org, other] = await Promise.all([onboard(h), onboard(h)]);
    const names = ["welcome", "beta_2", "Alpha", "beta.1", "0-first", "beta-1", "zeta"];
    for (const name of names) await created(org.apiKey, { name, text: "plain" });
    await created(other.apiKey, { name: "not-mine" });

    const response = await call(org.apiKey, "GET", TEMPLATES);
    expect(response.status).toBe(200);
    const { templates: listed } = (await response.json()) as { templates: Record<string, string>[] };
    expect(listed.map((t) => t.name)).toEqual([
      "0-first",
      "Alpha",
      "beta-1",
      "beta.1",
      "beta_2",
      "welcome",
      "zeta",
    ]);
    for (const entry of listed) {
      expect(Object.keys(entry).sort()).toEqual(["created_at", "name", "updated_at"]);
      expectIsoUtc(entry.created_at as string);
      expectIsoUtc(entry.updated_at as string);
    }
  });
});

describe("GET /api/v1/templates/{name}", () => {
  it("answers 404 for an unknown name, and identically for another organization's template", async () => {
    const [mine, theirs] = await Promise.all([onboard(h), onboard(h)]);
    await created(theirs.apiKey, { name: "secret" });
    const other = await read(mine.apiKey, "secret");
    const unknown = await read(mine.apiKey, "nothing-here");
    expect(await expectError(other, 404)).toBe("Template not found");
    expect(await expectError(unknown, 404)).toBe("Template not found");
  });

  it.each([
    ["starts with a dot", ".hidden"],
    ["starts with a dash", "-draft"],
    ["has a space", "a%20b"],
    ["has a non-ASCII letter", "caf%C3%A9"],
    ["is over 100 characters", "a".repeat(101)],
  ])("answers 400 for a name that %s", async (_, name) => {
    const org = await onboard(h);
    await expectError(await read(org.apiKey, name), 400, /^name: must be 1-100 letters/);
  });
});

describe("PUT /api/v1/templates/{name}", () => {
  it("replaces code and text; created_at stays, updated_at moves", async () => {
    const org = await onboard(h);
    let clock = new Date("2030-01-02T03:04:05.678Z");
    const timed = createApp({ ...h.deps, now: () => clock });
    const key = org.apiKey;
    const original = (await (
      await call(key, "POST", TEMPLATES, { name: "receipt", code: HTML, text: "old" }, {}, timed)
    ).json()) as TemplateBody;
    expect(original).toMatchObject({ created_at: clock.toISOString(), updated_at: clock.toISOString() });

    clock = new Date("2030-01-02T04:00:00.000Z");
    const response = await call(key, "PUT", at("receipt"), { code: "<p>new</p>", text: "new" }, {}, timed);
    expect(response.status).toBe(200);
    const updated = (await response.json()) as TemplateBody;
    expect(updated).toEqual({
      name: "receipt",
      code: "<p>new</p>",
      text: "new",
      created_at: "2030-01-02T03:04:05.678Z",
      updated_at: "2030-01-02T04:00:00.000Z",
    });
    expect(await (await read(key, "receipt")).json()).toEqual(updated);
  });

  it("sets text to null when the update leaves it out", async () => {
    const org = await onboard(h);
    await created(org.apiKey, { name: "t", text: "plain" });
    const response = await update(org.apiKey, "t", { code: "<p>only html</p>" });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ code: "<p>only html</p>", text: null });
  });

  it("answers 404 for a missing template, creating nothing", async () => {
    const org = await onboard(h);
    await expectError(await update(org.apiKey, "missing", { code: HTML }), 404, /^Template not found$/);
    expect(await countTemplates(org.id)).toBe(0);
  });

  it("answers 404 for another organization's template, and leaves it unchanged", async () => {
    const [mine, theirs] = await Promise.all([onboard(h), onboard(h)]);
    const before = await created(theirs.apiKey, { name: "theirs", text: "plain" });
    await expectError(
      await update(mine.apiKey, "theirs", { code: "<p>hijacked</p>" }),
      404,
      /^Template not found$/,
    );
    expect(await (await read(theirs.apiKey, "theirs")).json()).toEqual(before);
    expect(await countTemplates(mine.id)).toBe(0);
  });

  describe("refuses bad input with 400, changing nothing", () => {
    it.each([
      [
        "a name in the body (names are immutable)",
        { name: "renamed", code: HTML },
        /Unrecognized key: "name"/,
      ],
      ["an unknown field", { code: HTML, subject: "x" }, /Unrecognized key: "subject"/],
      ["a missing code", { text: "plain" }, /^code: is required$/],
      ["an empty code", { code: "" }, /^code: must not be empty$/],
      ["an empty text", { code: HTML, text: "" }, /^text: must not be empty/],
      ["malformed JSON", "{", /^Malformed JSON body$/],
    ])("%s", async (_, body, pattern) => {
      const org = await onboard(h);
      const before = await created(org.apiKey, { name: "stable", text: "plain" });
      await expectError(await update(org.apiKey, "stable", body), 400, pattern);
      expect(await (await read(org.apiKey, "stable")).json()).toEqual(before);
    });

    it("a bad name in the path", async () => {
      const org = await onboard(h);
      await expectError(await update(org.apiKey, "-bad", { code: HTML }), 400, /^name: /);
    });
  });

  it("answers 415 for a body that is not JSON and 413 for one over the body limit", async () => {
    const org = await onboard(h);
    const before = await created(org.apiKey, { name: "stable" });
    await expectError(
      await update(org.apiKey, "stable", { code: HTML }, { "content-type": "text/plain" }),
      415,
    );
    await expectError(await update(org.apiKey, "stable", { code: "x".repeat(2_200_000) }), 413);
    expect(await (await read(org.apiKey, "stable")).json()).toEqual(before);
  });
});

describe("DELETE /api/v1/templates/{name}", () => {
  it("answers 204 with no body; the template is gone and its name free again", async () => {
    const org = await onboard(h);
    await created(org.apiKey, { name: "goodbye" });
    const response = await remove(org.apiKey, "goodbye");
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
    await expectError(await read(org.apiKey, "goodbye"), 404, /^Template not found$/);
    await expectError(await remove(org.apiKey, "goodbye"), 404, /^Template not found$/);
    expect(await (await call(org.apiKey, "GET", TEMPLATES)).json()).toEqual({
      templates: [],
      next_cursor: null,
    });
    await created(org.apiKey, { name: "goodbye" });
  });

  it("answers 404 for a missing template", async () => {
    const org = await onboard(h);
    await expectError(await remove(org.apiKey, "never-existed"), 404, /^Template not found$/);
  });

  it("answers 404 for another organization's template, and leaves it in place", async () => {
    const [mine, theirs] = await Promise.all([onboard(h), onboard(h)]);
    const before = await created(theirs.apiKey, { name: "keep" });
    await expectError(await remove(mine.apiKey, "keep"), 404, /^Template not found$/);
    expect(await (await read(theirs.apiKey, "keep")).json()).toEqual(before);
  });

  it("answers 400 for a bad name", async () => {
    const org = await onboard(h);
    await expectError(await remove(org.apiKey, "_private"), 400, /^name: /);
  });
});

describe("POST /api/v1/templates/{name}/render", () => {
  const render = (apiKey: string, name: string, body: unknown) =>
    h.app.request(`/api/v1/templates/${name}/render`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: JSON.stringify(body),
    });

  it("renders regions, merge tags, subject and a derived text part, storing and sending nothing", async () => {
    const org = await onboard(h);
    await created(org.apiKey, {
      name: "welcome",
      code: '<h1 mc:edit="head">Hello</h1><p>Hi *|NAME|*, &amp; welcome</p>',
    });
    const response = await render(org.apiKey, "welcome", {
      subject: "Welcome, *|NAME|*",
      template_content: [{ name: "head", content: "<em>*|NAME|*</em>" }],
      global_merge_vars: [{ name: "name", content: "<Ada>" }],
    });
    expect(response.status).toBe(200);
    const email = (await response.json()) as { subject: string; html: string; text: string };
    expect(email.subject).toBe("Welcome, <Ada>");
    expect(email.html).toBe(
      '<h1 mc:edit="head"><em>&lt;Ada&gt;</em></h1><p>Hi &lt;Ada&gt;, &amp; welcome</p>',
    );
    expect(email.text).toContain("Hi <Ada>, & welcome");
    expect(await countTemplates(org.id)).toBe(1);
  });

  it("renders handlebars with the template's own text part", async () => {
    const org = await onboard(h);
    await created(org.apiKey, {
      name: "digest",
      code: "<ul>{{#each items}}<li>{{this}}</li>{{/each}}</ul>",
      text: "{{#each items}}* {{this}}\n{{/each}}",
    });
    const response = await render(org.apiKey, "digest", {
      merge_language: "handlebars",
      global_merge_vars: [{ name: "items", content: ["a & b", "c"] }],
    });
    expect(await response.json()).toEqual({
      subject: "",
      html: "<ul><li>a &amp; b</li><li>c</li></ul>",
      text: "* a & b\n* c\n",
    });
  });

  it("answers 422 with the reason for a template that does not render", async () => {
    const org = await onboard(h);
    await created(org.apiKey, { name: "broken", code: "<p>{{#if x}}never closed</p>" });
    await expectError(
      await render(org.apiKey, "broken", { merge_language: "handlebars" }),
      422,
      /Template "broken".*handlebars/,
    );
  });

  it("a template whose loops would run for days answers 422 within seconds, and other requests are answered meanwhile", async () => {
    const org = await onboard(h);
    // {{#each}} over 200 items nested six deep: 200^6 iterations, days of CPU. The API refuses to
    // save it (its sample takes too long); stored as one saved before that check.
    await storeTemplateDirectly(h, org.id, {
      name: "endless",
      code: `${"{{#each @root.x}}".repeat(6)}${"{{/each}}".repeat(6)}`,
    });
    const rendersBefore = renderSandbox.stats.renders;
    const started = Date.now();
    let answered = false;
    const endless = Promise.resolve(
      render(org.apiKey, "endless", {
        merge_language: "handlebars",
        global_merge_vars: [{ name: "x", content: Array.from({ length: 200 }, () => 0) }],
      }),
    ).then((response) => {
      answered = true;
      return response;
    });
    await eventually(async () => (renderSandbox.stats.renders > rendersBefore ? true : undefined));

    // While the template renders, the same app answers another organization's request at once.
    const other = await onboard(h);
    const askedAt = Date.now();
    expect((await call(other.apiKey, "GET", TEMPLATES)).status).toBe(200);
    expect(Date.now() - askedAt).toBeLessThan(1000);
    expect(answered).toBe(false);

    await expectError(
      await endless,
      422,
      new RegExp(`^Template "endless": rendering took longer than the limit of ${RENDER_DEADLINE_MS} ms$`),
    );
    expect(Date.now() - started).toBeLessThan(RENDER_DEADLINE_MS + 3000);
  });

  it.each([
    [
      "with regions to fill",
      [{ name: "main", content: "<p>x</p>" }],
      /the editable regions could not be filled/,
    ],
    // Merging 440 KB and overflowing the text conversion takes 0.5-1.2 s: on a loaded machine
    // the deadline may come first, which is a 422 as well.
    ["with a derived text part", [], /the text version could not be derived from the HTML|took longer than/],
  ])("markup nested 40,000 deep (%s) answers 422 with the reason, not 500", async (_, regions, reason) => {
    const org = await onboard(h);
    const code = `${"<div>".repeat(40_000)}${"</div>".repeat(40_000)}`; // 440 KB, under the limit
    await storeTemplateDirectly(h, org.id, { name: "deep", code }); // the save check may refuse it
    const error = await expectError(
      await render(org.apiKey, "deep", { template_content: regions }),
      422,
      reason,
    );
    expect(error).toMatch(/^Template "deep": .*(Maximum call stack size exceeded|ms)$/);
  });

  it("the template after a failed one renders as usual", async () => {
    const org = await onboard(h);
    await created(org.apiKey, { name: "fine", code: "<p>Hi *|NAME|*</p>" });
    const response = await render(org.apiKey, "fine", {
      global_merge_vars: [{ name: "name", content: "Ada" }],
    });
    expect(await response.json()).toEqual({ subject: "", html: "<p>Hi Ada</p>", text: "Hi Ada" });
  });

  it("answers 404 for a template of another organization, and 400 for a bad body", async () => {
    const [owner, other] = [await onboard(h), await onboard(h)];
    await created(owner.apiKey, { name: "mine" });
    await expectError(await render(other.apiKey, "mine", {}), 404, /^Template not found$/);
    await expectError(
      await render(owner.apiKey, "mine", { merge_language: "liquid" }),
      400,
      /merge_language/,
    );
    await expectError(await render(owner.apiKey, "mine", { to: [] }), 400, /to/);
  });
});
