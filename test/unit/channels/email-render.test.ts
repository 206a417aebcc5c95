import { describe, expect, it } from "vitest";
import type { EmailTemplateFields, MergeLanguage } from "../../../src/channels/email/content.js";
import {
  renderEmail,
  renderSample,
  SAMPLE_LIST_LENGTH,
  TemplateRenderError,
} from "../../../src/channels/email/templates/render.js";
import { renderFailure } from "../../support/render-failure.js";

type MergeVars = EmailTemplateFields["message"]["global_merge_vars"];

function fields(
  options: {
    language?: MergeLanguage;
    vars?: MergeVars;
    content?: EmailTemplateFields["template_content"];
    subject?: string;
  } = {},
): EmailTemplateFields {
  return {
    template_name: "welcome",
    template_content: options.content ?? [],
    message: {
      from_email: "hello@example.com",
      from_name: "Example",
      subject: options.subject ?? "Welcome",
      to: [{ email: "ada@example.org", name: "Ada", type: "to" }],
      merge_language: options.language ?? "mailchimp",
      global_merge_vars: options.vars ?? [],
    },
  };
}

function html(code: string, f: EmailTemplateFields): string {
  return renderEmail({ code, text: null }, f).html;
}

describe("renderEmail: editable regions", () => {
  const layout =
    '<table><tr><td mc:edit="header">Default header</td></tr><tr><td mc:edit="body">Default body</td></tr></table>';

  it("a region with a matching entry gets the entry's content as its inner HTML", () => {
    const f = fields({ content: [{ name: "header", content: "<h1>Hello</h1>" }] });
    expect(html(layout, f)).toBe(
      '<table><tr><td mc:edit="header"><h1>Hello</h1></td></tr><tr><td mc:edit="body">Default body</td></tr></table>',
    );
  });

  it("a region without an entry keeps its default content", () => {
    const f = fields({ content: [{ name: "body", content: "New body" }] });
    expect(html(layout, f)).toContain('<td mc:edit="header">Default header</td>');
    expect(html(layout, f)).toContain('<td mc:edit="body">New body</td>');
  });

  it("an entry with no matching region is ignored", () => {
    const f = fields({ content: [{ name: "sidebar", content: "<p>Nowhere</p>" }] });
    expect(html(layout, f)).toBe(layout);
  });

  it("region names match exactly", () => {
    const f = fields({ content: [{ name: "Header", content: "Changed" }] });
    expect(html(layout, f)).toContain("Default header");
  });

  it("every element carrying the same region name is filled", () => {
    const code = '<p mc:edit="x">a</p><div><span mc:edit="x">b</span></div>';
    expect(html(code, fields({ content: [{ name: "x", content: "c" }] }))).toBe(
      '<p mc:edit="x">c</p><div><span mc:edit="x">c</span></div>',
    );
  });

  it("the rest of the document is kept: doctype, head, styles, Outlook conditional comments", () => {
    const code = [
      "<!DOCTYPE html>",
      '<html lang="en"><head><meta charset="utf-8"><title>T</title>',
      "<style>td > p { color: red } /* <b>not markup</b> */</style>",
      "<!--[if mso]><xml><o:OfficeDocumentSettings/></xml><![endif]-->",
      "</head><body>",
      "<div mc:edit=\"main\" class='c' data-x=1>Default</div>",
      "</body></html>",
    ].join("\n");
    const rendered = html(code, fields({ content: [{ name: "main", content: "<p>Filled</p>" }] }));
    expect(rendered).toBe(code.replace(">Default<", "><p>Filled</p><"));
  });

  it("a template with no matching region is returned exactly as stored", () => {
    const code = "<p>Unclosed paragraph<br>";
    expect(html(code, fields({ content: [{ name: "main", content: "x" }] }))).toBe(code);
  });

  it("region content may use merge tags, which are merged afterwards", () => {
    const f = fields({
      content: [{ name: "header", content: "Hi *|FNAME|*" }],
      vars: [{ name: "fname", content: "Ada" }],
    });
    expect(html(layout, f)).toContain('<td mc:edit="header">Hi Ada</td>');
  });
});

describe("renderEmail: mailchimp merge tags", () => {
  const vars = (content: unknown, name = "NAME") => fields({ vars: [{ name, content }] });

  it("a tag is replaced by its variable", () => {
    expect(html("<p>Hello *|NAME|*</p>", vars("Ada"))).toBe("<p>Hello Ada</p>");
  });

  it("tag and variable names are case-insensitive", () => {
    expect(html("<p>*|name|* *|Name|*</p>", vars("Ada", "nAmE"))).toBe("<p>Ada Ada</p>");
  });

  it("a later variable with the same name wins, whatever its case", () => {
    const f = fields({
      vars: [
        { name: "name", content: "First" },
        { name: "NAME", content: "Second" },
      ],
    });
    expect(html("*|NAME|*", f)).toBe("Second");
  });

  it("the value is HTML-escaped in the HTML", () => {
    expect(html("<p>*|NAME|*</p>", vars(`<script>alert("x")</script> & 'y'`))).toBe(
      "<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;y&#x27;</p>",
    );
  });

  it("the value is escaped inside an attribute too, so it cannot break out of the quotes", () => {
    expect(html('<a href="*|URL|*">x</a>', vars('" onclick="evil()', "URL"))).toBe(
      '<a href="&quot; onclick&#x3D;&quot;evil()">x</a>',
    );
  });

  it("*|HTML:NAME|* inserts the value raw", () => {
    expect(html("<div>*|HTML:BLOCK|*</div>", vars("<b>bold</b>", "block"))).toBe("<div><b>bold</b></div>");
  });

  it("an unknown tag becomes an empty string", () => {
    expect(html("<p>[*|MISSING|*] [*|HTML:MISSING|*]</p>", vars("Ada"))).toBe("<p>[] []</p>");
  });

  it("numbers and booleans are inserted via String", () => {
    const f = fields({
      vars: [
        { name: "count", content: 3 },
        { name: "ok", content: false },
      ],
    });
    expect(html("*|COUNT|* *|OK|*", f)).toBe("3 false");
  });

  it("objects and arrays are inserted as JSON (escaped in the HTML), null as nothing", () => {
    const f = fields({
      vars: [
        { name: "obj", content: { a: [1, "b"] } },
        { name: "none", content: null },
      ],
    });
    expect(html("*|OBJ|*[*|NONE|*]", f)).toBe("{&quot;a&quot;:[1,&quot;b&quot;]}[]");
    expect(html("*|HTML:OBJ|*", f)).toBe('{"a":[1,"b"]}');
  });

  it("a value is inserted once, never scanned for tags itself", () => {
    const f = fields({
      vars: [
        { name: "a", content: "*|B|*" },
        { name: "b", content: "secret" },
      ],
    });
    expect(html("*|A|*", f)).toBe("*|B|*");
  });

  it("Handlebars syntax is plain text in a mailchimp template", () => {
    expect(html("<p>{{name}} {{#if x}}</p>", vars("Ada"))).toBe("<p>{{name}} {{#if x}}</p>");
  });

  it("the subject is merged as plain text, unescaped", () => {
    const f = fields({ subject: "Hi *|NAME|* & *|HTML:NAME|*", vars: [{ name: "name", content: "<Ada>" }] });
    expect(renderEmail({ code: "", text: null }, f).subject).toBe("Hi <Ada> & <Ada>");
  });

  it("the text template is merged as plain text, unescaped", () => {
    const f = vars("Tom & Jerry");
    expect(renderEmail({ code: "<p>x</p>", text: "Hello *|NAME|*\n" }, f).text).toBe("Hello Tom & Jerry\n");
  });
});

describe("renderEmail: handlebars", () => {
  const vars = (v: MergeVars, subject?: string) =>
    fields({ language: "handlebars", vars: v, ...(subject ? { subject } : {}) });

  it("a variable is replaced and HTML-escaped in the HTML", () => {
    expect(html("<p>{{name}}</p>", vars([{ name: "name", content: "<b>Ada</b> & co" }]))).toBe(
      "<p>&lt;b&gt;Ada&lt;/b&gt; &amp; co</p>",
    );
  });

  it("triple braces insert the value raw", () => {
    expect(html("<p>{{{name}}}</p>", vars([{ name: "name", content: "<b>Ada</b>" }]))).toBe(
      "<p><b>Ada</b></p>",
    );
  });

  it("objects are reachable by path and arrays with #each", () => {
    const f = vars([
      { name: "user", content: { first: "Ada", address: { city: "London" } } },
      {
        name: "items",
        content: [
          { sku: "A1", qty: 2 },
          { sku: "B2", qty: 1 },
        ],
      },
    ]);
    expect(
      html(
        "<p>{{user.first}} in {{user.address.city}}</p><ul>{{#each items}}<li>{{sku}}×{{qty}}</li>{{/each}}</ul>",
        f,
      ),
    ).toBe("<p>Ada in London</p><ul><li>A1×2</li><li>B2×1</li></ul>");
  });

  it("names are exact: a different case is a different (here unknown) variable", () => {
    expect(html("[{{Name}}]", vars([{ name: "name", content: "Ada" }]))).toBe("[]");
  });

  it("a later variable with the same name wins", () => {
    const f = vars([
      { name: "name", content: "First" },
      { name: "name", content: "Second" },
    ]);
    expect(html("{{name}}", f)).toBe("Second");
  });

  it("an unknown variable renders as nothing", () => {
    expect(html("<p>[{{missing}}] [{{missing.deeper}}]</p>", vars([]))).toBe("<p>[] []</p>");
  });

  it("the subject and the text template are not escaped", () => {
    const f = vars([{ name: "name", content: "Tom & <Jerry>" }], "Hi {{name}}");
    const rendered = renderEmail({ code: "<p>{{name}}</p>", text: "Dear {{name}}," }, f);
    expect(rendered).toEqual({
      subject: "Hi Tom & <Jerry>",
      html: "<p>Tom &amp; &lt;Jerry&gt;</p>",
      text: "Dear Tom & <Jerry>,",
    });
  });

  it("region content may use handlebars expressions", () => {
    const f = fields({
      language: "handlebars",
      content: [{ name: "main", content: "Hi {{name}}" }],
      vars: [{ name: "name", content: "Ada" }],
    });
    expect(html('<div mc:edit="main"></div>', f)).toBe('<div mc:edit="main">Hi Ada</div>');
  });

  it("mailchimp tags are plain text in a handlebars template", () => {
    expect(html("*|NAME|*", vars([{ name: "NAME", content: "Ada" }]))).toBe("*|NAME|*");
  });

  it.each([
    ["{{constructor}}"],
    ["{{constructor.name}}"],
    ["{{__proto__}}"],
    ["{{__proto__.constructor.name}}"],
    ["{{user.constructor.constructor}}"],
    ['{{lookup user "constructor"}}'],
    ['{{#with "s" as |s|}}{{s.constructor.constructor}}{{/with}}'],
    ["{{#with __proto__}}{{toString}}{{/with}}"],
  ])("a prototype-access attempt %s renders nothing", (expression) => {
    const f = vars([{ name: "user", content: { first: "Ada" } }]);
    expect(html(`[${expression}]`, f)).toBe("[]");
  });

  it("the classic constructor-to-Function escape runs no code", () => {
    const globals = globalThis as { renderEmailPwned?: boolean };
    const payload = [
      '{{#with "s" as |string|}}',
      '{{#with "e"}}{{#with split as |conslist|}}{{this.pop}}{{this.push (lookup string.sub "constructor")}}',
      "{{this.pop}}{{#with string.split as |codelist|}}{{this.pop}}",
      '{{this.push "globalThis.renderEmailPwned = true;"}}{{this.pop}}',
      "{{#each conslist}}{{#with (string.sub.apply 0 codelist)}}{{this}}{{/with}}{{/each}}",
      "{{/with}}{{/with}}{{/with}}{{/with}}",
    ].join("");
    try {
      renderEmail({ code: payload, text: null }, vars([]));
    } catch (err) {
      // Refusing to render is as good as rendering nothing.
      expect(err).toBeInstanceOf(TemplateRenderError);
    }
    expect(globals.renderEmailPwned).toBeUndefined();
  });

  it("a variable named __proto__ is an ordinary variable", () => {
    expect(html("{{__proto__}}", vars([{ name: "__proto__", content: "plain" }]))).toBe("plain");
  });

  it("{{log}} writes nothing and renders nothing", () => {
    expect(html('[{{log "from a template"}}]', vars([]))).toBe("[]");
  });

  it("helpers registered on the global Handlebars are not available", async () => {
    const { default: Handlebars } = await import("handlebars");
    Handlebars.registerHelper("leak", () => "leaked");
    try {
      expect(() => html("{{leak 1}}", vars([]))).toThrow(TemplateRenderError);
    } finally {
      Handlebars.unregisterHelper("leak");
    }
  });
});

describe("renderEmail: template errors", () => {
  it("a handlebars syntax error in the HTML is a TemplateRenderError naming the template and part", () => {
    const err = renderFailure(() =>
      renderEmail({ code: "<p>{{#if ok}}unclosed</p>", text: null }, fields({ language: "handlebars" })),
    );
    expect(err.part).toBe("html");
    expect(err.name).toBe("TemplateRenderError");
    expect(err.message).toMatch(
      /^Template "welcome": the HTML could not be rendered as handlebars: Parse error/,
    );
  });

  it("a syntax error in the subject names the subject", () => {
    const err = renderFailure(() =>
      renderEmail(
        { code: "<p>ok</p>", text: null },
        fields({ language: "handlebars", subject: "Hi {{name" }),
      ),
    );
    expect(err.part).toBe("subject");
    expect(err.message).toContain("the subject could not be rendered");
  });

  it("a syntax error in the text template names the text version", () => {
    const err = renderFailure(() =>
      renderEmail({ code: "<p>ok</p>", text: "{{/each}}" }, fields({ language: "handlebars" })),
    );
    expect(err.part).toBe("text");
  });

  it("a syntax error brought in by region content is reported too", () => {
    const f = fields({ language: "handlebars", content: [{ name: "main", content: "{{#each}}" }] });
    expect(() => html('<div mc:edit="main"></div>', f)).toThrow(TemplateRenderError);
  });

  it("an unknown helper is a TemplateRenderError", () => {
    const err = renderFailure(() => html("{{shout name}}", fields({ language: "handlebars" })));
    expect(err.message).toContain('Missing helper: "shout"');
  });

  it("a partial is a TemplateRenderError, since none exist", () => {
    expect(() => html("{{> footer}}", fields({ language: "handlebars" }))).toThrow(TemplateRenderError);
  });
});

describe("renderEmail: text part", () => {
  it("the text template is used when there is one", () => {
    const rendered = renderEmail({ code: "<h1>Big</h1>", text: "Small" }, fields());
    expect(rendered.text).toBe("Small");
  });

  it("without a text template, the text is derived from the rendered HTML", () => {
    const code = [
      "<html><head><title>Ignored</title><style>p { color: red }</style></head><body>",
      "<p>Hello *|NAME|*,</p>",
      '<p>Read <a href="https://example.com/terms">our terms</a> at <a href="https://example.com">https://example.com</a>.</p>',
      '<img src="https://example.com/pixel.gif" alt="">',
      "</body></html>",
    ].join("");
    const rendered = renderEmail(
      { code, text: null },
      fields({ vars: [{ name: "name", content: "Tom & Jerry" }] }),
    );
    expect(rendered.text).toBe(
      "Hello Tom & Jerry,\n\nRead our terms [https://example.com/terms] at https://example.com.",
    );
  });

  it("a derived text is wrapped at 78 columns", () => {
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
    const { text } = renderEmail({ code: `<p>${words}</p>`, text: null }, fields());
    const lines = text.split("\n");
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(78);
  });

  it("the subject is rendered even when the template has no merge tags", () => {
    expect(renderEmail({ code: "<p>x</p>", text: null }, fields({ subject: "Plain" })).subject).toBe("Plain");
  });
});

describe("renderEmail: the merged subject is one header line (decision 0029)", () => {
  it.each<[MergeLanguage, string]>([
    ["mailchimp", "Hi *|NAME|*!"],
    ["handlebars", "Hi {{NAME}}!"],
  ])(
    "%s: each run of CR, LF and tabs becomes one space, other control characters are removed",
    (language, subject) => {
      const f = fields({
        language,
        subject,
        vars: [{ name: "NAME", content: "Ada\r\nBcc: victim@example.org\r\n\r\n\tX\u0000\u001b\u007f" }],
      });
      expect(renderEmail({ code: "", text: null }, f).subject).toBe("Hi Ada Bcc: victim@example.org X!");
    },
  );

  it("a line break merged into the HTML or the text part stays", () => {
    const f = fields({ vars: [{ name: "NAME", content: "a\nb" }] });
    const email = renderEmail({ code: "<p>*|NAME|*</p>", text: "*|NAME|*" }, f);
    expect(email.html).toBe("<p>a\nb</p>");
    expect(email.text).toBe("a\nb");
  });
});

describe("renderSample: what a save checks", () => {
  const nested = (depth: number, body = "") =>
    `${"{{#each @root.items}}".repeat(depth)}${body}${"{{/each}}".repeat(depth)}`;

  it("an ordinary template, a Mailchimp one and one with a Handlebars error all pass", () => {
    expect(() => renderSample({ code: "<p>Hello {{name}}</p>", text: null }, "t")).not.toThrow();
    expect(() => renderSample({ code: "<p>*|FNAME|* {{#if}}</p>", text: "*|FNAME|*" }, "t")).not.toThrow();
    expect(() => renderSample({ code: nested(2, "<li>{{title}}</li>"), text: null }, "t")).not.toThrow();
  });

  it(`every {{#each}}, however nested, loops over ${SAMPLE_LIST_LENGTH} items`, () => {
    // 3 deep printing 160 characters: 30^3 · 160, just over the rendered e-mail's limit.
    const err = renderFailure(() => renderSample({ code: nested(3, "x".repeat(160)), text: null }, "t"));
    expect(err.limit).toBe("length");
    expect(err.message).toMatch(/longer than 4194304 characters/);
  });
});
