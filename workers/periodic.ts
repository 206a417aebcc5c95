/**
 * Runs `task` every `intervalMs` while `when()` holds (the database is reachable), never two runs
 * at once: a run that outlasts the interval makes the next one wait for the following tick.
 * `stop` ends the timer and waits for a run in progress. `task` handles its own errors.
 */
export function every(
  intervalMs: number,
  when: () => boolean,
  task: () => Promise<unknown>,
): { stop: () => Promise<void> } {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (running || !when()) return;
    running = task().then(
      () => {
        running = undefined;
      },
      () => {
        running = undefined;
      },
    );
  }, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
