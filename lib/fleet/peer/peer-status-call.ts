/**
 * "What is your live state?", asked of a peer over its peer link: how any instance answers the
 * status API for the whole fleet (lib/fleet/fleet-status-source.ts). A kgw method of our own on
 * the peer port, never seen by an upstream peer:
 *
 * - request: POST PEER_STATUS_PATH, gRPC framing, no message; `kgw-peer-origin` (the asking
 *   instance, percent-encoded) and, for one tenant's detail, `kgw-peer-tenant`;
 * - answer: one message, the peer's InstanceSlice as UTF-8 JSON (lib/server/status/), then
 *   status OK. At most PEER_STATUS_MAX_BYTES: a peer's slice beyond that is refused, not read.
 *
 * Never rejects: an older peer (UNIMPLEMENTED), a refusal, a reset, a malformed answer and
 * silence past the timeout each come back as the reason the peer is shown as not answering.
 */
import { type ClientHttp2Session, constants as h2 } from "node:http2";
import { GrpcMessageDecoder } from "../../proto/grpc-http2.js";
import { type InstanceSlice, STATUS_API_VERSION } from "../../server/status/status-model.js";
import { PeerHeader } from "./peer-context.js";

export const PEER_STATUS_PATH = "/kgw.fleet.Peer/Status";

/**
 * Largest slice taken from a peer: an instance's slice is about 300 bytes per agent and 500 per
 * tenant, so 16 MiB holds tens of thousands of agents; a peer sending more is not believed.
 */
export const PEER_STATUS_MAX_BYTES = 16 * 1024 * 1024;

/** Why a peer's slice is missing, as the status API shows it. */
export type PeerStatusFailure = "unreachable" | "timeout" | "refused" | "malformed";

export type PeerStatusAnswer = { slice: InstanceSlice } | { failure: PeerStatusFailure; detail?: string };

/** Asks over `session`; never rejects. */
export function askPeerStatus(
  session: ClientHttp2Session,
  origin: string,
  tenant: string | undefined,
  timeoutMs: number,
): Promise<PeerStatusAnswer> {
  return new Promise((resolve) => {
    let stream: ReturnType<ClientHttp2Session["request"]>;
    try {
      stream = session.request(
        {
          ":method": "POST",
          ":path": PEER_STATUS_PATH,
          "content-type": "application/grpc",
          te: "trailers",
          [PeerHeader.origin]: encodeURIComponent(origin),
          ...(tenant === undefined ? {} : { [PeerHeader.tenant]: tenant }),
        },
        { endStream: true },
      );
    } catch {
      resolve({ failure: "unreachable" }); // the session closed under us
      return;
    }
    const decoder = new GrpcMessageDecoder(PEER_STATUS_MAX_BYTES);
    let message: Buffer | null = null;
    let settled = false;
    const settle = (answer: PeerStatusAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const timer = setTimeout(() => {
      settle({ failure: "timeout" });
      stream.close(h2.NGHTTP2_CANCEL);
    }, timeoutMs);
    timer.unref();
    const status = (headers: Record<string, unknown>) => {
      const code = headers["grpc-status"];
      if (code === undefined) return;
      if (code !== "0") {
        settle({ failure: "refused", detail: `grpc-status ${String(code)}` });
        return;
      }
      settle(message === null ? { failure: "malformed", detail: "no message" } : parseSlice(message));
    };
    stream.on("response", (headers) => status(headers));
    stream.on("trailers", (trailers) => status(trailers));
    stream.on("data", (chunk: Buffer) => {
      try {
        decoder.push(chunk);
        const next = decoder.next();
        if (next !== null) message ??= next;
      } catch (err) {
        settle({ failure: "malformed", detail: (err as Error).message });
        stream.close(h2.NGHTTP2_CANCEL);
      }
    });
    stream.on("error", () => settle({ failure: "unreachable" }));
    stream.on("close", () => settle({ failure: "unreachable" }));
  });
}

/** The slice in `message`, if it is one (the fields the merge reads are checked). */
export function parseSlice(message: Buffer): PeerStatusAnswer {
  let value: unknown;
  try {
    value = JSON.parse(message.toString("utf8"));
  } catch {
    return { failure: "malformed", detail: "not JSON" };
  }
  const v = value as Partial<InstanceSlice> | null;
  if (
    !v ||
    typeof v !== "object" ||
    v.apiVersion !== STATUS_API_VERSION ||
    typeof v.instance !== "string" ||
    typeof v.agents !== "number" ||
    typeof v.tunnels !== "number" ||
    !Array.isArray(v.tenants) ||
    !v.tenants.every((t) => t && typeof t.tenant === "string" && Array.isArray(t.agents))
  ) {
    return { failure: "malformed", detail: `not a ${STATUS_API_VERSION} instance slice` };
  }
  return { slice: v as InstanceSlice };
}
