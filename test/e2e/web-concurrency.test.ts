import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { afterAll, describe, expect, inject, it } from "vitest";
import { eventually } from "../support/harness.js";
import { freePort, procfile, type RunningProcess, runProcess, waitForHttp } from "../support/processes.js";

/** Child processes of a process (its node:cluster workers). */
function childrenOf(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number),
  );
}

let web: RunningProcess | undefined;
afterAll(async () => {
  await web?.stop("SIGKILL");
});

/** The Procfile's web process with WEB_CONCURRENCY=2, answering. */
async function startWeb(
  env: Record<string, string> = {},
): Promise<{ port: number; running: RunningProcess }> {
  const port = await freePort();
  const running = runProcess(procfile().web ?? "missing-web", {
    DATABASE_URL: inject("databaseUrl"),
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    PORT: String(port),
    QUEUE_PREFIX: `e2e-${randomUUID().slice(0, 8)}`,
    WEB_CONCURRENCY: "2",
    LOG_LEVEL: "warn",
    ...env,
  });
  web = running;
  await waitForHttp(`http://127.0.0.1:${port}/healthz`);
  return { port, running };
}

describe("the web process with WEB_CONCURRENCY", () => {
  it("given WEB_CONCURRENCY=2, then it serves from two API processes and they all exit cleanly on SIGTERM", async () => {
    const { port, running } = await startWeb();
    const pid = running.child.pid ?? -1;
    expect(childrenOf(pid)).toHaveLength(2);
    for (let i = 0; i < 10; i++) expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

    expect(await running.stop("SIGTERM")).toBe(0);
  }, 30_000);

  it("given its API processes died and wait for their restart, when SIGTERM comes, then none is restarted and the supervisor exits 0 at once", async () => {
    // Long enough that waiting it out would show: the supervisor's own guard is this + 2 s.
    const { running } = await startWeb({ SHUTDOWN_TIMEOUT_MS: "10000" });
    for (const child of childrenOf(running.child.pid ?? -1)) process.kill(child, "SIGKILL");
    // The supervisor restarts a dead process after a second: stop it as soon as it has noticed both.
    await eventually(
      async () => (running.output().match(/an API process died/g) ?? []).length === 2 || undefined,
      5000,
      "the supervisor noticing both deaths",
    );
    const stoppedAt = Date.now();

    expect(await running.stop("SIGTERM")).toBe(0);
    expect(Date.now() - stoppedAt).toBeLessThan(5000);
    expect(running.output()).not.toMatch(/did not exit in time/);
  }, 30_000);

  it("given OPS_PORT, then the operator endpoints are on loopback only, and a scrape counts the requests of both API processes", async () => {
    const opsPort = await freePort();
    const password = "a-dashboard-password-of-some-length";
    const { port } = await startWeb({
      OPS_PORT: String(opsPort),
      ADMIN_USER: "ops",
      ADMIN_PASSWORD: password,
    });
    const ops = `http://127.0.0.1:${opsPort}`;
    await waitForHttp(`${ops}/readyz`);

    for (const path of ["/metrics", "/readyz", "/admin/queues"]) {
      expect((await fetch(`http://127.0.0.1:${port}${path}`)).status, path).toBe(404);
    }
    const board = await fetch(`${ops}/admin/queues/api/queues`, {
      headers: { authorization: `Basic ${Buffer.from(`ops:${password}`).toString("base64")}` },
    });
    expect(board.status).toBe(200);

    // Round-robin spreads these over both processes; each counts its own.
    const requests = 20;
    for (let i = 0; i < requests; i++) {
      const refused = await fetch(`http://127.0.0.1:${port}/api/v1/notifications/sms`, { method: "POST" });
      expect(refused.status).toBe(401);
    }
    const refusedSends = async () => {
      const text = await (await fetch(`${ops}/metrics`)).text();
      const line = text
        .split("\n")
        .find(
          (l) =>
            l.startsWith("http_request_duration_seconds_count{") &&
            l.includes('route="/api/v1/notifications/sms"') &&
            l.includes('status="401"'),
        );
      return Number(line?.split(" ").at(-1));
    };
    // Whichever process answers the scrape, it answers both processes' sum.
    expect(await refusedSends()).toBe(requests);
    expect(await refusedSends()).toBe(requests);

    const outward = Object.values(networkInterfaces())
      .flat()
      .find((address) => address && address.family === "IPv4" && !address.internal)?.address;
    if (outward) {
      expect((await fetch(`http://${outward}:${port}/healthz`)).status).toBe(200);
      await expect(fetch(`http://${outward}:${opsPort}/metrics`)).rejects.toThrow();
    }
  }, 30_000);
});
