import type { Context } from "hono";

/**
 * Where one limit stands for one request, in the terms of the IETF draft "RateLimit Fields for
 * HTTP" (draft-ietf-httpapi-ratelimit-headers-06): the quota of the policy, what is left of it
 * after this request, and the seconds until it is whole again.
 */
export interface LimitState {
  limit: number;
  remaining: number;
  resetSeconds: number;
  /** This limit as one item of `RateLimit-Policy`: `<quota>;w=<window seconds>`. */
  policy: string;
}

/** The draft's fields for one limit (`Retry-After` is the refusal's to add). */
export function limitHeaders(state: LimitState): Record<string, string> {
  return {
    "RateLimit-Limit": String(state.limit),
    "RateLimit-Remaining": String(Math.max(0, state.remaining)),
    "RateLimit-Reset": String(Math.max(0, state.resetSeconds)),
    "RateLimit-Policy": state.policy,
  };
}

/**
 * Adds a limit's fields to the answer, on the way out of a limit's middleware. Several limits can
 * apply to one request (a send's rate and its daily quota): the draft has the three fields speak
 * for the one closest to exhaustion, the lowest `RateLimit-Remaining`, so an inner limit's fields
 * (or a refusal's) stay unless this one has less left; `RateLimit-Policy` lists every limit.
 */
export function reportLimit(c: Context, state: LimitState): void {
  const headers = c.res.headers;
  const reported = headers.get("RateLimit-Remaining");
  const policies = headers.get("RateLimit-Policy");
  if (reported === null || Number(reported) > state.remaining) {
    for (const [name, value] of Object.entries(limitHeaders(state))) headers.set(name, value);
  }
  headers.set(
    "RateLimit-Policy",
    policies === null || policies === state.policy
      ? state.policy
      : policies.split(", ").includes(state.policy)
        ? policies
        : `${state.policy}, ${policies}`, // outer limits run last: the list reads in the order they are checked
  );
}
