import { describe, expect, it } from "vitest";
import { RenderBusyError } from "../../../src/channels/email/templates/render-error.js";
import { type Organization, Turns } from "../../../src/channels/email/templates/turns.js";

interface Render {
  organization: Organization;
  label: string;
}

const limits = { threadsPerOrganization: 1, queuePerOrganization: 3, maxUnderWay: Number.POSITIVE_INFINITY };

function given(...labels: string[]) {
  const turns = new Turns<Render>();
  for (const label of labels) {
    turns.add({ organization: turns.organization(label.slice(0, 1)), label });
  }
  return turns;
}

/** Takes renders one by one and finishes each at once, as a single thread would. */
function order(turns: Turns<Render>, threadsPerOrganization = 1): string[] {
  const taken: string[] = [];
  for (let render = turns.take(threadsPerOrganization); render; render = turns.take(threadsPerOrganization)) {
    taken.push(render.label);
    turns.count(render.organization, -1);
  }
  return taken;
}

describe("Turns: whose render is next", () => {
  it("organizations take turns, whatever order their renders came in", () => {
    expect(order(given("a1", "a2", "a3", "b1", "b2", "c1"))).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
  });

  it("a newcomer goes before an organization just served", () => {
    const turns = given("a1", "a2");
    const first = turns.take(1);
    expect(first?.label).toBe("a1");
    turns.add({ organization: turns.organization("b"), label: "b1" });
    turns.count(first?.organization as Organization, -1);
    expect(order(turns)).toEqual(["b1", "a2"]);
  });

  it("an organization running on all the threads it may gets no more until one finishes", () => {
    const turns = given("a1", "a2");
    expect(turns.take(1)?.label).toBe("a1");
    expect(turns.take(1)).toBeUndefined();
    expect(turns.waiting).toBe(1);
  });

  it("a render removed before its turn is never taken", () => {
    const turns = given("a1", "a2");
    const [, second] = turns.organization("a").waiting as Render[];
    expect(turns.remove(second as Render)).toBe(true);
    expect(turns.remove(second as Render)).toBe(false);
    expect(order(turns)).toEqual(["a1"]);
  });
});

describe("Turns: who is refused", () => {
  it("an organization with a full queue is refused; another is not", () => {
    const turns = given("a1", "a2", "a3");
    expect(turns.refusal(turns.organization("a"), limits, 0, undefined)).toBeInstanceOf(RenderBusyError);
    expect(turns.refusal(turns.organization("b"), limits, 0, undefined)).toBeUndefined();
  });

  it("past maxUnderWay every organization is refused, one with nothing under way too; below it, let in", () => {
    const turns = given("a1");
    const tight = { ...limits, maxUnderWay: 2 };
    expect(turns.refusal(turns.organization("a"), tight, 1, undefined)).toBeInstanceOf(RenderBusyError);
    expect(turns.refusal(turns.organization("b"), tight, 1, undefined)).toBeInstanceOf(RenderBusyError);
    expect(turns.refusal(turns.organization("b"), tight, 0, undefined)).toBeUndefined();
  });

  it("an organization whose renders take long is refused past maxWaitMs, with that wait as Retry-After", () => {
    const turns = given("a1", "a2");
    turns.remember("a", 2000);
    const refused = turns.refusal(turns.organization("a"), limits, 0, 1000);
    expect(refused).toBeInstanceOf(RenderBusyError);
    expect(refused?.retryAfterMs).toBe(4000);
    expect(turns.refusal(turns.organization("a"), limits, 0, 5000)).toBeUndefined();
  });

  it("a slow render counts at once; fast ones bring the estimate down over a few", () => {
    const turns = given("a1");
    turns.remember("a", 10);
    turns.remember("a", 2000);
    expect(turns.refusal(turns.organization("a"), limits, 0, 1999)).toBeInstanceOf(RenderBusyError);
    for (let i = 0; i < 12; i++) turns.remember("a", 10);
    expect(turns.refusal(turns.organization("a"), limits, 0, 100)).toBeUndefined();
  });
});
