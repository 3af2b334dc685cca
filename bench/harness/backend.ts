/**
 * The benchmark backend: a TCP source/sink speaking protocol.ts. Runs in its own process.
 */
import { createServer, type Server, type Socket } from "node:net";
import { ACK_EVERY, ack, COMMAND_BYTES, Op, PONG } from "./protocol.js";

/** One buffer, written again and again: the backend never allocates per byte sent. */
const CHUNK = Buffer.alloc(256 * 1024, 0x61);
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
    while (onBytes === null && header.length >= COMMAND_BYTES) {
      const op = header[0];
      const n = Number(header.readBigUInt64BE(1));
      header = header.subarray(COMMAND_BYTES);
      switch (op) {
        case Op.PING:
          socket.write(PONG_BYTE);
          break;
        case Op.DOWNLOAD:
          onBytes = () => {};
          send(socket, n);
          break;
        case Op.UPLOAD:
          onBytes = uploadCounter(socket, n);
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

function send(socket: Socket, n: number): void {
  let left = n;
  const pump = () => {
    while (left > 0 && !socket.destroyed) {
      const len = Math.min(left, CHUNK.length);
      left -= len;
      if (!socket.write(len === CHUNK.length ? CHUNK : CHUNK.subarray(0, len))) {
        socket.once("drain", pump);
        return;
      }
    }
  };
  pump();
}

function uploadCounter(socket: Socket, n: number): (chunk: Buffer) => void {
  let received = 0;
  let nextAck = Math.min(ACK_EVERY, n);
  return (chunk) => {
    received += chunk.length;
    if (received >= nextAck) {
      socket.write(ack(received));
      nextAck = Math.min(n, (Math.floor(received / ACK_EVERY) + 1) * ACK_EVERY);
      if (received >= n) nextAck = Number.POSITIVE_INFINITY;
    }
  };
}
