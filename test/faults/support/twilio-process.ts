import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../support/processes.js";

const root = join(import.meta.dirname, "..", "..", "..");
const SCRIPT = join(import.meta.dirname, "twilio-server.ts");

/** A request as the server logged it: its answer, or `cut` for a 201 a kill stopped from leaving. */
export interface LoggedRequest {
  messageId: string | undefined;
  receivedAt: number;
  answer: number | "hung" | "cut";
  /**
   * For a 201: true when the server logged it answered but not handed to its socket, so a kill
   * fell between the two and the answer most likely never left (or left just before the kill,
   * its log line not yet written: the service's own record of the attempt tells which).
   */
  unwritten?: boolean;
}

type LogLine = { pid: number } & (
  | { event: "received"; messageId?: string; receivedAt: number; answer: number | "hung" }
  | { event: "answered" | "written"; messageId: string }
);

/**
 * A Twilio-shaped server (test/faults/support/twilio-server.ts) in a child process on a fixed
 * port: killed with SIGKILL, as an outage cuts a provider mid-request, and restarted on the same
 * port. Its requests survive the kills in a log file.
 */
export class TwilioProcess {
  readonly port: number;
  readonly #dir: string;
  readonly #env: Record<string, string>;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #output = "";

  private constructor(port: number, dir: string, env: Record<string, string>) {
    this.port = port;
    this.#dir = dir;
    this.#env = env;
  }

  static async start(options: {
    account: { accountSid: string; authToken: string };
    publicBaseUrl: string;
    latencyMs: number;
  }): Promise<TwilioProcess> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), "fake-twilio-"));
    const server = new TwilioProcess(port, dir, {
      PORT: String(port),
      ACCOUNT_SID: options.account.accountSid,
      AUTH_TOKEN: options.account.authToken,
      PUBLIC_BASE_URL: options.publicBaseUrl,
      LATENCY_MS: String(options.latencyMs),
      LOG_FILE: join(dir, "requests.jsonl"),
    });
    await server.restart();
    return server;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Starts it (again) on its port and waits until it listens. */
  async restart(): Promise<void> {
    this.#output = "";
    const child = spawn(process.execPath, ["--import", "tsx", SCRIPT], {
      cwd: root,
      env: { ...process.env, ...this.#env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.on("exit", () => resolve()));
    const collect = (chunk: Buffer) => {
      this.#output += chunk.toString();
    };
    child.stdout?.on("data", collect);
    child.stderr?.on("data", collect);
    const deadline = Date.now() + 20_000;
    while (!this.#output.includes("fake Twilio listening")) {
      if (!this.running || Date.now() > deadline)
        throw new Error(`the fake Twilio did not start on ${this.port}:\n${this.#output}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** SIGKILL: its connections are cut mid-request, and new ones refused until it restarts. */
  async kill(): Promise<void> {
    this.#child?.kill("SIGKILL");
    await this.#exited;
  }

  /** Every request it got so far, across its restarts, each 201 whose answer never left as `cut`. */
  requests(): LoggedRequest[] {
    const file = this.#env.LOG_FILE ?? "";
    if (!existsSync(file)) return [];
    // The child may be writing a line as it is read: only whole lines (ended by a newline) count.
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .slice(0, -1)
      .filter(Boolean)
      .map((line) => JSON.parse(line) as LogLine);
    // Each message's answers and writes per server process (a restart starts a new log of its
    // own in the same file), in order: its 201 requests take them in turn.
    const key = (line: LogLine) => `${line.pid}:${line.messageId ?? ""}`;
    const answered = new Map<string, number>();
    const written = new Map<string, number>();
    for (const line of lines) {
      if (line.event === "answered") answered.set(key(line), (answered.get(key(line)) ?? 0) + 1);
      if (line.event === "written") written.set(key(line), (written.get(key(line)) ?? 0) + 1);
    }
    const requests: LoggedRequest[] = [];
    for (const line of lines) {
      if (line.event !== "received") continue;
      let answer: LoggedRequest["answer"] = line.answer;
      let unwritten = false;
      if (line.answer === 201) {
        const answers = answered.get(key(line)) ?? 0;
        const writes = written.get(key(line)) ?? 0;
        if (answers === 0) answer = "cut";
        else {
          answered.set(key(line), answers - 1);
          if (writes === 0) unwritten = true;
          else written.set(key(line), writes - 1);
        }
      }
      requests.push({
        messageId: line.messageId,
        receivedAt: line.receivedAt,
        answer,
        ...(unwritten ? { unwritten } : {}),
      });
    }
    return requests;
  }

  async close(): Promise<void> {
    await this.kill();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
