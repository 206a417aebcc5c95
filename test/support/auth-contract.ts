import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { apiKeys } from "../../db/schema.js";
import { type Harness, onboard } from "./harness.js";

type Call = (apiKey: string | undefined) => Response | Promise<Response>;

/**
 * The contract every `x-api-key` route honours: missing, malformed, unknown and revoked keys
 * all get the very same 401. Run it for each authenticated route.
 */
export function describeApiKeyContract(
  name: string,
  harness: () => Harness,
  setup: () => Promise<{ apiKey: string; organizationId: string; call: Call }>,
) {
  describe(`${name}: API key contract`, () => {
    it("gives identical 401s for missing, malformed, unknown and revoked keys", async () => {
      const { apiKey, organizationId, call } = await setup();
      const h = harness();
      await h.db
        .update(apiKeys)
        .set({ revokedAt: new Date() })
        .where(eq(apiKeys.organizationId, organizationId));
      const unknownKey = `ntf_${"A".repeat(43)}`;
      const responses = await Promise.all([
        call(undefined),
        call("not-a-key"),
        call(unknownKey),
        call(apiKey),
      ]);
      const bodies = await Promise.all(responses.map((r) => r.json()));
      expect(responses.map((r) => r.status)).toEqual([401, 401, 401, 401]);
      for (const body of bodies) expect(body).toEqual({ error: "Missing or invalid API key" });
    });
  });
}

/** The contract for `POST /api/v1/notifications/{channel}` with a body that is otherwise valid. */
export function describeSendContract(
  harness: () => Harness,
  channel: "sms" | "email" | "push",
  body: unknown,
) {
  describeApiKeyContract(`POST /api/v1/notifications/${channel}`, harness, async () => {
    const h = harness();
    const org = await onboard(h);
    return {
      apiKey: org.apiKey,
      organizationId: org.id,
      call: (key) =>
        h.app.request(`/api/v1/notifications/${channel}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(key ? { "x-api-key": key } : {}) },
          body: JSON.stringify(body),
        }),
    };
  });
}
