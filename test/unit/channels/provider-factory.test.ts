import { describe, expect, it } from "vitest";
import { providerFactory, requiredSettings } from "../../../src/channels/providers/factory.js";
import type { Provider } from "../../../src/channels/providers/provider.js";
import { TableSimulator } from "../../../src/channels/providers/simulator.js";
import { ConfigError } from "../../../src/runtime/config.js";

interface Note {
  messageId: string;
  attempt: number;
}

interface NoteConfig {
  NOTE_PROVIDER: "simulator" | "pigeon";
  PIGEON_NAME: string | undefined;
}

class NoteSimulator extends TableSimulator<Note> {
  constructor(options = {}) {
    super({ cases: {}, recipients: () => [], successId: (digest) => digest }, options);
  }
}

const pigeon = (name: string): Provider<Note> => ({
  name: `pigeon ${name}`,
  send: async () => ({ ok: true, provider: "pigeon", providerMessageId: "coo" }),
});

const createNoteProvider = providerFactory<NoteConfig, "NOTE_PROVIDER", Note>(
  "NOTE_PROVIDER",
  NoteSimulator,
  {
    pigeon(config, chosen) {
      const [name] = requiredSettings(config, ["PIGEON_NAME"], chosen);
      return pigeon(name);
    },
  },
);

describe("providerFactory", () => {
  it("builds the simulator, passing the rate-limit delay through", async () => {
    const provider = createNoteProvider(
      { NOTE_PROVIDER: "simulator", PIGEON_NAME: undefined },
      { simulatorRateLimitRetryAfterMs: 5 },
    );
    expect(provider).toBeInstanceOf(NoteSimulator);
  });

  it("builds the real provider the setting names, from the config", () => {
    expect(createNoteProvider({ NOTE_PROVIDER: "pigeon", PIGEON_NAME: "Cher Ami" }).name).toBe(
      "pigeon Cher Ami",
    );
  });

  it("refuses a real provider without its settings, naming them and the choice", () => {
    for (const PIGEON_NAME of [undefined, ""]) {
      expect(() => createNoteProvider({ NOTE_PROVIDER: "pigeon", PIGEON_NAME })).toThrow(
        new ConfigError("PIGEON_NAME: required when NOTE_PROVIDER=pigeon"),
      );
    }
  });

  it("refuses a provider it does not know (a config assembled from untyped input)", () => {
    for (const name of ["carrier", "toString", undefined]) {
      const config = { NOTE_PROVIDER: name, PIGEON_NAME: "x" } as unknown as NoteConfig;
      expect(() => createNoteProvider(config)).toThrow(
        new ConfigError(`NOTE_PROVIDER: unknown provider ${JSON.stringify(name)}`),
      );
    }
  });
});

describe("requiredSettings", () => {
  it("gives the values in order, or names every required setting when one is missing", () => {
    const config = { A: "1", B: "2", C: undefined as string | undefined };
    expect(requiredSettings(config, ["B", "A"], "X=y")).toEqual(["2", "1"]);
    expect(() => requiredSettings(config, ["A", "C"], "X=y")).toThrow("A / C: required when X=y");
  });
});
