import type { Provider } from "../../providers/provider.js";

export interface EmailAddress {
  email: string;
  name?: string;
}

/** A rendered e-mail, ready to hand over: the template and its merge variables are already applied. */
export interface EmailMessage {
  messageId: string;
  from: EmailAddress;
  to: EmailAddress[];
  cc: EmailAddress[];
  bcc: EmailAddress[];
  subject: string;
  html: string;
  text: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/** A way to hand an e-mail to the outside world (see {@link Provider}); `close` releases its pool. */
export type EmailProvider = Provider<EmailMessage>;
