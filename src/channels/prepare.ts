import type { Database } from "../../db/client.js";
import type { DeliveryError, DeliveryOutcome } from "../domain/delivery-outcome.js";
import type {
  EmailMessageContent,
  MessageContent,
  PushMessageContent,
  RejectedReason,
} from "../domain/events.js";
import type { PriorityTier } from "../domain/priority.js";
import type { EmailAddress, EmailProvider } from "./email/providers/provider.js";
import type { RenderedEmail } from "./email/templates/render.js";
import { TemplateRenderError } from "./email/templates/render-error.js";
import { renderSandbox } from "./email/templates/sandbox.js";
import { findTemplate } from "./email/templates/store.js";
import { pushPayloadText } from "./push/payload.js";
import type { PushProvider, PushUrgency } from "./push/providers/provider.js";
import type { SmsProvider } from "./sms/providers/provider.js";

/** One provider per channel, as configured. */
export interface Providers {
  sms: SmsProvider;
  email: EmailProvider;
  push: PushProvider;
}

/**
 * A message made ready for its provider, or the reason it never can be: an e-mail whose
 * template is missing or does not render is rejected before any provider is called.
 */
export type Prepared =
  | { ready: true; provider: string; send(attempt: number): Promise<DeliveryOutcome> }
  | { ready: false; reason: RejectedReason; error: DeliveryError };

/** Critical and high tiers wake the device; low ones may wait for it (RFC 8030 §5.3). */
const URGENCY: Record<PriorityTier, PushUrgency> = {
  critical: "high",
  high: "high",
  medium: "normal",
  low: "low",
};

/**
 * Gets a message ready for its channel's provider. Throws only when the database does, or when
 * the template sandbox cannot start its thread (both worth retrying).
 */
export async function prepareDelivery(
  deps: { db: Database; providers: Providers; now: () => Date },
  message: MessageContent,
): Promise<Prepared> {
  switch (message.channel) {
    case "sms": {
      const { sms } = deps.providers;
      return {
        ready: true,
        provider: sms.name,
        send: (attempt) =>
          sms.send({
            messageId: message.id,
            to: message.recipient,
            from: message.sender,
            body: message.body,
            attempt,
          }),
      };
    }
    case "email":
      return prepareEmail(deps, message);
    case "push":
      return preparePush(deps, message);
    default: {
      const never: never = message;
      throw new Error(`unknown channel ${JSON.stringify(never)}`);
    }
  }
}

async function prepareEmail(
  deps: { db: Database; providers: Providers },
  message: EmailMessageContent,
): Promise<Prepared> {
  const fields = message.email;
  // Rendered at each attempt from the template as it is now: an edit reaches unsent messages.
  const template = await findTemplate(deps.db, message.organizationId, fields.template_name);
  if (!template) {
    return {
      ready: false,
      reason: "template_not_found",
      error: {
        class: "rejected",
        code: "template_not_found",
        message: `no template named "${fields.template_name}" in this organization`,
      },
    };
  }
  let rendered: RenderedEmail;
  try {
    // On the sandbox's thread, so a template cannot hold the other jobs' event loop.
    rendered = await renderSandbox.render(template, fields);
  } catch (error) {
    if (!(error instanceof TemplateRenderError)) throw error;
    return {
      ready: false,
      reason: "template_render_failed",
      error: { class: "rejected", code: "template_render_failed", message: error.message },
    };
  }
  const { email } = deps.providers;
  const { from_email, from_name, to } = fields.message;
  const recipients = (type: "to" | "cc" | "bcc"): EmailAddress[] =>
    to.filter((r) => r.type === type).map((r) => ({ email: r.email, ...(r.name && { name: r.name }) }));
  return {
    ready: true,
    provider: email.name,
    send: (attempt) =>
      email.send({
        messageId: message.id,
        from: { email: from_email, ...(from_name && { name: from_name }) },
        to: recipients("to"),
        cc: recipients("cc"),
        bcc: recipients("bcc"),
        ...rendered,
        attempt,
      }),
  };
}

function preparePush(deps: { providers: Providers; now: () => Date }, message: PushMessageContent): Prepared {
  const { push } = deps.providers;
  const { keys, title, body, data, ttlSeconds } = message.push;
  const payload = pushPayloadText(message.id, title, body, data);
  return {
    ready: true,
    provider: push.name,
    send: (attempt) =>
      push.send({
        messageId: message.id,
        subscription: { endpoint: message.recipient, keys },
        payload,
        // Without a TTL of its own, the push service keeps it no longer than the message lives.
        ttlSeconds:
          ttlSeconds ?? Math.max(0, Math.ceil((Date.parse(message.expiresAt) - deps.now().getTime()) / 1000)),
        urgency: URGENCY[message.priority],
        attempt,
      }),
  };
}
