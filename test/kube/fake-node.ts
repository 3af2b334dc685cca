/**
 * Runs inside the suite's network namespace: a fake kubelet and a fake pod, on the test addresses
 * only the agent is meant to reach.
 *
 *   node --import tsx test/kube/fake-node.ts '<json FakeNodeConfig>'
 *
 * Kubelet (HTTPS, client certificate required, as a kubelet requires kube-apiserver's):
 *   GET /healthz                                   → "ok"
 *   GET /containerLogs/<ns>/<pod>/<container>      → LOG_TEXT
 *   GET /exec/<ns>/<pod>/<container>  (WebSocket, v5.channel.k8s.io) → 101; stdin is echoed on
 *       stdout (`cat`), and closing stdin ends the session with a Success status on the error stream
 *   POST /portForward/<ns>/<pod>      (SPDY/3.1 upgrade) → 101, then every byte echoed back
 * Pod (HTTP):
 *   GET /hello → "hello from <pod>"; GET /bytes?n=N → N pattern bytes; POST /sha256 → digest
 *   and length of the body; GET /hold → 64 KiB, then nothing until the connection goes.
 *
 * Answers close their connection (each request is a new dial). Every accepted connection is looked up with `ss -tnpH` before its first request is answered
 * (so it is still open), and reported on stdout as one JSON line:
 *   {"conn":{"server":"kubelet"|"pod","peer":"ip:port","pid":N,"comm":"…"}}
 * and, when it closes, as {"closed":{"server":…,"peer":"ip:port"}}. The test checks that each
 * belongs to the agent process: the bytes went through the tunnel.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { patternStream, sha256Of } from "../helpers/backends.js";
import { LOG_TEXT } from "./topology.js";
import { CHANNEL, WS_GUID, WsParser, wsFrame } from "./websocket.js";

export interface FakeNodeConfig {
  nodeIp: string;
  kubeletPort: number;
  podIp: string;
  podPort: number;
  podName: string;
  /** PEM file paths: the kubelet's serving certificate and the CA of kube-apiserver's client cert. */
  kubeletCert: string;
  kubeletKey: string;
  clientCa: string;
}

export interface ConnRecord {
  server: "kubelet" | "pod";
  /**
   * The order in which this node accepted the connection (from 1). The record itself is printed
   * once its owner is known, which can be seconds later on a loaded machine; an `accepted` line
   * with the same number is printed at once, so that a reader can mark "every connection so far"
   * without missing one whose record is still to come (node-log.ts).
   */
  seq: number;
  peer: string;
  pid: number;
  comm: string;
}

/** Which process owns the other end of an accepted connection (its local address is our peer). */
function ownerOf(peerIp: string, peerPort: number): Promise<{ pid: number; comm: string }> {
  return new Promise((resolve) => {
    execFile(
      "ss",
      ["-tnpH", "state", "established", "src", `${peerIp}:${peerPort}`],
      { timeout: 5000 },
      (err, out) => {
        const m = /users:\(\("([^"]*)",pid=(\d+)/.exec(err ? "" : out);
        resolve(m ? { comm: m[1]!, pid: Number(m[2]) } : { comm: "", pid: 0 });
      },
    );
  });
}

/** Numbers the connections this node accepts, its kubelet's and its pod's together. */
let accepted = 0;
const nextSeq = (): number => ++accepted;

/** Starts the lookup when a connection arrives; requests on it wait for the answer. */
function trackOwners(server: "kubelet" | "pod") {
  const owners = new Map<string, Promise<void>>();
  return {
    onConnection(socket: Socket) {
      const peer = `${socket.remoteAddress}:${socket.remotePort}`;
      const seq = nextSeq();
      process.stdout.write(`${JSON.stringify({ accepted: { server, seq } })}\n`);
      owners.set(
        peer,
        ownerOf(socket.remoteAddress!, socket.remotePort!).then(({ pid, comm }) => {
          const conn: ConnRecord = { server, seq, peer, pid, comm };
          process.stdout.write(`${JSON.stringify({ conn })}\n`);
        }),
      );
      socket.once("close", () => {
        // After the ownership line, so that a reader sees every connection open before it closes.
        void owners
          .get(peer)
          ?.then(() => process.stdout.write(`${JSON.stringify({ closed: { server, peer } })}\n`));
        owners.delete(peer);
      });
    },
    ready(socket: Socket): Promise<void> {
      return owners.get(`${socket.remoteAddress}:${socket.remotePort}`) ?? Promise.resolve();
    },
  };
}

function podHandler(podName: string) {
  return async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://pod");
    if (url.pathname === "/hello") {
      res.end(`hello from ${podName}`);
    } else if (url.pathname === "/bytes") {
      const n = Number(url.searchParams.get("n") ?? "0");
      res.writeHead(200, { "content-length": String(n), "content-type": "application/octet-stream" });
      patternStream(n).pipe(res);
    } else if (url.pathname === "/sha256" && req.method === "POST") {
      const { hex, bytes } = await sha256Of(req);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ sha256: hex, bytes }));
    } else if (url.pathname === "/hold") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.write(Buffer.alloc(64 * 1024, 0x61));
    } else {
      res.writeHead(404).end();
    }
  };
}

/** `cat` over the v5.channel.k8s.io WebSocket protocol, as a kubelet runs it for exec. */
function serveExec(req: IncomingMessage, socket: Duplex): void {
  const key = req.headers["sec-websocket-key"];
  const protocols = String(req.headers["sec-websocket-protocol"] ?? "").split(/,\s*/);
  if (typeof key !== "string" || !protocols.includes("v5.channel.k8s.io")) {
    socket.end("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    return;
  }
  const accept = createHash("sha1")
    .update(key + WS_GUID)
    .digest("base64");
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n`,
  );
  const parser = new WsParser((opcode, payload) => {
    if (opcode === 0x8) {
      socket.end(wsFrame(0x8, Buffer.alloc(0)));
    } else if (opcode === 0x2 && payload[0] === CHANNEL.stdin) {
      socket.write(wsFrame(0x2, Buffer.concat([Buffer.from([CHANNEL.stdout]), payload.subarray(1)])));
    } else if (opcode === 0x2 && payload[0] === CHANNEL.close && payload[1] === CHANNEL.stdin) {
      // stdin closed: `cat` exits 0.
      const status = Buffer.from(JSON.stringify({ metadata: {}, status: "Success" }));
      socket.write(wsFrame(0x2, Buffer.concat([Buffer.from([CHANNEL.error]), status])));
      socket.end(wsFrame(0x8, Buffer.from([0x03, 0xe8])));
    }
  });
  socket.on("data", (c: Buffer) => parser.push(c));
  socket.on("error", () => socket.destroy());
}

/** Port-forward's legacy SPDY upgrade: kube-apiserver splices bytes after the 101, so echo them. */
function servePortForward(socket: Duplex): void {
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n" +
      "X-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n",
  );
  socket.on("error", () => socket.destroy());
  socket.pipe(socket);
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2] ?? "") as FakeNodeConfig;

  const podOwners = trackOwners("pod");
  const podServe = podHandler(cfg.podName);
  // Every answer closes its connection, so each request is a new dial through the tunnel and the
  // test can account for every one of them.
  const pod = createHttpServer((req, res) => {
    res.setHeader("connection", "close");
    void podOwners.ready(req.socket).then(() => podServe(req, res));
  });
  pod.on("connection", (s: Socket) => podOwners.onConnection(s));

  const kubeletOwners = trackOwners("kubelet");
  const kubelet = createHttpsServer(
    {
      cert: readFileSync(cfg.kubeletCert),
      key: readFileSync(cfg.kubeletKey),
      ca: readFileSync(cfg.clientCa),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      res.setHeader("connection", "close");
      void kubeletOwners.ready(req.socket).then(() => {
        const url = new URL(req.url ?? "/", "https://kubelet");
        if (url.pathname === "/healthz") res.end("ok");
        else if (url.pathname.startsWith("/containerLogs/")) res.end(LOG_TEXT);
        else res.writeHead(404).end();
      });
    },
  );
  kubelet.on("connection", (s: Socket) => kubeletOwners.onConnection(s));
  kubelet.on("upgrade", (req: IncomingMessage, socket: Duplex) => {
    void kubeletOwners.ready(req.socket).then(() => {
      const url = new URL(req.url ?? "/", "https://kubelet");
      if (url.pathname.startsWith("/exec/")) serveExec(req, socket);
      else if (url.pathname.startsWith("/portForward/")) servePortForward(socket);
      else socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    });
  });

  await Promise.all([
    new Promise<void>((r) => pod.listen(cfg.podPort, cfg.podIp, r)),
    new Promise<void>((r) => kubelet.listen(cfg.kubeletPort, cfg.nodeIp, r)),
  ]);
  process.stdout.write("fake node ready\n");
  process.once("SIGTERM", () => {
    pod.closeAllConnections();
    kubelet.closeAllConnections();
    pod.close();
    kubelet.close();
  });
}

await main();
