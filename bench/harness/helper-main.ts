/**
 * Entry point of the benchmark's helper processes:
 *   helper-main.ts backend
 *   helper-main.ts http-backend
 *   helper-main.ts relay --target-port=P
 *   helper-main.ts delay --target-port=P --delay-ms=D
 * Each listens on an ephemeral loopback port and prints {"port":N} once it does.
 */
import type { Server } from "node:net";
import { createBackend } from "./backend.js";
import { createHttpBackend } from "./http-backend.js";
import { createDelayProxy, createRelay } from "./relay.js";

function flag(name: string): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  const value = Number(arg?.slice(name.length + 3));
  if (!arg || !Number.isFinite(value)) throw new Error(`--${name}=<number> is required`);
  return value;
}

const role = process.argv[2];
let server: Server;
switch (role) {
  case "backend":
    server = createBackend();
    break;
  case "http-backend":
    server = createHttpBackend();
    break;
  case "relay":
    server = createRelay(flag("target-port"));
    break;
  case "delay":
    server = createDelayProxy(flag("target-port"), flag("delay-ms"));
    break;
  default:
    process.stderr.write(`unknown role ${role}\n`);
    process.exit(2);
}
server.listen({ port: 0, host: "127.0.0.1", backlog: 4096 }, () => {
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => process.exit(0));
