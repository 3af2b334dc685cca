/**
 * The benchmark backend: a TCP source/sink speaking protocol.ts. Runs in its own process.
 */
import { createServer, type Server, type Socket } from "node:net";
import { PatternCheck, PatternSource } from "./pattern.js";
import { ACK_EVERY, ack, Op, PONG, parseCommand } from "./protocol.js";

/** Bytes handed to the socket per write: large enough that writes cost little per byte. */
const WRITE_BYTES = 256 * 1024;
const PONG_BYTE = Buffer.from([PONG]);

export function createBackend(): Server {
  const server = createServer({ noDelay: true }, serve);
  server.maxConnections = 100_000;
  return server;
}

function serve(socket: Socket): void {
  socket.on("error", () => socket.destroy());
  let header: Buffer = Buffer.alloc(0);
  let onBytes: ((chunk: Buffer) => void) | null = null;

  socket.on("data", (chunk: Buffer) => {
    if (onBytes) {
      onBytes(chunk);
      return;
    }
    header = header.length === 0 ? chunk : Buffer.concat([header, chunk]);
    for (let parsed = parseCommand(header); onBytes === null && parsed; parsed = parseCommand(header)) {
      const { op, n, patternStart } = parsed.command;
      header = header.subarray(parsed.bytes);
      switch (op) {
        case Op.PING:
          socket.write(PONG_BYTE);
          break;
        case Op.DOWNLOAD:
          onBytes = () => {};
          send(socket, n, new PatternSource(patternStart));
          break;
        case Op.UPLOAD:
          onBytes = uploadCounter(socket, n, new PatternCheck(patternStart));
          break;
        default:
          socket.destroy();
          return;
      }
    }
    if (onBytes !== null && header.length > 0) {
      const rest = header;
      header = Buffer.alloc(0);
      (onBytes as (chunk: Buffer) => void)(rest);
    }
  });
}

function send(socket: Socket, n: number, source: PatternSource): void {
  let left = n;
  const pump = () => {
    while (left > 0 && !socket.destroyed) {
      const len = Math.min(left, WRITE_BYTES);
      left -= len;
      if (!socket.write(source.next(len))) {
        socket.once("drain", pump);
        return;
      }
    }
  };
  pump();
}

/** Checks and counts what the client uploads; acknowledges as protocol.ts says. */
function uploadCounter(socket: Socket, n: number, check: PatternCheck): (chunk: Buffer) => void {
  let received = 0;
  let nextAck = Math.min(ACK_EVERY, n);
  let broken = false;
  return (chunk) => {
    if (broken) return;
    if (!check.accept(chunk)) {
      broken = true;
      socket.write(ack(check.checked, true));
      return;
    }
    received += chunk.length;
    if (received >= nextAck) {
      socket.write(ack(received));
      nextAck = Math.min(n, (Math.floor(received / ACK_EVERY) + 1) * ACK_EVERY);
      if (received >= n) nextAck = Number.POSITIVE_INFINITY;
    }
  };
}
