import pino, { type Logger } from "pino";

export type { Logger };

/** Structured JSON logs. Secrets are redacted wherever they might appear in a logged object. */
export function createLogger(options: { level: string; name: string }): Logger {
  return pino({
    name: options.name,
    level: options.level,
    redact: {
      paths: [
        "apiKey",
        "*.apiKey",
        "headers['x-api-key']",
        "headers.authorization",
        "req.headers['x-api-key']",
        "req.headers.authorization",
        "body",
        "*.body",
      ],
      censor: "[redacted]",
    },
  });
}
