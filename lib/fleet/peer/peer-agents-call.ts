/**
 * "Do you hold agents of tenant T?", asked of a peer over its peer link: how routing finds a
 * tenant's agents when the registry cannot say (lib/fleet/peer-probe.ts). Peer links are
 * ours at both ends, so this is a kgw method of our own on the peer port, never seen by an
 * upstream peer:
 *
 * - request: POST PEER_AGENTS_PATH, gRPC framing, no message; `kgw-peer-tenant` (the tenant id)
 *   and `kgw-peer-origin` (the asking instance, percent-encoded) as metadata;
 * - answer: response metadata `kgw-peer-agents` (decimal: the tenant's agents there that answer
 *   and take dials, 0 while the instance drains), then status OK with no message.
 *
 * An older peer answers UNIMPLEMENTED; that, a refusal, a reset and silence past the timeout all
 * count as "cannot say", never as "has agents".
 */
import { type ClientHttp2Session, constants as h2 } from "node:http2";
import { PeerHeader } from "./peer-context.js";

export const PEER_AGENTS_PATH = "/kgw.fleet.Peer/Agents";
export const PEER_AGENTS_HEADER = "kgw-peer-agents";

/**
 * Why a peer is asked (kgw_server_peer_probes_total's `reason`, and the probe's log line): the
 * registry cannot be read, or no owner it names took a dial (an agent's row may be unwritten).
 */
export type ProbeReason = "registry_unreadable" | "no_live_owner";

/** A peer's answer, for kgw_server_peer_probes_total: how many agents, or why none was had. */
export type PeerAgentsAnswer = { agents: number } | "unavailable" | "refused" | "timeout";

/** Largest count taken from a peer: far beyond any tenant's agents on one instance. */
const MAX_AGENTS = 1_000_000;

/** Asks over `session`; never rejects. */
export function askPeerAgents(
  session: ClientHttp2Session,
  tenant: string,
  origin: string,
  timeoutMs: number,
): Promise<PeerAgentsAnswer> {
  return new Promise((resolve) => {
    let stream: ReturnType<ClientHttp2Session["request"]>;
    try {
      stream = session.request(
        {
          ":method": "POST",
          ":path": PEER_AGENTS_PATH,
          "content-type": "application/grpc",
          te: "trailers",
          [PeerHeader.tenant]: tenant,
          [PeerHeader.origin]: encodeURIComponent(origin),
        },
        { endStream: true },
      );
    } catch {
      resolve("unavailable"); // the session closed under us
      return;
    }
    let settled = false;
    const settle = (answer: PeerAgentsAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const timer = setTimeout(() => {
      settle("timeout");
      stream.close(h2.NGHTTP2_CANCEL);
    }, timeoutMs);
    timer.unref();
    stream.on("response", (headers) => {
      const status = headers["grpc-status"];
      const count = headers[PEER_AGENTS_HEADER];
      if (status !== undefined && status !== "0") settle("refused");
      else if (typeof count === "string" && /^\d{1,7}$/.test(count) && Number(count) <= MAX_AGENTS) {
        settle({ agents: Number(count) });
      } else settle("refused");
    });
    stream.on("error", () => settle("unavailable"));
    stream.on("close", () => settle("unavailable"));
    stream.resume(); // no message is expected; the trailers end it
  });
}
