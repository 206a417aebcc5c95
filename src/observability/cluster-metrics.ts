import cluster from "node:cluster";
import { AggregatorRegistry } from "prom-client";
import type { Metrics } from "./metrics.js";

/**
 * `/metrics` of a web dyno that runs several API processes (node:cluster). A scrape reaches one
 * of them, as any request does; alone it would answer its own counters, a different process's
 * each time. So it asks the supervisor, which gathers every process's metrics with prom-client's
 * AggregatorRegistry (counters and histograms summed, gauges read on scrape taken once) and
 * answers with the dyno's whole.
 */

const REQUEST = "notification-service:metrics-request";
const ANSWER = "notification-service:metrics-answer";
/** Longer than the AggregatorRegistry's own 5 s, whose error then comes back rather than ours. */
const ANSWER_TIMEOUT_MS = 6000;

interface MetricsRequest {
  type: typeof REQUEST;
  id: number;
}
interface MetricsAnswer {
  type: typeof ANSWER;
  id: number;
  text?: string;
  error?: string;
}

/** In the supervisor: answers its API processes' metrics requests with the sum of all of them. */
export function answerClusterMetricsRequests(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on("message", (worker, message: Partial<MetricsRequest>) => {
    if (message?.type !== REQUEST || typeof message.id !== "number") return;
    const id = message.id;
    const answer = (reply: Omit<MetricsAnswer, "type" | "id">) => {
      if (worker.isConnected()) worker.send({ type: ANSWER, id, ...reply } satisfies MetricsAnswer);
    };
    aggregator.clusterMetrics().then(
      (text) => answer({ text }),
      (error: unknown) => answer({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
}

/**
 * In an API process under a supervisor: `metrics` whose `scrape` answers the whole dyno's, and
 * whose registry the supervisor reads when another process is scraped.
 */
export function clusterWideMetrics(metrics: Metrics): Metrics {
  // Makes prom-client answer the supervisor's requests, with this registry (not its global one).
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([metrics.registry]);

  let nextId = 0;
  const waiting = new Map<number, (answer: MetricsAnswer) => void>();
  process.on("message", (message: Partial<MetricsAnswer>) => {
    if (message?.type === ANSWER && typeof message.id === "number")
      waiting.get(message.id)?.(message as MetricsAnswer);
  });

  const scrape = () =>
    new Promise<string>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error("the web supervisor did not answer with the metrics in time"));
      }, ANSWER_TIMEOUT_MS);
      waiting.set(id, (answer) => {
        clearTimeout(timer);
        waiting.delete(id);
        if (answer.text !== undefined) resolve(answer.text);
        else reject(new Error(`the web supervisor could not gather the metrics: ${answer.error}`));
      });
      process.send?.({ type: REQUEST, id } satisfies MetricsRequest);
    });
  return { ...metrics, scrape };
}
