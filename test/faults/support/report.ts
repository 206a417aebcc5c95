import { appendFileSync } from "node:fs";

/** One row of `npm run test:faults`'s table. */
export interface FaultResult {
  scenario: string;
  /** Requests answered 202. */
  accepted: number;
  /** Of those, messages in a final state at the end. */
  final: number;
  /** Accepted messages not final by the deadline. */
  lost: number;
  /** Messages with more than one terminal event. */
  duplicatedFinal: number;
  /** Attempts recorded as `attempt_interrupted` (visible possible duplicates, allowed by design). */
  interrupted: number;
  durationMs: number;
  note?: string;
}

/** Appends the row to `FAULTS_REPORT_FILE` (JSON lines) when the report script set it. */
export function recordResult(result: FaultResult): void {
  const file = process.env.FAULTS_REPORT_FILE;
  if (file) appendFileSync(file, `${JSON.stringify(result)}\n`);
}
