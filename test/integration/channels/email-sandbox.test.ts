import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import type { EmailTemplateFields, MergeLanguage } from "../../../src/channels/email/content.js";
import {
  type EmailTemplateSource,
  type RenderInput,
  renderEmail,
  TemplateRenderError,
} from "../../../src/channels/email/templates/render.js";
import { RenderAbandonedError, RenderBusyError } from "../../../src/channels/email/templates/render-error.js";
import { RENDER_HEAP_MB, RenderSandbox } from "../../../src/channels/email/templates/sandbox.js";

type MergeVars = EmailTemplateFields["message"]["global_merge_vars"];

function fields(options: { language?: MergeLanguage; vars?: MergeVars; name?: string } = {}): RenderInput {
  return {
    template_name: options.name ?? "sandboxed",
    template_content: [],
    message: {
      subject: "Hello",
      merge_language: options.language ?? "handlebars",
      global_merge_vars: options.vars ?? [],
    },
  };
}

async function renderFailure(rendering: Promise<unknown>): Promise<TemplateRenderError> {
  try {
    await rendering;
  } catch (err) {
    if (err instanceof TemplateRenderError) return err;
    throw err;
  }
  throw new Error("expected a TemplateRenderError");
}

const ORDINARY: EmailTemplateSource = { code: "<p>Hello {{name}}</p>", text: null };
const ordinary = (name: string) => fields({ vars: [{ name: "name", content: name }] });

/** `{{#each}}` over 200 items nested six deep: 200^6 iterations, days of CPU. */
const ENDLESS: EmailTemplateSource = {
  code: `${"{{#each @root.x}}".repeat(6)}${"{{/each}}".repeat(6)}`,
  text: null,
};
const endless = fields({
  name: "endless",
  vars: [{ name: "x", content: Array.from({ length: 200 }, () => 0) }],
});

/** 10,000 expressions: Handlebars needs ~250 MB to compile them (measured in-process). */
const GREEDY: EmailTemplateSource = { code: "{{x}}".repeat(10_000), text: null };

const sandboxes: RenderSandbox[] = [];
function sandbox(options?: ConstructorParameters<typeof RenderSandbox>[0]): RenderSandbox {
  const created = new RenderSandbox(options);
  sandboxes.push(created);
  return created;
}
afterAll(() => Promise.all(sandboxes.map((s) => s.close())));

describe("RenderSandbox: ordinary renders", () => {
  const cases: Array<[string, EmailTemplateSource, RenderInput]> = [
    [
      "mailchimp tags, regions and a derived text part",
      {
        code: '<!doctype html><h1 mc:edit="header">Default</h1><p>Hi *|FNAME|*, plan *|PLAN|*</p><!--[if mso]>x<![endif]-->',
        text: null,
      },
      {
        ...fields({
          language: "mailchimp",
          vars: [
            { name: "FNAME", content: "Ada" },
            { name: "plan", content: "<Pro>" },
          ],
        }),
        template_content: [{ name: "header", content: "<em>Hi *|FNAME|*</em>" }],
      },
    ],
    [
      "handlebars objects, arrays and the template's own text part",
      {
        code: "<ul>{{#each items}}<li>{{title}}</li>{{/each}}</ul>{{{sig}}}",
        text: "{{#each items}}- {{title}}\n{{/each}}",
      },
      fields({
        vars: [
          { name: "items", content: [{ title: "First & best" }, { title: "Second" }] },
          { name: "sig", content: "<b>The team</b>" },
        ],
      }),
    ],
  ];

  it.each(cases)("%s: exactly what renderEmail gives in-process", async (_, template, input) => {
    expect(await sandbox().render(template, input)).toEqual(renderEmail(template, input));
  });

  it("a template error is the same TemplateRenderError as in-process", async () => {
    const broken = { code: "<p>{{#if ok}}unclosed</p>", text: null };
    const err = await renderFailure(sandbox().render(broken, fields()));
    expect(err.part).toBe("html");
    expect(err.message).toBe(
      (() => {
        try {
          renderEmail(broken, fields());
        } catch (inProcess) {
          return (inProcess as Error).message;
        }
      })(),
    );
  });

  it("markup nested 40,000 deep fails as a TemplateRenderError, not a RangeError", async () => {
    const deep = { code: `${"<div>".repeat(40_000)}${"</div>".repeat(40_000)}`, text: null };
    const err = await renderFailure(sandbox().render(deep, fields()));
    expect(err.message).toMatch(
      /^Template "sandboxed": the text version could not be derived from the HTML: /,
    );
  });

  it("only what the renderer reads crosses to the thread: a stored template's other columns are ignored", async () => {
    const stored = { ...ORDINARY, name: "welcome", createdAt: new Date(), render: () => "not cloneable" };
    expect(await sandbox().render(stored, ordinary("Ada"))).toMatchObject({ html: "<p>Hello Ada</p>" });
  });
});

describe("RenderSandbox: limits", () => {
  it("a render past the deadline fails as a TemplateRenderError; renders queued behind it finish on a new thread", async () => {
    const s = sandbox({ deadlineMs: 500 });
    await s.render(ORDINARY, ordinary("warm")); // the thread's start-up is not part of any deadline
    const started = Date.now();
    const [slow, next, last] = await Promise.allSettled([
      s.render(ENDLESS, endless),
      s.render(ORDINARY, ordinary("Ada")),
      s.render(ORDINARY, ordinary("Bob")),
    ]);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(slow.status === "rejected" && slow.reason).toBeInstanceOf(TemplateRenderError);
    expect(slow.status === "rejected" && (slow.reason as TemplateRenderError).message).toBe(
      'Template "endless": rendering took longer than the limit of 500 ms',
    );
    expect(slow.status === "rejected" && (slow.reason as TemplateRenderError).part).toBeNull();
    expect(next).toMatchObject({ status: "fulfilled", value: { html: "<p>Hello Ada</p>" } });
    expect(last).toMatchObject({ status: "fulfilled", value: { html: "<p>Hello Bob</p>" } });
    // The pool's two, and the one that replaced the thread the deadline ended.
    expect(s.stats).toMatchObject({ renders: 4, timeouts: 1, threadsStarted: 3 });
  });

  it("the caller's event loop stays free while a render runs", async () => {
    const s = sandbox({ deadlineMs: 1000 });
    await s.render(ORDINARY, ordinary("warm"));
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    let ticks = 0;
    const ticking = setInterval(() => ticks++, 20);
    await renderFailure(s.render(ENDLESS, endless));
    clearInterval(ticking);
    delay.disable();
    expect(ticks).toBeGreaterThan(20); // ~50 in the second the render ran
    expect(delay.max / 1e6).toBeLessThan(200);
  });

  it(`a render that needs more than ${RENDER_HEAP_MB} MB fails as a TemplateRenderError; only its thread dies, and the next render succeeds`, async () => {
    // A deadline long enough that only the heap limit can end this render.
    const s = sandbox({ deadlineMs: 60_000 });
    const err = await renderFailure(
      s.render(GREEDY, fields({ name: "greedy", vars: [{ name: "x", content: "a" }] })),
    );
    expect(err.message).toBe(
      `Template "greedy": rendering needed more memory than the limit of ${RENDER_HEAP_MB} MB`,
    );
    expect(err.part).toBeNull();
    expect(await s.render(ORDINARY, ordinary("Ada"))).toEqual(renderEmail(ORDINARY, ordinary("Ada")));
    expect(s.stats).toMatchObject({ renders: 2, outOfMemory: 1, timeouts: 0, threadsStarted: 3 });
  });
});

describe("RenderSandbox: threads", () => {
  it("starts no thread until the first render, then the pool's threads, and no more for many renders", async () => {
    const s = sandbox();
    expect(s.stats.threadsStarted).toBe(0);
    await Promise.all(["a", "b", "c"].map((name) => s.render(ORDINARY, ordinary(name))));
    expect(s.stats).toMatchObject({ threadsStarted: 2, renders: 3 });
  });

  it("close waits for the renders asked for, and a render asked for afterwards still runs", async () => {
    const s = sandbox({ deadlineMs: 300 });
    await s.render(ORDINARY, ordinary("warm"));
    let slowSettled = false;
    const slow = s.render(ENDLESS, endless).catch((error: unknown) => {
      slowSettled = true;
      return error;
    });
    await s.close();
    expect(slowSettled).toBe(true);
    expect(await slow).toBeInstanceOf(TemplateRenderError);
    expect(await s.render(ORDINARY, ordinary("late"))).toMatchObject({ html: "<p>Hello late</p>" });
    // The pool's two; none replaces them until asked; then two for the late render, ended with it.
    expect(s.stats.threadsStarted).toBe(4);
  });

  it("works from the compiled build (dist/), as the Procfile runs it", async () => {
    const url = new URL("../../../dist/src/channels/email/templates/sandbox.js", import.meta.url).href;
    const compiled = (await import(url)) as typeof import("../../../src/channels/email/templates/sandbox.js");
    const s = new compiled.RenderSandbox({ deadlineMs: 500 });
    try {
      expect(await s.render(ORDINARY, ordinary("Ada"))).toEqual(renderEmail(ORDINARY, ordinary("Ada")));
      const err = await s.render(ENDLESS, endless).catch((error: Error) => error);
      expect(err).toMatchObject({
        name: "TemplateRenderError",
        message: expect.stringMatching(/took longer/),
      });
    } finally {
      await s.close();
    }
  });
});

describe("RenderSandbox: fair between organizations (decision 0029)", () => {
  const A = { organizationId: "org-a" };
  const B = { organizationId: "org-b" };
  /** Settles with the order in which renders finished, by label. */
  const track = (order: string[], label: string, rendering: Promise<unknown>) =>
    rendering.then(
      (value) => {
        order.push(label);
        return value;
      },
      (error: unknown) => {
        order.push(label);
        throw error;
      },
    );

  it("one organization's slow renders never sit in front of another's: it runs on all threads but one", async () => {
    const s = sandbox({ deadlineMs: 1000, threads: 2 });
    await s.render(ORDINARY, ordinary("warm"));
    const order: string[] = [];
    const slow = [1, 2, 3, 4].map((i) =>
      track(order, `A${i}`, s.render(ENDLESS, endless, A)).catch(() => null),
    );
    const started = Date.now();
    const quick = await track(order, "B", s.render(ORDINARY, ordinary("Bea"), B));
    expect(quick).toMatchObject({ html: "<p>Hello Bea</p>" });
    expect(Date.now() - started).toBeLessThan(1000); // A's first render alone takes 1000
    await Promise.all(slow);
    expect(order).toEqual(["B", "A1", "A2", "A3", "A4"]);
  });

  it("the thread replacing one an organization's render ended counts as that organization's until it is ready", async () => {
    // A deadline well past what B's render may take even on a loaded machine: had B waited for
    // A's second render (on the thread A would have taken), it would have waited the deadline.
    const s = sandbox({ deadlineMs: 1500, threads: 2 });
    await s.render(ORDINARY, ordinary("warm"));
    const first = s.render(ENDLESS, endless, A);
    const second = s.render(ENDLESS, endless, A).catch(() => null);
    await renderFailure(first);
    // A's second render did not take the other, ready thread: it is left to other organizations
    // while A's replacement starts.
    expect(s.stats).toMatchObject({ renders: 2, waiting: 1 });
    const started = Date.now();
    expect(await s.render(ORDINARY, ordinary("Bea"), B)).toMatchObject({ html: "<p>Hello Bea</p>" });
    expect(Date.now() - started).toBeLessThan(1000);
    await second;
    expect(s.stats).toMatchObject({ renders: 4, timeouts: 2 });
  });

  it("with one thread, organizations take turns: B's render runs after A's current one, before A's next", async () => {
    const s = sandbox({ deadlineMs: 300, threads: 1 });
    await s.render(ORDINARY, ordinary("warm"));
    const order: string[] = [];
    const a = [1, 2, 3].map((i) => track(order, `A${i}`, s.render(ENDLESS, endless, A)).catch(() => null));
    const b = track(order, "B", s.render(ORDINARY, ordinary("Bea"), B));
    await Promise.all([...a, b]);
    expect(order).toEqual(["A1", "B", "A2", "A3"]);
  });

  it("over the organization's queue cap a render is refused at once; other organizations are not", async () => {
    const s = sandbox({ deadlineMs: 300, threads: 2, queuePerOrganization: 2 });
    await s.render(ORDINARY, ordinary("warm"));
    const taken = [1, 2, 3].map(() => s.render(ENDLESS, endless, A).catch(() => null)); // 1 runs, 2 wait
    const refused = await s.render(ORDINARY, ordinary("Ada"), A).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RenderBusyError);
    expect((refused as RenderBusyError).retryAfterMs).toBeGreaterThanOrEqual(100);
    expect(await s.render(ORDINARY, ordinary("Bea"), B)).toMatchObject({ html: "<p>Hello Bea</p>" });
    await Promise.all(taken);
    expect(s.stats.refused).toBe(1);
  });

  it("a render whose caller gave up is dropped from the queue and never runs", async () => {
    const s = sandbox({ deadlineMs: 300, threads: 2 });
    await s.render(ORDINARY, ordinary("warm"));
    const running = s.render(ENDLESS, endless, A).catch(() => null);
    const caller = new AbortController();
    const waiting = s.render(ORDINARY, ordinary("Ada"), { ...A, signal: caller.signal });
    caller.abort();
    await expect(waiting).rejects.toBeInstanceOf(RenderAbandonedError);
    await running;
    expect(s.stats).toMatchObject({ renders: 2, abandoned: 1 }); // the warm-up and the slow one
    const gone = new AbortController();
    gone.abort();
    await expect(s.render(ORDINARY, ordinary("x"), { signal: gone.signal })).rejects.toBeInstanceOf(
      RenderAbandonedError,
    );
  });

  it("a running render whose caller gave up is ended with its thread, which is replaced at once; the next organization's render does not wait for the deadline", async () => {
    // A deadline far past the test's own timeout: only ending the thread lets B's render run.
    const s = sandbox({ deadlineMs: 600_000, threads: 1 });
    await s.render(ORDINARY, ordinary("warm"));
    const order: string[] = [];
    const caller = new AbortController();
    const slow = track(order, "A", s.render(ENDLESS, endless, { ...A, signal: caller.signal }));
    const quick = track(order, "B", s.render(ORDINARY, ordinary("Bea"), B));
    // A's render is on the one thread; B's waits for it.
    expect(s.stats).toMatchObject({ renders: 2, waiting: 1, threadsStarted: 1 });

    caller.abort();
    await expect(slow).rejects.toThrow(RenderAbandonedError);
    await expect(slow).rejects.toThrow(/given up while it ran/);
    // Ended and replaced at once, not at the deadline.
    expect(s.stats).toMatchObject({ cancelled: 1, abandoned: 0, timeouts: 0, threadsStarted: 2 });

    expect(await quick).toMatchObject({ html: "<p>Hello Bea</p>" });
    expect(order).toEqual(["A", "B"]);
    expect(s.stats).toMatchObject({ renders: 3, cancelled: 1, timeouts: 0, threadsStarted: 2, waiting: 0 });
    // The thread's replacement goes on serving A too.
    expect(await s.render(ORDINARY, ordinary("Ada"), A)).toMatchObject({ html: "<p>Hello Ada</p>" });
  });

  it("a running render that finished before its caller gave up is not ended: aborting later changes nothing", async () => {
    const s = sandbox({ threads: 1 });
    const caller = new AbortController();
    expect(await s.render(ORDINARY, ordinary("Ada"), { ...A, signal: caller.signal })).toMatchObject({
      html: "<p>Hello Ada</p>",
    });
    caller.abort();
    expect(s.stats).toMatchObject({ cancelled: 0, abandoned: 0, threadsStarted: 1 });
    expect(await s.render(ORDINARY, ordinary("Bea"), B)).toMatchObject({ html: "<p>Hello Bea</p>" });
    expect(s.stats.threadsStarted).toBe(1);
  });

  it("an organization whose renders take long is refused when its wait would pass the caller's maxWaitMs", async () => {
    const s = sandbox({ deadlineMs: 400, threads: 2 });
    await s.render(ORDINARY, ordinary("warm"), A);
    // Nothing of A's ahead: taken whatever A's renders cost.
    const first = s.render(ENDLESS, endless, { ...A, maxWaitMs: 100 }).catch(() => null);
    await first; // A's renders are now known to take ~400 ms
    const running = s.render(ENDLESS, endless, { ...A, maxWaitMs: 100 }).catch(() => null);
    const refused = await s
      .render(ORDINARY, ordinary("Ada"), { ...A, maxWaitMs: 100 })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RenderBusyError);
    expect(await s.render(ORDINARY, ordinary("Bea"), { ...B, maxWaitMs: 100 })).toMatchObject({
      html: "<p>Hello Bea</p>",
    });
    await running;
  });

  it("past the total of renders under way every organization is refused, one with none under way too", async () => {
    const s = sandbox({ deadlineMs: 300, threads: 2, maxUnderWay: 2 });
    await s.render(ORDINARY, ordinary("warm"));
    const a = [1, 2].map(() => s.render(ENDLESS, endless, A).catch(() => null)); // 1 runs, 1 waits
    await expect(s.render(ORDINARY, ordinary("Ada"), A)).rejects.toBeInstanceOf(RenderBusyError);
    await expect(s.render(ORDINARY, ordinary("Bea"), B)).rejects.toBeInstanceOf(RenderBusyError);
    await Promise.all(a);
    expect(await s.render(ORDINARY, ordinary("Bea"), B)).toMatchObject({ html: "<p>Hello Bea</p>" });
  });

  it('a sample render over its own deadline fails with limit "time"; an ordinary template passes', async () => {
    const s = sandbox({ threads: 2 });
    const fiveDeep = { code: `${"{{#each x}}".repeat(5)}${"{{/each}}".repeat(5)}`, text: null };
    const err = await renderFailure(s.renderSample(fiveDeep, "five", { ...A, deadlineMs: 300 }));
    expect(err).toMatchObject({
      limit: "time",
      message: 'Template "five": rendering took longer than the limit of 300 ms',
    });
    await expect(s.renderSample(ORDINARY, "ordinary", { ...A, deadlineMs: 300 })).resolves.toBeUndefined();
  });
});
