/** The most of `times` (ms) in any window of `windowMs` that starts at one of them. */
export function busiestWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let end = 0;
  for (let start = 0; start < sorted.length; start++) {
    while (end < sorted.length && (sorted[end] as number) < (sorted[start] as number) + windowMs) end++;
    most = Math.max(most, end - start);
  }
  return most;
}
