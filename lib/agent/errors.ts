/**
 * Failures of the agent's own server connections. They never reach a peer, so they carry no wire
 * status mapping; the sync loop logs them and retries.
 */

/** A stream to a proxy server could not be opened or was refused (the gRPC code says why). */
export class ServerConnectError extends Error {
  readonly code = "ERR_SERVER_CONNECT";

  constructor(
    message: string,
    /** gRPC status code when the server (or grpc-js) answered with one. */
    readonly grpcCode?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ServerConnectError";
  }
}
