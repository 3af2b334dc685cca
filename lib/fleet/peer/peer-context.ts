/**
 * The caller's context on a forwarded dial, as request metadata of the peer call: who the
 * forwarding instance established the caller to be, so that the owner applies its own egress
 * policy, quotas and audit to the same tenant and principal. The owner trusts these values only
 * because the call came over a peer link (peer-identity.ts); it still checks each one, since a
 * malformed value must never become a tenant, a label or a log line.
 *
 * | header               | value                                                      |
 * | -------------------- | ---------------------------------------------------------- |
 * | `kgw-peer-tenant`    | tenant id (lib/tenancy/tenant-id.ts), or `default`          |
 * | `kgw-peer-principal` | the caller's principal, percent-encoded (encodeURIComponent) |
 * | `kgw-peer-frontend`  | `grpc` or `connect`                                         |
 * | `kgw-peer-listener`  | `tcp`, `uds` or `gateway`                                   |
 * | `kgw-peer-origin`    | the forwarding instance's --server-id, percent-encoded      |
 * | `kgw-peer-dial`      | the dial's id (its audit record's `dialId`), percent-encoded |
 *
 * Each exactly once (Node joins a repeated header with ", ", which no valid value contains).
 * `kgw-peer-dial` may be missing (a forwarding instance older than it): the dial is then served
 * without an id, and the origin still writes its record.
 */
import type { IncomingHttpHeaders } from "node:http2";
import type { CallerIdentity, CallerListener, FrontendKind } from "../../server/core/dial-context.js";
import { DEFAULT_TENANT } from "../../server/policy/agent-auth.js";
import { isValidTenantId } from "../../tenancy/tenant-id.js";
import { PROXY_SERVICE } from "../../transport/grpc/services.js";

/** The peer call is the frontend's own method: the upstream frontend protocol, unchanged. */
export const PEER_PROXY_PATH = PROXY_SERVICE.proxy!.path;

export const PeerHeader = {
  tenant: "kgw-peer-tenant",
  principal: "kgw-peer-principal",
  frontend: "kgw-peer-frontend",
  listener: "kgw-peer-listener",
  origin: "kgw-peer-origin",
  dial: "kgw-peer-dial",
} as const;

/** Longest principal accepted, decoded: a certificate CN (64) and serial (40) fit many times. */
const MAX_PRINCIPAL_CHARS = 512;
/** Longest instance id accepted, decoded: a UUID, a task ARN, a host name. */
const MAX_ORIGIN_CHARS = 256;
/** Longest dial id accepted, decoded: ours are UUIDs (36). */
const MAX_DIAL_ID_CHARS = 64;

const FRONTENDS: readonly FrontendKind[] = ["grpc", "connect"];
const LISTENERS: readonly CallerListener[] = ["tcp", "uds", "gateway"];

/** What the owner learns from a peer call's metadata. */
export interface PeerContext {
  caller: CallerIdentity;
  frontend: FrontendKind;
  /** The forwarding instance's id. */
  origin: string;
  /** The dial's id where it arrived; absent from a forwarding instance that sends none. */
  dialId?: string;
}

/** The metadata that carries `caller` and `frontend` from instance `origin`. */
export function peerContextHeaders(
  caller: CallerIdentity,
  frontend: FrontendKind,
  origin: string,
  dialId?: string,
): Record<string, string> {
  return {
    [PeerHeader.tenant]: caller.tenant,
    [PeerHeader.principal]: encodeURIComponent(caller.principal),
    [PeerHeader.frontend]: frontend,
    [PeerHeader.listener]: caller.listener,
    [PeerHeader.origin]: encodeURIComponent(origin),
    ...(dialId === undefined ? {} : { [PeerHeader.dial]: encodeURIComponent(dialId) }),
  };
}

/** The tenant a peer call names (`kgw-peer-tenant`), or why it is refused (INVALID_ARGUMENT). */
export function parsePeerTenant(headers: IncomingHttpHeaders): string | { problem: string } {
  const tenant = headers[PeerHeader.tenant];
  if (typeof tenant !== "string" || tenant === "") return { problem: `missing ${PeerHeader.tenant}` };
  if (!isValidTenantId(tenant) && tenant !== DEFAULT_TENANT) {
    return { problem: `${PeerHeader.tenant} is not a tenant id` };
  }
  return tenant;
}

/** The context of a peer call, or why its metadata is refused (INVALID_ARGUMENT). */
export function parsePeerContext(headers: IncomingHttpHeaders): PeerContext | { problem: string } {
  const one = (name: string): string | { problem: string } => {
    const v = headers[name];
    if (typeof v !== "string" || v === "") return { problem: `missing ${name}` };
    return v;
  };
  const tenant = parsePeerTenant(headers);
  if (typeof tenant !== "string") return tenant;
  const frontend = one(PeerHeader.frontend);
  if (typeof frontend !== "string") return frontend;
  if (!(FRONTENDS as readonly string[]).includes(frontend)) {
    return { problem: `${PeerHeader.frontend} is not one of ${FRONTENDS.join(", ")}` };
  }
  const listener = one(PeerHeader.listener);
  if (typeof listener !== "string") return listener;
  if (!(LISTENERS as readonly string[]).includes(listener)) {
    return { problem: `${PeerHeader.listener} is not one of ${LISTENERS.join(", ")}` };
  }
  const principal = decoded(headers, PeerHeader.principal, MAX_PRINCIPAL_CHARS);
  if (typeof principal !== "string") return principal;
  const origin = decoded(headers, PeerHeader.origin, MAX_ORIGIN_CHARS);
  if (typeof origin !== "string") return origin;
  const context: PeerContext = {
    caller: { tenant, principal, listener: listener as CallerListener },
    frontend: frontend as FrontendKind,
    origin,
  };
  if (headers[PeerHeader.dial] === undefined) return context;
  const dialId = decoded(headers, PeerHeader.dial, MAX_DIAL_ID_CHARS);
  if (typeof dialId !== "string") return dialId;
  context.dialId = dialId;
  return context;
}

/** Only what encodeURIComponent writes: unreserved characters and %XX. */
const PERCENT_ENCODED = /^(?:[A-Za-z0-9\-_.!~*'()]|%[0-9A-Fa-f]{2})+$/;
/** C0 and C1 controls, DEL, and the Unicode line separators: never in a log line or a label. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

function decoded(headers: IncomingHttpHeaders, name: string, maxChars: number): string | { problem: string } {
  const v = headers[name];
  if (typeof v !== "string" || v === "") return { problem: `missing ${name}` };
  // Checked before decoding, so that an oversized value costs nothing to refuse.
  if (v.length > maxChars * 12 || !PERCENT_ENCODED.test(v)) {
    return { problem: `${name} is not a percent-encoded value` };
  }
  let text: string;
  try {
    text = decodeURIComponent(v);
  } catch {
    return { problem: `${name} is not percent-encoded UTF-8` };
  }
  if (text.length > maxChars) return { problem: `${name} is longer than ${maxChars} characters` };
  if (CONTROL.test(text)) return { problem: `${name} contains control characters` };
  return text;
}
