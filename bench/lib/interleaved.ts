import { type EndToEndResult, measureEndToEnd, type Settings, withStack } from "./scenarios.js";

/**
 * A variant of scenario e2e (status webhooks, a Redis Cluster) compared with e2e itself, whose
 * targets are ratios of the two. On this shared machine one run's figures move by a tenth or more
 * within minutes, as other work comes and goes, so a ratio of one run to one run just before it is
 * mostly that drift. Both run twice, interleaved in the order baseline, variant, variant, baseline
 * (a drift that is steady over the four cancels out of the sums, to first order), each run on a stack of its own,
 * and the ratios are of the sums: messages over the spans of their final events, and the machine's
 * CPU over the messages. Each pair's own ratios are reported beside them (noisy-neighbour.ts does
 * the same with its drains).
 */
export interface Interleaved<V extends EndToEndResult> {
  /** e2e's two runs, in the order they ran (first and last). */
  baseline: EndToEndResult[];
  /** The variant's two runs, in the order they ran (second and third). */
  variant: V[];
  /** The variant ÷ the baseline over both pairs: messages/s, and the machine's CPU per message. */
  ratios: Ratios;
  /** The same for each pair: (first baseline, first variant), (second variant, second baseline). */
  pairs: Ratios[];
  /** Every run of both had every message final within its bound. */
  allFinalWithinBound: boolean;
}

export interface Ratios {
  messagesPerS: number;
  machineCpuPerMessage: number;
}

/** e2e's run on a stack of its own (one Redis node, no webhook endpoint). */
export function endToEndRun(settings: Settings, label: string): Promise<EndToEndResult> {
  return withStack(label, settings, async (stack) => (await measureEndToEnd(stack, settings)).endToEnd);
}

/** Runs `baseline` and `variant` twice each, as baseline, variant, variant, baseline. */
export async function interleaved<V extends EndToEndResult>(
  baseline: (round: number) => Promise<EndToEndResult>,
  variant: (round: number) => Promise<V>,
): Promise<Interleaved<V>> {
  const a1 = await baseline(1);
  const b1 = await variant(1);
  const b2 = await variant(2);
  const a2 = await baseline(2);
  return {
    baseline: [a1, a2],
    variant: [b1, b2],
    ratios: ratios([a1, a2], [b1, b2]),
    pairs: [ratios([a1], [b1]), ratios([a2], [b2])],
    allFinalWithinBound: [a1, a2, b1, b2].every((run) => run.allFinalWithinBound),
  };
}

/** Unrounded: the targets compare these with their bounds (the report rounds them for display). */
function ratios(baseline: EndToEndResult[], variant: EndToEndResult[]): Ratios {
  return {
    messagesPerS: messagesPerS(variant) / messagesPerS(baseline),
    machineCpuPerMessage: machineCpuPerMessage(variant) / machineCpuPerMessage(baseline),
  };
}

/** Every run's messages over the sum of their spans (first accepted → last final event). */
function messagesPerS(runs: EndToEndResult[]): number {
  return sum(runs.map((r) => r.events.messages)) / sum(runs.map((r) => r.events.spanS));
}

/** The machine's busy CPU of every run over their messages, in µs. */
function machineCpuPerMessage(runs: EndToEndResult[]): number {
  return (sum(runs.map((r) => r.cpuMs.machineBusy)) * 1000) / sum(runs.map((r) => r.messages));
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
