import { afterAll, describe, expect, it } from "vitest";
import { createHarness, eventually, getMessage, onboard, sendSms } from "../support/harness.js";

const h = createHarness();
afterAll(() => h.close());

describe("smoke", () => {
  it("onboards, sends and delivers", async () => {
    h.startWorker();
    const org = await onboard(h);
    const res = await sendSms(h, org.apiKey, { payload: { to: "+14155550100", body: "hi", sender: "ACME" } });
    expect(res.status).toBe(202);
    const { request_id } = (await res.json()) as { request_id: string };
    const rec = await eventually(async () => {
      const r = await getMessage(h, org.apiKey, request_id);
      const j = (await r.json()) as { status: string };
      return j.status === "success" ? j : undefined;
    });
    console.log(rec);
  });
});
