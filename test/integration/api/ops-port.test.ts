import { afterAll, describe, expect, it } from "vitest";
import { createOpsApp } from "../../../src/api/ops-app.js";
import { createHarness } from "../../support/harness.js";

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
const admin = { ADMIN_USER: "ops", ADMIN_PASSWORD: "board-password" };

const split = createHarness({ ...admin, OPS_PORT: "9465" });
const ops = createOpsApp(split.deps);
const together = createHarness(admin);
afterAll(async () => {
  await split.close();
  await together.close();
});

describe("given OPS_PORT", () => {
  it("the public port answers /metrics, /readyz and the dashboard with a JSON 404, as any unknown path", async () => {
    for (const path of ["/metrics", "/readyz", "/admin/queues", "/admin/queues/api/queues"]) {
      const response = await split.app.request(path, {
        headers: { authorization: basic("ops", "board-password") },
      });
      expect(response.status, path).toBe(404);
      expect(await response.json()).toEqual({ error: `No route for GET ${path}` });
    }
  });

  it("the public port still answers /healthz, for a router's health check", async () => {
    const response = await split.app.request("/healthz");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  });

  it("the operator port serves /healthz, /readyz, /metrics and the dashboard", async () => {
    expect((await ops.request("/healthz")).status).toBe(200);
    const ready = await ops.request("/readyz");
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready", checks: { postgres: "ok", redis: "ok" } });
    const metrics = await ops.request("/metrics");
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^notification_queue_jobs\{/m);
    expect((await ops.request("/admin/queues")).status).toBe(401);
    const board = await ops.request("/admin/queues/api/queues", {
      headers: { authorization: basic("ops", "board-password") },
    });
    expect(board.status).toBe(200);
  });

  it("the operator port serves no API route, and answers unknown paths with a JSON 404", async () => {
    const response = await ops.request("/api/v1/messages/01900000-0000-7000-8000-000000000000");
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: expect.stringContaining("No route") });
  });

  it("the operator port's requests are measured, like the public port's", async () => {
    await ops.request("/readyz");
    const text = await (await ops.request("/metrics")).text();
    expect(text).toMatch(/^http_request_duration_seconds_count\{[^}]*route="\/readyz"[^}]*\} [1-9]/m);
  });
});

describe("without OPS_PORT", () => {
  it("the public port serves every operator endpoint, as before", async () => {
    expect((await together.app.request("/readyz")).status).toBe(200);
    expect((await together.app.request("/metrics")).status).toBe(200);
    const board = await together.app.request("/admin/queues/api/queues", {
      headers: { authorization: basic("ops", "board-password") },
    });
    expect(board.status).toBe(200);
  });
});
