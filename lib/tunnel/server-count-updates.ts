/**
 * serverCount updates: a server tells our agents when the serverCount it would answer a
 * connecting agent changes (the fleet grew or shrank after they connected), so that they hold
 * as many streams as the fleet asks for, not as many as it asked when they joined.
 *
 * Upstream's agent learns serverCount only from the headers of a stream to a new server, so an
 * agent that joined a fleet still starting (or since grown) stays on fewer streams until it
 * happens to reconnect (its --sync-forever, off by default, would connect every sync interval to
 * find out, a handshake per agent per second). Here the server pushes the new count instead.
 *
 * Negotiated like the other extensions: our agent offers `kgw-server-count: v1` in its Connect
 * metadata (the HELLO of kgw-tunnel/1), our server acknowledges it in its response headers
 * (WELCOME). Only then does the server send KGW_SERVER_COUNT packets on that stream; an upstream
 * agent never offers it and never sees one.
 */

/** Metadata key of the offer (agent → server) and the acknowledgement (server → agent). */
export const SERVER_COUNT_HEADER = "kgw-server-count";
export const SERVER_COUNT_V1 = "v1";

/** Whether `headerValues` (one header's values; HTTP/2 may have joined them) hold SERVER_COUNT_V1. */
export function negotiatedServerCount(headerValues: readonly unknown[]): boolean {
  return headerValues.some(
    (v) =>
      typeof v === "string" &&
      v
        .split(",")
        .map((s) => s.trim())
        .includes(SERVER_COUNT_V1),
  );
}
