import { describe, expect, it } from "vitest";
import { httpStatusError } from "../../../src/channels/providers/http.js";

const answer = (status: number, headers: Record<string, string> = {}) =>
  new Response(null, { status, headers });

describe("httpStatusError", () => {
  it("429 is transient and carries Retry-After in milliseconds", () => {
    expect(httpStatusError(answer(429, { "Retry-After": "3" }), "rate_limited", "slow down")).toStrictEqual({
      class: "transient",
      code: "rate_limited",
      message: "slow down",
      retryAfterMs: 3000,
    });
  });

  it("429 without a usable Retry-After has no retryAfterMs", () => {
    expect(httpStatusError(answer(429), "c", "m")).toStrictEqual({
      class: "transient",
      code: "c",
      message: "m",
    });
    expect(httpStatusError(answer(429, { "Retry-After": "soon" }), "c", "m")).not.toHaveProperty(
      "retryAfterMs",
    );
  });

  it.each([500, 502, 503, 504, 599])("%i is transient", (status) => {
    expect(httpStatusError(answer(status), `http_${status}`, "m")).toStrictEqual({
      class: "transient",
      code: `http_${status}`,
      message: "m",
    });
  });

  it.each([400, 401, 403, 404, 410, 413, 422])(
    "%i is permanent: the same request fails the same way",
    (status) => {
      expect(httpStatusError(answer(status), "c", "m")).toStrictEqual({
        class: "permanent",
        code: "c",
        message: "m",
      });
    },
  );

  it("Retry-After on another status is not read", () => {
    expect(httpStatusError(answer(503, { "Retry-After": "3" }), "c", "m")).not.toHaveProperty("retryAfterMs");
  });
});
