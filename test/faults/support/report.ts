import { appendFileSync } from "node:fs";

import type { FaultResult } from "../../../scripts/faults-report.js";

export type { FaultResult };

/** Appends the row to `FAULTS_REPORT_FILE` (JSON lines) when the report script set it. */
export function recordResult(result: FaultResult): void {
  const file = process.env.FAULTS_REPORT_FILE;
  if (file) appendFileSync(file, `${JSON.stringify(result)}\n`);
}
