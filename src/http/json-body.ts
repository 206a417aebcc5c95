import type { Context } from "hono";
import type { z } from "zod";
import { readBodyText } from "./body-limit.js";
import { ApiError, describeZodError } from "./errors.js";

export const MAX_BODY_BYTES = 64 * 1024;

/** Reads a JSON body and validates it: 415 for another content type, 400 for bad JSON or schema. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const contentType = c.req.header("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    throw new ApiError(415, "Content-Type must be application/json");
  }
  const text = await readBodyText(c);
  let json: unknown;
  let hasNul = false;
  try {
    // Postgres text cannot hold U+0000: refuse it here rather than fail at the insert.
    json = JSON.parse(text, (key, value: unknown) => {
      if (key.includes("\0") || (typeof value === "string" && value.includes("\0"))) hasNul = true;
      return value;
    });
  } catch {
    throw new ApiError(400, "Malformed JSON body");
  }
  if (hasNul) throw new ApiError(400, "Strings must not contain the NUL character (\\u0000)");
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new ApiError(400, describeZodError(parsed.error));
  return parsed.data;
}
