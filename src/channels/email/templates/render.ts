import Handlebars from "handlebars";
import { convert } from "html-to-text";
import { type HTMLElement, type Options as HtmlParserOptions, parse } from "node-html-parser";
import type { EmailTemplateFields, MergeLanguage } from "../content.js";
import { type RenderedPart, TemplateRenderError } from "./render-error.js";

export { type RenderedPart, TemplateRenderError } from "./render-error.js";

/** A stored template: the HTML with its `mc:edit` regions, and an optional plain-text version. */
export interface EmailTemplateSource {
  code: string;
  /** `null` derives the text part from the rendered HTML. */
  text: string | null;
}

/** What a rendering uses of an e-mail's `template_fields`; an e-mail's whole fields will do. */
export interface RenderInput {
  template_name: string;
  template_content: EmailTemplateFields["template_content"];
  message: Pick<EmailTemplateFields["message"], "subject" | "merge_language" | "global_merge_vars">;
}

export interface RenderedEmail {
  subject: string;
  html: string;
  text: string;
}

/**
 * Renders an e-mail the way Mandrill's send-template call does:
 * 1. each element with `mc:edit="<name>"` gets the `template_content` entry of that exact name as
 *    its inner HTML (entries with no region are ignored; regions with no entry keep their default);
 * 2. `global_merge_vars` are merged into the HTML, the subject and the text template, after the
 *    regions are filled so region content may use merge tags;
 * 3. the text part is `template.text` rendered, or, when there is none, derived from the rendered
 *    HTML (wrapped at 78 columns, images left out).
 *
 * Merge rules, by `merge_language`:
 * - `mailchimp`: `*|NAME|*` (letters, digits, underscore; case-insensitive). In the HTML the value
 *   is HTML-escaped and `*|HTML:NAME|*` inserts it raw; in the subject and text it is inserted as
 *   is. Unknown names become "". Strings are used as they are, numbers and booleans via `String`,
 *   objects and arrays as JSON, `null` as "". Other Mailchimp tags (`*|IF:…|*`) are left alone.
 * - `handlebars`: an isolated Handlebars environment; the data is name → content, so objects and
 *   arrays work with `{{x.y}}` and `{{#each}}`. Names are exact (Handlebars is case-sensitive). In
 *   the HTML `{{x}}` is escaped and `{{{x}}}` raw; the subject and text are never escaped.
 *   Prototype properties are never reachable, and `{{log}}` does nothing.
 *
 * In both languages, a later variable with the same name wins, and escaping covers
 * `& < > " ' \` =`. Values are inserted once and never scanned for tags themselves.
 *
 * The rendered e-mail (subject, HTML and text together) may be at most
 * {@link MAX_RENDERED_LENGTH} characters. Time and memory are not bounded here: a client's
 * template is rendered through the sandbox (`sandbox.ts`), never on a process's own event loop.
 *
 * @throws {TemplateRenderError} for every failure: a template error, markup nested too deeply for
 *   the HTML parser or the text conversion (a stack overflow), or a result over the size limit.
 */
export function renderEmail(template: EmailTemplateSource, fields: RenderInput): RenderedEmail {
  const { message } = fields;
  return renderWith(template, fields, mergerFor(message.merge_language, message.global_merge_vars));
}

/**
 * How many items each list has in {@link renderSample}'s data: a long order or digest. Loops
 * nested four deep (810,000 iterations) still render within the save budget when they print
 * nothing, and fill the rendered e-mail's limit when they print a little; five deep do not.
 */
export const SAMPLE_LIST_LENGTH = 30;

/**
 * Renders the template the way a save checks it (docs/decisions/0029): once as Handlebars with
 * data where every name is a list of {@link SAMPLE_LIST_LENGTH} items whose every field is such a
 * list again (so each `{{#each}}`, however nested, loops over a sample list), once as Mailchimp
 * with no variables. Template errors are not its business (a Mailchimp template need not be valid
 * Handlebars; a missing variable is a send's problem): only the limits decide, the rendered
 * length ({@link MAX_RENDERED_LENGTH}, rethrown) and what the sandbox measures around it, the
 * time and the memory it takes.
 */
export function renderSample(template: EmailTemplateSource, name: string): void {
  const fields: RenderInput = {
    template_name: name,
    template_content: [],
    message: { subject: "", merge_language: "handlebars", global_merge_vars: [] },
  };
  const attempts: Array<() => unknown> = [
    () => renderWith(template, fields, handlebarsMergerOf(sampleData())),
    () => renderWith(template, fields, mailchimpMerger([])),
  ];
  for (const attempt of attempts) {
    try {
      attempt();
    } catch (error) {
      if (!(error instanceof TemplateRenderError) || error.limit) throw error;
    }
  }
}

function renderWith(template: EmailTemplateSource, fields: RenderInput, merger: Merger): RenderedEmail {
  const { template_name: name, message } = fields;
  // The parser and the text conversion recurse over the markup, so they fail on the template too.
  const attempt = (part: RenderedPart, step: string, run: () => string) => {
    try {
      return run();
    } catch (err) {
      throw renderError(name, part, step, err);
    }
  };
  let length = 0;
  const counted = (part: RenderedPart, value: string) => {
    length += value.length; // O(1), even while the string is still a tree of concatenated pieces
    if (length > MAX_RENDERED_LENGTH) {
      throw new TemplateRenderError(
        `Template ${JSON.stringify(name)}: the rendered e-mail is longer than ${MAX_RENDERED_LENGTH} characters (reached in the ${PART_NAMES[part]})`,
        part,
        { limit: "length" },
      );
    }
    return value;
  };
  const merge = (part: RenderedPart, source: string) =>
    counted(
      part,
      attempt(part, `the ${PART_NAMES[part]} could not be rendered as ${message.merge_language}`, () =>
        merger(source, part),
      ),
    );

  const code = attempt("html", "the editable regions could not be filled", () =>
    fillEditableRegions(template.code, fields.template_content),
  );
  const html = merge("html", code);
  const subject = oneHeaderLine(merge("subject", message.subject));
  const text =
    template.text === null
      ? counted(
          "text",
          attempt("text", "the text version could not be derived from the HTML", () => htmlToText(html)),
        )
      : merge("text", template.text);
  return { subject, html, text };
}

/**
 * The longest rendered e-mail, in UTF-16 code units: 4 Mi, eight times the largest template
 * (512 KiB), and far past what mail clients show (Gmail clips an HTML part at 102 KB). The
 * renderer's result is copied into the calling process, so this bounds the memory it can take
 * there (the web process has a 128 MB heap).
 */
export const MAX_RENDERED_LENGTH = 4 * 1024 * 1024;

/** Applies the merge variables to one part; the HTML part escapes, the others do not. */
type Merger = (source: string, part: RenderedPart) => string;

function mergerFor(
  language: MergeLanguage,
  vars: EmailTemplateFields["message"]["global_merge_vars"],
): Merger {
  switch (language) {
    case "mailchimp":
      return mailchimpMerger(vars);
    case "handlebars":
      return handlebarsMerger(vars);
    default: {
      const unknown: never = language;
      throw new TemplateRenderError(`Unknown merge language ${JSON.stringify(unknown)}`, "html");
    }
  }
}

// --- Editable regions -----------------------------------------------------------------------

/**
 * Comments are kept because e-mail HTML relies on them (`<!--[if mso]>` blocks for Outlook), and
 * the usual raw-text elements are kept verbatim so CSS and scripts are not reparsed as markup.
 */
const PARSER_OPTIONS: Partial<HtmlParserOptions> = {
  comment: true,
  blockTextElements: { script: true, noscript: true, style: true, pre: true },
};

function fillEditableRegions(code: string, content: EmailTemplateFields["template_content"]): string {
  if (content.length === 0) return code;
  const byName = new Map(content.map((entry) => [entry.name, entry.content]));
  const root = parse(code, PARSER_OPTIONS);
  // Collected before any change, so a region inside replaced content (or inside a region that
  // was itself replaced) is never filled: the outcome does not depend on the entries' order.
  const regions = elementsWithAttribute(root, "mc:edit");
  let filled = false;
  for (const region of regions) {
    const replacement = byName.get(region.getAttribute("mc:edit") ?? "");
    if (replacement === undefined) continue;
    region.set_content(replacement, PARSER_OPTIONS);
    filled = true;
  }
  // Serialising normalises a little (it closes unclosed elements), so an untouched document is
  // handed on exactly as it was stored.
  return filled ? root.toString() : code;
}

function elementsWithAttribute(root: HTMLElement, attribute: string): HTMLElement[] {
  const found: HTMLElement[] = [];
  const visit = (element: HTMLElement) => {
    for (const child of element.children) {
      if (child.hasAttribute(attribute)) found.push(child);
      visit(child);
    }
  };
  visit(root);
  return found;
}

// --- Mailchimp merge tags -------------------------------------------------------------------

const MAILCHIMP_TAG = /\*\|(HTML:)?([A-Za-z0-9_]+)\|\*/gi;

function mailchimpMerger(vars: EmailTemplateFields["message"]["global_merge_vars"]): Merger {
  const values = new Map(vars.map((v) => [v.name.toUpperCase(), mailchimpValue(v.content)]));
  return (source, part) =>
    source.replace(MAILCHIMP_TAG, (_tag: string, raw: string | undefined, name: string) => {
      const value = values.get(name.toUpperCase()) ?? "";
      return part === "html" && raw === undefined ? Handlebars.escapeExpression(value) : value;
    });
}

function mailchimpValue(content: unknown): string {
  switch (typeof content) {
    case "string":
      return content;
    case "number":
    case "boolean":
    case "bigint":
      return String(content);
    case "object":
      return content === null ? "" : JSON.stringify(content);
    default:
      return "";
  }
}

// --- Handlebars -----------------------------------------------------------------------------

/**
 * Our own environment, so no helper or partial registered elsewhere in the process is reachable
 * from a client's template. `log` would let a template write to the worker's console.
 */
const handlebars = Handlebars.create();
handlebars.registerHelper("log", () => undefined);

/**
 * Stated explicitly rather than left to the defaults: with no explicit value Handlebars logs a
 * warning to the console the first time a template tries a prototype property.
 */
const RUNTIME_OPTIONS: Handlebars.RuntimeOptions = {
  allowProtoPropertiesByDefault: false,
  allowProtoMethodsByDefault: false,
};

function handlebarsMerger(vars: EmailTemplateFields["message"]["global_merge_vars"]): Merger {
  // A null prototype, so a variable named "__proto__" is an ordinary entry, not a prototype.
  const data: Record<string, unknown> = Object.create(null);
  for (const v of vars) data[v.name] = v.content;
  return handlebarsMergerOf(data);
}

function handlebarsMergerOf(data: object): Merger {
  return (source, part) => {
    const template = handlebars.compile(source, { noEscape: part !== "html" });
    return template(data, RUNTIME_OPTIONS);
  };
}

/**
 * Data in which every name (but the few a value's conversion to text asks for) is a list of
 * {@link SAMPLE_LIST_LENGTH} items, each of which is this data again: `{{#each a}}{{#each b}}`
 * loops over sample lists at any depth. Built lazily, so nesting costs nothing until rendered.
 */
function sampleData(): object {
  const notAField = new Set(["toHTML", "toJSON", "then", "constructor", "length"]);
  let list: unknown[] = [];
  const isField = (key: string | symbol): key is string =>
    typeof key === "string" && !notAField.has(key) && !(key in Object.prototype);
  const item: object = new Proxy(
    {},
    {
      get: (target, key) => (isField(key) ? list : Reflect.get(target, key)),
      has: (target, key) => isField(key) || Reflect.has(target, key),
      getOwnPropertyDescriptor: (target, key) =>
        isField(key)
          ? { value: list, writable: true, enumerable: false, configurable: true }
          : Reflect.getOwnPropertyDescriptor(target, key),
    },
  );
  list = Array.from({ length: SAMPLE_LIST_LENGTH }, () => item);
  // Printed as a value, a list is one short word, not its items joined.
  Object.defineProperty(list, "toString", { value: () => "sample", enumerable: false });
  return item;
}

// --- Subject ----------------------------------------------------------------------------------

const LINE_BREAKS = /[\r\n\t\v\f]+/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const OTHER_CONTROLS = /[\u0000-\u001f\u007f]/g;

/**
 * The merged subject as one header line (docs/decisions/0029): a merge variable may carry a line
 * break, which must never reach the header as one. Each run of line breaks and tabs becomes one
 * space, other C0 controls and DEL are removed, so a preview shows exactly the subject that is sent.
 */
export function oneHeaderLine(subject: string): string {
  return subject.replace(LINE_BREAKS, " ").replace(OTHER_CONTROLS, "");
}

// --- Text part and errors -------------------------------------------------------------------

function htmlToText(html: string): string {
  return convert(html, {
    // RFC 5322 §2.1.1's recommended line length; long words such as URLs are never broken.
    wordwrap: 78,
    selectors: [
      // Spacers, logos and tracking pixels only add noise to a text part.
      { selector: "img", format: "skip" },
      { selector: "a", options: { hideLinkHrefIfSameAsText: true } },
    ],
  });
}

const PART_NAMES: Record<RenderedPart, string> = {
  subject: "subject",
  html: "HTML",
  text: "text version",
};

function renderError(
  templateName: string,
  part: RenderedPart,
  step: string,
  err: unknown,
): TemplateRenderError {
  const reason = err instanceof Error ? err.message : String(err);
  return new TemplateRenderError(`Template ${JSON.stringify(templateName)}: ${step}: ${reason}`, part, {
    cause: err,
  });
}
