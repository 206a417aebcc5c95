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
  try {
    json = JSON.parse(text);
  } catch {
    throw new ApiError(400, "Malformed JSON body");
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new ApiError(400, describeZodError(parsed.error));
  return parsed.data;
}
