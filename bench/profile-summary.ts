import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/**
 * Summarises V8 CPU profiles (`node --cpu-prof`, or `npm run bench -- --profile`): self time by
 * package or project folder, and the top functions. Usage: tsx bench/profile-summary.ts <file or folder>
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
}

function files(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => join(path, f));
}

for (const arg of process.argv.slice(2)) for (const file of files(arg)) summarise(file);
