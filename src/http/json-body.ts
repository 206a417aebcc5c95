import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, describeZodError } from "./errors.js";
import { readBodyText, requestHeader } from "./node-request.js";

export const MAX_BODY_BYTES = 64 * 1024;

/** Reads a JSON body and validates it: 415 for another content type, 400 for bad JSON or schema. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const { text, json } = await readJson(c);
  const problem = mayHoldProblem(text) ? problemIn(json) : undefined;
  if (problem) throw new ApiError(400, problem);
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new ApiError(400, describeZodError(parsed.error));
  return parsed.data;
}

/**
 * Reads a JSON body that must be an array of 1 to `maxItems` items, each checked on its own by
 * the caller (a batch's items, one result each): with each item, what in it Postgres could not
 * take ({@link problemIn}), if anything. 415 for another content type, 400 for bad JSON or a body
 * that is no such array.
 */
export async function readJsonItems(
  c: Context,
  maxItems: number,
): Promise<Array<{ item: unknown; problem: string | undefined }>> {
  const { text, json } = await readJson(c);
  if (!Array.isArray(json)) throw new ApiError(400, "The body must be a JSON array of items");
  if (json.length === 0 || json.length > maxItems)
    throw new ApiError(400, `The body must hold 1 to ${maxItems} items; it holds ${json.length}`);
  const check = mayHoldProblem(text);
  // The array is one level: its items may nest one level less than a body of their own.
  return json.map((item: unknown) => ({ item, problem: check ? problemIn(item, 1) : undefined }));
}

async function readJson(c: Context): Promise<{ text: string; json: unknown }> {
  const contentType = requestHeader(c, "content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    throw new ApiError(415, "Content-Type must be application/json");
  }
  const text = await readBodyText(c);
  try {
    return { text, json: JSON.parse(text) };
  } catch {
    throw new ApiError(400, "Malformed JSON body");
  }
}

/**
 * Deeper JSON is refused: nothing the API takes nests half as deep, and a deeper value would
 * overflow the stack of what later walks it recursively (`JSON.stringify` of a batch, Postgres).
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether the body's text could hold what {@link problemIn} looks for. JSON text cannot carry a raw
 * NUL or a lone surrogate, only their `\u` escapes, and a value cannot nest deeper than the body
 * has brackets: so the walk runs only for the few bodies that could fail it (a single send's; a
 * batch of more than a few dozen items has more brackets than the depth allowed, and is walked).
 */
function mayHoldProblem(text: string): boolean {
  if (text.includes("\\u0000") || SURROGATE_ESCAPE.test(text)) return true;
  let brackets = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code === 0x7b || code === 0x5b) && ++brackets > MAX_JSON_DEPTH) return true;
  }
  return false;
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** With the `u` flag a surrogate pair is one code point, so only an unpaired half matches. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * What in a parsed body Postgres or the batch writer could not take, as a 400 message: a NUL
 * character (Postgres text cannot hold U+0000), an unpaired UTF-16 surrogate (not text: Postgres
 * refuses it in JSON, and it cannot be encoded as UTF-8 for a provider), in any string or key, or
 * nesting past {@link MAX_JSON_DEPTH}. Iterative, so no depth can overflow it.
 */
function problemIn(root: unknown, rootDepth = 0): string | undefined {
  const pending: Array<[value: unknown, depth: number]> = [[root, rootDepth]];
  const badString = (s: string) =>
    s.includes("\0")
      ? "Strings must not contain the NUL character (\\u0000)"
      : LONE_SURROGATE.test(s)
        ? "Strings must not contain an unpaired UTF-16 surrogate (a \\uD800-\\uDFFF escape without its other half)"
        : undefined;
  while (pending.length > 0) {
    const [value, depth] = pending.pop() as [unknown, number];
    if (typeof value === "string") {
      const problem = badString(value);
      if (problem) return problem;
    } else if (typeof value === "object" && value !== null) {
      if (depth >= MAX_JSON_DEPTH) return `JSON must not nest deeper than ${MAX_JSON_DEPTH} levels`;
      for (const [key, inner] of Object.entries(value)) {
        const problem = badString(key);
        if (problem) return problem;
        pending.push([inner, depth + 1]);
      }
    }
  }
  return undefined;
}
