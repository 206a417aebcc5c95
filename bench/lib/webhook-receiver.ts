import { type ChildProcess, fork } from "node:child_process";
import { createServer as createTcpServer, type Socket } from "node:net";
import { Webhook } from "standardwebhooks";
import { percentile } from "./load.js";
import { cpuMs, processTree, rssMiB } from "./system.js";

/**
 * A lean local receiver of status webhooks for the benchmark (issue 16's performance scenarios).
 *
 * It runs in a child process of its own, so its work neither shares the load generator's thread
 * (autocannon's timings) nor hides in the load generator's CPU: its CPU is reported beside web's
 * and the worker's. The parent talks to it over the IPC channel; when the parent dies the channel
 * closes and the receiver exits.
 *
 * Per request it answers at once and records the receive time and, from the JSON body, `type`,
 * `timestamp`, `data.message_id`, `data.seq` and `data.organization_id`, by endpoint path (the
 * benchmark's endpoint URLs are `http://127.0.0.1:<port>/<organization id>`, so a body whose
 * `organization_id` is not its path's is counted as sent to the wrong organization). One request in
 * `VERIFY_EVERY` (and the first of each path) has its signature checked with the `standardwebhooks`
 * package, the standard's own library, once the parent has handed over the endpoints' secrets:
 * checking every one would make the receiver a measurable load of its own.
 *
 * It speaks just enough HTTP/1.1 itself, on `node:net` (requests framed by `Content-Length`,
 * keep-alive, `204` written as one fixed buffer; headers parsed only for the sampled signature
 * checks): `node:http`'s parser, objects and response machinery cost about three times as much
 * CPU per request, which would be counted against the service on a machine it shares.
 *
 * Modes, by path: a path under `/hang/` is never answered (the socket is held open until the sender
 * gives up: its time-out); every other path gets `204 No Content` as soon as the body is in.
 */

/** One request in this many (besides each path's first) has its signature verified. */
const VERIFY_EVERY = 50;
/** Paths under this prefix are never answered. */
export const HANGING_PREFIX = "/hang/";

/** What the receiver saw of the events it was told to expect (`expect`), and of the rest. */
export interface ReceiptSummary {
  /** Events expected: one per (message_id, seq) named by `expect`. */
  expected: number;
  /** Of them, how many arrived at least once. */
  received: number;
  /** Deliveries of expected events beyond the first (at-least-once allows them). */
  duplicates: number;
  /** receive time − the event's `timestamp`, over each expected event's first delivery. */
  eventToReceiptMs: { p50: number; p99: number; max: number };
  /**
   * The same latency's median for each path (endpoint), at its highest and lowest: far apart, some
   * endpoints wait while others are served (a claim that does not take the endpoints in turn).
   */
  endpointP50Ms: { lowest: number; highest: number };
  /** When the last expected event's first delivery arrived (ms since the epoch); null: none did. */
  lastReceiptAt: number | null;
  /** Requests to the healthy paths that are not expected events (warm-up messages, other paths). */
  otherRequests: number;
  /** All requests, every path and mode. */
  requests: number;
  /** Distinct paths that received at least one request. */
  paths: number;
  /** Bodies that were not JSON with a string `data.message_id` and a numeric `data.seq`. */
  unparsable: number;
  /** Bodies whose `data.organization_id` is not the organization their path names. */
  wrongOrganization: number;
  /** Signatures checked with `standardwebhooks` (a sample), and how many failed. */
  signatures: { checked: number; failed: number; unchecked: number };
  /** The paths under `/hang/`. */
  hanging: HangingSummary;
}

export interface HangingSummary {
  /** Requests received (attempts the sender made). */
  requests: number;
  /** Still held open at the summary. */
  openNow: number;
  /** The most held open at once (the sender's concurrency towards the hanging endpoint). */
  maxOpen: number;
  /** Closed by the sender (its time-out or shutdown), and how long they had been held. */
  closedBySender: number;
  heldMs: { p50: number; max: number };
}

/** The parent's handle on the receiver process. */
export interface WebhookReceiver {
  port: number;
  /** The child's pid: its CPU and memory are read from /proc. */
  pid: number;
  cpuMs: () => number;
  rssMiB: () => number;
  /** The signing secret of each path (from the 201 of the endpoint's creation), for the sampled checks. */
  setSecrets: (secrets: Record<string, string>) => Promise<void>;
  /** The events to measure: `<message_id>:<seq>` keys. Replaces any earlier set. */
  expect: (keys: string[]) => Promise<void>;
  /** How many of the expected events have arrived at least once. */
  received: () => Promise<number>;
  summary: () => Promise<ReceiptSummary>;
  close: () => Promise<void>;
}

type Request =
  | { type: "secrets"; secrets: Record<string, string> }
  | { type: "expect"; keys: string[] }
  | { type: "received" }
  | { type: "summary" };

/** Starts the receiver in a child process and waits (bounded) for its port. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const child = fork(new URL(import.meta.url).pathname, [], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, BENCH_WEBHOOK_RECEIVER: "child" },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    // Structured clone: a NaN (no receipt to take a percentile of) stays a NaN.
    serialization: "advanced",
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error("the webhook receiver did not start within 20 s")),
      20_000,
    );
    child.once("message", (message: { port?: number }) => {
      clearTimeout(timer);
      if (typeof message.port === "number") resolve(message.port);
      else reject(new Error(`the webhook receiver said ${JSON.stringify(message)}`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the webhook receiver exited (${code})`));
    });
  });
  const call = rpc(child);
  const pid = child.pid ?? -1;
  return {
    port,
    pid,
    cpuMs: () => processTree(pid).reduce((sum, p) => sum + cpuMs(p), 0),
    rssMiB: () => Math.round(rssMiB(pid) ?? 0),
    setSecrets: async (secrets) => {
      await call({ type: "secrets", secrets });
    },
    expect: async (keys) => {
      await call({ type: "expect", keys });
    },
    received: async () => (await call({ type: "received" })) as number,
    summary: async () => (await call({ type: "summary" })) as ReceiptSummary,
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** Request → answer over the IPC channel, each bounded to 30 s. */
function rpc(child: ChildProcess): (request: Request) => Promise<unknown> {
  let next = 0;
  const waiting = new Map<number, (value: unknown) => void>();
  child.on("message", (message: { id?: number; result?: unknown }) => {
    if (typeof message.id !== "number") return;
    waiting.get(message.id)?.(message.result);
    waiting.delete(message.id);
  });
  return (request) =>
    new Promise((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the webhook receiver did not answer ${request.type} within 30 s`));
      }, 30_000);
      waiting.set(id, (value) => {
        clearTimeout(timer);
        resolve(value);
      });
      child.send({ id, ...request });
    });
}

/** The child: the HTTP server and its records. */
function runReceiver(): void {
  const now = () => performance.timeOrigin + performance.now();
  /** First delivery of each event: receive time and the event's own time, and how many came. */
  const receipts = new Map<string, { receivedAt: number; eventAt: number; count: number; path: string }>();
  let expected = new Set<string>();
  const paths = new Set<string>();
  const verifiers = new Map<string, Webhook>();
  const verifiedPaths = new Set<string>();
  let requests = 0;
  let unparsable = 0;
  let wrongOrganization = 0;
  const signatures = { checked: 0, failed: 0, unchecked: 0 };
  const hanging = { requests: 0, openNow: 0, maxOpen: 0, closedBySender: 0, heldMs: [] as number[] };

  const record = (path: string, body: string, headers: () => Record<string, string>, receivedAt: number) => {
    const verifier = verifiers.get(path);
    if (verifier && (!verifiedPaths.has(path) || requests % VERIFY_EVERY === 0)) {
      verifiedPaths.add(path);
      signatures.checked++;
      try {
        verifier.verify(body, headers());
      } catch {
        signatures.failed++;
      }
    } else if (!verifier) {
      signatures.unchecked++;
    }
    let parsed: {
      timestamp?: unknown;
      data?: { message_id?: unknown; seq?: unknown; organization_id?: unknown };
    };
    try {
      parsed = JSON.parse(body);
    } catch {
      unparsable++;
      return;
    }
    const messageId = parsed?.data?.message_id;
    const seq = parsed?.data?.seq;
    const eventAt = typeof parsed?.timestamp === "string" ? Date.parse(parsed.timestamp) : Number.NaN;
    if (typeof messageId !== "string" || typeof seq !== "number") {
      unparsable++;
      return;
    }
    const organization = path.startsWith(HANGING_PREFIX) ? path.slice(HANGING_PREFIX.length) : path.slice(1);
    if (parsed.data?.organization_id !== organization) wrongOrganization++;
    if (path.startsWith(HANGING_PREFIX)) return;
    const key = `${messageId}:${seq}`;
    const seen = receipts.get(key);
    if (seen) seen.count++;
    else receipts.set(key, { receivedAt, eventAt, count: 1, path });
  };

  const server = createTcpServer((socket) => {
    // Requests on one connection come one at a time (the sender does not pipeline): a hanging
    // path's request holds its connection until the sender closes it.
    let hangingSince: number | undefined;
    socket.once("close", () => {
      if (hangingSince === undefined) return;
      hanging.openNow--;
      hanging.closedBySender++;
      hanging.heldMs.push(now() - hangingSince);
    });
    socket.on("error", () => {});
    readRequests(socket, (request) => {
      const receivedAt = now();
      requests++;
      paths.add(request.path);
      if (request.path.startsWith(HANGING_PREFIX)) {
        hangingSince = receivedAt;
        hanging.requests++;
        hanging.openNow++;
        hanging.maxOpen = Math.max(hanging.maxOpen, hanging.openNow);
        record(request.path, request.body, request.headers, receivedAt);
        return false; // never answered
      }
      socket.write(NO_CONTENT);
      record(request.path, request.body, request.headers, receivedAt);
      return true;
    });
  });

  const answer = (message: Request): unknown => {
    switch (message.type) {
      case "secrets":
        for (const [path, secret] of Object.entries(message.secrets))
          verifiers.set(path, new Webhook(secret));
        return true;
      case "expect":
        expected = new Set(message.keys);
        return expected.size;
      case "received": {
        let n = 0;
        for (const key of expected) if (receipts.has(key)) n++;
        return n;
      }
      case "summary": {
        const latencies: number[] = [];
        let duplicates = 0;
        let lastReceiptAt: number | null = null;
        let otherRequests = 0;
        const byPath = new Map<string, number[]>();
        for (const [key, receipt] of receipts) {
          if (!expected.has(key)) {
            otherRequests += receipt.count;
            continue;
          }
          const latency = receipt.receivedAt - receipt.eventAt;
          latencies.push(latency);
          const ofPath = byPath.get(receipt.path);
          if (ofPath) ofPath.push(latency);
          else byPath.set(receipt.path, [latency]);
          duplicates += receipt.count - 1;
          lastReceiptAt = Math.max(lastReceiptAt ?? 0, receipt.receivedAt);
        }
        latencies.sort((a, b) => a - b);
        const pathMedians = [...byPath.values()]
          .map((list) =>
            percentile(
              list.sort((a, b) => a - b),
              50,
            ),
          )
          .sort((a, b) => a - b);
        const held = [...hanging.heldMs].sort((a, b) => a - b);
        const round = (v: number) => Math.round(v * 10) / 10;
        return {
          expected: expected.size,
          received: latencies.length,
          duplicates,
          eventToReceiptMs: {
            p50: round(percentile(latencies, 50)),
            p99: round(percentile(latencies, 99)),
            max: round(latencies.at(-1) ?? Number.NaN),
          },
          endpointP50Ms: {
            lowest: round(pathMedians[0] ?? Number.NaN),
            highest: round(pathMedians.at(-1) ?? Number.NaN),
          },
          lastReceiptAt: lastReceiptAt === null ? null : Math.round(lastReceiptAt),
          otherRequests,
          requests,
          paths: paths.size,
          unparsable,
          wrongOrganization,
          signatures,
          hanging: {
            requests: hanging.requests,
            openNow: hanging.openNow,
            maxOpen: hanging.maxOpen,
            closedBySender: hanging.closedBySender,
            heldMs: { p50: round(percentile(held, 50)), max: round(held.at(-1) ?? Number.NaN) },
          },
        } satisfies ReceiptSummary;
      }
    }
  };

  process.on("message", (message: { id: number } & Request) => {
    process.send?.({ id: message.id, result: answer(message) });
  });
  const stop = () => {
    server.close();
    process.exit(0);
  };
  process.once("SIGTERM", stop);
  process.once("disconnect", stop);
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    process.send?.({ port: typeof address === "object" && address ? address.port : -1 });
  });
}

const NO_CONTENT = Buffer.from("HTTP/1.1 204 No Content\r\n\r\n", "latin1");
const HEADERS_END = Buffer.from("\r\n\r\n", "latin1");

interface RawRequest {
  path: string;
  body: string;
  /** The headers, lower-cased, parsed when asked for (the sampled signature checks). */
  headers: () => Record<string, string>;
}

/**
 * Frames the HTTP/1.1 requests of one connection (request line, headers, a `Content-Length` body)
 * and hands each to `onRequest`, which answers it and returns false to stop reading (a request
 * left unanswered). A request it cannot frame (no length, or a chunked body, which the sender
 * never uses) gets a `400` and the connection is closed.
 */
function readRequests(socket: Socket, onRequest: (request: RawRequest) => boolean): void {
  let pending: Buffer = Buffer.alloc(0);
  let reading = true;
  socket.on("data", (chunk: Buffer) => {
    if (!reading) return;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (reading) {
      const headersEnd = pending.indexOf(HEADERS_END);
      if (headersEnd < 0) return;
      const head = pending.toString("latin1", 0, headersEnd);
      const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head)?.[1];
      if (length === undefined || /\r\ntransfer-encoding:/i.test(head)) {
        reading = false;
        socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        return;
      }
      const bodyStart = headersEnd + HEADERS_END.length;
      const bodyEnd = bodyStart + Number(length);
      if (pending.length < bodyEnd) return;
      const target = head.slice(head.indexOf(" ") + 1, head.indexOf(" ", head.indexOf(" ") + 1));
      const query = target.indexOf("?");
      const request: RawRequest = {
        path: query < 0 ? target : target.slice(0, query),
        body: pending.toString("utf8", bodyStart, bodyEnd),
        headers: () => parseHeaders(head),
      };
      pending = pending.subarray(bodyEnd);
      reading = onRequest(request);
    }
  });
}

function parseHeaders(head: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of head.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

if (process.env.BENCH_WEBHOOK_RECEIVER === "child") runReceiver();
