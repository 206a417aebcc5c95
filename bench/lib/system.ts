import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "..");
const CLOCK_TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  loadAverageAtStart: number[];
}

export function machineInfo(): MachineInfo {
  return {
    cpuModel: cpus()[0]?.model ?? "unknown",
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: readFileSync("/proc/version", "utf8").split(" ").slice(0, 3).join(" "),
    loadAverageAtStart: loadavg().map((v) => Math.round(v * 100) / 100),
  };
}

export function loadAverage(): number[] {
  return loadavg().map((v) => Math.round(v * 100) / 100);
}

/** Versions of the runtime and of the packages on the measured path. */
export function packageVersions(): Record<string, string> {
  const versionOf = (name: string) => {
    try {
      const pkg = JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")) as {
        version: string;
      };
      return pkg.version;
    } catch {
      return "missing";
    }
  };
  const names = [
    "hono",
    "@hono/node-server",
    "bullmq",
    "ioredis",
    "postgres",
    "drizzle-orm",
    "zod",
    "libphonenumber-js",
    "autocannon",
  ];
  return { node: process.version, ...Object.fromEntries(names.map((n) => [n, versionOf(n)])) };
}

export function gitRevision(directory = root): string {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: directory }).toString().trim();
    // Tracked files only: the results this run writes, or a worktree's node_modules link, change no code.
    const dirty =
      execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: directory })
        .toString()
        .trim() !== "";
    return dirty ? `${head} (uncommitted changes)` : head;
  } catch {
    return "unknown";
  }
}

/** Resident set size of one process, in MiB; undefined once it is gone. */
export function rssMiB(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    return kib ? Number(kib) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A process and its descendants (node:cluster workers of a web process). */
export function processTree(pid: number): number[] {
  const result = [pid];
  for (let index = 0; index < result.length; index++) {
    const current = result[index] as number;
    let children: string[] = [];
    try {
      for (const task of readdirSync(`/proc/${current}/task`)) {
        children = children.concat(
          readFileSync(`/proc/${current}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean),
        );
      }
    } catch {
      // the process exited
    }
    result.push(...children.map(Number));
  }
  return result;
}

/** CPU time (user + system) a process has used so far, in milliseconds. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[11] and fields[12] are utime and stime (fields 14 and 15 of proc(5)).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * CPU time a process has used so far plus that of its children it has reaped, in milliseconds.
 * Postgres backends exit when their connection closes, and their CPU then moves into the
 * postmaster's reaped-children time: summed over every postgres process this way, the total only
 * grows, where the live processes' own time alone drops whenever a backend exits.
 */
export function cpuMsWithReaped(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime, stime, cutime, cstime: fields 14 to 17 of proc(5).
    const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * The CPU time so far of the Postgres backends connected to `database` (their command line names
 * it): the service's own share of Postgres, which other databases' work on a shared machine does
 * not inflate. Autovacuum, the WAL writer and the checkpointer are left out (they serve every
 * database), and so is a backend that exited (its time is in the machine-wide figure only).
 */
export function postgresBackendsCpuMs(database: string): number {
  const marker = ` ${database} `;
  let total = 0;
  for (const pid of pidsNamed("postgres")) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").includes(marker))
        total += cpuMs(pid);
    } catch {
      // gone
    }
  }
  return total;
}

/** Every process whose command name is `name` (e.g. postgres backends, redis-server). */
export function pidsNamed(name: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

/** Busy and total CPU time of the whole machine so far, in milliseconds. */
export function machineCpuMs(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const values = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = values;
  const busy = user + nice + system + irq + softirq + steal;
  const toMs = (ticks: number) => (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
  return { busy: toMs(busy), total: toMs(busy + idle + iowait) };
}
