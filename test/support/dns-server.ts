import { createSocket, type Socket } from "node:dgram";
import type { AddressInfo } from "node:net";
import * as dnsPacket from "dns-packet";

/** What the server answers for one name: TXT records (each as its strings), or a failure. */
export type Zone = string[][] | "servfail" | "silent";

const NXDOMAIN = 3;
const SERVFAIL = 2;

/**
 * A real DNS server over UDP on 127.0.0.1 and a free port, for tests: packets encoded and decoded
 * by `dns-packet`, so the service's own resolver (Node's c-ares) asks it exactly as it would ask
 * the Internet's. A name it does not know is NXDOMAIN; `servfail` answers SERVFAIL; `silent`
 * never answers (a time-out).
 */
export class TestDnsServer {
  readonly zones = new Map<string, Zone>();
  /** Every name asked, in order. */
  readonly asked: string[] = [];
  #socket: Socket | undefined;

  /** `127.0.0.1:<port>`: a `DNS_SERVERS` value. */
  get address(): string {
    const socket = this.#socket;
    if (!socket) throw new Error("the DNS server is not started");
    return `127.0.0.1:${(socket.address() as AddressInfo).port}`;
  }

  async start(): Promise<this> {
    const socket = createSocket("udp4");
    socket.on("message", (message, remote) => {
      const query = dnsPacket.decode(message);
      const [question] = query.questions ?? [];
      if (!question) return;
      this.asked.push(question.name);
      const zone = this.zones.get(question.name.toLowerCase());
      if (zone === "silent") return;
      const answers: dnsPacket.Answer[] =
        Array.isArray(zone) && question.type === "TXT"
          ? zone.map((data) => ({ type: "TXT", name: question.name, ttl: 60, class: "IN", data }))
          : [];
      const rcode = zone === "servfail" ? SERVFAIL : zone === undefined ? NXDOMAIN : 0;
      const response = dnsPacket.encode({
        type: "response",
        id: query.id,
        flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcode,
        questions: [question],
        answers,
      });
      socket.send(response, remote.port, remote.address);
    });
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind(0, "127.0.0.1", () => resolve());
    });
    this.#socket = socket;
    return this;
  }

  async close(): Promise<void> {
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }
}
