/**
 * VERP (variable envelope return path, docs/decisions/0040): each e-mail goes out with an
 * envelope sender of its own, `{localPart}+{message_id}@{domain}`, so the DSN or complaint a mail
 * server sends back to it names the message without reading anything in the report.
 */

export interface ReturnPathSettings {
  /** `BOUNCE_DOMAIN`, lower-case. */
  domain: string;
  /** `BOUNCE_LOCAL_PART` (default `bounce`). */
  localPart: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The envelope sender (`MAIL FROM`) of a message: `bounce+{message_id}@BOUNCE_DOMAIN`. */
export function returnPath(settings: ReturnPathSettings, messageId: string): string {
  return `${settings.localPart}+${messageId.toLowerCase()}@${settings.domain}`;
}

/**
 * The message id a return path names, or null when `address` is not one of ours: another
 * domain, another prefix, or no message id (a UUID) after the `+`. Domains and the prefix are
 * compared without regard to case (mail servers may change it); nothing else is accepted.
 */
export function messageIdOfReturnPath(settings: ReturnPathSettings, address: string): string | null {
  const at = address.lastIndexOf("@");
  if (at <= 0) return null;
  const domain = address.slice(at + 1).toLowerCase();
  if (domain !== settings.domain) return null;
  const local = address.slice(0, at).toLowerCase();
  const prefix = `${settings.localPart}+`;
  if (!local.startsWith(prefix)) return null;
  const id = local.slice(prefix.length);
  return UUID.test(id) ? id : null;
}
