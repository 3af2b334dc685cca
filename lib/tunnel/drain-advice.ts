/**
 * Drain advice: a server that is shutting down tells our agents so, so that they move before
 * their stream is cut (make-before-break).
 *
 * Negotiated like the other extensions: our agent offers `kgw-drain: v1` in its Connect metadata
 * (the HELLO of kgw-tunnel/1), our server acknowledges it in its response headers (WELCOME).
 * Only then, at the start of a graceful shutdown, does the server send the agent a DRAIN packet
 * (PacketType.DRAIN, already in upstream's proto, where only agents send it): over gRPC as a
 * stream message, over kgw-tunnel/1 as a PACKET frame. An upstream agent never offers it, never
 * gets the packet, and sees its stream closed as upstream's server would close it.
 *
 * The agent, on DRAIN from a server, stops counting that connection towards serverCount (so its
 * client set dials a replacement at once), keeps serving the tunnels already open on it, and
 * closes it once they are done or the server closes it (lib/agent/client-set.ts).
 */

/** Metadata key of the offer (agent → server) and the acknowledgement (server → agent). */
export const DRAIN_HEADER = "kgw-drain";
export const DRAIN_V1 = "v1";

/** Whether `headerValues` (one header's values; HTTP/2 may have joined them) hold DRAIN_V1. */
export function negotiatedDrain(headerValues: readonly unknown[]): boolean {
  return headerValues.some(
    (v) =>
      typeof v === "string" &&
      v
        .split(",")
        .map((s) => s.trim())
        .includes(DRAIN_V1),
  );
}
