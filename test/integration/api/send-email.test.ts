import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvents } from "../../../db/schema.js";
import {
  countMessages,
  createHarness,
  expectError,
  getMessage,
  onboard,
  sendNotification,
} from "../../support/harness.js";

const h = createHarness();
let apiKey = "";
let organizationId = "";
beforeAll(async () => {
  const org = await onboard(h);
  apiKey = org.apiKey;
  organizationId = org.id;
});
afterAll(() => h.close());

const message = {
  from_email: "hello@acme.test",
  from_name: "ACME",
  subject: "Welcome, *|FNAME|*",
  to: [
    { email: "ada@example.com", name: "Ada", type: "to" },
    { email: "grace@example.com", type: "to" },
    { email: "audit@acme.test", type: "cc" },
    { email: "archive@acme.test", type: "bcc" },
  ],
  merge_language: "mailchimp",
  global_merge_vars: [{ name: "FNAME", content: "Ada" }],
};
const withMessage = (patch: object) => ({
  payload: { ...valid.payload, message: { ...message, ...patch } },
});

/** An array nested `depth` levels deep around one string. */
const nested = (depth: number): unknown =>
  Array.from({ length: depth }).reduce<unknown>((inner) => [inner], "x");

const valid = {
  payload: {
    template_name: "welcome",
    template_content: [{ name: "header", content: "<h1>Hi</h1>" }],
    message,
  },
  retry_enabled: true,
};

const send = (body: unknown, headers: Record<string, string> = {}, query = "") =>
  sendNotification(h, "email", apiKey, body, headers, query);

async function acceptedId(body: unknown): Promise<string> {
  const response = await send(body);
  expect(response.status).toBe(202);
  const answer = (await response.json()) as { message: string; request_id: string };
  expect(answer.message).toBe("Email notification accepted");
  return answer.request_id;
}

type Record_ = Record<string, unknown> & { payload: Record<string, unknown> };

describe("POST /api/v1/notifications/email", () => {
  it("accepts a valid e-mail with 202 and commits its accepted event and outbox row", async () => {
    const id = await acceptedId(valid);
    const events = await h.db.select().from(messageEvents).where(eq(messageEvents.messageId, id));
    expect(events.map((e) => [e.seq, e.type])).toEqual([[1, "accepted"]]);
    await h.relayOutbox();
    expect((await h.queue.getJob(id))?.opts.priority).toBe(3);
  });

  it("fills the record from the payload: template_fields exactly, subject, recipient, receiver_id, sender_id", async () => {
    const id = await acceptedId(valid);
    const record = (await (await getMessage(h, apiKey, id)).json()) as Record_;
    expect(record).toMatchObject({
      message_id: id,
      channel: "email",
      status: "accepted",
      receiver_id: "ada@example.com, grace@example.com",
      sender_id: "hello@acme.test",
      delivery_time: null,
      retry_count: 0,
    });
    expect(record.payload).toMatchObject({
      channel: "email",
      recipient: "ada@example.com, grace@example.com",
      sender: "hello@acme.test",
      subject: "Welcome, *|FNAME|*",
      message: null,
      priority: "medium",
      retry_enabled: true,
    });
    // What the request left out is there as null.
    expect(record.payload.template_fields).toEqual({
      ...valid.payload,
      message: { ...message, to: message.to.map((to) => ({ name: null, ...to })) },
    });
  });

  it("applies the defaults to template_fields: type to, mailchimp, no regions, no merge vars", async () => {
    const id = await acceptedId({
      payload: {
        template_name: "plain",
        message: { from_email: "a@acme.test", subject: "Hi", to: [{ email: "b@example.com" }] },
      },
    });
    const record = (await (await getMessage(h, apiKey, id)).json()) as Record_;
    expect(record.payload.template_fields).toEqual({
      template_name: "plain",
      template_content: [],
      message: {
        from_email: "a@acme.test",
        from_name: null,
        subject: "Hi",
        to: [{ email: "b@example.com", name: null, type: "to" }],
        merge_language: "mailchimp",
        global_merge_vars: [],
      },
    });
    expect(record.payload.retry_enabled).toBe(true);
  });

  it("keeps merge variables of any JSON shape (handlebars objects and arrays)", async () => {
    const vars = [
      { name: "user", content: { first: "Ada", tags: ["a", "b"] } },
      { name: "count", content: 3 },
      { name: "flag", content: null },
    ];
    const body = {
      payload: {
        ...valid.payload,
        message: { ...message, merge_language: "handlebars", global_merge_vars: vars },
      },
    };
    const id = await acceptedId(body);
    const record = (await (await getMessage(h, apiKey, id)).json()) as Record_;
    expect((record.payload.template_fields as typeof body.payload).message.global_merge_vars).toEqual(vars);
  });

  it("keeps a merge variable nested as deep as the limit allows", async () => {
    // The body's root object, payload, message, the vars array and its entry take five levels.
    const vars = [{ name: "deep", content: nested(59) }];
    const id = await acceptedId(withMessage({ merge_language: "handlebars", global_merge_vars: vars }));
    const record = (await (await getMessage(h, apiKey, id)).json()) as Record_;
    expect(
      (record.payload.template_fields as { message: { global_merge_vars: unknown } }).message
        .global_merge_vars,
    ).toEqual(vars);
  });

  it("takes its tier from notification_type", async () => {
    const id = await acceptedId({ ...valid, notification_type: "PASSWORD_RESET" });
    const record = (await (await getMessage(h, apiKey, id)).json()) as Record_;
    expect(record.payload.priority).toBe("critical");
  });

  describe("refuses bad input with 400 naming the field, storing nothing", () => {
    it.each([
      ["a missing payload", {}, /payload: is required/],
      ["a missing template_name", { payload: { message } }, /template_name/],
      [
        "a template_name with a space",
        { payload: { ...valid.payload, template_name: "my template" } },
        /template_name/,
      ],
      ["a missing message", { payload: { template_name: "welcome" } }, /payload\.message: is required/],
      [
        "a bad from_email",
        withMessage({ from_email: "not-an-address" }),
        /from_email: must be an e-mail address/,
      ],
      ["a missing subject", withMessage({ subject: undefined }), /subject/],
      ["a blank subject", withMessage({ subject: "   " }), /subject: must not be empty/],
      [
        "a subject with a line break",
        withMessage({ subject: "Hi\r\nBcc: x@evil.test" }),
        /subject: must not contain line breaks/,
      ],
      [
        "a from_name with a line break",
        withMessage({ from_name: "A\nB" }),
        /from_name: must not contain line breaks/,
      ],
      ["no recipients", withMessage({ to: [] }), /to: must have at least one recipient/],
      ["only cc recipients", withMessage({ to: [{ email: "a@example.com", type: "cc" }] }), /type "to"/],
      [
        "a bad recipient address",
        withMessage({ to: [{ email: "nope" }] }),
        /to\.0\.email: must be an e-mail address/,
      ],
      [
        "a bad recipient type",
        withMessage({ to: [{ email: "a@example.com", type: "reply-to" }] }),
        /to\.0\.type: must be one of: to, cc, bcc/,
      ],
      [
        "an unknown field in a recipient",
        withMessage({ to: [{ email: "a@example.com", phone: "1" }] }),
        /phone/,
      ],
      [
        "51 recipients",
        withMessage({ to: Array.from({ length: 51 }, (_, i) => ({ email: `u${i}@example.com` })) }),
        /at most 50 recipients/,
      ],
      [
        "a bad merge_language",
        withMessage({ merge_language: "liquid" }),
        /merge_language: must be one of: mailchimp, handlebars/,
      ],
      [
        "a merge var name starting with _",
        withMessage({ global_merge_vars: [{ name: "_x", content: "1" }] }),
        /global_merge_vars\.0\.name/,
      ],
      ["a merge var without content", withMessage({ global_merge_vars: [{ name: "x" }] }), /content/],
      [
        "a merge var nested past 64 levels (it would overflow what serialises it)",
        withMessage({ global_merge_vars: [{ name: "x", content: nested(100) }] }),
        /must not nest deeper than 64 levels/,
      ],
      ["an unknown field in message", withMessage({ html: "<p>raw</p>" }), /html/],
      ["an unknown field in payload", { payload: { ...valid.payload, body: "x" } }, /body/],
      [
        "a region that is not {name, content}",
        { payload: { ...valid.payload, template_content: ["x"] } },
        /template_content\.0/,
      ],
      [
        "a region whose content is not a string",
        { payload: { ...valid.payload, template_content: [{ name: "a", content: 1 }] } },
        /template_content\.0\.content/,
      ],
    ])("%s", async (_, body, pattern) => {
      const before = await countMessages(h, organizationId);
      await expectError(await send(body), 400, pattern);
      expect(await countMessages(h, organizationId)).toBe(before);
    });
  });

  it("validates without storing on ?dry_run=true", async () => {
    const before = await countMessages(h, organizationId);
    const response = await send(valid, {}, "?dry_run=true");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      message: "Email notification is valid; nothing was stored or sent (dry run)",
    });
    expect(await countMessages(h, organizationId)).toBe(before);
  });

  it("replays the first 202 for a repeated Idempotency-Key and answers 422 for another body", async () => {
    const headers = { "Idempotency-Key": `email-${Date.now()}` };
    const first = await send(valid, headers);
    const { request_id } = (await first.json()) as { request_id: string };
    const again = await send(valid, headers);
    expect(again.status).toBe(202);
    expect(again.headers.get("Idempotent-Replayed")).toBe("true");
    expect(((await again.json()) as { request_id: string }).request_id).toBe(request_id);
    const other = { payload: { ...valid.payload, message: { ...message, subject: "Another" } } };
    await expectError(await send(other, headers), 422, /different request body/);
  });

  it("answers 401 without a key", async () => {
    const response = await h.app.request("/api/v1/notifications/email", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(valid),
    });
    await expectError(response, 401, /API key/);
  });
});
