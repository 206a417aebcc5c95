import { randomUUID } from "node:crypto";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export const FAKE_TWILIO_SID = "AC00000000000000000000000000000fault";
export const FAKE_TWILIO_TOKEN = "fault-token-0123456789";

/**
 * A stand-in for Twilio's Messages endpoint that answers after `latencyMs`, so deliveries are
 * really in flight when a test kills or stops a worker, and that counts every send by message
 * body (tests give each message a unique body): the ground truth for "sent twice".
 * Like the simulator, +15005550500 fails (503) on every send and +15005550502 on its first two.
 */
export class FakeProvider {
  latencyMs: number;
  readonly sends = new Map<string, number>();
  inFlight = 0;
  readonly #server: Server;

  private constructor(server: Server, latencyMs: number) {
    this.#server = server;
    this.latencyMs = latencyMs;
  }

  static async start(latencyMs = 0): Promise<FakeProvider> {
    let fake: FakeProvider | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => fake?.handle(Buffer.concat(chunks).toString(), res));
    });
    fake = new FakeProvider(server, latencyMs);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The worker's environment for sending through this fake. */
  get env(): Record<string, string> {
    return {
      SMS_PROVIDER: "twilio",
      TWILIO_BASE_URL: this.baseUrl,
      TWILIO_ACCOUNT_SID: FAKE_TWILIO_SID,
      TWILIO_AUTH_TOKEN: FAKE_TWILIO_TOKEN,
    };
  }

  sendsOf(body: string): number {
    return this.sends.get(body) ?? 0;
  }

  get totalSends(): number {
    let total = 0;
    for (const count of this.sends.values()) total += count;
    return total;
  }

  handle(text: string, res: ServerResponse): void {
    const fields = new URLSearchParams(text);
    const body = fields.get("Body") ?? "";
    const to = fields.get("To") ?? "";
    const count = this.sendsOf(body) + 1;
    this.sends.set(body, count);
    this.inFlight++;
    const failing = to === "+15005550500" || (to === "+15005550502" && count <= 2);
    setTimeout(() => {
      this.inFlight--;
      if (res.destroyed) return;
      if (failing) {
        res.writeHead(503, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ code: 20503, message: "Service unavailable (fake)", status: 503 }));
        return;
      }
      res.writeHead(201, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ sid: `SM${randomUUID().replaceAll("-", "")}`, status: "queued" }));
    }, this.latencyMs);
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
