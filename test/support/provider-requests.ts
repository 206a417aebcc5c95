/**
 * The ground truth of a provider outage test (docs/decisions/0046): the requests each fake
 * provider received for one message, laid over the message's attempts by time. An attempt starts
 * with its `attempt_started` event, appended before the provider is called, and ends where the
 * next one starts; a request belongs to the attempt whose window holds the instant it arrived.
 *
 * A request "may have been taken" unless its answer proves that it was not, as the service must
 * read answers (docs/decisions/0046): only a 429 does. A 201 made a message; a request left
 * unanswered (a hang, a process killed mid-request) may have; and so may a 503, which an edge in
 * front of Twilio can answer after Twilio made the message (the fake's `made_then_unavailable`).
 * A refused connection never reaches a fake, so it is no request here. No attempt may have more
 * than one request that may have been taken, across all providers: that would be one attempt
 * sent by two providers.
 */

export interface ProviderRequest {
  /** Which fake got it (`twilio:primary`). */
  provider: string;
  /** Date.now() when it arrived. */
  receivedAt: number;
  /** 201, 503, 429, or anything else for no answer (`hung`, `cut`). */
  answer: number | string;
  /** A 201 a fake in a process of its own logged but never handed to its socket (killed between). */
  unwritten?: boolean;
}

export interface AttemptEvent {
  type: string;
  data: unknown;
  /** Milliseconds since the epoch. */
  occurredAt: number;
}

export interface MessageRequests {
  /** Requests by attempt number (1 for the first). */
  byAttempt: Map<number, ProviderRequest[]>;
  /** Attempts with more than one request that may have been taken: must be empty. */
  sentTwiceInOneAttempt: number[];
  /** Requests answered 201 (a message made, as the service was told). */
  created: ProviderRequest[];
  /** Requests that arrived outside every attempt (before the first started): must be none. */
  outside: ProviderRequest[];
}

/** Whether the answer leaves open that the provider took it: anything but a 429. */
export const mayHaveBeenTaken = (request: ProviderRequest) => request.answer !== 429;

export function requestsByAttempt(
  events: readonly AttemptEvent[],
  requests: readonly ProviderRequest[],
): MessageRequests {
  const starts = events
    .filter(
      (event) => event.type === "pending" && (event.data as { kind?: string }).kind === "attempt_started",
    )
    .map((event) => ({ attempt: (event.data as { attempt: number }).attempt, at: event.occurredAt }));
  const byAttempt = new Map<number, ProviderRequest[]>();
  const outside: ProviderRequest[] = [];
  for (const request of requests) {
    const start = starts.findLast((candidate) => candidate.at <= request.receivedAt);
    if (!start) {
      outside.push(request);
      continue;
    }
    byAttempt.set(start.attempt, [...(byAttempt.get(start.attempt) ?? []), request]);
  }
  const sentTwiceInOneAttempt = [...byAttempt]
    .filter(([, attempt]) => attempt.filter(mayHaveBeenTaken).length > 1)
    .map(([number]) => number);
  return {
    byAttempt,
    sentTwiceInOneAttempt,
    created: requests.filter((request) => request.answer === 201),
    outside,
  };
}
