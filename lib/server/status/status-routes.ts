/**
 * The status API on the admin port (docs/OPERATIONS.md): `GET /status`, the fleet and its
 * tenants; `GET /status/tenants/<id>`, one tenant in detail. Any instance answers for the whole
 * fleet (FleetMembership.statusOf asks its peers); without a fleet the instance answers for
 * itself. JSON, versioned (`apiVersion`). The admin port is the operator's (loopback or the VPC):
 * these answers name every tenant, as /metrics does.
 */
import { isValidTenantId } from "../../tenancy/tenant-id.js";
import type { HttpReply, HttpRequestInfo, Routes } from "../../transport/http-endpoints.js";
import { DEFAULT_TENANT } from "../policy/agent-auth.js";
import { fleetStatus, type InstanceAnswer, tenantStatus } from "./fleet-status.js";
import type { InstanceSlice } from "./status-model.js";

export const STATUS_PATH = "/status";
export const TENANT_STATUS_PREFIX = "/status/tenants/";

export interface StatusRouteDeps {
  instance: string;
  /** This instance's slice (only `tenant`'s part, when given). */
  local(tenant?: string): InstanceSlice;
  /** The fleet's answers, this one's included; absent: no fleet, this instance alone. */
  fleet?(self: InstanceSlice, tenant: string | undefined): Promise<InstanceAnswer[]>;
  now?: () => number;
}

const json = (status: number, body: unknown): HttpReply => ({
  status,
  body: `${JSON.stringify(body, null, 2)}\n`,
  contentType: "application/json",
});

const problem = (status: number, code: string, message: string): HttpReply =>
  json(status, { error: { code, message } });

export function statusRoutes(deps: StatusRouteDeps): Routes {
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
    [STATUS_PATH]: async () => json(200, fleetStatus(deps.instance, await answers(), now())),
    [TENANT_STATUS_PREFIX]: async ({ path }: HttpRequestInfo) => {
      const id = path.slice(TENANT_STATUS_PREFIX.length);
      // Echoed only once it is known to be a tenant id (a DNS label): nothing to escape.
      if (!isValidTenantId(id) && id !== DEFAULT_TENANT) {
        return problem(400, "ERR_BAD_REQUEST", "the path must end in a tenant id (a DNS label)");
      }
      return json(200, tenantStatus(deps.instance, await answers(id), id, now()));
    },
  };
}
