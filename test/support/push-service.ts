import { createECDH, createPublicKey, type ECDH, randomBytes, verify } from "node:crypto";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import ece from "http_ece";
import type { PushSubscription, PushUrgency } from "../../src/channels/push/providers/provider.js";

/** A push the service accepted as well formed: VAPID verified and the body decrypted. */
export interface VerifiedPush {
  verified: true;
  path: string;
  ttl: number;
  urgency: PushUrgency;
  vapid: { subject: string; publicKey: string };
  plaintext: string;
  headers: IncomingHttpHeaders;
  /** What the service answered (the path's behaviour decides); undefined while hanging. */
  status: number | undefined;
  /** The Location sent with a default 201. */
  location?: string;
}

/** A request the service refused, with the reason; tests assert there are none. */
export interface RefusedPush {
  verified: false;
  path: string;
  reason: string;
  headers: IncomingHttpHeaders;
  status: number;
}

export type ReceivedPush = VerifiedPush | RefusedPush;

export interface PushServiceResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * How a path answers a well-formed push: always the same response; the next response of a
 * sequence per request, then the default 201 once it is used up; or never (the request hangs
 * until the client gives up or the service closes).
 */
export type PushServiceBehaviour = PushServiceResponse | { sequence: PushServiceResponse[] } | { hang: true };

export interface PushService {
  /** e.g. "http://127.0.0.1:41234", no trailing slash. */
  url: string;
  /** A real subscription (fresh P-256 key pair and auth secret) whose endpoint is on this service. */
  createSubscription(path?: string): PushSubscription;
  /** Every POST so far, in arrival order. */
  received(): ReceivedPush[];
  /** `path` is a path ("/push/abc") or a whole endpoint URL. */
  respondWith(path: string, behaviour: PushServiceBehaviour): void;
  close(): Promise<void>;
}

const URGENCIES: readonly string[] = ["very-low", "low", "normal", "high"] satisfies PushUrgency[];
/** RFC 8030 §7.2: a push service must accept 4096 octets of payload and may refuse more. */
const MAX_BODY_BYTES = 4096;
const MAX_JWT_LIFETIME_SECONDS = 24 * 60 * 60;

/** A push service refuses the request with this status and reason. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    reason: string,
  ) {
    super(reason);
  }
}

/**
 * A Web Push service (RFC 8030) on 127.0.0.1 that checks what a real one checks (the VAPID
 * token of RFC 8292, TTL, Urgency) and also decrypts each payload (RFC 8291) as the browser
 * would, so tests see exactly what a device would receive.
 */
export async function startPushService(): Promise<PushService> {
  const service = new FakePushService();
  await service.listen();
  return {
    url: service.url,
    createSubscription: (path) => service.createSubscription(path),
    received: () => [...service.pushes],
    respondWith: (path, behaviour) => service.respondWith(path, behaviour),
    close: () => service.close(),
  };
}

interface Subscriber {
  ecdh: ECDH;
  auth: string;
}

class FakePushService {
  readonly pushes: ReceivedPush[] = [];
  readonly #server: Server;
  readonly #subscribers = new Map<string, Subscriber>();
  readonly #behaviours = new Map<string, PushServiceBehaviour>();
  #url = "";

  constructor() {
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  get url(): string {
    return this.#url;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  createSubscription(path = `/push/${randomBytes(12).toString("base64url")}`): PushSubscription {
    if (!path.startsWith("/")) throw new Error(`createSubscription: path must start with "/": ${path}`);
    const ecdh = createECDH("prime256v1");
    ecdh.generateKeys();
    const auth = randomBytes(16).toString("base64url");
    this.#subscribers.set(path, { ecdh, auth });
    return { endpoint: `${this.#url}${path}`, keys: { p256dh: ecdh.getPublicKey("base64url"), auth } };
  }

  respondWith(path: string, behaviour: PushServiceBehaviour): void {
    const key = path.startsWith("/") ? path : new URL(path).pathname;
    this.#behaviours.set(key, "sequence" in behaviour ? { sequence: [...behaviour.sequence] } : behaviour);
  }

  async close(): Promise<void> {
    // Hanging requests would keep close() waiting for ever.
    this.#server.closeAllConnections();
    await new Promise<void>((resolve, reject) =>
      this.#server.close((err) => (err ? reject(err) : resolve())),
    );
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const path = new URL(req.url ?? "/", this.#url).pathname;
      try {
        if (req.method !== "POST") throw new Refusal(405, `method ${req.method}`);
        const push = this.#verify(path, req.headers, Buffer.concat(chunks));
        this.pushes.push(push);
        this.#answer(push, res);
      } catch (err) {
        const refusal = err instanceof Refusal ? err : new Refusal(400, String(err));
        this.pushes.push({
          verified: false,
          path,
          reason: refusal.message,
          headers: req.headers,
          status: refusal.status,
        });
        res.writeHead(refusal.status, { "Content-Type": "text/plain" });
        res.end(refusal.message);
      }
    });
  }

  #verify(path: string, headers: IncomingHttpHeaders, body: Buffer): VerifiedPush {
    const vapid = verifyVapid(headers.authorization, new URL(this.#url).origin);
    const ttl = readTtl(single(headers, "ttl"));
    const urgency = single(headers, "urgency") ?? "normal";
    if (!URGENCIES.includes(urgency)) throw new Refusal(400, `Urgency ${JSON.stringify(urgency)}`);
    const subscriber = this.#subscribers.get(path);
    if (!subscriber) throw new Refusal(404, `no subscription at ${path}`);
    if (body.length > MAX_BODY_BYTES) throw new Refusal(413, `body of ${body.length} bytes`);
    return {
      verified: true,
      path,
      ttl,
      urgency: urgency as PushUrgency,
      vapid,
      plaintext: decryptBody(headers, body, subscriber),
      headers,
      status: undefined,
    };
  }

  #answer(push: VerifiedPush, res: ServerResponse): void {
    const behaviour = this.#behaviours.get(push.path);
    if (behaviour && "hang" in behaviour) return;
    const response = behaviour && "sequence" in behaviour ? behaviour.sequence.shift() : behaviour;
    if (response) {
      push.status = response.status;
      res.writeHead(response.status, response.headers);
      res.end(response.body ?? "");
      return;
    }
    push.status = 201;
    push.location = `${this.#url}/message/${randomBytes(12).toString("base64url")}`;
    res.writeHead(201, { Location: push.location });
    res.end();
  }
}

/** RFC 8292 §3: `vapid t=<JWT>, k=<public key>`, the JWT signed with ES256 by that key. */
function verifyVapid(header: string | undefined, origin: string): VerifiedPush["vapid"] {
  const scheme = /^vapid\s+(.*)$/i.exec(header ?? "");
  if (!scheme?.[1]) throw new Refusal(400, "Authorization is not a vapid token");
  const params = new Map<string, string>();
  for (const part of scheme[1].split(",")) {
    const [name, ...value] = part.trim().split("=");
    if (name) params.set(name.toLowerCase(), value.join("="));
  }
  const token = params.get("t");
  const publicKey = params.get("k");
  if (!token || !publicKey) throw new Refusal(400, "vapid token lacks t= or k=");

  const [encodedHeader, encodedClaims, signature, ...rest] = token.split(".");
  if (!encodedHeader || !encodedClaims || !signature || rest.length > 0) {
    throw new Refusal(400, "t= is not a JWT");
  }
  const jwtHeader = parseJsonObject(encodedHeader);
  if (jwtHeader.alg !== "ES256") throw new Refusal(400, `JWT alg ${String(jwtHeader.alg)}`);
  const valid = verify(
    "sha256",
    Buffer.from(`${encodedHeader}.${encodedClaims}`),
    { key: p256PublicKey(publicKey), dsaEncoding: "ieee-p1363" },
    Buffer.from(signature, "base64url"),
  );
  if (!valid) throw new Refusal(400, "JWT signature does not verify against k=");

  const claims = parseJsonObject(encodedClaims);
  if (claims.aud !== origin) throw new Refusal(400, `JWT aud ${String(claims.aud)}, expected ${origin}`);
  const now = Date.now() / 1000;
  if (typeof claims.exp !== "number" || claims.exp <= now) throw new Refusal(400, "JWT expired");
  if (claims.exp > now + MAX_JWT_LIFETIME_SECONDS) throw new Refusal(400, "JWT exp more than 24 h away");
  if (typeof claims.sub !== "string" || claims.sub === "") throw new Refusal(400, "JWT has no sub");
  return { subject: claims.sub, publicKey };
}

function parseJsonObject(base64url: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(Buffer.from(base64url, "base64url").toString("utf8"));
    if (typeof value === "object" && value !== null) return value as Record<string, unknown>;
  } catch {
    // Falls through to the refusal.
  }
  throw new Refusal(400, "JWT part is not a JSON object");
}

function p256PublicKey(base64url: string) {
  const point = Buffer.from(base64url, "base64url");
  if (point.length !== 65 || point[0] !== 4) throw new Refusal(400, "k= is not an uncompressed P-256 key");
  try {
    return createPublicKey({
      key: {
        kty: "EC",
        crv: "P-256",
        x: point.subarray(1, 33).toString("base64url"),
        y: point.subarray(33).toString("base64url"),
      },
      format: "jwk",
    });
  } catch {
    throw new Refusal(400, "k= is not a point on P-256");
  }
}

function single(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  if (Array.isArray(value)) throw new Refusal(400, `${name} sent ${value.length} times`);
  return value;
}

/** RFC 8030 §5.2: TTL is required, a non-negative number of seconds. */
function readTtl(header: string | undefined): number {
  if (header === undefined || !/^\d+$/.test(header.trim())) {
    throw new Refusal(400, `TTL ${JSON.stringify(header)}`);
  }
  return Number(header.trim());
}

function decryptBody(headers: IncomingHttpHeaders, body: Buffer, subscriber: Subscriber): string {
  if (body.length === 0) return "";
  if (headers["content-encoding"] !== "aes128gcm") {
    throw new Refusal(400, `Content-Encoding ${JSON.stringify(headers["content-encoding"])}`);
  }
  try {
    const plaintext = ece.decrypt(body, {
      version: "aes128gcm",
      privateKey: subscriber.ecdh,
      authSecret: subscriber.auth,
    });
    return plaintext.toString("utf8");
  } catch (err) {
    throw new Refusal(400, `body does not decrypt: ${err instanceof Error ? err.message : String(err)}`);
  }
}
