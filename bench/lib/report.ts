import type { AcceptBatchResult } from "./batch.js";
import type { EndToEndClusterResult } from "./cluster.js";
import type { Interleaved, Ratios } from "./interleaved.js";
import type { NoisyNeighbourResult } from "./noisy-neighbour.js";
import type { NoisyTemplatesResult } from "./noisy-templates.js";
import type {
  EndToEndResult,
  LoadScenarioResult,
  PeakRss,
  PriorityResult,
  ReadResult,
  UntilSettled,
} from "./scenarios.js";
import type { MachineInfo } from "./system.js";
import type { EndToEndWebhooksResult, Receipts, WebhooksHangingResult } from "./webhooks.js";

export interface BenchReport {
  date: string;
  label: string;
  command: string;
  revision: string;
  machine: MachineInfo;
  versions: Record<string, string>;
  settings: Record<string, unknown>;
  results: {
    ceiling?: LoadScenarioResult;
    accept64?: LoadScenarioResult;
    /** The same with a new `Idempotency-Key` on every request (no target: what the claims cost). */
    accept64Idempotent?: LoadScenarioResult;
    /** The same with `SENDER_VERIFICATION=off`: against accept64, what checking the sender costs. */
    accept64SendersOff?: LoadScenarioResult;
    accept64Worker?: LoadScenarioResult;
    accept256?: LoadScenarioResult;
    /** Batches of 100 SMS at 16 connections beside single sends at 64 (issue 20). */
    acceptBatch?: AcceptBatchResult;
    endToEnd?: EndToEndResult;
    /** e2e with one status-webhook endpoint per organization (issue 16). */
    endToEndWebhooks?: EndToEndWebhooksResult;
    /** One organization's webhook endpoint hangs, another's is healthy (issue 16). */
    webhooksHanging?: WebhooksHangingResult;
    /** e2e on a Redis Cluster of three masters with three queue shards (issue 18). */
    endToEndCluster?: EndToEndClusterResult;
    read?: ReadResult;
    priority?: PriorityResult;
    noisyTemplates?: NoisyTemplatesResult;
    /** One organization's 50,000 beside another's 500, with and without fairness (issue 19). */
    noisyNeighbour?: NoisyNeighbourResult;
  };
  loadAverageAtEnd: number[];
}

interface Target {
  what: string;
  measured: string;
  target: string;
  met: boolean | undefined;
}

const fmt = (v: number | undefined, digits = 0) =>
  v === undefined || Number.isNaN(v) ? "–" : v.toLocaleString("en-US", { maximumFractionDigits: digits });

/**
 * An event → receipt p99 as measured, saying plainly when receipts are missing (none at all: the
 * service sent none, e.g. a build without the webhook dispatcher).
 */
function receiptMeasure(r: Receipts): string {
  if (r.expected === 0) return "no final events to deliver";
  if (r.received === 0) return `**no receipts** (0 of ${fmt(r.expected)} final events)`;
  const missing = r.received < r.expected ? `; **${fmt(r.expected - r.received)} missing**` : "";
  return `${fmt(r.eventToReceiptMs.p99, 1)} ms (${fmt(r.received)} of ${fmt(r.expected)} received${missing})`;
}

/** Met only if every expected event arrived within the bound, none forged or misaddressed, p99 ≤ 1 s. */
function receiptsMet(r: Receipts): boolean {
  return (
    r.expected > 0 &&
    r.received === r.expected &&
    r.allWithinBound &&
    r.signatures.failed === 0 &&
    r.wrongOrganization === 0 &&
    r.eventToReceiptMs.p99 <= 1000
  );
}

/** A ratio of interleaved runs as the targets show it: the pooled ratio, then each pair's. */
function ratioMeasure(compared: Interleaved<EndToEndResult>, key: keyof Ratios): string {
  const runs = (list: EndToEndResult[]) =>
    list
      .map((r) => (key === "messagesPerS" ? fmt(r.messagesPerS) : fmt(r.cpuUsPerMessage.machine)))
      .join(", ");
  const unit = key === "messagesPerS" ? "msg/s" : "µs";
  return (
    `${fmt(compared.ratios[key], 2)} (pairs ${compared.pairs.map((p) => fmt(p[key], 2)).join(", ")}; ` +
    `runs ${runs(compared.variant)} against ${runs(compared.baseline)} ${unit})`
  );
}

function webhookTargets(report: BenchReport): Target[] {
  const { endToEndWebhooks: withHooks, webhooksHanging: hanging } = report.results;
  const list: Target[] = [];
  if (withHooks) {
    list.push({
      what: "status webhooks, end to end: messages/s ÷ e2e's without webhooks, two runs each interleaved, of the sums",
      measured: ratioMeasure(withHooks, "messagesPerS"),
      target: "≥ 0.85",
      met: withHooks.allFinalWithinBound && withHooks.ratios.messagesPerS >= 0.85,
    });
    // The run that missed the bound, else the one with the higher p99 (none measured: the highest).
    const p99 = (r: Receipts) => (r.received === 0 ? Number.POSITIVE_INFINITY : r.eventToReceiptMs.p99);
    const worst = [...withHooks.variant].sort(
      (a, b) =>
        Number(receiptsMet(a.receipts)) - Number(receiptsMet(b.receipts)) ||
        p99(b.receipts) - p99(a.receipts),
    )[0];
    if (worst) {
      list.push({
        what: `status webhooks, end to end: event→receipt p99 (the worse run's), every final event received within ${worst.receipts.boundS} s`,
        measured: receiptMeasure(worst.receipts),
        target: "≤ 1,000 ms",
        met: withHooks.variant.every((run) => receiptsMet(run.receipts)),
      });
    }
  }
  if (hanging) {
    list.push({
      what: "status webhooks, another organization's endpoint hanging: the healthy one's event→receipt p99",
      measured: receiptMeasure(hanging.healthy),
      target: "≤ 1,000 ms",
      met: receiptsMet(hanging.healthy),
    });
  }
  return list;
}

/** e2e on the cluster against e2e on one node, interleaved: messages/s and CPU per message within 15 %. */
function clusterTargets(report: BenchReport): Target[] {
  const cluster = report.results.endToEndCluster;
  if (!cluster) return [];
  return [
    {
      what: `Redis Cluster (${cluster.redis.masters} masters, QUEUE_SHARDS=${cluster.redis.shards}), end to end: messages/s ÷ e2e's on one node, two runs each interleaved, of the sums`,
      measured: ratioMeasure(cluster, "messagesPerS"),
      target: "≥ 0.85",
      met: cluster.allFinalWithinBound && cluster.ratios.messagesPerS >= 0.85,
    },
    {
      what: "Redis Cluster, end to end: the machine's CPU per message ÷ e2e's on one node, the same runs",
      measured: ratioMeasure(cluster, "machineCpuPerMessage"),
      target: "≤ 1.15",
      met: cluster.allFinalWithinBound && cluster.ratios.machineCpuPerMessage <= 1.15,
    },
  ];
}

/** The issue's targets, checked against whatever scenarios ran. */
export function targets(report: BenchReport): Target[] {
  const { ceiling, accept64, accept256, endToEnd, priority, read, noisyTemplates } = report.results;
  const list: Target[] = [];
  if (noisyTemplates) {
    list.push(
      {
        what: "noisy templates: the other tenant's preview p99",
        measured: `${fmt(noisyTemplates.preview.p99, 1)} ms`,
        target: "≤ 200 ms",
        met: noisyTemplates.preview.p99 <= 200 && noisyTemplates.preview.errors === 0,
      },
      {
        what: "noisy templates: the other tenant's OTP SMS accept→success p99",
        measured: `${fmt(noisyTemplates.otp.p99, 1)} ms`,
        target: "≤ 500 ms",
        met: noisyTemplates.otp.p99 <= 500 && noisyTemplates.otp.byStatus.success === noisyTemplates.otp.sent,
      },
    );
  }
  if (accept64) {
    list.push(
      {
        what: "accept, 64 connections: throughput",
        measured: `${fmt(accept64.requestsPerS)} req/s`,
        target: "≥ 5,000 req/s",
        met: accept64.requestsPerS >= 5000,
      },
      {
        what: "accept, 64 connections: p99",
        measured: `${fmt(accept64.latencyMs.p99, 1)} ms`,
        target: "≤ 25 ms",
        met: accept64.latencyMs.p99 <= 25,
      },
      {
        what: "accept, 64 connections: errors",
        measured: fmt(accept64.errors),
        target: "0",
        met: accept64.errors === 0,
      },
    );
  }
  if (accept64 && ceiling) {
    const ratio = accept64.requestsPerS / ceiling.requestsPerS;
    list.push({
      what: "accept ÷ ceiling (64 connections)",
      measured: fmt(ratio, 2),
      target: "≥ 1.2",
      met: ratio >= 1.2,
    });
  }
  if (accept256) {
    list.push(
      {
        what: "accept, 256 connections: throughput",
        measured: `${fmt(accept256.requestsPerS)} req/s`,
        target: "≥ 8,000 req/s",
        met: accept256.requestsPerS >= 8000,
      },
      {
        what: "accept, 256 connections: p99",
        measured: `${fmt(accept256.latencyMs.p99, 1)} ms`,
        target: "≤ 100 ms",
        met: accept256.latencyMs.p99 <= 100,
      },
    );
  }
  if (endToEnd) {
    list.push(
      {
        what: "end to end: messages/s",
        measured: `${fmt(endToEnd.messagesPerS)} msg/s`,
        target: "≥ 2,000 msg/s",
        met: endToEnd.allFinalWithinBound && endToEnd.messagesPerS >= 2000,
      },
      {
        what: "end to end: accept→success p99",
        measured: `${fmt(endToEnd.events.acceptToFinalMs.p99)} ms`,
        target: "≤ 1,000 ms",
        met: endToEnd.events.acceptToFinalMs.p99 <= 1000,
      },
    );
  }
  if (priority) {
    list.push({
      what: "OTP under a 50,000 low flood: accept→success p99 (all OTPs; those accepted while the flood drained)",
      measured: `${fmt(priority.otp.events.acceptToFinalMs.p99)} ms; ${fmt(priority.otp.underFlood.acceptToFinalMs.p99)} ms (${fmt(priority.otp.underFlood.messages)} OTPs)`,
      target: "≤ 500 ms, ≥ half the OTPs under flood",
      met:
        priority.otp.allFinalWithinBound &&
        priority.otp.events.acceptToFinalMs.p99 <= 500 &&
        priority.otp.underFlood.acceptToFinalMs.p99 <= 500 &&
        priority.otp.underFlood.messages * 2 >= priority.otp.messages,
    });
  }
  if (read) {
    list.push(
      {
        what: "read: throughput",
        measured: `${fmt(read.requestsPerS)} req/s`,
        target: "≥ 8,000 req/s",
        met: read.requestsPerS >= 8000,
      },
      {
        what: "read: p99",
        measured: `${fmt(read.latencyMs.p99, 1)} ms`,
        target: "≤ 10 ms",
        met: read.latencyMs.p99 <= 10,
      },
    );
  }
  list.push(...webhookTargets(report));
  list.push(...clusterTargets(report));
  const nn = report.results.noisyNeighbour;
  if (nn) {
    list.push(
      {
        what: "noisy neighbour: B's accept→success p99 beside A's 50,000 (fairness on)",
        measured: `${fmt(nn.fair.b?.acceptToSuccessMs.p99 ?? Number.NaN)} ms (off: ${fmt(nn.unfair.b?.acceptToSuccessMs.p99 ?? Number.NaN)} ms)`,
        target: "≤ 1,000 ms",
        met:
          (nn.fair.b?.acceptToSuccessMs.p99 ?? Number.POSITIVE_INFINITY) <= 1000 &&
          nn.fair.b?.byStatus.success === nn.fair.b?.messages,
      },
      {
        what: "noisy neighbour: A's drain with B ÷ alone (fairness on)",
        measured: `${fmt(nn.drainRatio, 2)} (pairs with ÷ alone: ${nn.pairs.map((p) => `${p.withBS} s ÷ ${p.aloneS} s`).join(", ")})`,
        target: "≤ 1.10",
        met: nn.drainRatio <= 1.1,
      },
    );
  }
  const batch = report.results.acceptBatch;
  if (batch) {
    list.push({
      what: "batch sends: messages/s through batches of 100 at 16 connections ÷ single sends' req/s at 64, same run",
      measured: `${fmt(batch.ratio, 2)} (${fmt(batch.batch.messagesPerS)} ÷ ${fmt(batch.single.requestsPerS)})`,
      target: "≥ 4",
      met: batch.ratio >= 4 && batch.batch.errors === 0 && batch.single.errors === 0,
    });
  }
  const peaks = [
    report.results.accept64,
    report.results.accept64Worker,
    accept256,
    endToEnd,
    ...[report.results.endToEndWebhooks, report.results.endToEndCluster].flatMap((compared) =>
      compared ? [...compared.baseline, ...compared.variant] : [],
    ),
    report.results.webhooksHanging,
    priority,
  ]
    .filter((r) => r !== undefined)
    .map((r) => r.peakRss as PeakRss);
  if (peaks.length > 0) {
    const web = Math.max(...peaks.map((p) => p.webTotalMiB));
    const worker = Math.max(...peaks.map((p) => p.workerMiB));
    list.push(
      {
        what: "peak RSS, web (all its processes)",
        measured: `${web} MiB`,
        target: "≤ 200 MB",
        met: web <= 200,
      },
      { what: "peak RSS, worker", measured: `${worker} MiB`, target: "≤ 300 MB", met: worker <= 300 },
    );
  }
  return list;
}

function loadRow(name: string, r: LoadScenarioResult | ReadResult | undefined): string | undefined {
  if (!r) return undefined;
  const cpu = r.cpuUsPerRequest;
  return `| ${name} | ${r.connections} | ${fmt(r.requestsPerS)} | ${fmt(r.latencyMs.p50, 1)} | ${fmt(r.latencyMs.p99, 1)} | ${fmt(r.errors)} | ${cpu.web} / ${cpu.worker} / ${cpu.postgres} / ${cpu.redis} / ${cpu.loadGenerator} / ${cpu.machine} |`;
}

export function renderMarkdown(report: BenchReport): string {
  const { machine, versions, results } = report;
  const lines: string[] = [
    `# Benchmark ${report.date}${report.label ? ` (${report.label})` : ""}`,
    "",
    `Command: \`${report.command}\` · revision ${report.revision}`,
    "",
    `Machine: ${machine.cores} cores (${machine.cpuModel}), ${machine.memoryGiB} GiB, ${machine.kernel}; ` +
      `load average at start ${machine.loadAverageAtStart.join(" ")}, at end ${report.loadAverageAtEnd.join(" ")}. ` +
      "Postgres, Redis, the processes and the load generator all share this machine.",
    "",
    `Versions: ${Object.entries(versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}.`,
    "",
    `Settings: ${JSON.stringify(report.settings)}`,
    "",
    "| scenario | connections | req/s | p50 ms | p99 ms | errors | CPU µs per request: web / worker / postgres / redis / loadgen / machine |",
    "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ...[
      loadRow("ceiling (insert + add per request)", results.ceiling),
      loadRow("accept, worker stopped", results.accept64),
      loadRow("accept, worker stopped, SENDER_VERIFICATION=off", results.accept64SendersOff),
      loadRow("accept, worker stopped, a new Idempotency-Key each", results.accept64Idempotent),
      loadRow("accept, worker running", results.accept64Worker),
      loadRow("accept, worker stopped", results.accept256),
      loadRow("read GET /messages/{id}", results.read),
    ].filter((l) => l !== undefined),
    "",
  ];
  if (results.ceiling && results.accept64) {
    lines.push(
      `accept ÷ ceiling at 64 connections: ${fmt(results.accept64.requestsPerS / results.ceiling.requestsPerS, 2)}`,
      "",
    );
  }
  if (results.accept64 && results.accept64SendersOff) {
    const on = results.accept64;
    const off = results.accept64SendersOff;
    lines.push(
      `Sender check (SENDER_VERIFICATION=required ÷ off, 64 connections): req/s ${fmt(on.requestsPerS / off.requestsPerS, 2)}, ` +
        `web CPU per request ${fmt((on.cpuUsPerRequest.web ?? 0) / Math.max(1, off.cpuUsPerRequest.web ?? 0), 2)}`,
      "",
    );
  }
  const e2e = results.endToEnd;
  if (e2e) {
    lines.push(
      `End to end: ${fmt(e2e.messages)} messages sent by 64 connections as fast as accepted (${fmt(e2e.accept.errors)} errors), ` +
        `accepted at ${fmt(e2e.acceptedPerS)} msg/s; first accepted → last final event ${e2e.events.spanS} s = **${fmt(e2e.messagesPerS)} msg/s** ` +
        `(wall clock until the poll saw all final: ${e2e.wallS} s${e2e.allFinalWithinBound ? "" : `; **only ${fmt(e2e.events.messages)} final within the 120 s bound**`}); ` +
        `accept→final p50 ${fmt(e2e.events.acceptToFinalMs.p50)} ms, **p99 ${fmt(e2e.events.acceptToFinalMs.p99)} ms**, ` +
        `max ${fmt(e2e.events.acceptToFinalMs.max)} ms (of which accepted → first attempt: p50 ${fmt(e2e.events.acceptToFirstAttemptMs.p50)} ms, p99 ${fmt(e2e.events.acceptToFirstAttemptMs.p99)} ms); outcomes ${JSON.stringify(e2e.events.byStatus)}. ` +
        `CPU µs per message: ${JSON.stringify(e2e.cpuUsPerMessage)}; WAL per message: ${fmt(e2e.walBytesPerMessage)} bytes.`,
      "",
    );
  }
  const b = results.acceptBatch;
  if (b) {
    const perMessage = (r: LoadScenarioResult, items: number) =>
      Object.fromEntries(Object.entries(r.cpuUsPerRequest).map(([k, v]) => [k, Math.round(v / items)]));
    lines.push(
      `Batch sends: ${fmt(b.batch.requests)} batches of ${b.batch.itemsPerRequest} SMS by ${b.batch.connections} connections ` +
        `(${fmt(b.batch.errors)} errors, batch p50 ${fmt(b.batch.latencyMs.p50, 1)} ms, p99 ${fmt(b.batch.latencyMs.p99, 1)} ms): ` +
        `**${fmt(b.batch.messagesPerS)} messages/s**, against ${fmt(b.single.requestsPerS)} req/s of single sends by ${b.single.connections} connections ` +
        `in the same run (${fmt(b.single.errors)} errors, p99 ${fmt(b.single.latencyMs.p99, 1)} ms): ×${fmt(b.ratio, 2)}. ` +
        `CPU µs per message, batch: ${JSON.stringify(perMessage(b.batch, b.batch.itemsPerRequest))}; single: ${JSON.stringify(perMessage(b.single, 1))}.`,
      "",
    );
  }
  lines.push(...webhookParagraphs(results.endToEndWebhooks, results.webhooksHanging));
  const cl = results.endToEndCluster;
  if (cl) {
    lines.push(
      `End to end on a Redis Cluster of ${cl.redis.masters} masters (no replicas), QUEUE_SHARDS=${cl.redis.shards} ` +
        `(redis: every redis-server of the machine, the cluster's three included), beside e2e on one node, in the order ` +
        `one node, cluster, cluster, one node. ${interleavedRuns(cl, "cluster", "one node")}`,
      "",
    );
  }
  const p = results.priority;
  if (p) {
    lines.push(
      `Priority: ${fmt(p.flood.messages)} NEWS_UPDATE (low) accepted with the worker stopped at ${fmt(p.flood.accept.requestsPerS)} req/s; ` +
        `worker started; ${p.otp.messages} OTP at ${p.otp.ratePerS}/s while they drained (${fmt(p.lowUnfinishedAtLastOtp)} low still unfinished at the last OTP): ` +
        `OTP accept→final p50 ${fmt(p.otp.events.acceptToFinalMs.p50)} ms, **p99 ${fmt(p.otp.events.acceptToFinalMs.p99)} ms**, ` +
        `max ${fmt(p.otp.events.acceptToFinalMs.max)} ms (accepted → first attempt p50 ${fmt(p.otp.events.acceptToFirstAttemptMs.p50)} ms, p99 ${fmt(p.otp.events.acceptToFirstAttemptMs.p99)} ms); ` +
        `the ${fmt(p.otp.underFlood.messages)} OTPs accepted before the last low message was final: p50 ${fmt(p.otp.underFlood.acceptToFinalMs.p50)} ms, p99 ${fmt(p.otp.underFlood.acceptToFinalMs.p99)} ms; flood drained ${p.floodDrainS === null ? "not within the bound" : `${p.floodDrainS} s after the worker started`}.`,
      "",
    );
  }
  const noisy = results.noisyTemplates;
  if (noisy) {
    lines.push(
      `Noisy templates (${noisy.durationS} s, WORKER_CONCURRENCY=${noisy.workerConcurrency}): tenant A kept ${noisy.attacker.previewsInFlight} previews of a template that takes the full render deadline in flight ` +
        `(answers ${JSON.stringify(noisy.attacker.previewStatuses)}) and sent ${fmt(noisy.attacker.emailsSent)} such e-mails (${JSON.stringify(noisy.attacker.emailsByStatus)}); ` +
        `tenant B's trivial preview: ${fmt(noisy.preview.requests)} requests, ${fmt(noisy.preview.errors)} errors, p50 ${fmt(noisy.preview.p50, 1)} ms, **p99 ${fmt(noisy.preview.p99, 1)} ms**, max ${fmt(noisy.preview.max, 1)} ms; ` +
        `B's OTP SMS: ${fmt(noisy.otp.sent)} sent (${JSON.stringify(noisy.otp.byStatus)}), accept→success p50 ${fmt(noisy.otp.p50, 1)} ms, **p99 ${fmt(noisy.otp.p99, 1)} ms**, max ${fmt(noisy.otp.max, 1)} ms.`,
      "",
    );
  }
  const nn = results.noisyNeighbour;
  if (nn) {
    const line = (name: string, r: NoisyNeighbourResult["fair"]) =>
      `${name} (QUEUE_WAITING_LIMIT ${r.waitingLimit}): A ${fmt(r.a.messages)} accepted in ${r.a.acceptedS} s, drained in **${r.a.drainS} s** ${JSON.stringify(r.a.byStatus)}` +
      (r.b
        ? `; B ${fmt(r.b.messages)} at 50/s, accept→success p50 ${fmt(r.b.acceptToSuccessMs.p50)} ms, **p99 ${fmt(r.b.acceptToSuccessMs.p99)} ms**, max ${fmt(r.b.acceptToSuccessMs.max)} ms ${JSON.stringify(r.b.byStatus)}`
        : "");
    lines.push(
      `Noisy neighbour: ${line("fair", nn.fair)}. ${line("unfair", nn.unfair)}. ${line("A alone, fair", nn.aloneFair)}.`,
      "",
    );
  }
  const checks = targets(report);
  if (checks.length > 0) {
    lines.push("| target | measured | goal | met |", "| --- | ---: | ---: | :---: |");
    for (const t of checks)
      lines.push(`| ${t.what} | ${t.measured} | ${t.target} | ${t.met ? "yes" : "**no**"} |`);
    lines.push("");
  }
  return `${lines.join("\n")}\n`;
}

/** Each run of an interleaved comparison in a line: its messages/s, latency and CPU per message. */
function interleavedRuns(compared: Interleaved<EndToEndResult>, variant: string, baseline: string): string {
  const line = (name: string, r: EndToEndResult) =>
    `${name}: ${fmt(r.messages)} messages (${fmt(r.accept.errors)} errors), first accepted → last final event ${r.events.spanS} s = ` +
    `**${fmt(r.messagesPerS)} msg/s**${r.allFinalWithinBound ? "" : ` (**only ${fmt(r.events.messages)} final within the 120 s bound**)`}, ` +
    `accept→final p50 ${fmt(r.events.acceptToFinalMs.p50)} ms, p99 ${fmt(r.events.acceptToFinalMs.p99)} ms, outcomes ${JSON.stringify(r.events.byStatus)}, ` +
    `CPU µs per message ${JSON.stringify(r.cpuUsPerMessage)}`;
  const [a1, a2] = compared.baseline;
  const [b1, b2] = compared.variant;
  const runs: Array<[string, EndToEndResult | undefined]> = [
    [`${baseline} 1`, a1],
    [`${variant} 1`, b1],
    [`${variant} 2`, b2],
    [`${baseline} 2`, a2],
  ];
  return `${runs.flatMap(([name, r]) => (r ? [line(name, r)] : [])).join("; ")}.`;
}

function receiptsLine(r: Receipts): string {
  const latency =
    r.received === 0
      ? "**no receipts**: no event→receipt latency to report"
      : `event→receipt p50 ${fmt(r.eventToReceiptMs.p50, 1)} ms, **p99 ${fmt(r.eventToReceiptMs.p99, 1)} ms**, max ${fmt(r.eventToReceiptMs.max, 1)} ms (an endpoint's p50 ${fmt(r.endpointP50Ms.lowest, 1)} to ${fmt(r.endpointP50Ms.highest, 1)} ms)`;
  return (
    `receipts: ${fmt(r.received)} of ${fmt(r.expected)} final events delivered at least once` +
    `${r.allWithinBound ? "" : ` (**${fmt(r.expected - r.received)} missing** ${r.boundS} s after the last final event)`}, ` +
    `${fmt(r.duplicates)} duplicates; ${latency}` +
    `${r.trailS === null ? "" : `; the last receipt ${r.trailS} s after the last final event`}; ` +
    `signatures checked with standardwebhooks ${fmt(r.signatures.checked)} (a sample), ${fmt(r.signatures.failed)} failed; ` +
    `${fmt(r.wrongOrganization)} bodies of another organization, ${fmt(r.unparsable)} unparsable; ` +
    `${fmt(r.requests)} requests in all to ${fmt(r.paths)} paths (${fmt(r.otherRequests)} of events outside the measured window)`
  );
}

function untilReceiptsLine(until: UntilSettled, r: Receipts): string {
  const why = r.allWithinBound
    ? "the dispatcher's work that trails the messages included"
    : "**the wait ran to its bound, so this includes idle time: not a cost per message**";
  return `until the receipts were in (${until.waitS} s more; ${why}): ${JSON.stringify(until.cpuUsPerMessage)}`;
}

function webhookParagraphs(
  withHooks: EndToEndWebhooksResult | undefined,
  hanging: WebhooksHangingResult | undefined,
): string[] {
  const lines: string[] = [];
  if (withHooks) {
    lines.push(
      `End to end with status webhooks beside e2e without, in the order without, with, with, without. ${interleavedRuns(withHooks, "with", "without")}`,
      "",
    );
  }
  for (const [index, run] of (withHooks?.variant ?? []).entries()) {
    lines.push(
      `Status webhooks' run ${index + 1}: ${fmt(run.endpoints)} endpoints (one per organization, final events) on the local receiver; ` +
        `${receiptsLine(run.receipts)}; ${untilReceiptsLine(run.untilReceipts, run.receipts)}.`,
      "",
    );
  }
  if (hanging) {
    const h = hanging.hanging;
    lines.push(
      `Status webhooks with a hanging endpoint (${hanging.durationS} s, ${hanging.ratePerS} SMS/s from each of two organizations, worker's webhook settings at their defaults): ` +
        `B (healthy endpoint) ${fmt(hanging.accept.healthy.statuses["202"] ?? 0)} accepted, ${receiptsLine(hanging.healthy)}. ` +
        `A (endpoint never answers) ${fmt(hanging.accept.hanging.statuses["202"] ?? 0)} accepted, ${fmt(h.finalEvents)} final events owed to its endpoint: ` +
        `the receiver got ${fmt(h.requests)} requests, at most ${fmt(h.maxOpen)} held open at once, ${fmt(h.openNow)} still open at the end; ` +
        `${fmt(h.closedBySender)} closed by the sender after ${fmt(h.heldMs.p50)} ms (median; max ${fmt(h.heldMs.max)} ms); ` +
        `the service recorded attempts ${JSON.stringify(h.attemptsRecorded)} and held ${fmt(h.deliveriesLeft)} deliveries for it at the end. ` +
        `CPU µs per message (A's and B's) until all final: ${JSON.stringify(hanging.cpuUsPerMessage)}; ` +
        `${untilReceiptsLine(hanging.untilReceipts, hanging.healthy)}.`,
      "",
    );
  }
  return lines;
}
