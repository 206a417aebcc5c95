import { existsSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness } from "../support/harness.js";

/**
 * The pages a person opens, rendered in a real headless Chromium (Debian's, driven by
 * playwright-core): the API reference and the queue dashboard. `.ci/run` installs Chromium; on a
 * machine without it the suite is skipped locally, never in CI.
 */
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const runnable = existsSync(executablePath) || Boolean(process.env.CI);

describe.skipIf(!runnable)("pages in a browser", () => {
  const h = createHarness({ ADMIN_USER: "ops", ADMIN_PASSWORD: "board-password" });
  let server: ServerType;
  let base = "";
  let browser: Browser;

  beforeAll(async () => {
    server = serve({ fetch: h.app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    await h.close();
  });

  it("renders the API reference at /docs with the SMS endpoint, without reaching the internet", async () => {
    const page = await browser.newPage();
    const outside: string[] = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(base)) outside.push(request.url());
    });
    try {
      await page.goto(`${base}/docs`);
      await page.getByText("/api/v1/notifications/sms").first().waitFor({ timeout: 20_000 });
      await page.screenshot({ path: "test/browser/docs.png" }).catch(() => {});
      expect(outside).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("renders Bull Board at /admin/queues with the delivery queue", async () => {
    const context = await browser.newContext({
      httpCredentials: { username: "ops", password: "board-password" },
    });
    try {
      const page = await context.newPage();
      const response = await page.goto(`${base}/admin/queues`);
      expect(response?.status()).toBe(200);
      await page.getByText("deliveries").first().waitFor({ timeout: 20_000 });
      await page.screenshot({ path: "test/browser/queues.png" }).catch(() => {});
    } finally {
      await context.close();
    }
  });
});
