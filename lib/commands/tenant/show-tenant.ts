/**
 * `kgw tenant show`: the stored tenant (credentials, install links) and, given an admin address
 * (--admin-url or KGW_ADMIN_URL), its live state across the fleet from the status API
 * (`GET /status/tenants/<id>`, lib/commands/status/fetch-status.ts), asked once the store has
 * answered. The store's view is printed whatever the admin address does: it is what an operator
 * acts on (revoke, rotate). When the live state cannot be had, a warning names the address and
 * the exit code is 1, a partial result, so that a script never takes a missing live state for a
 * tenant without agents.
 */
import { AdminUnreachableError } from "../../errors.js";
import type { TenantStatus } from "../../server/status/status-model.js";
import { TenantNotFoundError } from "../../tenancy/errors.js";
import type { TenantStore } from "../../tenancy/store.js";
import { EXIT, type ExitCode } from "../exit-codes.js";
import { fetchStatus } from "../status/fetch-status.js";
import { DEFAULT_STATUS_TIMEOUT_MS } from "../status/parse-status-command.js";
import { activityLines, agentsTable, cell, header } from "../status/render-status.js";
import type { TenantCommand } from "./parse-tenant-command.js";
import { type PublicCredential, publicTenant, tenantDetails } from "./render.js";
import type { Io } from "./tenant-io.js";

type ShowCommand = Extract<TenantCommand, { name: "show" }>;

/** A stored credential as the status API names it: "token:<id>" or "cert:<serial>". */
export function statusCredentialId(c: Pick<PublicCredential, "kind" | "id">): string {
  return `${c.kind.endsWith("-token") ? "token" : "cert"}:${c.id}`;
}

async function liveState(command: ShowCommand & { adminUrl: string }) {
  try {
    const live = (await fetchStatus(
      command.adminUrl,
      command.tenantId,
      DEFAULT_STATUS_TIMEOUT_MS,
    )) as TenantStatus;
    return { live, problem: null };
  } catch (err) {
    if (!(err instanceof AdminUnreachableError)) throw err;
    return { live: null, problem: err };
  }
}

function liveText(adminUrl: string, live: TenantStatus, unknownIds: readonly string[]): string {
  return [
    "",
    `LIVE STATE from ${cell(adminUrl)}. ${header(live)}`,
    `AGENTS\n${agentsTable(live.tenant)}`,
    ...activityLines(live.tenant),
    ...(unknownIds.length > 0 ? [`USED BUT NOT IN THE STORE: ${unknownIds.map(cell).join(", ")}\n`] : []),
  ].join("\n");
}

export async function showTenant(command: ShowCommand, store: TenantStore, io: Io): Promise<ExitCode> {
  const record = await store.get(command.tenantId);
  if (!record) throw new TenantNotFoundError(`tenant ${command.tenantId}`);
  const tenant = publicTenant(record, io.now());
  const json = command.output === "json";
  if (command.adminUrl === null) {
    io.out(json ? `${JSON.stringify({ tenant }, null, 2)}\n` : tenantDetails(record, io.now()));
    return EXIT.OK;
  }
  const { live, problem } = await liveState({ ...command, adminUrl: command.adminUrl });
  if (json) {
    const body = { tenant, live, ...(problem ? { liveError: problem.message } : {}) };
    io.out(`${JSON.stringify(body, null, 2)}\n`);
  } else if (live === null) {
    io.out(tenantDetails(record, io.now()));
  } else {
    const used = new Map(live.tenant.credentials.map((c) => [c.id, c.lastUsed]));
    const stored = new Set(tenant.credentials.map(statusCredentialId));
    const unknown = [...used.keys()].filter((id) => !stored.has(id));
    io.out(
      tenantDetails(record, io.now(), (c) => used.get(statusCredentialId(c)) ?? null) +
        liveText(command.adminUrl, live, unknown),
    );
  }
  if (problem) {
    io.err(
      `kgw tenant show: warning: the stored tenant is shown without its live state: ${problem.message}\n`,
    );
    return EXIT.FAILED;
  }
  return EXIT.OK;
}
