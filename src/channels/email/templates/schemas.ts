import { z } from "zod";
import { anyJson } from "../../request.js";
import { MERGE_LANGUAGES } from "../content.js";
import type { Template, TemplateSummary } from "./store.js";

/** Largest `code` or `text`, in UTF-8 bytes. */
export const MAX_TEMPLATE_PART_BYTES = 512 * 1024;
/** A request carrying both at their largest, with room for JSON escaping. */
export const MAX_TEMPLATE_BODY_BYTES = 4 * MAX_TEMPLATE_PART_BYTES;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const NAME_RULE = "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit";

/** A template's name: what an e-mail's `template_name` refers to. Case-sensitive, immutable. */
export const templateName = z
  .string({ error: (issue) => (issue.input === undefined ? "is required" : "must be a string") })
  .regex(NAME, NAME_RULE)
  .meta({
    description: "1-100 letters, digits, `.`, `_` or `-`, starting with a letter or digit; case-sensitive",
    example: "welcome-email",
  });

const withinPartLimit = (value: string) => Buffer.byteLength(value, "utf8") <= MAX_TEMPLATE_PART_BYTES;
const PART_LIMIT_RULE = `must be at most ${MAX_TEMPLATE_PART_BYTES / 1024} KiB (UTF-8)`;

/** The HTML: `mc:edit` regions and merge tags are kept as written; rendering happens at delivery. */
export const templateCode = z
  .string({ error: (issue) => (issue.input === undefined ? "is required" : "must be a string") })
  .min(1, "must not be empty")
  .refine(withinPartLimit, PART_LIMIT_RULE)
  .meta({
    description: `The HTML, with \`mc:edit\` regions and merge tags: 1 character to ${MAX_TEMPLATE_PART_BYTES / 1024} KiB of UTF-8`,
    maxLength: MAX_TEMPLATE_PART_BYTES,
    example: '<h1 mc:edit="header">Welcome, *|FNAME|*</h1>',
  });

/** The plain-text part; null (or absent) means it is derived from the rendered HTML. */
export const templateText = z
  .string({ error: "must be a string or null" })
  .min(1, "must not be empty; leave it out (or null) to derive the text from the HTML")
  .refine(withinPartLimit, PART_LIMIT_RULE)
  .nullable()
  .optional()
  .meta({
    description: `The plain-text part, up to ${MAX_TEMPLATE_PART_BYTES / 1024} KiB of UTF-8; absent or null: derived from the rendered HTML`,
    maxLength: MAX_TEMPLATE_PART_BYTES,
  });

const timestamp = z.iso.datetime().meta({ description: "ISO 8601, UTC" });

export const templateSummary = z
  .object({ name: templateName, created_at: timestamp, updated_at: timestamp })
  .meta({ id: "TemplateSummary", description: "A template without its content" });

export const templateRecord = z
  .object({
    name: templateName,
    code: z.string().meta({ description: "The HTML" }),
    text: z.string().nullable().meta({ description: "The plain-text part; null: derived from the HTML" }),
    created_at: timestamp,
    updated_at: timestamp.meta({ description: "ISO 8601, UTC: the last create or update" }),
  })
  .meta({ id: "Template", description: "An e-mail template, Mandrill style" });

export function toTemplateSummary(row: TemplateSummary): z.input<typeof templateSummary> {
  return { name: row.name, created_at: row.createdAt.toISOString(), updated_at: row.updatedAt.toISOString() };
}

export function toTemplateRecord(row: Template): z.input<typeof templateRecord> {
  return {
    name: row.name,
    code: row.code,
    text: row.text,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

// --- What a rendering takes: shared by e-mails and the template preview ---------------------

/** A header value: one line (a CR or LF would let a value forge headers). */
export const headerText = (max: number) =>
  z
    .string({ error: "must be a string" })
    .max(max, `must be at most ${max} characters`)
    .regex(/^[^\r\n]*$/, "must not contain line breaks");

export const emailSubject = headerText(998)
  .refine((v) => v.trim().length > 0, "must not be empty")
  .meta({ description: "1-998 characters; merge tags are applied to it too" });

/** Editable regions: `template_content`. */
export const templateContent = z
  .array(
    z.strictObject({
      name: z.string({ error: "must be a string" }).min(1, "must not be empty").max(100),
      content: z.string({ error: "must be a string" }),
    }),
  )
  .max(100, "must have at most 100 entries")
  .default([])
  .meta({ description: 'Editable regions: the element with `mc:edit="<name>"` gets `content` (HTML)' });

export const mergeLanguage = z
  .enum(MERGE_LANGUAGES, { error: "must be one of: mailchimp, handlebars" })
  .default("mailchimp")
  .meta({ description: "`mailchimp`: `*|NAME|*` tags; `handlebars`: `{{name}}`, `{{#each}}`, …" });

export const globalMergeVars = z
  .array(
    z.strictObject({
      name: z
        .string({ error: "must be a string" })
        .regex(/^[A-Za-z0-9][A-Za-z0-9_]{0,99}$/, "must be 1-100 letters, digits or _, not starting with _"),
      content: anyJson.meta({ description: "Any JSON value (objects and arrays for handlebars)" }),
    }),
  )
  .max(100, "must have at most 100 entries")
  .default([]);
