import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { every } from "../../../workers/periodic.js";

/** A task whose runs finish only when the test says so. */
function controlledTask() {
  const finishers: Array<() => void> = [];
  const task = vi.fn(() => new Promise<void>((resolve) => finishers.push(resolve)));
  return { task, finishLatest: () => finishers.at(-1)?.() };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("every", () => {
  it("runs the task once per interval while the condition holds, and not while it fails", async () => {
    let up = true;
    const task = vi.fn(async () => {});
    const periodic = every(100, () => up, task);

    await vi.advanceTimersByTimeAsync(300);
    expect(task).toHaveBeenCalledTimes(3);
    up = false;
    await vi.advanceTimersByTimeAsync(300);
    expect(task).toHaveBeenCalledTimes(3);
    up = true;
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(4);
    await periodic.stop();
  });

  it("never starts a run while the previous one is still going", async () => {
    const { task, finishLatest } = controlledTask();
    const periodic = every(100, () => true, task);

    await vi.advanceTimersByTimeAsync(500);
    expect(task).toHaveBeenCalledTimes(1);
    finishLatest();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(2);
    finishLatest();
    await periodic.stop();
  });

  it("keeps going after a run that failed", async () => {
    const task = vi.fn(async () => {
      throw new Error("database gone");
    });
    const periodic = every(100, () => true, task);

    await vi.advanceTimersByTimeAsync(300);
    expect(task).toHaveBeenCalledTimes(3);
    await periodic.stop();
  });

  it("stop waits for the run in progress and starts no other", async () => {
    const { task, finishLatest } = controlledTask();
    const periodic = every(100, () => true, task);
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(1);

    let stopped = false;
    const stopping = periodic.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(300);
    expect(stopped).toBe(false);
    finishLatest();
    await stopping;
    expect(stopped).toBe(true);
    await vi.advanceTimersByTimeAsync(300);
    expect(task).toHaveBeenCalledTimes(1);
  });
});
