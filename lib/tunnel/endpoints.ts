import type { GatewayError } from "../errors.js";

/**
 * The two halves of one tunneled connection as the core sees them, whatever carries them
 * (a gRPC frontend stream, an HTTP CONNECT socket, later a peer link between instances).
 *
 * FrontendEnd is implemented by the caller's side; BackendLink by the side that reaches the
 * agent. Each side only ever calls the other through these methods, so the data path has no
 * knowledge of transports and can be tested with fakes.
 */

export interface FrontendEnd {
  /** The agent connected to the destination; `link` now carries data. Called at most once. */
  established(link: BackendLink): void;
  /** The dial failed; called at most once and never after `established`. */
  dialFailed(err: GatewayError): void;
  /**
   * Bytes from the destination. `false` means the caller's buffer for this connection is full:
   * the backend side stops reading until `onceWritable` fires. `flushed` runs once the bytes
   * have left our buffers (written to the socket or handed to HTTP/2); credit-based flow control
   * returns credit then.
   */
  deliver(data: Uint8Array, flushed?: () => void): boolean;
  /** Runs `cb` once `deliver` may be called again. */
  onceWritable(cb: () => void): void;
  /**
   * The backend side closed: the destination closed normally, or, when `err` is set, the
   * connection broke (agent gone, backend failed, protocol violation). The caller must be able to
   * tell the two apart, or a truncated transfer looks complete: a CONNECT socket is reset, a gRPC
   * caller gets CLOSE_RSP with the error.
   */
  closed(err?: GatewayError): void;
}

export interface BackendLink {
  /** Bytes towards the destination; `false` means back off until `onceWritable` fires. */
  send(data: Uint8Array): boolean;
  onceWritable(cb: () => void): void;
  /** The caller closed its side; the destination connection is closed too. */
  close(): void;
}

/** A dial that has been sent and not yet answered. */
export interface DialHandle {
  /** The caller no longer wants the connection (DIAL_CLS, or the caller went away). */
  cancel(): void;
}

/** What the caller asks for. */
export interface DialRequest {
  protocol: string;
  address: string;
  /**
   * The caller's tenant's egress policy in its wire form (lib/egress/egress-wire.ts), attached by
   * the dial authorizer; sent only to agents that asked to judge dials themselves.
   */
  egress?: string;
}
