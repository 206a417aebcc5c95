import { describe, expect, it } from "vitest";
import { loadClientOnboardingConfig } from "../../../src/client-onboarding/config.js";
import { ConfigError } from "../../../src/runtime/config.js";

describe("client-onboarding service configuration", () => {
  it("uses the documented defaults when nothing is set (a missing NODE_ENV is production)", () => {
    const config = loadClientOnboardingConfig({});
    expect(config).toMatchObject({
      PORT: 3100,
      ONBOARD_RATE_LIMIT: 20,
      ONBOARD_RATE_WINDOW_MS: 60_000,
      TRUST_PROXY: false,
      LOG_LEVEL: "info",
      NODE_ENV: "production",
    });
  });

  it("reads numbers and booleans from their string form", () => {
    const config = loadClientOnboardingConfig({ PORT: "8080", ONBOARD_RATE_LIMIT: "5", TRUST_PROXY: "true" });
    expect(config).toMatchObject({ PORT: 8080, ONBOARD_RATE_LIMIT: 5, TRUST_PROXY: true });
  });

  it.each([
    ["ONBOARD_RATE_LIMIT", "0"],
    ["ONBOARD_RATE_LIMIT", "many"],
    ["ONBOARD_RATE_WINDOW_MS", "10"],
    ["TRUST_PROXY", "yes"],
    ["PORT", "70000"],
    ["DATABASE_URL", "not a url"],
    ["LOG_LEVEL", "loud"],
  ])("refuses %s=%s with a message naming the variable", (name, value) => {
    expect(() => loadClientOnboardingConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadClientOnboardingConfig({ [name]: value })).toThrow(
      new RegExp(`^Invalid configuration:\\n  ${name}: `),
    );
  });

  it("does not need the web process's settings (Redis, providers, onboarding token)", () => {
    expect(() => loadClientOnboardingConfig({ NODE_ENV: "production" })).not.toThrow();
  });
});
