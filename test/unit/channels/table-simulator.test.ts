import { describe, expect, it } from "vitest";
import {
  type SimulatedCase,
  TableSimulator,
  tableSimulator,
} from "../../../src/channels/providers/simulator.js";

interface Note {
  messageId: string;
  attempt: number;
  to: string[];
}

const cases = {
  refused: {
    description: "rejected: refused",
    class: "rejected",
    code: "refused",
    failingAttempts: Infinity,
  },
  flaky: { description: "transient once", class: "transient", code: "outage", failingAttempts: 1 },
  busy: {
    description: "rate limited once",
    class: "transient",
    code: "rate_limited",
    failingAttempts: 1,
    rateLimited: true,
  },
} satisfies Record<string, SimulatedCase>;

const table = {
  cases,
  recipients: (note: Note) => note.to,
  successId: (digest: string) => `note-${digest}`,
};

const note = (to: string[], attempt: number, messageId = "m-1"): Note => ({ messageId, attempt, to });

describe("TableSimulator", () => {
  const simulator = new TableSimulator(table);

  it("is named simulator, and succeeds for a recipient not in its table, with an id stable per message and attempt", async () => {
    expect(simulator.name).toBe("simulator");
    const first = await simulator.send(note(["anyone"], 1));
    expect(first).toEqual({
      ok: true,
      provider: "simulator",
      providerMessageId: expect.stringMatching(/^note-[0-9a-f]{32}$/),
    });
    expect(await simulator.send(note(["anyone"], 1))).toEqual(first);
    expect(await simulator.send(note(["anyone"], 2))).not.toEqual(first);
    expect(await simulator.send(note(["anyone"], 1, "m-2"))).not.toEqual(first);
  });

  it("fails a special recipient's first failingAttempts attempts, then succeeds", async () => {
    expect(await simulator.send(note(["flaky"], 1))).toEqual({
      ok: false,
      provider: "simulator",
      error: { class: "transient", code: "outage", message: "Simulator: transient once (attempt 1)" },
    });
    expect(await simulator.send(note(["flaky"], 2))).toMatchObject({ ok: true });
    expect(await simulator.send(note(["refused"], 50))).toMatchObject({
      ok: false,
      error: { class: "rejected" },
    });
  });

  it("the first special recipient decides", async () => {
    expect(await simulator.send(note(["anyone", "refused", "flaky"], 1))).toMatchObject({
      error: { code: "refused" },
    });
    expect(await simulator.send(note(["flaky", "refused"], 2))).toMatchObject({ ok: true });
  });

  it("a rate-limited case asks to wait the configured delay (default 1000 ms)", async () => {
    expect(await simulator.send(note(["busy"], 1))).toMatchObject({ error: { retryAfterMs: 1000 } });
    const quick = new TableSimulator(table, { rateLimitRetryAfterMs: 5 });
    expect(await quick.send(note(["busy"], 1))).toMatchObject({ error: { retryAfterMs: 5 } });
    expect(await quick.send(note(["flaky"], 1))).not.toHaveProperty("error.retryAfterMs");
  });

  it("never names the recipient in the failure (the history shows it to tenants)", async () => {
    const outcome = await simulator.send(note(["refused"], 3));
    expect(outcome).toMatchObject({ error: { message: "Simulator: rejected: refused (attempt 3)" } });
  });

  it("a recipient that only matches a property every object has is ordinary", async () => {
    expect(await simulator.send(note(["constructor", "__proto__", "toString"], 1))).toMatchObject({
      ok: true,
    });
  });

  it("tableSimulator makes a provider class of its own for a table", async () => {
    const NoteSimulator = tableSimulator(table);
    const simulator = new NoteSimulator({ rateLimitRetryAfterMs: 7 });
    expect(simulator).toBeInstanceOf(NoteSimulator);
    expect(simulator).toBeInstanceOf(TableSimulator);
    expect(await simulator.send(note(["busy"], 1))).toMatchObject({ error: { retryAfterMs: 7 } });
  });
});
