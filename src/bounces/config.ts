import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { z } from "zod";
import { ConfigError, configSchema, parseEnvironment } from "../runtime/config.js";

/**
 * The `bounces` process's settings: only what it needs (Postgres and its own), so the web and
 * worker's requirements in production (providers, master keys, Redis) are not asked of it. The
 * settings themselves are declared once, with the others (src/runtime/config.ts).
 */
export const bouncesConfigSchema = configSchema.pick({
  NODE_ENV: true,
  DATABASE_URL: true,
  DATABASE_STATEMENT_TIMEOUT_MS: true,
  LOG_LEVEL: true,
  SHUTDOWN_TIMEOUT_MS: true,
  BOUNCE_DOMAIN: true,
  BOUNCE_LOCAL_PART: true,
  BOUNCES_PORT: true,
  BOUNCES_HOST: true,
  BOUNCES_MAX_CLIENTS: true,
  BOUNCES_MAX_CONNECTIONS_PER_IP: true,
  BOUNCES_FEEDBACK_ADDRESS: true,
  BOUNCES_TLS_KEY_FILE: true,
  BOUNCES_TLS_CERT_FILE: true,
});

export type BouncesConfig = z.infer<typeof bouncesConfigSchema> & { BOUNCE_DOMAIN: string };

/**
 * Parses the environment; throws a `ConfigError` naming every bad variable (BOUNCE_DOMAIN is
 * required; the feedback address must be at it and not look like a return path; the TLS files
 * come both or neither).
 */
export function loadBouncesConfig(env: NodeJS.ProcessEnv = process.env): BouncesConfig {
  const config = parseEnvironment(bouncesConfigSchema, env);
  const problems: string[] = [];
  const domain = config.BOUNCE_DOMAIN;
  if (!domain) problems.push("BOUNCE_DOMAIN: required by the bounces process");
  const feedback = config.BOUNCES_FEEDBACK_ADDRESS;
  if (feedback && domain) {
    const at = feedback.lastIndexOf("@");
    if (feedback.slice(at + 1) !== domain)
      problems.push(`BOUNCES_FEEDBACK_ADDRESS: must be an address at BOUNCE_DOMAIN (${domain})`);
    else if (feedback.startsWith(`${config.BOUNCE_LOCAL_PART}+`))
      problems.push(
        `BOUNCES_FEEDBACK_ADDRESS: must not start with BOUNCE_LOCAL_PART+ (${config.BOUNCE_LOCAL_PART}+: a return path)`,
      );
  }
  if (Boolean(config.BOUNCES_TLS_KEY_FILE) !== Boolean(config.BOUNCES_TLS_CERT_FILE)) {
    problems.push(
      config.BOUNCES_TLS_KEY_FILE
        ? "BOUNCES_TLS_CERT_FILE: required when BOUNCES_TLS_KEY_FILE is set (set both or neither)"
        : "BOUNCES_TLS_KEY_FILE: required when BOUNCES_TLS_CERT_FILE is set (set both or neither)",
    );
  }
  if (problems.length > 0 || !domain)
    throw new ConfigError(`Invalid configuration:\n  ${problems.join("\n  ")}`);
  return { ...config, BOUNCE_DOMAIN: domain };
}

/** The listener's certificate for STARTTLS: PEM text of the private key and the certificate (chain). */
export interface BouncesTls {
  key: string;
  cert: string;
}

/**
 * Reads `BOUNCES_TLS_KEY_FILE` and `BOUNCES_TLS_CERT_FILE` (undefined when neither is set) and
 * checks that they make a TLS context (PEM that parses, a key that matches the certificate), so a
 * bad file stops start-up with a `ConfigError` naming it, not the first mail server's STARTTLS.
 */
export function loadBouncesTls(
  config: Pick<BouncesConfig, "BOUNCES_TLS_KEY_FILE" | "BOUNCES_TLS_CERT_FILE">,
  readFile: (path: string) => string = (path) => readFileSync(path, "utf8"),
): BouncesTls | undefined {
  const keyFile = config.BOUNCES_TLS_KEY_FILE;
  const certFile = config.BOUNCES_TLS_CERT_FILE;
  if (!keyFile || !certFile) return undefined;
  const read = (name: string, path: string) => {
    try {
      return readFile(path);
    } catch (error) {
      const why = error instanceof Error && "code" in error ? String(error.code) : "unreadable";
      throw new ConfigError(`Invalid configuration:\n  ${name}: cannot read ${path} (${why})`);
    }
  };
  const tls = { key: read("BOUNCES_TLS_KEY_FILE", keyFile), cert: read("BOUNCES_TLS_CERT_FILE", certFile) };
  const refuse = (name: string, what: string, error?: unknown) => {
    const why = error instanceof Error ? ` (${error.message})` : "";
    return new ConfigError(`Invalid configuration:\n  ${name}: ${what}${why}`);
  };
  // Each file on its own (Node's TLS context takes an empty key or certificate as none, and would
  // then offer a STARTTLS whose every handshake fails), so the message names the one at fault.
  let key: KeyObject;
  let cert: X509Certificate;
  try {
    key = createPrivateKey(tls.key);
  } catch (error) {
    throw refuse("BOUNCES_TLS_KEY_FILE", `${keyFile} is not a PEM private key`, error);
  }
  try {
    cert = new X509Certificate(tls.cert);
  } catch (error) {
    throw refuse("BOUNCES_TLS_CERT_FILE", `${certFile} is not a PEM certificate`, error);
  }
  if (!cert.checkPrivateKey(key)) {
    throw refuse("BOUNCES_TLS_KEY_FILE", `${keyFile} is not the private key of ${certFile}'s certificate`);
  }
  try {
    createSecureContext(tls);
  } catch (error) {
    throw refuse("BOUNCES_TLS_CERT_FILE", `${certFile} and its key do not make a TLS context`, error);
  }
  return tls;
}
