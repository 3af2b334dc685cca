/**
 * `kgw demo …`: the quick start. Starts a throwaway CA, a gateway, an agent and a service behind
 * it on loopback (lib/demo/local-stack.ts), sends a request through the tunnel, prints how to
 * try it by hand, and keeps running until told to stop (or exits with --once).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getThroughConnect } from "../../demo/connect-request.js";
import { startLocalStack } from "../../demo/local-stack.js";
import { createLogger } from "../../observability/logger.js";
import type { DemoCommand } from "./parse-demo-command.js";

export interface DemoIo {
  out(text: string): void;
  /** Resolves when the demo is to stop (the entrypoint: SIGINT or SIGTERM). */
  untilStopped(): Promise<void>;
}

/** Exit codes: 0 done (with --once: the request was answered 200), 1 it was not. */
export async function runDemo(command: DemoCommand, io: DemoIo): Promise<number> {
  const dir = command.dir || mkdtempSync(join(tmpdir(), "kgw-demo-"));
  const log = createLogger({ name: "kgw-demo", level: command.logLevel });
  const stack = await startLocalStack({ dir, ephemeralPorts: command.ephemeralPorts, log });
  const out = (s = "") => io.out(`${s}\n`);
  try {
    const deadline = Date.now() + 10_000;
    while (!stack.gateway.ready && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    const frontendPort = stack.gateway.addresses.frontend!.port;
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
    out(`  curl http://${addr(stack.gateway.addresses.health)}/readyz      # ready: an agent is connected`);
    out(`  curl http://${addr(stack.gateway.addresses.admin)}/metrics     # Prometheus metrics`);
    out(`  Unix socket frontend (kube-apiserver colocated): ${stack.gateway.addresses.uds}`);
    out(`  Certificates: ${dir}`);
    if (command.once) return answer.status === 200 ? 0 : 1;
    out();
    out("Press Ctrl-C to stop.");
    await io.untilStopped();
    return 0;
  } finally {
    await stack.stop();
  }
}

const addr = (a: { port: number }) => `127.0.0.1:${a.port}`;
const read = async (path: string) => (await import("node:fs/promises")).readFile(path, "utf8");
