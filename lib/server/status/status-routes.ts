/**
 * The status API on the admin port (docs/OPERATIONS.md): `GET /status`, the fleet and its
 * tenants; `GET /status/tenants/<id>`, one tenant in detail. Any instance answers for the whole
 * fleet (status-reader.ts); without a fleet the instance answers for itself. JSON, versioned
 * (`apiVersion`). The admin port is the operator's (loopback or the VPC): these answers name
 * every tenant, as /metrics does.
 */
import type { HttpReply, HttpRequestInfo, Routes } from "../../transport/http-endpoints.js";
import { BAD_TENANT_PATH, type StatusReader, tenantIdOfPath } from "./status-reader.js";

export const STATUS_PATH = "/status";
export const TENANT_STATUS_PREFIX = "/status/tenants/";

const json = (status: number, body: unknown): HttpReply => ({
  status,
  body: `${JSON.stringify(body, null, 2)}\n`,
  contentType: "application/json",
});

const problem = (status: number, code: string, message: string): HttpReply =>
  json(status, { error: { code, message } });

export function statusRoutes(read: StatusReader): Routes {
  return {
    [STATUS_PATH]: async () => json(200, await read.fleet()),
    [TENANT_STATUS_PREFIX]: async ({ path }: HttpRequestInfo) => {
      const id = tenantIdOfPath(path, TENANT_STATUS_PREFIX);
      if (id === null) return problem(400, "ERR_BAD_REQUEST", BAD_TENANT_PATH);
      return json(200, await read.tenant(id));
    },
  };
}
