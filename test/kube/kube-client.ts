/**
 * A small Kubernetes API client for the test: HTTPS with the admin client certificate, over the
 * bridge's Unix socket for one kube-apiserver (see bridge.ts). Plain requests, streamed bodies,
 * and the two kinds of upgraded stream exec and port-forward use.
 */
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import type { IncomingMessage } from "node:http";
import { request } from "node:https";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { CHANNEL, WS_GUID, WsParser, wsFrame } from "./websocket.js";

export interface KubeResponse {
  status: number;
  body: Buffer;
  text: string;
  /** Parsed JSON body, or undefined. */
  json: unknown;
}

export class KubeClient {
  private readonly tls: { ca: Buffer; cert: Buffer; key: Buffer };

  constructor(
    readonly name: string,
    readonly socketPath: string,
    files: { ca: string; cert: string; key: string },
  ) {
    this.tls = {
      ca: fs.readFileSync(files.ca),
      cert: fs.readFileSync(files.cert),
      key: fs.readFileSync(files.key),
    };
  }

  /** Starts a request; the caller writes the body (if any) and ends it. */
  private start(method: string, path: string, headers: Record<string, string>, timeoutMs: number) {
    const req = request({
      socketPath: this.socketPath,
      // kube-apiserver's serving certificate is for localhost / 127.0.0.1.
      servername: "localhost",
      host: "localhost",
      method,
      path,
      headers,
      agent: false,
      timeout: timeoutMs,
      ...this.tls,
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
    return req;
  }

  /** The response, streaming; rejects on connection errors. */
  stream(
    method: string,
    path: string,
    opts: { body?: Buffer | string | Readable; headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = this.start(method, path, opts.headers ?? {}, opts.timeoutMs ?? 30_000);
      req.on("error", reject);
      req.on("response", resolve);
      const body = opts.body;
      if (body === undefined || typeof body === "string" || Buffer.isBuffer(body)) req.end(body);
      else body.pipe(req);
    });
  }

  async call(
    method: string,
    path: string,
    opts: {
      body?: Buffer | string | Readable;
      json?: unknown;
      contentType?: string;
      headers?: Record<string, string>;
      timeoutMs?: number;
    } = {},
  ): Promise<KubeResponse> {
    const headers: Record<string, string> = { accept: "application/json, */*", ...opts.headers };
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers["content-type"] = opts.contentType ?? "application/json";
    }
    const res = await this.stream(method, path, {
      headers,
      ...(body === undefined ? {} : { body }),
      ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }),
    });
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const buf = Buffer.concat(chunks);
    const text = buf.toString();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.statusCode ?? 0, body: buf, text, json };
  }

  /** An upgrade request; resolves with the raw socket once the server answered 101. */
  upgrade(
    method: string,
    path: string,
    headers: Record<string, string>,
  ): Promise<{ res: IncomingMessage; socket: Socket; head: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = this.start(method, path, { connection: "Upgrade", ...headers }, 30_000);
      req.on("error", reject);
      req.on("upgrade", (res, socket, head) => {
        socket.setTimeout(0);
        resolve({ res, socket, head });
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => {
          text += c.toString();
        });
        res.on("end", () => reject(new Error(`${path}: no upgrade, status ${res.statusCode}: ${text}`)));
      });
      req.end();
    });
  }

  /**
   * `kubectl exec -i … cat` as kubectl 1.36 does it: a WebSocket with v5.channel.k8s.io. Sends
   * `input` on stdin in 64 KiB messages, then closes stdin; resolves with what came back on
   * stdout and the status on the error stream.
   */
  async execCat(path: string, input: Buffer): Promise<{ stdout: Buffer; status: unknown }> {
    const key = randomBytes(16).toString("base64");
    const { res, socket, head } = await this.upgrade("GET", path, {
      upgrade: "websocket",
      "sec-websocket-version": "13",
      "sec-websocket-key": key,
      "sec-websocket-protocol": "v5.channel.k8s.io",
    });
    const expected = createHash("sha1")
      .update(key + WS_GUID)
      .digest("base64");
    if (res.headers["sec-websocket-accept"] !== expected) {
      socket.destroy();
      throw new Error(`bad Sec-WebSocket-Accept: ${res.headers["sec-websocket-accept"]}`);
    }
    const stdout: Buffer[] = [];
    let status: unknown;
    const done = new Promise<void>((resolve, reject) => {
      const parser = new WsParser((opcode, payload) => {
        if (opcode === 0x2 && payload[0] === CHANNEL.stdout) stdout.push(payload.subarray(1));
        else if (opcode === 0x2 && payload[0] === CHANNEL.error)
          status = JSON.parse(payload.subarray(1).toString());
        else if (opcode === 0x8) {
          socket.end();
          resolve();
        }
      });
      if (head.length) parser.push(head);
      socket.on("data", (c: Buffer) => parser.push(c));
      socket.on("error", reject);
      socket.on("close", () =>
        status === undefined ? reject(new Error("exec stream closed early")) : resolve(),
      );
    });
    const mask = () => randomBytes(4);
    for (let off = 0; off < input.length; off += 64 * 1024) {
      const part = input.subarray(off, off + 64 * 1024);
      socket.write(wsFrame(0x2, Buffer.concat([Buffer.from([CHANNEL.stdin]), part]), mask()));
    }
    socket.write(wsFrame(0x2, Buffer.from([CHANNEL.close, CHANNEL.stdin]), mask()));
    await done;
    return { stdout: Buffer.concat(stdout), status };
  }

  /**
   * Port-forward's SPDY upgrade (what kubectl falls back to). kube-apiserver splices bytes once
   * the kubelet answered 101, so after it the fake kubelet echoes raw bytes: resolves with what
   * came back for `input`.
   */
  async portForwardEcho(path: string, input: Buffer): Promise<Buffer> {
    const { res, socket, head } = await this.upgrade("POST", path, {
      upgrade: "SPDY/3.1",
      "x-stream-protocol-version": "portforward.k8s.io",
    });
    if (String(res.headers.upgrade).toLowerCase() !== "spdy/3.1") {
      socket.destroy();
      throw new Error(`unexpected Upgrade: ${res.headers.upgrade}`);
    }
    const got: Buffer[] = head.length ? [head] : [];
    let n = head.length;
    await new Promise<void>((resolve, reject) => {
      if (n >= input.length) resolve();
      socket.on("data", (c: Buffer) => {
        got.push(c);
        n += c.length;
        if (n >= input.length) resolve();
      });
      socket.on("error", reject);
      socket.on("close", () => reject(new Error(`port-forward stream closed after ${n} bytes`)));
      socket.write(input);
    });
    socket.destroy();
    return Buffer.concat(got);
  }
}
