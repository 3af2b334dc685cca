/**
 * One HTTP CONNECT tunnel (kube-apiserver's `HTTPConnect` egress mode), after its request head
 * has been parsed. Status codes follow upstream: 200 established, 502 dial refused, 503 no agent,
 * 504 dial timeout (see httpStatusFor).
 */
import type { Socket } from "node:net";
import { CredentialRevokedError, type GatewayError, isRefusal, toGatewayError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { DialSteps } from "../../observability/dial-steps.js";
import type { BudgetedLog } from "../../observability/log-budget.js";
import type { Logger } from "../../observability/logger.js";
import { breakSocket } from "../../transport/break-socket.js";
import { connectRefusalResponse, refusalDetails } from "../../transport/refusal-details.js";
import type { BackendLink, DialHandle } from "../../tunnel/endpoints.js";
import type { CallerDialer, CallerIdentity } from "../core/dial-context.js";

/**
 * Bytes a client may send after its CONNECT head but before the dial completes. kube-apiserver
 * sends nothing until it sees 200; a TLS ClientHello from an eager client fits easily. Past it we
 * stop reading the socket, so TCP pushes back instead of our memory growing.
 */
export const PRE_DIAL_BUFFER_BYTES = 64 * 1024;

const ESTABLISHED = Buffer.from("HTTP/1.1 200 Connection established\r\n\r\n");

export interface ConnectTunnelOptions {
  socket: Socket;
  address: string;
  /** Bytes that followed the request head in the same read. */
  rest: Buffer;
  dialer: CallerDialer;
  /** Who dials: its tenant and credential name every line logged about the tunnel. */
  caller: Pick<CallerIdentity, "tenant" | "principal">;
  log: Logger;
  /** Dial failures that are not refusals, at info within a budget (log-budget.ts). */
  logFailure: BudgetedLog;
  /** Told of a dial refused by policy or quota (isRefusal), for the refusal throttle. */
  refused?: () => void;
  metrics: ServerMetrics;
  /**
   * Sockets of tunnels that ended cleanly and are still delivering their last bytes and FIN to
   * the caller, until the socket closes; shutdown waits for them before destroying sockets.
   */
  ending?: Set<Socket>;
  /** The dial's step clock (--dial-step-metrics): the agent's answer and the first byte end here. */
  steps?: DialSteps;
  /**
   * Told of each chunk read from the caller once the tunnel carries data: each arrived in a
   * fresh buffer, which the scavenge pacer frees (lib/transport/scavenge-pacer.ts).
   */
  bytesRead?: (bytes: number) => void;
}

/** A CONNECT tunnel being served, as its owner (the caller's credential) sees it. */
export interface ConnectTunnel {
  /**
   * Breaks the tunnel off (its credential was revoked): the caller reads an error after what it
   * was sent, never a clean end (break-socket.ts), and the dial or the backend link is closed.
   */
  breakOff(): void;
}

export function serveConnect(opts: ConnectTunnelOptions): ConnectTunnel {
  const { socket, log, metrics, bytesRead } = opts;
  let early: Buffer[] = opts.rest.length > 0 ? [opts.rest] : [];
  let earlyBytes = opts.rest.length;
  let link: BackendLink | null = null;
  let handle: DialHandle | null = null;
  let finished = false;
  /** The tunnel broke: the socket is being broken off (break-socket.ts), never ended. */
  let broken = false;
  /** Writes to the caller not yet completed, and who waits for there to be none. */
  let unflushed = 0;
  let whenFlushed: (() => void) | null = null;
  const write = (data: Uint8Array, flushed?: () => void): boolean => {
    unflushed++;
    return socket.write(data, (err) => {
      unflushed--;
      if (!err) flushed?.();
      if (unflushed === 0 && whenFlushed) {
        const cb = whenFlushed;
        whenFlushed = null;
        cb();
      }
    });
  };

  metrics.httpConnections.inc();
  const finish = () => {
    if (finished) return;
    finished = true;
    metrics.httpConnections.dec();
    if (link) link.close();
    else handle?.cancel();
  };

  const onData = (chunk: Buffer) => {
    if (broken) return; // the tunnel is gone: nothing to send it to
    if (link) {
      bytesRead?.(chunk.length);
      if (!link.send(chunk)) {
        socket.pause();
        link.onceWritable(() => socket.resume());
      }
      return;
    }
    early.push(chunk);
    earlyBytes += chunk.length;
    if (earlyBytes >= PRE_DIAL_BUFFER_BYTES) socket.pause();
  };

  socket.on("data", onData);
  // No half-close in the tunnel protocol: the client's FIN closes the whole connection, as upstream.
  socket.on("end", () => {
    finish();
    // A broken tunnel's socket is reset, never ended: an end under way makes a reset impossible.
    if (!broken) socket.end();
  });
  socket.on("close", finish);
  socket.on("error", (err) => log.debug({ err }, "CONNECT client socket error"));

  const fail = (err: GatewayError) => {
    if (finished) return;
    const { rule, quota, limit } = refusalDetails(err);
    const fields = {
      tenant: opts.caller.tenant,
      principal: opts.caller.principal,
      address: opts.address,
      err: err.message,
      code: err.code,
      ...(rule !== undefined ? { rule } : {}),
      ...(quota !== undefined ? { quota, limit } : {}),
    };
    if (isRefusal(err)) {
      // Counted, and in the dial's audit record: a storm of them need not also flood the log.
      log.debug(fields, "CONNECT dial refused");
      opts.refused?.();
    } else {
      opts.logFailure(fields, "CONNECT dial failed");
    }
    finished = true;
    metrics.httpConnections.dec();
    socket.end(connectRefusalResponse(err));
  };

  try {
    handle = opts.dialer(
      { protocol: "tcp", address: opts.address },
      {
        established: (l) => {
          if (finished) {
            l.close();
            return;
          }
          link = l;
          write(ESTABLISHED);
          opts.steps?.mark("agent");
          const pending = early;
          early = [];
          for (const chunk of pending) onData(chunk);
          if (earlyBytes >= PRE_DIAL_BUFFER_BYTES) socket.resume();
        },
        dialFailed: fail,
        deliver: (data, flushed) => {
          opts.steps?.mark("first-byte");
          return write(data, flushed);
        },
        onceWritable: (cb) => {
          if (socket.writableNeedDrain) socket.once("drain", cb);
          else queueMicrotask(cb);
        },
        closed: (err) => {
          if (finished) return;
          finished = true;
          metrics.httpConnections.dec();
          if (err) {
            // Broken, not finished (agent gone, owner gone, backend failed): a FIN would pass a
            // truncated transfer off as complete, and so would a bare reset to a caller that is
            // behind on reading: the caller reads an error after the last byte (break-socket.ts).
            breakOff(err.code);
          } else {
            socket.end();
            const ending = opts.ending;
            if (ending && !socket.destroyed) {
              ending.add(socket);
              socket.once("close", () => ending.delete(socket));
            }
          }
        },
      },
    );
  } catch (err) {
    fail(toGatewayError(err));
  }
  return { breakOff: () => breakOff(new CredentialRevokedError().code) };

  function breakOff(code: string): void {
    if (broken) return;
    broken = true;
    const outcome = breakSocket(socket, {
      whenFlushed: (cb) => {
        if (unflushed === 0) cb();
        else whenFlushed = cb;
      },
    });
    finish();
    metrics.brokenConnectTunnels.inc({ end: outcome });
    log.debug(
      { tenant: opts.caller.tenant, principal: opts.caller.principal, address: opts.address, code, outcome },
      "CONNECT tunnel broken",
    );
  }
}
