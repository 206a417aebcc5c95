import { z } from "zod";

/** What the channels' request schemas (`<channel>/request.ts`) share. */

/** The `payload` object's own error for a missing or non-object value. */
export const payloadObjectError = {
  error: (issue: { code: string; input?: unknown }) =>
    issue.code === "invalid_type"
      ? issue.input === undefined
        ? "is required"
        : "must be an object"
      : undefined,
};

/**
 * Any JSON value. A parsed JSON body holds nothing else, so this only insists on presence;
 * (`z.json()` is recursive, which the OpenAPI generator cannot follow.)
 */
export const anyJson = z
  .unknown()
  .refine((value) => value !== undefined, "is required")
  .meta({ description: "Any JSON value" });
