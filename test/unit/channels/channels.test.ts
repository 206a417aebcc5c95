import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { channelNamed, channels } from "../../../src/channels/index.js";
import { CHANNELS } from "../../../src/domain/events.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * The modules a file loads when it runs, followed from `entry`: static imports and re-exports,
 * without type-only ones (erased) and without `import()` (loaded only when called).
 */
function loadedFrom(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const pending = [resolve(root, entry)];
  const statement = /^(?:import|export)\s+(?!type\s)(?:[^;]*?\s+from\s+)?["']([^"']+)["']/gms;
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (files.has(file)) continue;
    files.add(file);
    for (const [, specifier = ""] of readFileSync(file, "utf8").matchAll(statement)) {
      if (specifier.startsWith(".")) pending.push(resolve(dirname(file), specifier.replace(/\.js$/, ".ts")));
      else packages.add(specifier);
    }
  }
  return { files, packages };
}

describe("the channel list", () => {
  it("holds every channel the domain knows, once, each found by its name", () => {
    expect(channels.map((channel) => channel.name).sort()).toEqual([...CHANNELS].sort());
    for (const name of CHANNELS) expect(channelNamed(name).name).toBe(name);
  });

  it("an unknown name is an error", () => {
    expect(() => channelNamed("pigeon" as never)).toThrow('unknown channel "pigeon"');
  });

  it("the web process loads no provider code: providers are created in the worker only", () => {
    // What an API process runs (`server.ts` loads it with `import()`).
    const { files, packages } = loadedFrom("src/api/api-process.ts");
    expect(files).toContain(resolve(root, "src/channels/index.ts"));
    const providerFiles = [...files].filter((file) => /\/channels\/(?:[^/]+\/)?providers\//.test(file));
    expect(providerFiles).toEqual([]);
    expect([...packages].filter((name) => /nodemailer|web-push/.test(name))).toEqual([]);
  });
});
