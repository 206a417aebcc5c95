import autocannon, { type Options } from "autocannon";
import type { BenchProcess } from "./stack.js";
import { cpuMs, cpuMsWithReaped, machineCpuMs, pidsNamed, postgresBackendsCpuMs } from "./system.js";

export interface LoadResult {
  requests: number;
  durationS: number;
  requestsPerS: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** Connection errors, time-outs and responses with an unexpected status. */
  errors: number;
  statuses: Record<string, number>;
}

export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return Math.round((sorted[index] as number) * 100) / 100;
}

/**
 * Runs autocannon in this process and measures every response's latency itself (autocannon's own
 * histogram rounds to whole milliseconds). `expectedStatus` responses count as successes.
 */
export async function load(options: Options & { expectedStatus: number }): Promise<LoadResult> {
  const { expectedStatus, ...rest } = options;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const instance = autocannon({ timeout: 10, ...rest });
  instance.on("response", (_client: unknown, status: number, _bytes: number, responseTime: number) => {
    latencies.push(responseTime);
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  const started = process.hrtime.bigint();
  const result = await instance;
  const durationS = Number(process.hrtime.bigint() - started) / 1e9;
  const sorted = Float64Array.from(latencies).sort();
  const completed = latencies.length;
  const unexpected = completed - (statuses[expectedStatus] ?? 0);
  return {
    requests: completed,
    durationS: Math.round(durationS * 100) / 100,
    requestsPerS: Math.round(completed / durationS),
    latencyMs: {
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: percentile(sorted, 100),
    },
    errors: result.errors + result.timeouts + unexpected,
    statuses,
  };
}

/** CPU milliseconds used during a window, by component. Postgres and Redis are machine-wide. */
export interface CpuUsage {
  web: number;
  worker: number;
  postgres: number;
  redis: number;
  loadGenerator: number;
  machineBusy: number;
  machineTotal: number;
  /** The webhook receiver's child process (bench/lib/webhook-receiver.ts), where one runs. */
  receiver?: number;
  /** The backends of the run's own database (`postgres` is every Postgres process of the machine). */
  postgresOwn?: number;
}

export function cpuSnapshot(processes: {
  web?: BenchProcess;
  worker?: BenchProcess;
  receiver?: { cpuMs: () => number };
  /** The run's database: its backends' CPU is reported apart (`postgresOwn`). */
  database?: string;
}): CpuUsage {
  const self = process.cpuUsage();
  const machine = machineCpuMs();
  const sum = (pids: number[]) => pids.reduce((total, pid) => total + cpuMs(pid), 0);
  return {
    web: processes.web?.cpuMs() ?? 0,
    worker: processes.worker?.cpuMs() ?? 0,
    postgres: pidsNamed("postgres").reduce((total, pid) => total + cpuMsWithReaped(pid), 0),
    redis: sum(pidsNamed("redis-server")),
    loadGenerator: (self.user + self.system) / 1000,
    machineBusy: machine.busy,
    machineTotal: machine.total,
    ...(processes.receiver ? { receiver: processes.receiver.cpuMs() } : {}),
    ...(processes.database ? { postgresOwn: postgresBackendsCpuMs(processes.database) } : {}),
  };
}

export function cpuDelta(before: CpuUsage, after: CpuUsage): CpuUsage {
  const keys = Object.keys(before) as Array<keyof CpuUsage>;
  return Object.fromEntries(
    keys.map((k) => [k, Math.round((after[k] ?? 0) - (before[k] ?? 0))]),
  ) as unknown as CpuUsage;
}

/** Samples the resident memory of web and worker every 200 ms and keeps the peaks. */
export class RssMonitor {
  peak = { webTotalMiB: 0, webLargestMiB: 0, workerMiB: 0 };
  readonly #timer: NodeJS.Timeout;

  constructor(processes: () => { web?: BenchProcess; worker?: BenchProcess }) {
    this.#timer = setInterval(() => {
      const { web, worker } = processes();
      if (web) {
        const rss = web.rss();
        this.peak.webTotalMiB = Math.max(this.peak.webTotalMiB, Math.round(rss.totalMiB));
        this.peak.webLargestMiB = Math.max(this.peak.webLargestMiB, Math.round(rss.largestMiB));
      }
      if (worker) this.peak.workerMiB = Math.max(this.peak.workerMiB, Math.round(worker.rss().totalMiB));
    }, 200);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
