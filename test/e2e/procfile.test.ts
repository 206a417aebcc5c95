import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import nodemailer from "nodemailer";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { eventually } from "../support/harness.js";
import {
  bouncesListening,
  freePort,
  type ProcfileStack,
  procfile,
  runProcess,
  startProcfileStack,
} from "../support/processes.js";

/**
 * The Procfile's processes, built and run exactly as written, against a database that does not
 * exist yet: release creates and migrates it, then web and worker deliver what the API accepts.
 */
let stack: ProcfileStack;
let base = "";

beforeAll(async () => {
  stack = await startProcfileStack(inject("databaseUrl"));
  base = stack.base;
}, 60_000);
afterAll(() => stack?.close());

async function json(response: Response) {
  return (await response.json()) as Record<string, unknown>;
}

describe("the Procfile's processes", () => {
  it("onboard, accept and deliver every kind of simulator outcome", async () => {
    const onboarded = await fetch(`${base}/api/v1/onboarding/organizations/e2e-product`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ organizations: [{ name: "E2E", active: true }] }),
    });
    expect(onboarded.status).toBe(201);
    const { organizations } = (await onboarded.json()) as { organizations: Array<{ apiKey: string }> };
    const apiKey = organizations[0]?.apiKey ?? "";

    const expected: Array<[string, string, number]> = [
      ["+14155550100", "success", 0],
      ["+15005550501", "success", 1],
      ["+15005550001", "rejected", 0],
      ["+15005550500", "failed", 4],
    ];
    const ids = await Promise.all(
      expected.map(async ([to]) => {
        const response = await fetch(`${base}/api/v1/notifications/sms`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": apiKey },
          body: JSON.stringify({ payload: { to, body: "hello", sender: "E2E" }, notification_type: "OTP" }),
        });
        expect(response.status).toBe(202);
        return (await json(response)).request_id as string;
      }),
    );
    for (const [index, [, status, retries]] of expected.entries()) {
      const record = await eventually(
        async () => {
          const response = await fetch(`${base}/api/v1/messages/${ids[index]}`, {
            headers: { "x-api-key": apiKey },
          });
          const body = await json(response);
          return body.status === status ? body : undefined;
        },
        15_000,
        `message ${index} to reach ${status}`,
      );
      expect(record.retry_count).toBe(retries);
    }
  });

  it("bounces listens for reports to its domain's return paths, refuses other addresses and exits on SIGTERM", async () => {
    const port = await freePort();
    const bounces = runProcess(procfile().bounces ?? "missing-bounces", {
      DATABASE_URL: stack.databaseUrl,
      // Production, without the providers and keys web and worker need: it asks only for its own.
      NODE_ENV: "production",
      BOUNCE_DOMAIN: "bounces.e2e.test",
      BOUNCES_PORT: String(port),
    });
    try {
      await bouncesListening(bounces);
      const transport = nodemailer.createTransport({
        host: "127.0.0.1",
        port,
        secure: false,
        ignoreTLS: true,
      });
      const raw = "From: MAILER-DAEMON@mx.example\r\nSubject: Undelivered\r\n\r\nNot a report.\r\n";
      // A return path of a message that does not exist: taken (250), nothing recorded.
      const taken = await transport.sendMail({
        envelope: { from: "", to: [`bounce+${randomUUID()}@bounces.e2e.test`] },
        raw,
      });
      expect(taken.response).toMatch(/^250 /);
      await expect(
        transport.sendMail({ envelope: { from: "", to: ["someone@example.com"] }, raw }),
      ).rejects.toMatchObject({ responseCode: 550 });
      transport.close();
    } finally {
      expect(await bounces.stop("SIGTERM")).toBe(0);
    }
  });

  it("bounces offers STARTTLS with BOUNCES_TLS_*_FILE, takes the feedback address, and refuses to start with a key alone", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bounces-e2e-"));
    const keyFile = join(dir, "key.pem");
    const certFile = join(dir, "cert.pem");
    await promisify(execFile)("openssl", [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", "/CN=bounces.e2e.test"],
      ...["-addext", "subjectAltName=DNS:bounces.e2e.test"],
    ]);
    const env = {
      DATABASE_URL: stack.databaseUrl,
      NODE_ENV: "production",
      BOUNCE_DOMAIN: "bounces.e2e.test",
    };
    try {
      const alone = runProcess(procfile().bounces ?? "missing-bounces", {
        ...env,
        BOUNCES_PORT: String(await freePort()),
        BOUNCES_TLS_KEY_FILE: keyFile,
      });
      expect(await alone.exited).not.toBe(0);
      expect(alone.output()).toMatch(/BOUNCES_TLS_CERT_FILE: required when BOUNCES_TLS_KEY_FILE is set/);

      const port = await freePort();
      const bounces = runProcess(procfile().bounces ?? "missing-bounces", {
        ...env,
        BOUNCES_PORT: String(port),
        BOUNCES_TLS_KEY_FILE: keyFile,
        BOUNCES_TLS_CERT_FILE: certFile,
        BOUNCES_FEEDBACK_ADDRESS: "fbl@bounces.e2e.test",
      });
      try {
        await bouncesListening(bounces);
        const transport = nodemailer.createTransport({
          host: "127.0.0.1",
          port,
          secure: false,
          requireTLS: true,
          tls: { ca: [await readFile(certFile, "utf8")], servername: "bounces.e2e.test" },
        });
        const raw = "From: staff@hotmail.example\r\nSubject: complaint\r\n\r\nNot a report.\r\n";
        const taken = await transport.sendMail({ envelope: { from: "", to: ["fbl@bounces.e2e.test"] }, raw });
        expect(taken.response).toMatch(/^250 /);
        transport.close();
      } finally {
        expect(await bounces.stop("SIGTERM")).toBe(0);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("web and worker exit cleanly on SIGTERM", async () => {
    const codes = await Promise.all([stack.web.stop("SIGTERM"), stack.worker.stop("SIGTERM")]);
    expect(codes).toEqual([0, 0]);
  });
});
