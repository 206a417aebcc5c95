import type { Cluster, Redis } from "ioredis";

/**
 * How a caller stands in a limit's line (docs/decisions/0048):
 * - `new`: a message that never waited for this limit; while others wait in line it joins the
 *   end of the line, so it never takes a turn promised to them.
 * - `returning`: a message that was given a turn (it waited already): it takes a token when one
 *   is there, line or not; early or beaten to it, it goes to the end of the line.
 * - `urgent`: a critical message (an OTP): it takes a token when one is there; otherwise it waits
 *   in a short line of its own whose turns come just before the ordinary line's, so an OTP is
 *   never stuck behind a sender's bulk backlog.
 */
export type LineMode = "new" | "returning" | "urgent";

export type Take =
  | { granted: true }
  | {
      granted: false;
      /** When to come back for a token: the turn this take was given. */
      waitMs: number;
      /** False when the turn lies past `deadlineMs`: none was booked (the message will not use it). */
      booked: boolean;
    };

export interface TakeOptions {
  /** Messages a second; positive. */
  rate: number;
  mode: LineMode;
  /** A turn further away than this is not booked (the message's time to live ends first). */
  deadlineMs?: number;
}

/** How early a send may come before its time: one interval, never more than 50 ms. */
export const MAX_TOLERANCE_US = 50_000;

/**
 * One limit's state in one key, so every call touches a single key (a Redis Cluster runs it on
 * the key's slot; no hash tags, no cross-slot script). The value is `tat:tail:urgentTail`, all in
 * microseconds of Redis's clock (`TIME`, one clock for every worker):
 * - `tat`, the theoretical arrival time of GCRA (the generic cell rate algorithm): a send conforms
 *   when now >= tat - tolerance, and moves tat to max(tat, now) + interval. So any n sends in a row
 *   span at least (n - 1) × interval - tolerance: over any window W at most W × rate + 1 +
 *   tolerance / interval sends, whatever the number of workers.
 * - `tail`, the last turn booked in the line of messages handed back; `urgentTail`, the last one
 *   booked in the urgent line. A refused take books the next turn (one interval after the tail,
 *   and not before the next token), so the waiting messages come back one per interval, in
 *   order, instead of all at once every time a token comes free.
 * ARGV: interval (µs), tolerance (µs), mode, deadline (µs from now; -1: none).
 * Returns {1} when granted, else {0, wait in ms, booked 0|1}. The key expires once every time in
 * it has passed (plus a second): an idle limit costs nothing.
 */
export const THROUGHPUT_SCRIPT = `
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local mode = ARGV[3]
local deadline = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat, tail, urgent = 0, 0, 0
local saved = redis.call('GET', KEYS[1])
if saved then
  local a, b, c = string.match(saved, '^(%d+):(%d+):(%d+)$')
  if a then tat, tail, urgent = tonumber(a), tonumber(b), tonumber(c) end
end
local conforming = now >= tat - tolerance
local line = tail + interval >= now
local result
if conforming and (mode ~= 'new' or not line) then
  tat = math.max(tat, now) + interval
  result = {1}
else
  local turn
  if mode == 'urgent' then
    turn = math.max(urgent + interval, tat - tolerance)
  else
    turn = math.max(tail + interval, tat)
  end
  local booked = 0
  if deadline < 0 or turn <= now + deadline then
    booked = 1
    if mode == 'urgent' then urgent = turn else tail = turn end
  end
  result = {0, math.ceil((turn - now) / 1000), booked}
end
local last = math.max(tat, tail, urgent)
local ttl = math.max(1, math.ceil((last - now) / 1000)) + 1000
redis.call('SET', KEYS[1], string.format('%.0f:%.0f:%.0f', tat, tail, urgent), 'PX', ttl)
return result
`;

type ScriptedRedis = (Redis | Cluster) & {
  takeThroughput(key: string, ...args: (string | number)[]): Promise<number[]>;
};

/**
 * A throughput limiter shared by every process on one Redis: a GCRA with a line (see
 * {@link THROUGHPUT_SCRIPT}). Why not rate-limiter-flexible, which the API's limits use: its
 * script hook passes a fixed set of arguments and answers only "consumed, wait", with no room for
 * the line, the urgent lane or the deadline that keep waiting messages from coming back as a herd.
 */
export function createThroughputLimiter(redis: Redis | Cluster, options: { timeoutMs?: number } = {}) {
  if (!("takeThroughput" in redis)) {
    redis.defineCommand("takeThroughput", { numberOfKeys: 1, lua: THROUGHPUT_SCRIPT });
  }
  const scripted = redis as ScriptedRedis;
  const timeoutMs = options.timeoutMs ?? 1000;
  return {
    /** Takes one send's token from the limit of `key`, or says when the message's turn is. */
    async take(key: string, { rate, mode, deadlineMs }: TakeOptions): Promise<Take> {
      if (!(rate > 0)) throw new RangeError(`a throughput rate must be positive, not ${rate}`);
      const intervalUs = Math.ceil(1_000_000 / rate);
      const toleranceUs = Math.min(intervalUs, MAX_TOLERANCE_US);
      const deadlineUs = deadlineMs === undefined ? -1 : Math.max(0, Math.floor(deadlineMs * 1000));
      const reply = await withTimeout(
        scripted.takeThroughput(key, intervalUs, toleranceUs, mode, deadlineUs),
        timeoutMs,
      );
      const [granted, waitMs = 0, booked = 0] = reply;
      return granted === 1 ? { granted: true } : { granted: false, waitMs, booked: booked === 1 };
    },
  };
}

export type ThroughputLimiter = ReturnType<typeof createThroughputLimiter>;

/** A Redis that does not answer in time is as good as away (the fail-fast client errors at once). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`throughput limiter: no answer from Redis in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
