import { describe, expect, it } from "vitest";
import { type BreakerState, CircuitBreaker } from "../../../src/channels/providers/breaker.js";

/** A breaker on a clock the test moves, recording every change of state. */
function breaker(failures = 3, cooldownMs = 1000) {
  let now = 0;
  const changes: Array<[BreakerState, BreakerState]> = [];
  const subject = new CircuitBreaker({
    failures,
    cooldownMs,
    now: () => now,
    onChange: (from, to) => changes.push([from, to]),
  });
  return {
    subject,
    changes,
    advance: (ms: number) => {
      now += ms;
    },
    /** One call let through and settled with `result`. */
    call(result: "success" | "failure" | "unused") {
      const permit = subject.acquire();
      if (!permit) throw new Error("the breaker let no call through");
      subject.settle(permit, result);
      return permit;
    },
  };
}

/** A breaker opened by `failures` failures in a row at time 0. */
function opened(failures = 3, cooldownMs = 1000) {
  const b = breaker(failures, cooldownMs);
  for (let i = 0; i < failures; i++) b.call("failure");
  return b;
}

describe("a closed breaker", () => {
  it("given a new breaker, then it is closed and lets every call through", () => {
    const { subject } = breaker();
    expect(subject.state).toBe("closed");
    expect(subject.readyInMs()).toBe(0);
    expect(subject.acquire()).toEqual({ probe: false, generation: 0 });
    expect(subject.acquire()).toEqual({ probe: false, generation: 0 });
  });

  it("given failures fewer than the run, then it stays closed", () => {
    const b = breaker(3);
    b.call("failure");
    b.call("failure");
    expect(b.subject.state).toBe("closed");
    expect(b.changes).toEqual([]);
  });

  it("given an answer between failures, then the run starts again (closed → closed)", () => {
    const b = breaker(3);
    b.call("failure");
    b.call("failure");
    b.call("success");
    b.call("failure");
    b.call("failure");
    expect(b.subject.state).toBe("closed");
  });

  it("given a call never made (unused) between failures, then the run goes on", () => {
    const b = breaker(3);
    b.call("failure");
    b.call("unused");
    b.call("failure");
    b.call("failure");
    expect(b.subject.state).toBe("open");
  });

  it("given the run's failures in a row, then it opens (closed → open)", () => {
    const b = opened(3);
    expect(b.subject.state).toBe("open");
    expect(b.changes).toEqual([["closed", "open"]]);
  });

  it("given a run of 1, then the first failure opens it", () => {
    const b = opened(1);
    expect(b.subject.state).toBe("open");
  });
});

describe("an open breaker", () => {
  it("given the cool-down not over, then it lets nothing through and says how long is left", () => {
    const b = opened(3, 1000);
    b.advance(400);
    expect(b.subject.acquire()).toBeUndefined();
    expect(b.subject.readyInMs()).toBe(600);
    b.advance(599);
    expect(b.subject.acquire()).toBeUndefined();
    expect(b.subject.state).toBe("open");
  });

  it("given calls let through before it opened, then their results change nothing", () => {
    const b = breaker(2, 1000);
    const early = b.subject.acquire();
    const late = b.subject.acquire();
    if (!early || !late) throw new Error("closed breakers let calls through");
    b.call("failure");
    b.call("failure");
    b.advance(900);
    b.subject.settle(early, "failure"); // would restart the cool-down if counted
    b.subject.settle(late, "success"); // would close it if counted
    expect(b.subject.state).toBe("open");
    b.advance(100);
    expect(b.subject.state).toBe("half_open");
  });

  it("given the cool-down over, then it reads half-open and lets one probe through (open → half_open)", () => {
    const b = opened(3, 1000);
    b.advance(1000);
    expect(b.subject.state).toBe("half_open");
    expect(b.subject.readyInMs()).toBe(0);
    const probe = b.subject.acquire();
    expect(probe?.probe).toBe(true);
    expect(b.changes).toEqual([
      ["closed", "open"],
      ["open", "half_open"],
    ]);
  });
});

describe("a half-open breaker", () => {
  function probing() {
    const b = opened(3, 1000);
    b.advance(1000);
    const probe = b.subject.acquire();
    if (!probe) throw new Error("no probe");
    return { ...b, probe };
  }

  it("given its probe under way, then no other call goes through, until the probe answers", () => {
    const b = probing();
    expect(b.subject.acquire()).toBeUndefined();
    expect(b.subject.readyInMs()).toBe(Number.POSITIVE_INFINITY);
    b.advance(10_000);
    expect(b.subject.acquire()).toBeUndefined();
  });

  it("given the probe succeeds, then it closes (half_open → closed) and a new run is needed to open it", () => {
    const b = probing();
    b.subject.settle(b.probe, "success");
    expect(b.subject.state).toBe("closed");
    expect(b.changes.at(-1)).toEqual(["half_open", "closed"]);
    b.call("failure");
    b.call("failure");
    expect(b.subject.state).toBe("closed");
  });

  it("given the probe fails, then it opens again for a whole cool-down (half_open → open)", () => {
    const b = probing();
    b.advance(250);
    b.subject.settle(b.probe, "failure");
    expect(b.subject.state).toBe("open");
    expect(b.changes.at(-1)).toEqual(["half_open", "open"]);
    expect(b.subject.readyInMs()).toBe(1000);
    b.advance(999);
    expect(b.subject.acquire()).toBeUndefined();
    b.advance(1);
    expect(b.subject.acquire()?.probe).toBe(true);
  });

  it("given the probe given back unused, then it stays half-open and the next call is the probe", () => {
    const b = probing();
    b.subject.settle(b.probe, "unused");
    expect(b.subject.state).toBe("half_open");
    expect(b.subject.readyInMs()).toBe(0);
    const next = b.subject.acquire();
    expect(next?.probe).toBe(true);
    expect(b.subject.acquire()).toBeUndefined();
  });

  it("given a probe settled twice (a bug's double report), then the second changes nothing", () => {
    const b = probing();
    b.subject.settle(b.probe, "success");
    b.subject.settle(b.probe, "failure");
    expect(b.subject.state).toBe("closed");
  });
});

describe("a hook that throws", () => {
  it("given onChange throwing at half-opening, then the probe is still let through and its answer still counts", () => {
    let now = 0;
    const subject = new CircuitBreaker({
      failures: 1,
      cooldownMs: 1000,
      now: () => now,
      onChange: () => {
        throw new Error("a metrics hook failed");
      },
    });
    const first = subject.acquire();
    if (!first) throw new Error("closed breakers let calls through");
    subject.settle(first, "failure");
    expect(subject.state).toBe("open");
    now = 1000;
    const probe = subject.acquire();
    expect(probe?.probe).toBe(true);
    if (probe) subject.settle(probe, "success");
    expect(subject.state).toBe("closed");
  });
});

describe("its options", () => {
  it("refuse a run below 1 and a negative cool-down", () => {
    expect(() => new CircuitBreaker({ failures: 0, cooldownMs: 1, now: () => 0 })).toThrow(RangeError);
    expect(() => new CircuitBreaker({ failures: 1, cooldownMs: -1, now: () => 0 })).toThrow(RangeError);
  });
});
