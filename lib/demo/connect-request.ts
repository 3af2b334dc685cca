import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";

/**
 * GET http://<target><path> through the gateway's HTTP CONNECT frontend over mTLS: exactly what
 * kube-apiserver's `HTTPConnect` egress does before it speaks to a kubelet.
 */
export function getThroughConnect(opts: {
  proxyPort: number;
  target: string;
  path: string;
  tls: { ca: string; cert: string; key: string };
}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      host: "127.0.0.1",
      port: opts.proxyPort,
      servername: "localhost",
      method: "CONNECT",
      path: opts.target,
      headers: { host: "127.0.0.1" },
      agent: false,
      ...opts.tls,
    });
    req.once("error", reject);
    req.once("response", (res) => reject(new Error(`CONNECT answered ${res.statusCode}`)));
    req.once("connect", (res, socket: Socket) => {
      if (res.statusCode !== 200) {
        reject(new Error(`CONNECT answered ${res.statusCode}`));
        return;
      }
      const get = httpRequest({
        createConnection: () => socket,
        path: opts.path,
        headers: { host: opts.target },
      });
      get.once("error", reject);
      get.once("response", (r) => {
        const chunks: Buffer[] = [];
        r.on("data", (c: Buffer) => chunks.push(c));
        r.on("end", () => {
          socket.destroy();
          resolve({ status: r.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
        });
      });
      get.end();
    });
    req.end();
  });
}
