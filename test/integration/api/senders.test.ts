import { spawn } from "node:child_process";
import { createECDH, randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { verifiedSendersFor } from "../../../src/api/api-process.js";
import { createApp } from "../../../src/api/app.js";
import { systemTxtResolver } from "../../../src/runtime/dns.js";
import { TestDnsServer } from "../../support/dns-server.js";
import { createHarness, type Harness, onboard, sendNotification } from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";

/**
 * Verified senders (docs/decisions/0033): domains proved by a TXT record that a real DNS server
 * on 127.0.0.1 serves to the service's own resolver (Node's c-ares, pointed at it by
 * `DNS_SERVERS`), SMS sender ids approved by the operator's command, and the accept path's 422.
 */

const dns = await new TestDnsServer().start();
const h = createHarness({ SENDER_VERIFICATION: "required", DNS_SERVERS: dns.address });
const open = createHarness({ SENDER_VERIFICATION: "off" });
afterAll(async () => {
  await Promise.all([h.close(), open.close()]);
  await dns.close();
});

interface SenderRecord {
  id: string;
  kind: string;
  value: string;
  status: string;
  created_at: string;
  verified_at: string | null;
  verification: { method: string; record?: { type: string; name: string; value: string } };
}

function call(harness: Harness, method: string, path: string, apiKey: string, body?: unknown) {
  return Promise.resolve(
    harness.app.request(path, {
      method,
      headers: { "x-api-key": apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
}

async function registerDomain(apiKey: string, domain: string, harness = h): Promise<SenderRecord> {
  const response = await call(harness, "POST", "/api/v1/senders/domains", apiKey, { domain });
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as SenderRecord;
}

function verify(apiKey: string, id: string, harness = h) {
  return call(harness, "POST", `/api/v1/senders/domains/${id}/verify`, apiKey);
}

/** Registers `domain`, publishes its record in the test DNS server and verifies it. */
async function verifiedDomain(apiKey: string, domain: string): Promise<SenderRecord> {
  const sender = await registerDomain(apiKey, domain);
  const record = sender.verification.record;
  if (!record) throw new Error("no TXT record to publish");
  dns.zones.set(record.name, [[record.value]]);
  const response = await verify(apiKey, sender.id);
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as SenderRecord;
}

const email = (from: string) => ({
  payload: {
    template_name: "welcome",
    message: { from_email: from, subject: "Hello", to: [{ email: "ada@example.com" }] },
  },
});

const sms = (sender?: string) => ({
  payload: { to: "+14155550100", body: "Your code is 123456", ...(sender === undefined ? {} : { sender }) },
});

let domainCount = 0;
/** A domain no other test registers: the DNS server's zones are shared by the file. */
const uniqueDomain = () => `acme-${++domainCount}-${Date.now().toString(36)}.example`;

describe("registering an e-mail domain", () => {
  it("answers with the TXT record to publish, the domain normalised and pending", async () => {
    const org = await onboard(h);
    const domain = uniqueDomain();
    const sender = await registerDomain(org.apiKey, ` ${domain.toUpperCase()}. `);
    expect(sender).toMatchObject({
      kind: "email_domain",
      value: domain,
      status: "pending",
      verified_at: null,
      verification: { method: "dns_txt", record: { type: "TXT", name: `_notify-verification.${domain}` } },
    });
    expect(sender.verification.record?.value).toMatch(/^ntf-verify=[A-Za-z0-9_-]{32}$/);

    const again = await call(h, "POST", "/api/v1/senders/domains", org.apiKey, { domain });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ error: `The domain ${domain} is already registered` });
  });

  it.each([["localhost"], ["192.168.0.1"], ["a..example"], ["-a.example"], ["exa mple.com"], [""]])(
    "refuses %j as a domain with a 400",
    async (domain) => {
      const org = await onboard(h);
      const response = await call(h, "POST", "/api/v1/senders/domains", org.apiKey, { domain });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: string }).error).toMatch(/^domain: must be a domain name/);
    },
  );

  it("gives each organization its own token for the same domain", async () => {
    const [a, b] = await Promise.all([onboard(h), onboard(h)]);
    const domain = uniqueDomain();
    const [first, second] = await Promise.all([
      registerDomain(a.apiKey, domain),
      registerDomain(b.apiKey, domain),
    ]);
    expect(first.verification.record?.value).not.toBe(second.verification.record?.value);
  });
});

describe("the bounds on senders", () => {
  it("given SENDER_MAX_PER_ORGANIZATION=2, a third sender of any kind is a 409 saying so, until one is deleted; other organizations are untouched", async () => {
    const capped = createApp({ ...h.deps, config: { ...h.config, SENDER_MAX_PER_ORGANIZATION: 2 } });
    const post = (apiKey: string, path: string, body: unknown) =>
      capped.request(path, {
        method: "POST",
        headers: { "x-api-key": apiKey, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const org = await onboard(h);
    const first = await post(org.apiKey, "/api/v1/senders/domains", { domain: uniqueDomain() });
    expect(first.status).toBe(201);
    expect((await post(org.apiKey, "/api/v1/senders/sms", { sender: "ACME" })).status).toBe(201);
    for (const [path, body] of [
      ["/api/v1/senders/domains", { domain: uniqueDomain() }],
      ["/api/v1/senders/sms", { sender: "OTHER" }],
    ] as const) {
      const refused = await post(org.apiKey, path, body);
      expect(refused.status).toBe(409);
      expect(await refused.json()).toEqual({
        error:
          "This organization has 2 senders, the most it may have (SENDER_MAX_PER_ORGANIZATION); delete one it no longer uses",
      });
    }
    const { id } = (await first.json()) as SenderRecord;
    expect((await call(h, "DELETE", `/api/v1/senders/${id}`, org.apiKey)).status).toBe(204);
    expect((await post(org.apiKey, "/api/v1/senders/sms", { sender: "OTHER" })).status).toBe(201);
    const other = await onboard(h);
    expect((await post(other.apiKey, "/api/v1/senders/sms", { sender: "ACME" })).status).toBe(201);
  });

  it("checks an organization's domains through DNS at most 10 at once, then 1 a second (429 with Retry-After)", async () => {
    const org = await onboard(h);
    const sender = await registerDomain(org.apiKey, uniqueDomain());
    const answers = await Promise.all(Array.from({ length: 12 }, () => verify(org.apiKey, sender.id)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 422).length).toBeGreaterThanOrEqual(10);
    expect(statuses.filter((s) => s === 422).length).toBeLessThanOrEqual(11);
    const refused = answers.find((r) => r.status === 429);
    if (!refused) throw new Error(`nothing refused: ${statuses.join(", ")}`);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toEqual({
      error: expect.stringMatching(
        /^Too many requests: this organization may check 1 sending domain a second \(bursts of 10\); retry in \d+ s$/,
      ),
    });
    // Another organization's checks are its own.
    const other = await onboard(h);
    const its = await registerDomain(other.apiKey, uniqueDomain());
    expect((await verify(other.apiKey, its.id)).status).toBe(422);
  });
});

describe("verifying a domain through DNS", () => {
  it("is a 422 saying so while no TXT record is published (NXDOMAIN)", async () => {
    const org = await onboard(h);
    const sender = await registerDomain(org.apiKey, uniqueDomain());
    const response = await verify(org.apiKey, sender.id);
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({
      error: `No TXT record at ${sender.verification.record?.name}; publish one whose value is ${sender.verification.record?.value}`,
    });
    expect(dns.asked).toContain(sender.verification.record?.name);
  });

  it("is a 422 naming what was found when the records hold another value", async () => {
    const org = await onboard(h);
    const sender = await registerDomain(org.apiKey, uniqueDomain());
    const name = sender.verification.record?.name ?? "";
    dns.zones.set(name, [["v=spf1 -all"], ["ntf-verify=someone-elses-token"]]);
    const response = await verify(org.apiKey, sender.id);
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({
      error: `The TXT records at ${name} do not hold ${sender.verification.record?.value} (found 2: "v=spf1 -all", "ntf-verify=someone-elses-token")`,
    });
    const listed = await call(h, "GET", "/api/v1/senders", org.apiKey);
    expect(((await listed.json()) as { senders: SenderRecord[] }).senders[0]?.status).toBe("pending");
  });

  it("verifies the domain when a record holds the token, even split into several strings", async () => {
    const org = await onboard(h);
    const sender = await registerDomain(org.apiKey, uniqueDomain());
    const { name, value } = sender.verification.record ?? { name: "", value: "" };
    dns.zones.set(name, [["v=spf1 -all"], [value.slice(0, 20), value.slice(20)]]);
    const response = await verify(org.apiKey, sender.id);
    expect(response.status).toBe(200);
    const verified = (await response.json()) as SenderRecord;
    expect(verified).toMatchObject({ id: sender.id, status: "verified" });
    expect(Date.parse(verified.verified_at ?? "")).toBeGreaterThanOrEqual(Date.parse(sender.created_at));

    // Verified stays verified: no second look-up, even once the record is gone.
    dns.zones.delete(name);
    const lookups = dns.asked.length;
    const again = await verify(org.apiKey, sender.id);
    expect(again.status).toBe(200);
    expect(((await again.json()) as SenderRecord).verified_at).toBe(verified.verified_at);
    expect(dns.asked).toHaveLength(lookups);
  });

  it("is a 503 with Retry-After when DNS fails or gives no answer, and the domain stays pending", async () => {
    const org = await onboard(h);
    const failing = await registerDomain(org.apiKey, uniqueDomain());
    dns.zones.set(failing.verification.record?.name ?? "", "servfail");
    const failed = await verify(org.apiKey, failing.id);
    expect(failed.status).toBe(503);
    expect(failed.headers.get("retry-after")).toBe("30");
    expect(await failed.json()).toEqual({
      error: "DNS gave no answer for the domain's TXT record (ESERVFAIL); try again later",
    });

    const silent = await registerDomain(org.apiKey, uniqueDomain());
    dns.zones.set(silent.verification.record?.name ?? "", "silent");
    const impatient = createApp({
      ...h.deps,
      txtResolver: systemTxtResolver({ servers: [dns.address], timeoutMs: 100, tries: 1 }),
    });
    const timedOut = await impatient.request(`/api/v1/senders/domains/${silent.id}/verify`, {
      method: "POST",
      headers: { "x-api-key": org.apiKey },
    });
    expect(timedOut.status).toBe(503);
    expect(await timedOut.json()).toEqual({
      error: "DNS gave no answer for the domain's TXT record (ETIMEOUT); try again later",
    });
  });
});

describe("sending with SENDER_VERIFICATION=required", () => {
  it("accepts an e-mail from a verified domain and refuses any other domain, a subdomain included, with a 422 naming it", async () => {
    const org = await onboard(h);
    const domain = uniqueDomain();
    await verifiedDomain(org.apiKey, domain);

    expect((await sendNotification(h, "email", org.apiKey, email(`hello@${domain}`))).status).toBe(202);
    expect(
      (await sendNotification(h, "email", org.apiKey, email(`Hello@${domain.toUpperCase()}`))).status,
    ).toBe(202);

    for (const other of ["bank.example", `mail.${domain}`]) {
      const refused = await sendNotification(h, "email", org.apiKey, email(`ceo@${other}`));
      expect(refused.status).toBe(422);
      expect(await refused.json()).toEqual({
        error: `from_email domain ${other} is not verified for this organization; register it with POST /api/v1/senders/domains and publish its TXT record`,
      });
    }
    // A dry run validates the sender too.
    const dry = await sendNotification(
      h,
      "email",
      org.apiKey,
      email("ceo@bank.example"),
      {},
      "?dry_run=true",
    );
    expect(dry.status).toBe(422);
  });

  it("refuses a domain still pending", async () => {
    const org = await onboard(h);
    const domain = uniqueDomain();
    await registerDomain(org.apiKey, domain);
    const refused = await sendNotification(h, "email", org.apiKey, email(`hello@${domain}`));
    expect(refused.status).toBe(422);
  });

  it("refuses, at once, a domain its organization deleted", async () => {
    const org = await onboard(h);
    const domain = uniqueDomain();
    const sender = await verifiedDomain(org.apiKey, domain);
    expect((await sendNotification(h, "email", org.apiKey, email(`a@${domain}`))).status).toBe(202);
    expect((await call(h, "DELETE", `/api/v1/senders/${sender.id}`, org.apiKey)).status).toBe(204);
    expect((await sendNotification(h, "email", org.apiKey, email(`a@${domain}`))).status).toBe(422);
    expect((await call(h, "DELETE", `/api/v1/senders/${sender.id}`, org.apiKey)).status).toBe(404);
  });

  it("replays, after its domain was deleted, a send accepted under an Idempotency-Key; a new key or a dry run is refused", async () => {
    const org = await onboard(h);
    const domain = uniqueDomain();
    const sender = await verifiedDomain(org.apiKey, domain);
    const key = { "Idempotency-Key": "before-delete" };
    const first = await sendNotification(h, "email", org.apiKey, email(`a@${domain}`), key);
    expect(first.status).toBe(202);
    expect((await call(h, "DELETE", `/api/v1/senders/${sender.id}`, org.apiKey)).status).toBe(204);
    const retry = await sendNotification(h, "email", org.apiKey, email(`a@${domain}`), key);
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await retry.json()).toEqual(await first.json());
    const fresh = { "Idempotency-Key": "after-delete" };
    expect((await sendNotification(h, "email", org.apiKey, email(`a@${domain}`), fresh)).status).toBe(422);
    const dry = await sendNotification(h, "email", org.apiKey, email(`a@${domain}`), key, "?dry_run=true");
    expect(dry.status).toBe(422);
  });

  it("allows the platform's default SMS sender, named or not, and refuses any other sender id", async () => {
    const org = await onboard(h);
    expect((await sendNotification(h, "sms", org.apiKey, sms())).status).toBe(202);
    expect((await sendNotification(h, "sms", org.apiKey, sms(h.config.SMS_DEFAULT_SENDER))).status).toBe(202);
    const refused = await sendNotification(h, "sms", org.apiKey, sms("BANK"));
    expect(refused.status).toBe(422);
    expect(await refused.json()).toEqual({
      error:
        "sender BANK is not verified for this organization; register it with POST /api/v1/senders/sms for an operator to approve",
    });
  });

  it("lets a push notification through: its sender is the platform's own", async () => {
    const org = await onboard(h);
    const ecdh = createECDH("prime256v1");
    ecdh.generateKeys();
    const response = await sendNotification(h, "push", org.apiKey, {
      payload: {
        to: {
          endpoint: "https://push.simulator.notify.test/ok",
          keys: {
            p256dh: ecdh.getPublicKey().toString("base64url"),
            auth: randomBytes(16).toString("base64url"),
          },
        },
        title: "Hi",
        body: "There",
      },
    });
    expect(response.status, await response.clone().text()).toBe(202);
  });
});

describe("SMS sender ids, approved by an operator", () => {
  const root = join(import.meta.dirname, "../../..");
  function senders(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", "scripts/senders.ts", ...args], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: h.config.DATABASE_URL },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk) => (stdout += chunk));
      child.stderr.on("data", (chunk) => (stderr += chunk));
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
  }

  it("registers a sender pending, lists it for the operator, and accepts sends once it is approved", async () => {
    const org = await onboard(h);
    // The cache of senders as a web process keeps it: the operator's approval shows within its TTL.
    let clock = Date.now();
    const app = createApp({
      ...h.deps,
      senders: verifiedSendersFor(
        { SENDER_VERIFICATION: "required", AUTH_CACHE_TTL_MS: 5000 },
        h.db,
        () => new Date(clock),
      ),
    });
    const send = (sender: string) =>
      app.request("/api/v1/notifications/sms", {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": org.apiKey },
        body: JSON.stringify(sms(sender)),
      });

    const registered = await call(h, "POST", "/api/v1/senders/sms", org.apiKey, { sender: " BANK " });
    expect(registered.status).toBe(201);
    const sender = (await registered.json()) as SenderRecord;
    expect(sender).toMatchObject({
      kind: "sms_sender",
      value: "BANK",
      status: "pending",
      verification: { method: "operator_review" },
    });
    expect((await send("BANK")).status).toBe(422);

    const pending = await senders("pending");
    expect(pending.code).toBe(0);
    expect(pending.stdout).toContain(`${sender.id}  sms_sender  "BANK"  pending`);

    const approved = await senders("approve", sender.id);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain(`approved ${sender.id}`);
    expect((await senders("pending")).stdout).not.toContain(sender.id);

    expect((await send("BANK")).status).toBe(422); // still cached
    clock += 5001;
    expect((await send("BANK")).status).toBe(202);
    expect((await send("Bank")).status).toBe(422); // what the phone shows: exactly as approved

    // Its organization lists it verified; `reject` deletes it.
    const listed = await call(h, "GET", "/api/v1/senders", org.apiKey);
    expect((await listed.json()) as { senders: SenderRecord[] }).toMatchObject({
      senders: [{ id: sender.id, status: "verified" }],
    });
    expect((await senders("reject", sender.id)).code).toBe(0);
    clock += 5001;
    expect((await send("BANK")).status).toBe(422);
  });

  it("normalises a number to E.164, and the domain check route does not know SMS senders", async () => {
    const org = await onboard(h);
    const registered = await call(h, "POST", "/api/v1/senders/sms", org.apiKey, {
      sender: "+1 (415) 555-0199",
    });
    const sender = (await registered.json()) as SenderRecord;
    expect(sender.value).toBe("+14155550199");
    expect((await verify(org.apiKey, sender.id)).status).toBe(404);
  });

  it("refuses to approve an e-mail domain or an unknown id", async () => {
    const org = await onboard(h);
    const domain = await registerDomain(org.apiKey, uniqueDomain());
    const refused = await senders("approve", domain.id);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("only its DNS record verifies it");
    expect((await senders("approve", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")).code).toBe(1);
    expect((await senders("approve", "BANK")).code).toBe(2);
  });
});

describe("another organization's senders", () => {
  it("are 404s identical to unknown ones, absent from its list, and no use to it", async () => {
    const [owner, intruder] = await Promise.all([onboard(h), onboard(h)]);
    const domain = uniqueDomain();
    const sender = await verifiedDomain(owner.apiKey, domain);
    const unknown = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    for (const [method, path] of [
      ["POST", `/api/v1/senders/domains/{id}/verify`],
      ["DELETE", `/api/v1/senders/{id}`],
    ] as const) {
      const theirs = await call(h, method, path.replace("{id}", sender.id), intruder.apiKey);
      const none = await call(h, method, path.replace("{id}", unknown), intruder.apiKey);
      expect([theirs.status, none.status]).toEqual([404, 404]);
      expect(await theirs.json()).toEqual(await none.json());
    }
    const list = await call(h, "GET", "/api/v1/senders", intruder.apiKey);
    expect(await list.json()).toEqual({ senders: [] });
    expect((await sendNotification(h, "email", intruder.apiKey, email(`ceo@${domain}`))).status).toBe(422);
    // And the owner's domain is still there.
    expect((await sendNotification(h, "email", owner.apiKey, email(`ceo@${domain}`))).status).toBe(202);
  });
});

describe("SENDER_VERIFICATION=off (a single-tenant install)", () => {
  it("accepts any from_email and any SMS sender, as before", async () => {
    const org = await onboard(open);
    expect((await sendNotification(open, "email", org.apiKey, email("ceo@bank.example"))).status).toBe(202);
    expect((await sendNotification(open, "sms", org.apiKey, sms("BANK"))).status).toBe(202);
  });
});

describe("the OpenAPI document", () => {
  it("documents the sender operations under Senders, behind ApiKeyAuth, and their answers as given", async () => {
    const document = await fetchDocument(h.app);
    const expectDocumented = responseChecker(document) as (
      r: Response,
      m: string,
      p: string,
    ) => Promise<void>;
    const SENDERS = "/api/v1/senders";
    const DOMAINS = "/api/v1/senders/domains";
    const VERIFY = "/api/v1/senders/domains/{id}/verify";
    const SMS = "/api/v1/senders/sms";
    for (const [path, method] of [
      [SENDERS, "get"],
      [DOMAINS, "post"],
      [VERIFY, "post"],
      [SMS, "post"],
      ["/api/v1/senders/{id}", "delete"],
    ] as const) {
      const operation = document.paths[path]?.[method] as { tags?: string[]; security?: unknown } | undefined;
      expect(operation?.tags, `${method} ${path}`).toEqual(["Senders"]);
      expect(operation?.security, `${method} ${path}`).toEqual([{ ApiKeyAuth: [] }]);
    }

    const org = await onboard(h);
    const domain = uniqueDomain();
    const cases: Array<[() => Promise<Response>, string, string, number]> = [
      [() => call(h, "POST", DOMAINS, org.apiKey, { domain }), "post", DOMAINS, 201],
      [() => call(h, "POST", DOMAINS, org.apiKey, { domain }), "post", DOMAINS, 409],
      [() => call(h, "POST", DOMAINS, org.apiKey, { domain: "nope" }), "post", DOMAINS, 400],
      [() => call(h, "POST", SMS, org.apiKey, { sender: "ACME" }), "post", SMS, 201],
      [() => call(h, "POST", SMS, org.apiKey, { sender: "far too long a sender" }), "post", SMS, 400],
    ];
    for (const [response, method, path, status] of cases) {
      const answered = await response();
      expect(answered.status).toBe(status);
      await expectDocumented(answered, method, path);
    }
    const listed = await call(h, "GET", SENDERS, org.apiKey);
    await expectDocumented(listed, "get", SENDERS);
    const [pending] = ((await listed.json()) as { senders: SenderRecord[] }).senders;
    const failed = await verify(org.apiKey, pending?.id ?? "");
    expect(failed.status).toBe(422);
    await expectDocumented(failed, "post", VERIFY);
    const verified = await verifiedDomain(org.apiKey, uniqueDomain());
    const again = await verify(org.apiKey, verified.id);
    await expectDocumented(again, "post", VERIFY);
    const unknown = await call(
      h,
      "DELETE",
      "/api/v1/senders/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
      org.apiKey,
    );
    expect(unknown.status).toBe(404);
    await expectDocumented(unknown, "delete", "/api/v1/senders/{id}");
  });
});
