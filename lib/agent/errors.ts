/**
 * Failures of the agent's own server connections. They never reach a peer, so they carry no wire
 * status mapping; the sync loop logs them and retries.
 */

import { GatewayError } from "../errors.js";

/** A stream to a proxy server could not be opened or was refused (the gRPC code says why). */
export class ServerConnectError extends GatewayError {
  constructor(
    message: string,
    /** gRPC status code when the server (or grpc-js) answered with one. */
    readonly grpcCode?: number,
    options?: { cause?: unknown },
  ) {
    super("ERR_SERVER_CONNECT", message, options);
  }
}
