import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, describeZodError } from "./errors.js";
import { readBodyText, requestHeader } from "./node-request.js";

export const MAX_BODY_BYTES = 64 * 1024;

/** Reads a JSON body and validates it: 415 for another content type, 400 for bad JSON or schema. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const contentType = requestHeader(c, "content-type") ?? "";
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
  // Postgres text cannot hold U+0000: refuse it here rather than fail at the insert. JSON text
  // cannot carry a raw NUL, only the escape, so the walk runs only for a body that has one.
  if (text.includes("\\u0000") && holdsNul(json)) {
    throw new ApiError(400, "Strings must not contain the NUL character (\\u0000)");
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new ApiError(400, describeZodError(parsed.error));
  return parsed.data;
}

/** Whether a parsed JSON value has a NUL character in any string or key (iterative: any depth). */
function holdsNul(root: unknown): boolean {
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === "string") {
      if (value.includes("\0")) return true;
    } else if (typeof value === "object" && value !== null) {
      for (const [key, inner] of Object.entries(value)) {
        if (key.includes("\0")) return true;
        pending.push(inner);
      }
    }
  }
  return false;
}
