/**
 * `kgw demo`: the quick start. Starts a throwaway CA, a gateway, an agent and a service behind
 * it on loopback, sends a request through the tunnel, and keeps running (or exits with --once).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineFlags, formatHelp, parseFlags } from "../../lib/config/flags.js";
import { getThroughConnect } from "../../lib/demo/connect-request.js";
import { startLocalStack } from "../../lib/demo/local-stack.js";
import { createLogger } from "../../lib/observability/logger.js";

const FLAGS = defineFlags({
  dir: {
    kind: "string",
    default: "",
    help: "Where to write the demo CA and certificates (a new temp dir if empty).",
  },
  once: {
    kind: "bool",
    default: false,
    help: "Exit after the first request instead of serving until Ctrl-C.",
  },
  "ephemeral-ports": { kind: "bool", default: false, help: "Use free ports instead of 8090/8132/8133/8134." },
  "log-level": { kind: "string", default: "warn", help: "Log level of the embedded server and agent." },
});

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let f: ReturnType<typeof parseFlags<typeof FLAGS>>;
  try {
    f = parseFlags(FLAGS, argv, env);
  } catch (err) {
    process.stderr.write(`kgw demo: ${(err as Error).message}\n`);
    return 2;
  }
  if (f.help) {
    process.stdout.write(
      formatHelp(
        "kgw demo [flags]",
        "Runs a complete local gateway and shows a request going through it.",
        FLAGS,
      ),
    );
    return 0;
  }
  const v = f.values;
  const dir = v.dir || mkdtempSync(join(tmpdir(), "kgw-demo-"));
  const log = createLogger({ name: "kgw-demo", level: v["log-level"] });
  const stack = await startLocalStack({ dir, ephemeralPorts: v["ephemeral-ports"], log });
  const out = (s = "") => process.stdout.write(`${s}\n`);
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
    if (v.once) return answer.status === 200 ? 0 : 1;
    out();
    out("Press Ctrl-C to stop.");
    await new Promise<void>((resolve) => {
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
    });
    return 0;
  } finally {
    await stack.stop();
  }
}

const addr = (a: { port: number }) => `127.0.0.1:${a.port}`;
const read = async (path: string) => (await import("node:fs/promises")).readFile(path, "utf8");
