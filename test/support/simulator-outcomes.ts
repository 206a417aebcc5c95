import { expect } from "vitest";
import type { DeliveryOutcome } from "../../src/domain/delivery-outcome.js";

/** A simulator's answers to attempts 1..attempts of one message, in order. */
export async function attemptOutcomes(
  send: (attempt: number) => Promise<DeliveryOutcome>,
  attempts: number,
): Promise<DeliveryOutcome[]> {
  const results = [];
  for (let attempt = 1; attempt <= attempts; attempt++) results.push(await send(attempt));
  return results;
}

/** What a simulator's failure looks like: its class and code, any message. */
export const simulatedFailure = (cls: string, code: string, extra: object = {}) => ({
  ok: false,
  provider: "simulator",
  error: { class: cls, code, message: expect.any(String), ...extra },
});
