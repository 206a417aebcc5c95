import { describe, expect, it } from "vitest";
import type { MergeLanguage } from "../../../src/channels/email/content.js";
import {
  MAX_RENDERED_LENGTH,
  type RenderInput,
  renderEmail,
  TemplateRenderError,
} from "../../../src/channels/email/templates/render.js";
import { renderFailure } from "../../support/render-failure.js";

function fields(
  options: {
    language?: MergeLanguage;
    vars?: RenderInput["message"]["global_merge_vars"];
    regions?: boolean;
  } = {},
): RenderInput {
  return {
    template_name: "limits",
    template_content: options.regions ? [{ name: "main", content: "<p>filled</p>" }] : [],
    message: {
      subject: "Subject",
      merge_language: options.language ?? "mailchimp",
      global_merge_vars: options.vars ?? [],
    },
  };
}

/** 440 KB, under the 512 KiB template limit, and deeper than the parser's recursion can go. */
const DEEP = `${"<div>".repeat(40_000)}${"</div>".repeat(40_000)}`;

describe("renderEmail: failures outside the merge step are TemplateRenderErrors too", () => {
  it("markup nested 40,000 deep, with regions to fill, fails in the HTML naming the regions", () => {
    const err = renderFailure(() => renderEmail({ code: DEEP, text: null }, fields({ regions: true })));
    expect(err.part).toBe("html");
    expect(err.message).toMatch(
      /^Template "limits": the editable regions could not be filled: Maximum call stack size exceeded$/,
    );
  });

  it("markup nested 40,000 deep, with no regions, fails where its text version is derived", () => {
    const err = renderFailure(() => renderEmail({ code: DEEP, text: null }, fields()));
    expect(err.part).toBe("text");
    expect(err.message).toMatch(/^Template "limits": the text version could not be derived from the HTML: /);
  });

  it("the same input fails the same way every time", () => {
    const once = renderFailure(() => renderEmail({ code: DEEP, text: null }, fields())).message;
    expect(renderFailure(() => renderEmail({ code: DEEP, text: null }, fields())).message).toBe(once);
  });

  it("a template of its own text part does not derive one, so deep HTML without regions renders", () => {
    const email = renderEmail({ code: DEEP, text: "plain" }, fields());
    expect(email.html).toBe(DEEP);
    expect(email.text).toBe("plain");
  });
});

describe("renderEmail: the size of the result", () => {
  const big = { name: "big", content: "x".repeat(64 * 1024) };

  it(`an e-mail longer than ${MAX_RENDERED_LENGTH} characters fails, naming the part that crossed the limit`, () => {
    const code = "*|BIG|*".repeat(MAX_RENDERED_LENGTH / (64 * 1024) + 1);
    const err = renderFailure(() => renderEmail({ code, text: null }, fields({ vars: [big] })));
    expect(err.part).toBe("html");
    expect(err.message).toBe(
      `Template "limits": the rendered e-mail is longer than ${MAX_RENDERED_LENGTH} characters (reached in the HTML)`,
    );
  });

  it("the limit counts the parts together", () => {
    const half = "*|BIG|*".repeat(MAX_RENDERED_LENGTH / (2 * 64 * 1024));
    const err = renderFailure(() =>
      renderEmail({ code: half, text: `${half}*|BIG|*` }, fields({ vars: [big] })),
    );
    expect(err.part).toBe("text");
  });

  it("handlebars loops that build an output far past the limit fail without building it", () => {
    const items = { name: "items", content: Array.from({ length: 1000 }, () => 0) };
    const code = "{{#each items}}{{#each @root.items}}{{{@root.big}}}{{/each}}{{/each}}";
    const err = renderFailure(() =>
      renderEmail({ code, text: null }, fields({ language: "handlebars", vars: [items, big] })),
    );
    expect(err).toBeInstanceOf(TemplateRenderError);
    expect(err.part).toBe("html");
  });

  it("an e-mail just under the limit renders", () => {
    const code = "*|BIG|*".repeat(MAX_RENDERED_LENGTH / (64 * 1024) - 1);
    const email = renderEmail({ code, text: "t" }, fields({ vars: [big] }));
    expect(email.html).toHaveLength(MAX_RENDERED_LENGTH - 64 * 1024);
  });
});
