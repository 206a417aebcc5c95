import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * `npm run test:faults [-- vitest args]`: runs the fault suite (test/faults: real processes,
 * cut networks, killed Redis and workers; fuzzing, rate limits, keys) and prints one table row
 * per fault scenario: requests accepted, messages final, lost, duplicated final states,
 * interrupted attempts, duration. Exits with vitest's status.
 */
/** One row of the table, as each scenario appends it to FAULTS_REPORT_FILE (JSON lines). */
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

const root = join(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "faults-"));
const reportFile = join(dir, "report.jsonl");
const started = Date.now();

const child = spawn(
  process.execPath,
  [
    join(root, "node_modules", "vitest", "vitest.mjs"),
    "run",
    "--config",
    "test/faults/vitest.config.ts",
    ...process.argv.slice(2),
  ],
  { cwd: root, stdio: "inherit", env: { ...process.env, FAULTS_REPORT_FILE: reportFile } },
);

child.on("exit", (code, signal) => {
  const rows: FaultResult[] = existsSync(reportFile)
    ? readFileSync(reportFile, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as FaultResult)
    : [];
  rmSync(dir, { recursive: true, force: true });
  console.log(`\n${table(rows)}`);
  console.log(
    `\nfault suite: ${((Date.now() - started) / 1000).toFixed(1)} s, vitest exit ${code ?? signal}`,
  );
  process.exit(code ?? 1);
});

function table(rows: FaultResult[]): string {
  if (rows.length === 0) return "(no fault scenario reported a result)";
  const header = ["scenario", "accepted", "final", "lost", "dup. final", "interrupted", "duration", "note"];
  const body = rows.map((row) => [
    row.scenario,
    String(row.accepted),
    String(row.final),
    String(row.lost),
    String(row.duplicatedFinal),
    String(row.interrupted),
    `${(row.durationMs / 1000).toFixed(1)} s`,
    row.note ?? "",
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((cells) => cells[column]?.length ?? 0)),
  );
  const line = (cells: string[]) =>
    `| ${cells.map((cell, column) => (column > 0 && column < 7 ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join(" | ")} |`;
  return [
    line(header),
    `|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`,
    ...body.map(line),
  ].join("\n");
}
