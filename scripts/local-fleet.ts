/**
 * A local fleet on one machine, as an operator would run one, for trying the hosted mode without
 * AWS: a DynamoDB-compatible server (dynalite, in this process), a throwaway CA, three
 * `kgw server --registry-table` instances with peer ports behind a TCP load balancer with health
 * checks (lib/demo/tcp-balancer.ts, as the NLB in front of the hosted fleet), tenant `acme` made
 * with `kgw tenant --table`, its agent connected through the balancer, and a "cluster" HTTP
 * service only the agent is meant to reach. Then a request enters at every instance and at the
 * balancer and reaches the service through acme's agent (over a peer link where the agent is
 * elsewhere).
 *
 *   npm run fleet:local                      # keeps running; prints curl lines; Ctrl-C stops it all
 *   npm run fleet:local -- --once            # the requests, an instance killed, the agent moving
 *   npm run fleet:local -- --base-port=28000 # other ports (the layout: --help)
 *   npm run fleet:local -- --ephemeral-ports # free ports, printed
 *
 * Everything is written under a temporary directory (a CA key and private keys among it), removed
 * on every way out: done, failed, Ctrl-C, SIGTERM. Exit codes: 0 done, 1 failed (a busy port
 * among them, named with the flags that avoid it), 2 a bad flag.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server as HttpServer } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo, Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { BENCH_CREDENTIALS, BENCH_REGION, localAwsEnv } from "../bench/harness/local-aws.js";
import { addressInUse } from "../lib/demo/address-in-use.js";
import { getThroughConnect } from "../lib/demo/connect-request.js";
import { LOCAL_AGENT_MOVE_MS, LOCAL_STOP_MS } from "../lib/demo/durations.js";
import {
  checkPortsFree,
  type FleetPortLayout,
  INSTANCES,
  type InstanceNumber,
  type InstancePorts,
  PortInUseError,
  parseLocalFleetOptions,
  portLayout,
} from "../lib/demo/local-fleet-options.js";
import { BUSY_PORT_ADVICE, LocalProcesses } from "../lib/demo/local-processes.js";
import { TcpBalancer } from "../lib/demo/tcp-balancer.js";
import { GatewayError } from "../lib/errors.js";
import { issuePeerCertificate } from "../lib/fleet/peer/peer-certificate-issue.js";
import { clearPortsFile, writePortsFile } from "../lib/observability/ports-file.js";
import { createCa } from "../lib/pki/ca.js";
import { writePemFiles } from "../lib/pki/files.js";
import { createDynamoClient } from "../lib/registry/dynamo/client.js";
import { createTable } from "../lib/registry/dynamo/table.js";

const TABLE = "kgw-local";
const TENANT = "acme";
const KGW = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "bin", "kgw.js");
const dir = mkdtempSync(path.join(tmpdir(), "kgw-local-fleet-"));
const procs = new LocalProcesses(dir, KGW);
const cleanups: (() => Promise<void>)[] = [];

/** Whatever happens, the directory with the CA key and the private keys does not outlive us. */
process.on("exit", () => {
  procs.killAllNow();
  rmSync(dir, { recursive: true, force: true });
});

async function status(port: number, urlPath: string): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}${urlPath}`)).status;
  } catch {
    return 0;
  }
}

async function startDynamo(): Promise<Record<string, string>> {
  const dynalite = createRequire(import.meta.url)("dynalite") as (o: Record<string, number>) => Server;
  const db = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((r) => db.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => db.close(() => r())));
  const dbPort = (db.address() as AddressInfo).port;
  const client = createDynamoClient({
    endpoint: `http://127.0.0.1:${dbPort}`,
    region: BENCH_REGION,
    credentials: BENCH_CREDENTIALS,
  });
  await createTable(client, TABLE);
  client.destroy();
  return localAwsEnv(dbPort);
}

async function startService(): Promise<string> {
  const service: HttpServer = createServer((_req, res) => res.end(`hello from ${TENANT}'s cluster\n`));
  await new Promise<void>((r) => service.listen(0, "127.0.0.1", r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        service.closeAllConnections();
        service.close(() => r());
      }),
  );
  return `127.0.0.1:${(service.address() as AddressInfo).port}`;
}

interface Instance {
  n: InstanceNumber;
  name: string;
  ports: InstancePorts;
}

async function startInstance(
  n: InstanceNumber,
  want: InstancePorts,
  f: Record<string, string>,
  env: Record<string, string>,
): Promise<Instance> {
  const name = `instance-${n}`;
  // The advertised peer address is written to the registry as given, so it needs the real port
  // up front: with --ephemeral-ports, one found free a moment before.
  const peerPort = want.peer === 0 ? await freePort() : want.peer;
  const portsFile = path.join(dir, `${name}.ports.json`);
  procs.run(
    name,
    [
      "server",
      `--server-id=local-${n}`,
      `--registry-table=${TABLE}`,
      `--tenant-ca-cert=${f["ca.pem"]}`,
      `--agent-port=${want.agent}`,
      "--agent-bind-address=127.0.0.1",
      `--cluster-cert=${f["server.pem"]}`,
      `--cluster-key=${f["server-key.pem"]}`,
      `--peer-port=${peerPort}`,
      "--peer-bind-address=127.0.0.1",
      `--peer-advertise-address=127.0.0.1:${peerPort}`,
      `--peer-cert=${f["peer.pem"]}`,
      `--peer-key=${f["peer-key.pem"]}`,
      `--peer-ca-cert=${f["ca.pem"]}`,
      `--admin-port=${want.admin}`,
      `--health-port=${want.health}`,
      "--health-bind-address=127.0.0.1",
      `--ports-file=${portsFile}`,
    ],
    env,
  );
  const p = await procs.announced(name, portsFile);
  return { n, name, ports: { agent: p.agent!, admin: p.admin!, health: p.health!, peer: p.peer! } };
}

/** A port free on 127.0.0.1 now (bound, then released). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  return port;
}

/** The instances acme's agent holds a stream to now (each instance's admin /readyz?tenant=). */
async function agentAt(instances: Instance[]): Promise<InstanceNumber[]> {
  const at: InstanceNumber[] = [];
  for (const i of instances) {
    if (!procs.running(i.name)) continue;
    if ((await status(i.ports.admin, `/readyz?tenant=${TENANT}`)) === 200) at.push(i.n);
  }
  return at;
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parseLocalFleetOptions>;
  try {
    parsed = parseLocalFleetOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`local fleet: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(parsed.text);
    return 0;
  }
  const opts = parsed.options;
  const layout: FleetPortLayout = portLayout(opts.basePort);
  await checkPortsFree(layout);
  if (opts.portsFile) await clearPortsFile(opts.portsFile);
  const out = (s: string) => process.stdout.write(`${s}\n`);

  const env = await startDynamo();
  // The PKI: the gateway CA (tenants' certificates, the serving certificate) and peer certificates.
  const ca = await createCa({ commonName: "kgw-local-fleet-ca", validityDays: 7 });
  const serving = await ca.issue({
    commonName: "localhost",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1"],
    usage: "server",
    validityDays: 7,
  });
  const peer = await issuePeerCertificate(ca);
  const f = await writePemFiles(dir, {
    "ca.pem": ca.certPem,
    "ca-key.pem": ca.keyPem,
    "server.pem": serving.certPem,
    "server-key.pem": serving.keyPem,
    "peer.pem": peer.certPem,
    "peer-key.pem": peer.keyPem,
  });

  // The balancer first: its address is the gateway address in acme's bundle.
  const balancer = await TcpBalancer.start({
    host: "127.0.0.1",
    port: layout.balancer,
    onChange: (t) => out(`  balancer: ${t.name} ${t.healthy ? "healthy" : "unhealthy"}`),
  });
  cleanups.push(() => balancer.close());
  const gatewayAddress = `localhost:${balancer.port}`;
  const target = await startService();
  const tenantEnv = {
    ...env,
    KGW_CA_CERT: f["ca.pem"],
    KGW_CA_KEY: f["ca-key.pem"],
    KGW_GATEWAY_ADDRESS: gatewayAddress,
  };
  const created = path.join(dir, "acme-create.json");
  const tenant = spawn(
    process.execPath,
    [
      KGW,
      "tenant",
      "create",
      TENANT,
      `--table=${TABLE}`,
      "--allow-loopback",
      "--output=json",
      `--out=${path.join(dir, TENANT)}`,
    ],
    { stdio: ["ignore", openSync(created, "w", 0o600), "inherit"], env: { ...process.env, ...tenantEnv } },
  );
  const code = await new Promise((r) => tenant.once("exit", r));
  if (code !== 0) throw new Error(`kgw tenant create exited ${String(code)}`);
  const { agentToken, bundle } = JSON.parse(readFileSync(created, "utf8")) as {
    agentToken: string;
    bundle: { files: { caBundle: string; clientCert: string; clientKey: string } };
  };

  const instances: Instance[] = [];
  for (const n of INSTANCES) instances.push(await startInstance(n, layout.instances[n], f, env));
  for (const i of instances) {
    await procs.until(`${i.name} ready`, async () => (await status(i.ports.health, "/readyz")) === 200, [
      i.name,
    ]);
  }
  // What the NLB checks is /healthz; /readyz here also keeps new connections off a draining instance.
  balancer.setTargets(
    instances.map((i) => ({
      name: i.name,
      host: "127.0.0.1",
      port: i.ports.agent,
      healthUrl: `http://127.0.0.1:${i.ports.health}/readyz`,
    })),
  );

  // acme's agent, through the balancer, as an agent in acme's cluster reaches the hosted fleet.
  procs.run(
    "agent",
    [
      "agent",
      "--proxy-server-host=127.0.0.1",
      `--proxy-server-port=${balancer.port}`,
      "--server-name=localhost",
      `--ca-cert=${f["ca.pem"]}`,
      `--agent-id=${TENANT}-agent`,
      "--health-server-host=127.0.0.1",
      `--health-server-port=${layout.agentHealth}`,
      `--admin-server-port=${layout.agentAdmin}`,
    ],
    { ...env, KGW_AGENT_TOKEN: agentToken },
  );
  // Connected, then to two instances: the fleet asks agents for two streams (--agent-redundancy).
  await procs.until(
    "acme's agent connected to two instances",
    async () => (await agentAt(instances)).length >= 2,
    ["agent"],
  );

  const tls = {
    ca: readFileSync(bundle.files.caBundle, "utf8"),
    cert: readFileSync(bundle.files.clientCert, "utf8"),
    key: readFileSync(bundle.files.clientKey, "utf8"),
  };
  const dial = async (proxyPort: number) => {
    const a = await getThroughConnect({ proxyPort, target, path: "/", tls });
    return `${a.status} ${a.body.trim()}`;
  };
  out(`acme's agent holds streams to instance(s) ${(await agentAt(instances)).join(", ")}.`);
  for (const i of instances) out(`  a request entering at instance ${i.n}: ${await dial(i.ports.agent)}`);
  out(`  a request through the balancer (127.0.0.1:${balancer.port}): ${await dial(balancer.port)}`);
  if (opts.portsFile) {
    const ports: Record<string, number> = { balancer: balancer.port };
    for (const i of instances) {
      for (const [role, port] of Object.entries(i.ports)) ports[`${i.name}-${role}`] = port;
    }
    await writePortsFile(opts.portsFile, ports);
    cleanups.push(() => clearPortsFile(opts.portsFile));
  }

  if (opts.once) {
    // The failover, as the hosted fleet does it: the instance holding acme's agent dies; the
    // balancer stops sending it connections, the agent reconnects through the balancer to the
    // others, and requests through the balancer keep going.
    const holding = (await agentAt(instances))[0]!;
    const dead = instances.find((i) => i.n === holding)!;
    await procs.kill(dead.name, "SIGKILL");
    out(`instance ${holding} killed (SIGKILL).`);
    const alive = instances.filter((i) => i !== dead);
    await procs.until(
      "acme's agent on the surviving instances",
      async () => (await agentAt(alive)).length === alive.length,
      ["agent"],
      LOCAL_AGENT_MOVE_MS,
    );
    out(`acme's agent holds streams to instance(s) ${(await agentAt(alive)).join(", ")}.`);
    out(`  a request through the balancer: ${await dial(balancer.port)}`);
    return 0;
  }

  const awsEnv = Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  out(
    `\nA fleet of three behind a load balancer on 127.0.0.1:${balancer.port}; everything is in ${dir} (removed on exit).\n` +
      "Try it (the balancer, or any instance's agent port):\n" +
      `  curl -sS --proxy-cacert ${bundle.files.caBundle} --proxy-cert ${bundle.files.clientCert} --proxy-key ${bundle.files.clientKey} \\\n` +
      `       --proxy https://localhost:${balancer.port} --proxytunnel http://${target}/\n` +
      `  curl -s http://127.0.0.1:${instances[1]!.ports.admin}/readyz?verbose     # instance 2's view of the fleet\n` +
      `  curl -s http://127.0.0.1:${instances[1]!.ports.admin}/metrics | grep kgw_fleet_\n` +
      `Kill an instance and watch the agent move (the balancer prints its health changes):\n` +
      instances.map((i) => `  kill ${procs.pid(i.name)}     # ${i.name}\n`).join("") +
      "Tenants in this fleet's table (kgw tenant --table):\n" +
      `  export ${awsEnv} \\\n    KGW_CA_CERT=${f["ca.pem"]} KGW_CA_KEY=${f["ca-key.pem"]} KGW_GATEWAY_ADDRESS=${gatewayAddress}\n` +
      `  npx kgw tenant --table=${TABLE} list\n` +
      "Ctrl-C stops everything.",
  );
  await new Promise<never>(() => {}); // until a signal: see below
  return 0;
}

/**
 * Stops everything this run started, in reverse order, the instances first (they leave the fleet);
 * once, whoever asks first (the end of the run, a failure, a signal).
 */
let stopping: Promise<void> | null = null;
function stop(): Promise<void> {
  stopping ??= (async () => {
    await procs.stopAll(LOCAL_STOP_MS);
    for (const s of cleanups.reverse()) await s().catch(() => {});
  })();
  return stopping;
}

let signals = 0;
const onSignal = () => {
  signals++;
  if (signals > 1) process.exit(130); // the exit hook kills the children and removes the directory
  void stop().then(() => process.exit(0));
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

main().then(
  async (code) => {
    await stop();
    process.exit(code);
  },
  async (err: unknown) => {
    // Stopped by a signal during start-up: what failed is the stop's doing, not worth a message.
    if (signals > 0) return;
    // A busy port (the check before start, or the balancer's listen) is named as such; the rest
    // are said in one line, with a stack only for what is not one of ours.
    const busy = addressInUse(err) !== null && !(err instanceof PortInUseError);
    const ours = err instanceof GatewayError || busy;
    let message = err instanceof Error ? (ours ? err.message : (err.stack ?? err.message)) : String(err);
    if (busy) message += `: ${BUSY_PORT_ADVICE}`;
    process.stderr.write(`local fleet: ${message}\n`);
    await stop();
    process.exit(1);
  },
);
