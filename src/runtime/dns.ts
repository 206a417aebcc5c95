import { Resolver } from "node:dns/promises";

/**
 * Looks up TXT records: what a domain's verification needs of DNS. An interface so a test (or a
 * deployment with its own DNS API) can plug another in; the default is Node's own resolver.
 */
export interface TxtResolver {
  /**
   * The TXT records at `name`, each as its strings (a record longer than 255 characters comes in
   * several). Resolves to `[]` when the name or its TXT records do not exist; rejects with a
   * {@link DnsLookupError} when DNS gave no answer (time-out, server failure, refusal).
   */
  resolveTxt(name: string): Promise<string[][]>;
}

/** DNS could not say whether the records exist: worth trying again later. */
export class DnsLookupError extends Error {
  constructor(readonly code: string) {
    super(`DNS lookup failed (${code})`);
  }
}

/** The answers that mean "there is no such record": the proof is absent, not unknown. */
const NO_RECORD = new Set(["ENOTFOUND", "ENODATA", "NXDOMAIN"]);

/**
 * Node's resolver (c-ares): the system's DNS servers, or `servers` (`DNS_SERVERS`: addresses, with
 * `:port` or `[v6]:port` if not 53). It asks the servers, never the hosts file or a local cache,
 * so a record just published is seen as soon as the servers see it. Each try waits `timeoutMs`
 * (c-ares doubles it on the next), so the defaults give up within about 4.5 s, inside a request's
 * `REQUEST_TIMEOUT_MS`.
 */
export function systemTxtResolver(
  options: { servers?: readonly string[] | null; timeoutMs?: number; tries?: number } = {},
): TxtResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 1500, tries: options.tries ?? 2 });
  if (options.servers && options.servers.length > 0) resolver.setServers([...options.servers]);
  return {
    async resolveTxt(name) {
      try {
        return await resolver.resolveTxt(name);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code ?? "EUNKNOWN";
        if (NO_RECORD.has(code)) return [];
        throw new DnsLookupError(code);
      }
    },
  };
}
