/**
 * HTTP CONNECT to a tenant-mode gateway's one port, as Node's https client sends it: TLS with the
 * test CA, the caller's client certificate and/or `Proxy-Authorization: Bearer`. Resolves with the
 * status, the error code a refusal carries (X-Kgw-Error-Code) and the socket (the tunnel on 200).
 */
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import type { TestPki } from "./pki.js";

export interface GatewayCaller {
  token?: string;
  cert?: { certPem: string | Buffer; keyPem: string | Buffer };
  /** The loopback address to connect from (default: the kernel's choice, 127.0.0.1). */
  from?: string;
}

export interface GatewayConnect {
  status: number;
  code: string | undefined;
  headers: Record<string, unknown>;
  socket: Socket;
}

export function connectOnGatewayPort(
  pki: TestPki,
  port: number,
  caller: GatewayCaller,
  target: string,
): Promise<GatewayConnect> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      method: "CONNECT",
      path: target,
      host: "127.0.0.1",
      port,
      servername: "localhost",
      ca: pki.ca.certPem,
      agent: false,
      localAddress: caller.from,
      headers: { host: target, ...(caller.token ? { "proxy-authorization": `Bearer ${caller.token}` } : {}) },
      ...(caller.cert ? { cert: caller.cert.certPem, key: caller.cert.keyPem } : {}),
    });
    const answer = (res: { statusCode?: number; headers: Record<string, unknown> }, socket: Socket) => {
      socket.on("error", () => {}); // a reset is the test's to observe, through its own listeners
      const code = res.headers["x-kgw-error-code"];
      resolve({
        status: res.statusCode ?? 0,
        code: typeof code === "string" ? code : undefined,
        headers: res.headers,
        socket,
      });
    };
    // Node reports every answer to CONNECT as "connect", refusals included; "response" is kept
    // for answers Node does not treat as one.
    req.once("connect", (res, socket) => answer(res, socket));
    req.once("response", (res) => {
      res.resume();
      answer(res, res.socket);
    });
    req.once("error", reject);
    req.end();
  });
}
