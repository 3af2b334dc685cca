/**
 * The admin port's one way to read the status model, shared by its two faces (the JSON of
 * status-routes.ts and the page of page/page-routes.ts): this instance's slice and, in a fleet,
 * its peers' (FleetMembership.statusOf, bounded fan-out), merged by fleet-status.ts. A page and
 * a JSON answer of the same moment say the same, because they are the same call.
 */
import { isValidTenantId } from "../../tenancy/tenant-id.js";
import { DEFAULT_TENANT } from "../policy/agent-auth.js";
import { fleetStatus, type InstanceAnswer, tenantStatus } from "./fleet-status.js";
import type { FleetStatus, InstanceSlice, TenantStatus } from "./status-model.js";

export interface StatusReaderDeps {
  instance: string;
  /** This instance's slice (only `tenant`'s part, when given). */
  local(tenant?: string): InstanceSlice;
  /** The fleet's answers, this one's included; absent: no fleet, this instance alone. */
  fleet?(self: InstanceSlice, tenant: string | undefined): Promise<InstanceAnswer[]>;
  now?: () => number;
}

export interface StatusReader {
  /** The instance answering. */
  readonly instance: string;
  fleet(): Promise<FleetStatus>;
  /** One tenant in detail; `id` must have passed tenantIdOfPath. */
  tenant(id: string): Promise<TenantStatus>;
}

export function statusReader(deps: StatusReaderDeps): StatusReader {
  const now = deps.now ?? Date.now;
  const answers = async (tenant?: string): Promise<InstanceAnswer[]> => {
    const self = deps.local(tenant);
    if (deps.fleet) return deps.fleet(self, tenant);
    return [
      {
        id: deps.instance,
        peerAddress: null,
        lease: "none",
        leaseExpiresAt: null,
        slice: self,
        reason: null,
      },
    ];
  };
  return {
    instance: deps.instance,
    fleet: async () => fleetStatus(deps.instance, await answers(), now()),
    tenant: async (id) => tenantStatus(deps.instance, await answers(id), id, now()),
  };
}

/** What a path naming no tenant is told, by the JSON and the page alike. */
export const BAD_TENANT_PATH = "the path must end in a tenant id (a DNS label)";

/**
 * The tenant id a path ends in after `prefix`, or null when it is not one (a DNS label, or the
 * drop-in mode's `default`). Only an id that passed may be echoed: it has nothing to escape.
 */
export function tenantIdOfPath(path: string, prefix: string): string | null {
  const id = path.slice(prefix.length);
  return isValidTenantId(id) || id === DEFAULT_TENANT ? id : null;
}
