/**
 * Where a tenant's agents are when the owner cache cannot say (a miss, "not here", every owner
 * unavailable): the registry, or the live peers when the registry cannot be read.
 *
 * - The registry known down (registry-health.ts): the peers are asked at once (peer-probe.ts),
 *   no dial waits on a read.
 * - Otherwise the registry is read, within `readTimeoutMs`. A read that has not answered within
 *   `probeAfterMs` (a Query answers in milliseconds: this one is likely hung) has the peers asked
 *   beside it, and whichever first names an owner answers; a read that fails or times out marks
 *   the registry down and falls back on the peers' answer.
 * - Neither names an owner: "no agent", saying why.
 */
import { NoAgentError } from "../errors.js";
import { ROUTE_PROBE_AFTER_MS } from "../server/durations.js";
import type { OwnerCache, RouteRead } from "./owner-cache.js";
import type { PeerProbe } from "./peer-probe.js";
import type { RegistryHealth } from "./registry-health.js";

export interface OwnerLookupDeps {
  owners: Pick<OwnerCache, "read">;
  readTimeoutMs: number;
  /** Asks the peers where the tenant's agents are, when the registry cannot be read. */
  probe?: Pick<PeerProbe, "find">;
  /** Whether the registry is known to be unreachable now, and told when a routing read fails. */
  registry?: Pick<RegistryHealth, "down" | "readFailed">;
  /** How long a read may go unanswered before the peers are asked beside it (ROUTE_PROBE_AFTER_MS). */
  probeAfterMs?: number;
}

/**
 * The live instances (not this one) holding `tenant`'s agents; rejects with NoAgentError.
 * `tried`: owners the dial found without the agents (the peers are asked again rather than
 * trust a kept answer naming only them).
 */
export function lookupOwners(
  deps: OwnerLookupDeps,
  tenant: string,
  why: RouteRead,
  tried: ReadonlySet<string> = new Set(),
): Promise<readonly string[]> {
  const { probe, registry } = deps;
  if (!probe) return readWithin(deps, tenant, why);
  if (registry?.down()) return probe.find(tenant, "registry_unreadable", tried);
  return new Promise((resolve, reject) => {
    let settled = false;
    let readError: Error | null = null;
    let asked = false;
    let peersKnowNone = false;
    const settle = (f: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(hedge);
      f();
    };
    const noneAnywhere = (err: Error) =>
      new NoAgentError(`${err.message}, and no live peer holds an agent of the tenant`);
    const ask = () => {
      if (asked) return;
      asked = true;
      // find never rejects.
      void probe.find(tenant, "registry_unreadable", tried).then((found) => {
        if (found.length > 0) settle(() => resolve(found));
        else if (readError) settle(() => reject(noneAnywhere(readError!)));
        else peersKnowNone = true; // the read may still answer
      });
    };
    const hedge = setTimeout(ask, deps.probeAfterMs ?? ROUTE_PROBE_AFTER_MS);
    hedge.unref();
    readWithin(deps, tenant, why).then(
      (owners) => settle(() => resolve(owners)),
      (err: Error) => {
        registry?.readFailed();
        readError = err;
        if (peersKnowNone) settle(() => reject(noneAnywhere(err)));
        else ask();
      },
    );
  });
}

function readWithin(deps: OwnerLookupDeps, tenant: string, why: RouteRead): Promise<readonly string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new NoAgentError(`the fleet registry did not answer within ${deps.readTimeoutMs}ms`)),
      deps.readTimeoutMs,
    );
  });
  return Promise.race([deps.owners.read(tenant, why), timeout]).finally(() => clearTimeout(timer));
}
