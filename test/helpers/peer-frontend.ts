/**
 * A FrontendEnd that records what a dial did, for tests that call PeerLinks directly, as routing
 * does: the outcome (established or failed), the bytes delivered, and how the tunnel closed.
 */
import type { GatewayError } from "../../lib/errors.js";
import type { BackendLink, FrontendEnd } from "../../lib/tunnel/endpoints.js";

export interface RecordedDial {
  end: FrontendEnd;
  outcome: Promise<{ link?: BackendLink; err?: GatewayError }>;
  received(): Buffer;
  /** undefined while open; { err } once closed (err undefined: a clean close). */
  closed(): { err: GatewayError | undefined } | undefined;
}

export function recordingEnd(): RecordedDial {
  let resolve!: (v: { link?: BackendLink; err?: GatewayError }) => void;
  const outcome = new Promise<{ link?: BackendLink; err?: GatewayError }>((r) => {
    resolve = r;
  });
  const chunks: Buffer[] = [];
  let closed: { err: GatewayError | undefined } | undefined;
  return {
    end: {
      established: (link) => resolve({ link }),
      dialFailed: (err) => resolve({ err }),
      deliver: (data, flushed) => {
        chunks.push(Buffer.from(data));
        if (flushed) queueMicrotask(flushed);
        return true;
      },
      onceWritable: (cb) => queueMicrotask(cb),
      closed: (err) => {
        closed = { err };
      },
    },
    outcome,
    received: () => Buffer.concat(chunks),
    closed: () => closed,
  };
}
