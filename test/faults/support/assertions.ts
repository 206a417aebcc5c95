import { expect } from "vitest";
import { expectFinishedHistory } from "../../integration/workers/history.js";
import type { Audit, FaultScenario } from "./scenario.js";

/**
 * What every fault scenario must end with (DESIGN.md §2–3): no accepted message lost, exactly one
 * terminal event each, sequence numbers 1..n, every history legal and folded into its record,
 * and (with the fake provider) no send the events do not account for.
 */
export async function expectSoundOutcome(scenario: FaultScenario, audit: Audit): Promise<void> {
  expect(audit.lost, "accepted messages without a final state").toEqual([]);
  expect(audit.duplicatedFinal, "messages with more than one terminal event").toEqual([]);
  expect(audit.seqGaps, "messages whose seq is not 1..n").toEqual([]);
  expect(audit.unexplainedSends, "provider sends the events do not account for").toEqual([]);
  for (const id of audit.messages.keys()) await expectFinishedHistory(scenario.db, id);
}
