import type { MessageEvent } from "../../src/domain/events.js";

/**
 * The `accepted` event of an SMS message of `organization` at `at` (an ISO instant), as the API
 * appends it: medium priority, retries on, a day to live. For tests that write a message's events
 * themselves rather than through the API.
 */
export function acceptedSmsEvent(
  id: string,
  organization: { id: string; productId: string },
  at: string,
  expiresAt: string = new Date(Date.parse(at) + 24 * 3_600_000).toISOString(),
): MessageEvent {
  return {
    type: "accepted",
    retryCount: 0,
    occurredAt: at,
    data: {
      id,
      organizationId: organization.id,
      productId: organization.productId,
      channel: "sms",
      priority: "medium",
      notificationType: null,
      retryEnabled: true,
      recipient: "+14155550100",
      sender: "ACME",
      expiresAt,
      body: "hello",
    },
  };
}
