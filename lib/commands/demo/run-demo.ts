/**
 * `kgw demo …`: the quick start. Starts a throwaway CA, a gateway, an agent and a service behind
 * it on loopback (lib/demo/local-stack.ts), sends a request through the tunnel, prints how to
 * try it by hand, and keeps running until told to stop (or exits with --once).
 *
 * A temporary directory it made (no --dir) holds a CA key and private keys: it is removed on
 * every way out, a busy port, a failed start, Ctrl-C, SIGTERM, and `process.exit` from the
 * entrypoint on a second signal included.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { addressInUse } from "../../demo/address-in-use.js";
import { getThroughConnect } from "../../demo/connect-request.js";
import { DEMO_PORTS, type LocalStack, startLocalStack } from "../../demo/local-stack.js";
import { createLogger } from "../../observability/logger.js";
import { clearPortsFile, writePortsFile } from "../../observability/ports-file.js";
import type { DemoCommand } from "./parse-demo-command.js";

export interface DemoIo {
  out(text: string): void;
  err(text: string): void;
  /**
   * Resolves when the demo is to stop (the entrypoint: SIGINT or SIGTERM, listened for from the
   * start, so that a signal during start-up still ends in a clean stop).
   */
  untilStopped(): Promise<void>;
}

/**
 * Exit codes: 0 done (with --once: the request was answered 200); 1 it was not, or the demo
 * could not start (a port already in use: the message names it and --ephemeral-ports).
 */
export async function runDemo(command: DemoCommand, io: DemoIo): Promise<number> {
  const madeDir = command.dir === "";
  const dir = command.dir || mkdtempSync(join(tmpdir(), "kgw-demo-"));
  const removeDir = () => {
    if (madeDir) rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", removeDir);
  try {
    return await runIn(dir, command, io);
  } catch (err) {
    const busy = addressInUse(err);
    if (!busy) throw err;
    const port = busy.port === null ? "one of its ports" : `port ${busy.port}`;
    io.err(
      `kgw demo: ${port} is already in use (${busy.message}).\n` +
        `  The demo listens on ${Object.values(DEMO_PORTS).join(", ")} by default; stop what holds ${port},\n` +
        "  or run it on free ports: kgw demo --ephemeral-ports\n",
    );
    return 1;
  } finally {
    process.off("exit", removeDir);
    removeDir();
  }
}

async function runIn(dir: string, command: DemoCommand, io: DemoIo): Promise<number> {
  let stopAsked = false;
  const stopped = io.untilStopped().then(() => {
    stopAsked = true;
  });
  if (command.portsFile) await clearPortsFile(command.portsFile);
  const log = createLogger({ name: "kgw-demo", level: command.logLevel });
  const stack = await startLocalStack({ dir, ephemeralPorts: command.ephemeralPorts, log });
  try {
    if (stopAsked) return 0;
    return await show(stack, dir, command, io, stopped);
  } finally {
    await stack.stop();
    if (command.portsFile) await clearPortsFile(command.portsFile).catch(() => {});
  }
}

async function show(
  stack: LocalStack,
  dir: string,
  command: DemoCommand,
  io: DemoIo,
  stopped: Promise<void>,
): Promise<number> {
  const out = (s = "") => io.out(`${s}\n`);
  const deadline = Date.now() + 10_000;
  while (!stack.gateway.ready && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  const a = stack.gateway.addresses;
  const frontendPort = a.frontend!.port;
  const f = stack.files;
  const answer = await getThroughConnect({
    proxyPort: frontendPort,
    target: stack.service,
    path: "/demo",
    tls: { ca: await read(f.caCert), cert: await read(f.clientCert), key: await read(f.clientKey) },
  });
  out(`kgw demo: gateway, agent and an in-cluster service are running on loopback.`);
  out();
  out(`  request : GET http://${stack.service}/demo  via CONNECT on 127.0.0.1:${frontendPort} (mTLS)`);
  out(`  answer  : ${answer.status} ${answer.body.trim()}`);
  out();
  out(`Try it yourself:`);
  out(
    `  curl -p --proxy https://localhost:${frontendPort} --proxy-cacert ${f.caCert} \\\n       --proxy-cert ${f.clientCert} --proxy-key ${f.clientKey} http://${stack.service}/hello`,
  );
  out(`  curl http://${addr(a.health)}/readyz      # ready: an agent is connected`);
  out(`  curl http://${addr(a.admin)}/metrics     # Prometheus metrics`);
  out(`  Unix socket frontend (kube-apiserver colocated): ${a.uds}`);
  out(`  Certificates: ${dir}${command.dir ? "" : " (removed when the demo stops)"}`);
  if (command.once) return answer.status === 200 ? 0 : 1;
  if (command.portsFile) {
    await writePortsFile(command.portsFile, {
      frontend: frontendPort,
      agent: a.agent.port,
      admin: a.admin.port,
      health: a.health.port,
    });
  }
  out();
  out("Press Ctrl-C to stop.");
  await stopped;
  return 0;
}

const addr = (a: { port: number }) => `127.0.0.1:${a.port}`;
const read = (path: string) => readFile(path, "utf8");
