/**
 * Agent selection, as upstream's `--proxy-strategies`: an ordered list of strategies, the first
 * that finds an agent wins. Each is a pure function over the connected agents, so tenancy or a
 * fleet can wrap or replace them without touching the data path.
 */
import { isIP } from "node:net";
import type { ProxyStrategy } from "../../config/server-options.js";
import type { DialRequest } from "../../tunnel/endpoints.js";

export interface Candidate {
  readonly draining: boolean;
  readonly load: number;
  readonly info: {
    readonly identifiers: {
      readonly host: readonly string[];
      readonly ipv4: readonly string[];
      readonly ipv6: readonly string[];
      readonly defaultRoute: boolean;
    };
  };
}

export type AgentChooser = <C extends Candidate>(candidates: readonly C[], req: DialRequest) => C | undefined;

/** Splits "host:port" / "[v6]:port" into the host part, lower-cased, brackets removed. */
export function destinationHost(address: string): string {
  const end = address.lastIndexOf(":");
  const host = end === -1 ? address : address.slice(0, end);
  return (host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host).toLowerCase();
}

/**
 * Prefer agents that are not draining; among them pick at random, weighted towards the less
 * loaded of two random choices ("power of two choices"), which spreads load without scanning.
 */
function pickBalanced<C extends Candidate>(pool: readonly C[]): C | undefined {
  if (pool.length <= 1) return pool[0];
  const a = pool[Math.floor(Math.random() * pool.length)]!;
  const b = pool[Math.floor(Math.random() * pool.length)]!;
  return a.load <= b.load ? a : b;
}

function preferActive<C extends Candidate>(pool: readonly C[]): C | undefined {
  const active = pool.filter((c) => !c.draining);
  return pickBalanced(active.length > 0 ? active : pool);
}

const STRATEGIES: Record<ProxyStrategy, AgentChooser> = {
  default: (candidates) => preferActive(candidates),
  destHost: (candidates, req) => {
    const host = destinationHost(req.address);
    const family = isIP(host);
    return preferActive(
      candidates.filter((c) => {
        const ids = c.info.identifiers;
        if (family === 4) return ids.ipv4.includes(host);
        if (family === 6) return ids.ipv6.includes(host);
        return ids.host.includes(host);
      }),
    );
  },
  defaultRoute: (candidates) => preferActive(candidates.filter((c) => c.info.identifiers.defaultRoute)),
};

export function chooserFor(strategies: readonly ProxyStrategy[]): AgentChooser {
  const chain = strategies.map((s) => STRATEGIES[s]);
  return (candidates, req) => {
    for (const choose of chain) {
      const agent = choose(candidates, req);
      if (agent) return agent;
    }
    return undefined;
  };
}
