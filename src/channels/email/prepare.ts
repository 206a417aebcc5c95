import { type MessageOf, type PrepareDeps, type Prepared, readyFor } from "../channel.js";
import type { EmailAddress, EmailMessage } from "./providers/provider.js";
import type { RenderedEmail } from "./templates/render.js";
import { TemplateRenderError } from "./templates/render-error.js";
import { renderSandbox } from "./templates/sandbox.js";
import { findTemplate } from "./templates/store.js";

/**
 * The longest an e-mail's delivery waits for its organization's renders ahead of it: beyond, the
 * job is handed back instead of holding a delivery slot that SMS and push need (decision 0029).
 */
export const EMAIL_RENDER_MAX_WAIT_MS = 1000;

/**
 * Renders an e-mail from its organization's template; a template that is missing or does not
 * render makes the message rejected before the provider is called. Throws only when the database
 * does, when the template sandbox cannot start its thread, or when it will not take the render
 * now (a RenderBusyError, or a RenderAbandonedError past the message's time to live): all worth
 * trying again later, none an attempt.
 */
export async function prepareEmail(
  message: MessageOf<"email">,
  { db, provider, now, isSuppressed }: PrepareDeps<EmailMessage>,
): Promise<Prepared> {
  const fields = message.email;
  // The suppressed addresses are left out of every envelope (the attempt's event names their
  // entries); none left, nothing is sent. The domain rejects the message before this when its
  // list covers every address, so this is the safety net for one it could not match.
  const to = isSuppressed ? fields.message.to.filter((r) => !isSuppressed(r.email)) : fields.message.to;
  if (to.length === 0) {
    return {
      ready: false,
      reason: "recipient_suppressed",
      error: {
        class: "rejected",
        code: "recipient_suppressed",
        message: "every recipient is on the organization's suppression list",
      },
    };
  }
  // Rendered at each attempt from the template as it is now: an edit reaches unsent messages.
  const template = await findTemplate(db, message.organizationId, fields.template_name);
  if (!template) {
    return {
      ready: false,
      reason: "template_not_found",
      error: {
        class: "rejected",
        code: "template_not_found",
        // Not the name: it is sealed content, and this event is stored in clear (decision 0034).
        message: "no template of that name in this organization",
      },
    };
  }
  let rendered: RenderedEmail;
  // Past the message's time to live a render is of no use: dropped if waiting, ended if running.
  const expired = new AbortController();
  const expiry = setTimeout(
    () => expired.abort(),
    Math.max(0, Date.parse(message.expiresAt) - now().getTime()),
  );
  try {
    // On the sandbox's threads, so a template cannot hold the other jobs' event loop, and in the
    // organization's turn. When its renders ahead would take long, or past the message's time to
    // live, this throws (RenderBusyError, RenderAbandonedError) and the job is handed back.
    rendered = await renderSandbox.render(template, fields, {
      organizationId: message.organizationId,
      maxWaitMs: EMAIL_RENDER_MAX_WAIT_MS,
      signal: expired.signal,
    });
  } catch (error) {
    if (!(error instanceof TemplateRenderError)) throw error;
    return {
      ready: false,
      reason: "template_render_failed",
      error: {
        class: "rejected",
        code: "template_render_failed",
        message: withoutName(error, fields.template_name),
      },
    };
  } finally {
    clearTimeout(expiry);
  }
  const { from_email, from_name } = fields.message;
  const recipients = (type: "to" | "cc" | "bcc"): EmailAddress[] =>
    to.filter((r) => r.type === type).map((r) => ({ email: r.email, ...(r.name && { name: r.name }) }));
  return readyFor(provider, (attempt) => ({
    messageId: message.id,
    from: { email: from_email, ...(from_name && { name: from_name }) },
    to: recipients("to"),
    cc: recipients("cc"),
    bcc: recipients("bcc"),
    ...rendered,
    attempt,
  }));
}

/**
 * The renderer's explanation without the template's name: the name is sealed content and the
 * rejection event is stored in clear (decision 0034); a preview still names it to its caller.
 */
function withoutName(error: TemplateRenderError, templateName: string): string {
  return error.message.replaceAll(`Template ${JSON.stringify(templateName)}`, "The template");
}
