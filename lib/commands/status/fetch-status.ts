/**
 * One request to the status API at an admin address. Whatever goes wrong (nothing listening, a
 * timeout, an answer that is not the API's JSON) becomes an AdminUnreachableError naming the
 * address, so `kgw status` says which instance to look at.
 */
import { AdminUnreachableError } from "../../errors.js";
import { STATUS_API_VERSION } from "../../server/status/status-model.js";

/** The path of the fleet's status, or of one tenant's. */
export function statusPath(tenant: string | null): string {
  return tenant === null ? "/status" : `/status/tenants/${tenant}`;
}

/** Why a fetch failed, in words: the cause's code where Node gives one (ECONNREFUSED, ...). */
function reasonOf(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (typeof cause?.code === "string")
    return cause.code === "ECONNREFUSED" ? "connection refused" : cause.code;
  if ((err as Error).name === "TimeoutError") return "no answer in time";
  return typeof cause?.message === "string" ? cause.message : (err as Error).message;
}

export async function fetchStatus(
  adminUrl: string,
  tenant: string | null,
  timeoutMs: number,
): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${adminUrl}${statusPath(tenant)}`, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw new AdminUnreachableError(adminUrl, reasonOf(err), { cause: err });
  }
  let body: unknown;
  try {
    body = await res.json();
  } catch (err) {
    throw new AdminUnreachableError(adminUrl, `HTTP ${res.status}, not the status API's JSON`, {
      cause: err,
    });
  }
  const version = (body as { apiVersion?: unknown } | null)?.apiVersion;
  if (!res.ok || version !== STATUS_API_VERSION) {
    const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
    throw new AdminUnreachableError(
      adminUrl,
      typeof message === "string"
        ? `HTTP ${res.status}: ${message.slice(0, 200)}`
        : `HTTP ${res.status}, not ${STATUS_API_VERSION}`,
    );
  }
  return body;
}
