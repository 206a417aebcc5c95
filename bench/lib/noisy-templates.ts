import { percentile } from "./load.js";
import type { Settings } from "./scenarios.js";
import { Stack } from "./stack.js";

export interface NoisyTemplatesResult {
  durationS: number;
  workerConcurrency: number;
  attacker: {
    /** Previews of the slow template kept in flight at once, and their answers by status. */
    previewsInFlight: number;
    previewStatuses: Record<string, number>;
    emailsSent: number;
    emailsByStatus: Record<string, number>;
  };
  /** Tenant B's trivial preview, one after another for the whole attack. */
  preview: { requests: number; errors: number; p50: number; p99: number; max: number };
  /** Tenant B's OTP SMS: accept → success from the events' own `occurred_at`. */
  otp: { sent: number; byStatus: Record<string, number>; p50: number; p99: number; max: number };
}

/** Four nested loops: over 200 items, every render takes the sandbox's full deadline (2 s). */
const SLOW_TEMPLATE = `${"{{#each @root.x}}".repeat(4)}${"{{/each}}".repeat(4)}`;
const ITEMS = [{ name: "x", content: Array.from({ length: 200 }, (_, i) => i) }];
const WORKER_CONCURRENCY = 4;

/**
 * Scenario "noisy templates" (issue 15, item 1): tenant A keeps four previews of a template that
 * takes the full render deadline in flight, and sends such an e-mail every 400 ms, for the
 * scenario's duration; meanwhile tenant B previews a trivial template (one request after
 * another) and sends an OTP SMS every 200 ms. The worker has few delivery slots
 * (WORKER_CONCURRENCY=4), as in the review. Reports B's preview latency and OTP accept → success.
 */
export async function noisyTemplatesScenario(settings: Settings): Promise<NoisyTemplatesResult> {
  const stack = new Stack("noisy", {
    ...settings,
    env: { ...settings.env, WORKER_CONCURRENCY: String(WORKER_CONCURRENCY) },
  });
  try {
    await stack.start();
    await stack.startWorker();
    const [a, b] = stack.organizations;
    if (!a || !b) throw new Error("two organizations needed");
    // The API's save check refuses the slow template: stored as one saved before that check.
    await stack.sql`
      insert into templates (organization_id, name, code, text, created_at, updated_at)
      values (${a.id}, 'slow', ${SLOW_TEMPLATE}, null, now(), now())`;
    const call = (apiKey: string, path: string, body: unknown) =>
      fetch(`${stack.base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": apiKey },
        body: JSON.stringify(body),
      });
    const created = await call(b.apiKey, "/api/v1/templates", {
      name: "hello",
      code: "<p>Hello {{name}}</p>",
    });
    if (created.status !== 201)
      throw new Error(`template not created: ${created.status} ${await created.text()}`);

    const until = Date.now() + settings.durationS * 1000;
    const running = () => Date.now() < until;
    const count = (map: Record<string, number>, key: string | number) => {
      map[key] = (map[key] ?? 0) + 1;
    };

    // Tenant A.
    const previewStatuses: Record<string, number> = {};
    const slowPreviews = Array.from({ length: 4 }, async () => {
      while (running()) {
        const response = await call(a.apiKey, "/api/v1/templates/slow/render", {
          merge_language: "handlebars",
          global_merge_vars: ITEMS,
        });
        await response.arrayBuffer();
        count(previewStatuses, response.status);
        // A refusal (429) names when to come back; an attacker comes back at once, but not in a spin.
        if (response.status === 429) await sleep(50);
      }
    });
    let emailsSent = 0;
    const emails = (async () => {
      while (running()) {
        const response = await call(a.apiKey, "/api/v1/notifications/email", {
          payload: {
            template_name: "slow",
            message: {
              from_email: "digest@bench.test",
              subject: "Digest",
              to: [{ email: "ada@example.com" }],
              merge_language: "handlebars",
              global_merge_vars: ITEMS,
            },
          },
        });
        await response.arrayBuffer();
        if (response.status === 202) emailsSent++;
        await sleep(400);
      }
    })();

    // Tenant B, once A's renders have taken the threads.
    await sleep(500);
    const previewMs: number[] = [];
    let previewErrors = 0;
    const quickPreviews = (async () => {
      while (running()) {
        const started = performance.now();
        const response = await call(b.apiKey, "/api/v1/templates/hello/render", {
          merge_language: "handlebars",
          global_merge_vars: [{ name: "name", content: "Bea" }],
        });
        await response.arrayBuffer();
        previewMs.push(performance.now() - started);
        if (response.status !== 200) previewErrors++;
        await sleep(100);
      }
    })();
    let otpSent = 0;
    const otps = (async () => {
      while (running()) {
        const response = await call(b.apiKey, "/api/v1/notifications/sms", {
          payload: { to: "+14155550100", body: "Your code is 123456" },
          notification_type: "OTP",
        });
        await response.arrayBuffer();
        if (response.status === 202) otpSent++;
        await sleep(200);
      }
    })();
    await Promise.all([...slowPreviews, emails, quickPreviews, otps]);

    // B's OTPs final (bounded), then their latencies from the events.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const [row] = await stack.sql<Array<{ n: number }>>`
        select count(*)::int as n from messages
        where organization_id = ${b.id} and status in ('accepted', 'pending')`;
      if ((row?.n ?? 0) === 0) break;
      await sleep(250);
    }
    const otpRows = await stack.sql<Array<{ status: string; ms: number | null }>>`
      select m.status, extract(epoch from f.occurred_at - a.occurred_at) * 1000 as ms
      from messages m
      join message_events a on a.message_id = m.message_id and a.type = 'accepted'
      left join message_events f on f.message_id = m.message_id and f.type in ('success', 'failed', 'rejected')
      where m.organization_id = ${b.id} and m.channel = 'sms'`;
    const emailRows = await stack.sql<Array<{ status: string; n: number }>>`
      select status, count(*)::int as n from messages where organization_id = ${a.id} group by status`;
    const otpByStatus: Record<string, number> = {};
    for (const row of otpRows) count(otpByStatus, row.status);
    const otpMs = otpRows.flatMap((row) => (row.ms === null ? [] : [Number(row.ms)])).sort((x, y) => x - y);
    previewMs.sort((x, y) => x - y);
    const round = (v: number) => Math.round(v * 10) / 10;
    return {
      durationS: settings.durationS,
      workerConcurrency: WORKER_CONCURRENCY,
      attacker: {
        previewsInFlight: 4,
        previewStatuses,
        emailsSent,
        emailsByStatus: Object.fromEntries(emailRows.map((row) => [row.status, row.n])),
      },
      preview: {
        requests: previewMs.length,
        errors: previewErrors,
        p50: round(percentile(previewMs, 50)),
        p99: round(percentile(previewMs, 99)),
        max: round(previewMs.at(-1) ?? Number.NaN),
      },
      otp: {
        sent: otpSent,
        byStatus: otpByStatus,
        p50: round(percentile(otpMs, 50)),
        p99: round(percentile(otpMs, 99)),
        max: round(otpMs.at(-1) ?? Number.NaN),
      },
    };
  } catch (error) {
    settings.log(
      `web output:\n${stack.web?.output() ?? ""}\nworker output:\n${stack.worker?.output() ?? ""}`,
    );
    throw error;
  } finally {
    await stack.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
