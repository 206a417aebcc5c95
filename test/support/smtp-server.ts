import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerError } from "smtp-server";

/**
 * A real SMTP server (the smtp-server package) on 127.0.0.1 for tests: AUTH PLAIN with
 * {@link USER} / {@link PASSWORD}, scripted refusals, and every accepted message kept raw.
 */

export const USER = "notify";
export const PASSWORD = "pw_7c1e9a24d5b3f8061e2d";
export const PLAIN_TOKEN = Buffer.from(`\u0000${USER}\u0000${PASSWORD}`).toString("base64");
export const QUEUE_ID = "4XyZ0aBc12";

export interface Received {
  sessionId: string;
  mailFrom: string | undefined;
  rcptTo: string[];
  raw: Buffer;
}

export function smtpError(responseCode: number, message: string): SMTPServerError {
  return Object.assign(new Error(message), { responseCode });
}

/**
 * What the server does with a recipient or a message once authentication has passed: answer
 * with an error, hang, or accept (undefined).
 */
export interface Scenario {
  rcpt?: (address: string) => SMTPServerError | undefined;
  data?: () => SMTPServerError | "hang" | undefined;
  auth?: (username: string | undefined, password: string | null | undefined) => Error | undefined;
  /** Text of the 250 reply to DATA. */
  accepted?: string;
}

/** A real SMTP server on 127.0.0.1 that requires AUTH PLAIN and records what it is sent. */
export class TestSmtpServer {
  readonly received: Received[] = [];
  scenario: Scenario = {};
  readonly #hanging = new Set<() => void>();
  readonly #server = new SMTPServer({
    logger: false,
    disabledCommands: ["STARTTLS"],
    authMethods: ["PLAIN"],
    // Plain-text AUTH is fine on loopback; STARTTLS is not what these tests are about.
    allowInsecureAuth: true,
    disableReverseLookup: true,
    closeTimeout: 100,
    onAuth: (auth, _session, callback) => {
      const custom = this.scenario.auth?.(auth.username, auth.password);
      if (custom) return callback(custom);
      if (auth.username === USER && auth.password === PASSWORD) return callback(null, { user: USER });
      callback(smtpError(535, "5.7.8 Authentication credentials invalid"));
    },
    onRcptTo: (address, _session, callback) => {
      callback(this.scenario.rcpt?.(address.address));
    },
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        const outcome = this.scenario.data?.();
        if (outcome === "hang") {
          this.#hanging.add(() => callback(smtpError(421, "closing")));
          return;
        }
        if (outcome) return callback(outcome);
        this.received.push({
          sessionId: session.id,
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
          rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
          raw: Buffer.concat(chunks),
        });
        callback(null, this.scenario.accepted ?? `2.0.0 Ok: queued as ${QUEUE_ID}`);
      });
    },
  });

  static async start(): Promise<TestSmtpServer> {
    const fake = new TestSmtpServer();
    await new Promise<void>((resolve) => fake.#server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  get port(): number {
    return (this.#server.server.address() as AddressInfo).port;
  }

  reset(): void {
    for (const release of this.#hanging) release();
    this.#hanging.clear();
    this.received.length = 0;
    this.scenario = {};
  }

  async close(): Promise<void> {
    this.reset();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
