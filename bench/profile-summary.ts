import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

/**
 * Summarises V8 CPU profiles (`node --cpu-prof`, or `npm run bench -- --profile`): self time by
 * package or project folder, and the top functions. Usage: tsx bench/profile-summary.ts <file or folder>
 *   --inclusive        also the top functions by inclusive time (themselves and what they call)
 *   --callers <name>   the call paths that lead to the samples of the functions named <name>
 *                      (e.g. `writev`: which writes are HTTP responses, which Postgres statements)
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

function owner(url: string): string {
  if (url === "") return "(native / V8)";
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  const modules = url.lastIndexOf("node_modules/");
  if (modules >= 0) {
    const rest = url.slice(modules + "node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  const dist = /\/dist\/(.+)$/.exec(url)?.[1] ?? url;
  return `project: ${dist.split("/").slice(0, -1).join("/") || dist}`;
}

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: { inclusive: { type: "boolean", default: false }, callers: { type: "string" } },
});

function summarise(file: string): void {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const totalMs = (profile.endTime - profile.startTime) / 1000;
  const perSampleMs = totalMs / Math.max(1, profile.samples.length);
  const byOwner = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const ms = (node.hitCount ?? 0) * perSampleMs;
    const name = node.callFrame.functionName || "(anonymous)";
    if (name === "(idle)" || name === "(program)" || name === "(garbage collector)") {
      byOwner.set(name, (byOwner.get(name) ?? 0) + ms);
      if (name !== "(idle)") busy += ms;
      continue;
    }
    busy += ms;
    const key = owner(node.callFrame.url);
    byOwner.set(key, (byOwner.get(key) ?? 0) + ms);
    const fn = `${name} (${key}${node.callFrame.url ? `:${node.callFrame.lineNumber + 1}` : ""})`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
  }
  const pct = (ms: number) => `${((100 * ms) / Math.max(1, busy)).toFixed(1).padStart(5)}%`;
  console.log(`\n${file}\n  wall ${totalMs.toFixed(0)} ms, busy (not idle) ${busy.toFixed(0)} ms`);
  console.log("  self time by owner (share of busy):");
  for (const [key, ms] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    if (key !== "(idle)") console.log(`    ${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${key}`);
  }
  console.log("  top functions by self time:");
  for (const [key, ms] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
    console.log(`    ${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${key}`);
  }
  if (options.inclusive || options.callers) paths(profile, perSampleMs, pct);
}

/** Inclusive time per function, and the call paths to `--callers`, from each node's ancestry. */
function paths(profile: Profile, perSampleMs: number, pct: (ms: number) => string): void {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const frame = (node: ProfileNode) =>
    `${node.callFrame.functionName || "(anonymous)"} (${owner(node.callFrame.url)}:${node.callFrame.lineNumber + 1})`;
  const inclusive = new Map<string, number>();
  const callers = new Map<string, number>();
  for (const node of profile.nodes) {
    const ms = (node.hitCount ?? 0) * perSampleMs;
    if (ms === 0 || node.callFrame.functionName === "(idle)") continue;
    const seen = new Set<string>();
    const chain: string[] = [];
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const current = byId.get(id) as ProfileNode;
      const name = frame(current);
      if (!seen.has(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + ms);
      seen.add(name);
      if (id !== node.id && chain.length < 8) chain.push(name);
    }
    if (options.callers && node.callFrame.functionName === options.callers) {
      const path = chain.join("\n        < ");
      callers.set(path, (callers.get(path) ?? 0) + ms);
    }
  }
  if (options.inclusive) {
    console.log("  top functions by inclusive time:");
    for (const [key, ms] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
      console.log(`    ${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${key}`);
    }
  }
  if (options.callers) {
    console.log(`  call paths to ${options.callers}:`);
    for (const [path, ms] of [...callers].sort((a, b) => b[1] - a[1]).slice(0, 8)) {
      console.log(`    ${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  < ${path}`);
    }
  }
}

function files(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => join(path, f));
}

for (const arg of positionals) for (const file of files(arg)) summarise(file);
