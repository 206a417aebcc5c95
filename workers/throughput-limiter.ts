import type { Cluster, Redis } from "ioredis";

/**
 * How a caller stands in a limit's line (docs/decisions/0048):
 * - `new`: a message that never waited for this limit; while others wait in line it is given a
 *   turn at the end of the line, so it never takes a turn promised to them.
 * - `returning`: a message that was given a turn before: it passes that turn (`turn`), takes a
 *   token once its turn is near, and keeps its turn if it comes back early.
 * - `urgent`: a critical message (an OTP): it takes a token when one is there, line or not;
 *   otherwise it gets a turn in a short line of its own, whose turns come just before the
 *   ordinary message booked on the same token, so an OTP is never stuck behind a bulk backlog.
 */
export type LineMode = "new" | "returning" | "urgent";

export type Take =
  | { granted: true }
  | {
      granted: false;
      /** When to take again: a little before the caller's turn (its own, or the next token). */
      waitMs: number;
      /**
       * The caller's turn, in microseconds of Redis's clock, to pass back as `turn` when it comes
       * back; 0 when none was booked (its turn lies past `deadlineMs`: it will not use it).
       */
      turn: number;
    };

export interface TakeOptions {
  /** Messages a second; positive. */
  rate: number;
  mode: LineMode;
  /** A turn further away than this is not booked (the message's time to live ends first). */
  deadlineMs?: number;
  /** The turn this limit gave the caller before (`Take.turn`); 0 or absent: none. */
  turn?: number;
}

/**
 * How early a send may come before its time: one interval, never more than 50 ms. It absorbs the
 * timing of the takes (a timer firing late, a round trip to Redis, a busy event loop) and adds at
 * most one send to a window: a limit of 10 a second grants at most 51 in any 5 s.
 */
export const MAX_TOLERANCE_US = 50_000;

/**
 * One limit's state in one key, so every call touches a single key (a Redis Cluster runs it on
 * the key's slot; no hash tags, no cross-slot script). The value is `tat:tail:urgentTail`, all in
 * microseconds of Redis's clock (`TIME`, one clock for every worker):
 * - `tat`, the theoretical arrival time of GCRA (the generic cell rate algorithm): a send conforms
 *   when now >= tat - tolerance, and moves tat to max(tat, now) + interval. So any n sends in a row
 *   span at least (n - 1) × interval - tolerance: over any window W at most W × rate + 1 +
 *   tolerance / interval sends, whatever the number of workers and however they time their takes.
 * - `tail`, the last turn booked in the line of messages handed back; `urgentTail`, the last one
 *   of the urgent line. A refused take books the next turn (one interval after the tail, and not
 *   before the next token), so the waiting messages come back one per interval, in order,
 *   instead of all at once every time a token comes free.
 * A returning caller may take a token from one interval before its turn on. Early, it keeps its
 * turn; a little late (another send took its token, and the next one is at most an interval
 * after its turn) it waits for the next token; later than that it goes to the end of the line,
 * which gives the line back the interval it lost. Callers are told to come back half the
 * tolerance before their turn (urgent ones nine tenths: before the ordinary one booked on the
 * same token): inside the tolerance a send moves tat on by exactly one interval, whereas one after
 * tat moves it to now + interval and loses the lateness for every message behind it.
 * ARGV: interval (µs), tolerance (µs), mode, deadline (µs from now; -1: none), the caller's turn
 * (µs; 0: none). Returns {1} when granted, else {0, wait in ms, turn in µs (0: none booked)}. The
 * key expires once every time in it has passed (plus a second): an idle limit costs nothing.
 */
export const THROUGHPUT_SCRIPT = `
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local mode = ARGV[3]
local deadline = tonumber(ARGV[4])
local mine = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat, tail, urgent = 0, 0, 0
local saved = redis.call('GET', KEYS[1])
if saved then
  local a, b, c = string.match(saved, '^(%d+):(%d+):(%d+)$')
  if a then tat, tail, urgent = tonumber(a), tonumber(b), tonumber(c) end
end
local may_take
if mine > 0 then
  may_take = now >= mine - interval
elseif mode == 'new' then
  may_take = tail + interval < now
else
  may_take = true
end
local result
if may_take and now >= tat - tolerance then
  tat = math.max(tat, now) + interval
  result = {1}
else
  local turn, booked = 0, 0
  if mine > 0 and tat <= mine + interval then
    turn = math.max(tat, mine)
    booked = turn
  else
    if mode == 'urgent' then
      turn = math.max(urgent + interval, tat)
    else
      turn = math.max(tail + interval, tat)
    end
    if deadline < 0 or turn <= now + deadline then
      booked = turn
      if mode == 'urgent' then urgent = turn else tail = turn end
    end
  end
  local lead = tolerance / 2
  if mode == 'urgent' then lead = tolerance * 0.9 end
  result = {0, math.max(0, math.ceil((turn - lead - now) / 1000)), booked}
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
 * the line, the turns, the urgent lane or the deadline that keep waiting messages from coming
 * back as a herd.
 */
export function createThroughputLimiter(redis: Redis | Cluster, options: { timeoutMs?: number } = {}) {
  if (!("takeThroughput" in redis)) {
    redis.defineCommand("takeThroughput", { numberOfKeys: 1, lua: THROUGHPUT_SCRIPT });
  }
  const scripted = redis as ScriptedRedis;
  const timeoutMs = options.timeoutMs ?? 1000;
  return {
    /** Takes one send's token from the limit of `key`, or says when the caller's turn is. */
    async take(key: string, { rate, mode, deadlineMs, turn }: TakeOptions): Promise<Take> {
      if (!(rate > 0)) throw new RangeError(`a throughput rate must be positive, not ${rate}`);
      const intervalUs = Math.ceil(1_000_000 / rate);
      const toleranceUs = Math.min(intervalUs, MAX_TOLERANCE_US);
      const deadlineUs = deadlineMs === undefined ? -1 : Math.max(0, Math.floor(deadlineMs * 1000));
      const reply = await withTimeout(
        scripted.takeThroughput(key, intervalUs, toleranceUs, mode, deadlineUs, Math.max(0, turn ?? 0)),
        timeoutMs,
      );
      const [granted, waitMs = 0, booked = 0] = reply;
      return granted === 1 ? { granted: true } : { granted: false, waitMs, turn: booked };
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
